/**
 * The deterministic WordPiece vocabulary: special tokens, single characters with and without the
 * `##` continuation prefix (so every ASCII word can be spelled), common English words and suffix
 * pieces, then `[unusedN]` fillers up to the requested size (as BERT vocabularies reserve them).
 */
import { ConfigError } from '../../src/encoder/errors.ts';
import { ENGLISH_WORDS, SUFFIX_WORD_PIECES } from './english-words.ts';

export const CONTINUING_SUBWORD_PREFIX = '##';

/** Special tokens in id order: [PAD] is 0 as BERT's pad_token_id expects. */
export const SPECIAL_TOKENS = {
  pad: '[PAD]',
  unk: '[UNK]',
  cls: '[CLS]',
  sep: '[SEP]',
  mask: '[MASK]',
} as const;

const SPECIAL_TOKEN_ORDER: readonly string[] = [
  SPECIAL_TOKENS.pad,
  SPECIAL_TOKENS.unk,
  SPECIAL_TOKENS.cls,
  SPECIAL_TOKENS.sep,
  SPECIAL_TOKENS.mask,
];

/** Lowercase letters only: the normalizer lowercases text before WordPiece sees it. */
const LETTERS = 'abcdefghijklmnopqrstuvwxyz';
const DIGITS = '0123456789';
const PUNCTUATION = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~';

function buildBaseVocabulary(): readonly string[] {
  const singles = [...LETTERS, ...DIGITS, ...PUNCTUATION];
  const tokens = [
    ...SPECIAL_TOKEN_ORDER,
    ...singles,
    ...singles.map((char) => CONTINUING_SUBWORD_PREFIX + char),
    ...ENGLISH_WORDS,
    ...SUFFIX_WORD_PIECES,
  ];
  // The word lists may repeat a word or a single character; the first occurrence keeps its id.
  return [...new Set(tokens)];
}

/** Tokens every generated vocabulary starts with, in id order. */
export const BASE_VOCABULARY: readonly string[] = buildBaseVocabulary();
export const BASE_VOCABULARY_SIZE = BASE_VOCABULARY.length;

/** The vocabulary of `size` tokens, in id order. */
export function buildVocabulary(size: number): string[] {
  if (!Number.isSafeInteger(size) || size < BASE_VOCABULARY_SIZE) {
    throw new ConfigError(`vocabulary size ${size} is smaller than the base vocabulary (${BASE_VOCABULARY_SIZE} tokens)`);
  }
  const vocabulary = [...BASE_VOCABULARY];
  for (let unused = 0; vocabulary.length < size; unused++) vocabulary.push(`[unused${unused}]`);
  return vocabulary;
}

/** The special tokens with their ids: they sit at fixed positions at the start of every vocabulary. */
export const SPECIAL_TOKEN_IDS: readonly { token: string; id: number }[] = SPECIAL_TOKEN_ORDER.map((token, id) => ({
  token,
  id,
}));
