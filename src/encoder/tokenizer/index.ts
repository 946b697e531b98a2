export {
  EncoderTokenizer,
  type EncodeSettings,
  type Encoding,
  type PaddedBatch,
  type PaddingSettings,
  type TruncationSettings,
} from './encoder-tokenizer.ts';
