export {
  EncoderTokenizer,
  type EncodeSettings,
  type Encoding,
  type PaddedBatch,
  type PaddingSettings,
  type TextTruncation,
  type TokenizerOptions,
  type TruncationSettings,
  type TruncationStrategy,
} from './encoder-tokenizer.ts';
