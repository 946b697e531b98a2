export {
  EncoderTokenizer,
  type EncodeSettings,
  type Encoding,
  type PaddedBatch,
  type PaddingSettings,
  type TokenizerOptions,
  type TruncationSettings,
  type TruncationStrategy,
} from './encoder-tokenizer.ts';
