/**
 * The tokenizer files of a BERT-uncased model directory, in the structure HF writes for
 * bert-base-uncased: tokenizer.json (the `tokenizers` library's format), tokenizer_config.json,
 * special_tokens_map.json and vocab.txt.
 */
import { InternalError } from '../../src/encoder/errors.ts';
import { formatJson } from './json-format.ts';
import type { JsonObject, JsonValue } from './json-format.ts';
import { CONTINUING_SUBWORD_PREFIX, SPECIAL_TOKENS, SPECIAL_TOKEN_IDS } from './vocabulary.ts';

/** The `tokenizers` library writes tokenizer.json pretty-printed, in its own key order, without a final newline. */
export function tokenizerJson(vocabulary: readonly string[]): string {
  const id = (token: string): number => {
    const index = vocabulary.indexOf(token);
    if (index < 0) throw new InternalError(`vocabulary lacks ${token}`);
    return index;
  };
  const special = (token: string, typeId: number): JsonObject => ({ SpecialToken: { id: token, type_id: typeId } });
  const sequence = (name: string, typeId: number): JsonObject => ({ Sequence: { id: name, type_id: typeId } });
  const { cls, sep, unk } = SPECIAL_TOKENS;
  const tokenizer: JsonObject = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIAL_TOKEN_IDS.map(({ token, id: tokenId }) => ({
      id: tokenId,
      content: token,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: {
      type: 'BertNormalizer',
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null,
      lowercase: true,
    },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [special(cls, 0), sequence('A', 0), special(sep, 0)],
      pair: [special(cls, 0), sequence('A', 0), special(sep, 0), sequence('B', 1), special(sep, 1)],
      special_tokens: {
        [cls]: { id: cls, ids: [id(cls)], tokens: [cls] },
        [sep]: { id: sep, ids: [id(sep)], tokens: [sep] },
      },
    },
    decoder: { type: 'WordPiece', prefix: CONTINUING_SUBWORD_PREFIX, cleanup: true },
    model: {
      type: 'WordPiece',
      unk_token: unk,
      continuing_subword_prefix: CONTINUING_SUBWORD_PREFIX,
      max_input_chars_per_word: 100,
      vocab: new Map<string, JsonValue>(vocabulary.map((token, index) => [token, index])),
    },
  };
  return formatJson(tokenizer);
}

/** transformers writes tokenizer_config.json with sorted keys and a final newline. */
export function tokenizerConfigJson(modelMaxLength: number): string {
  const addedTokensDecoder: JsonObject = {};
  for (const { token, id } of SPECIAL_TOKEN_IDS) {
    addedTokensDecoder[String(id)] = {
      content: token,
      lstrip: false,
      normalized: false,
      rstrip: false,
      single_word: false,
      special: true,
    };
  }
  const config: JsonObject = {
    added_tokens_decoder: addedTokensDecoder,
    clean_up_tokenization_spaces: false,
    cls_token: SPECIAL_TOKENS.cls,
    do_lower_case: true,
    extra_special_tokens: {},
    mask_token: SPECIAL_TOKENS.mask,
    model_max_length: modelMaxLength,
    pad_token: SPECIAL_TOKENS.pad,
    sep_token: SPECIAL_TOKENS.sep,
    strip_accents: null,
    tokenize_chinese_chars: true,
    tokenizer_class: 'BertTokenizer',
    unk_token: SPECIAL_TOKENS.unk,
  };
  return formatJson(config, { sortKeys: true }) + '\n';
}

export function specialTokensMapJson(): string {
  const map: JsonObject = {
    cls_token: SPECIAL_TOKENS.cls,
    mask_token: SPECIAL_TOKENS.mask,
    pad_token: SPECIAL_TOKENS.pad,
    sep_token: SPECIAL_TOKENS.sep,
    unk_token: SPECIAL_TOKENS.unk,
  };
  return formatJson(map, { sortKeys: true }) + '\n';
}

/** One token per line, line number = id. */
export function vocabTxt(vocabulary: readonly string[]): string {
  return vocabulary.map((token) => `${token}\n`).join('');
}
