/**
 * EncoderTokenizer API: maxLength, encode/encodeBatch, pad(), ConfigError at load. Self-contained
 * (inline tokenizer.json files), so it runs on a fresh clone.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/encoder/errors.ts';
import { EncoderTokenizer } from '../../src/encoder/tokenizer/index.ts';

const VOCAB = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'hello', 'world', '##s', '!', ',', 'a', 'x', '<pad>', 'cafe', 'naive'];

function bertJson(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'].map((content) => ({
      id: VOCAB.indexOf(content),
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
      pair: [],
      special_tokens: {
        '[CLS]': { id: '[CLS]', ids: [2], tokens: ['[CLS]'] },
        '[SEP]': { id: '[SEP]', ids: [3], tokens: ['[SEP]'] },
      },
    },
    decoder: null,
    model: {
      type: 'WordPiece',
      unk_token: '[UNK]',
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      vocab: Object.fromEntries(VOCAB.map((t, i) => [t, i])),
    },
    ...overrides,
  };
}

function expectConfigError(fn: () => unknown, message: RegExp): void {
  let error: unknown;
  try {
    fn();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as ConfigError).kind).toBe('config');
  expect((error as Error).message).toMatch(message);
}

describe('EncoderTokenizer', () => {
  describe('maxLength', () => {
    it('comes from tokenizer_config.json model_max_length', () => {
      expect(EncoderTokenizer.fromJson(bertJson(), { model_max_length: 128 }).maxLength).toBe(128);
    });

    it('is 512 without tokenizer_config.json', () => {
      expect(EncoderTokenizer.fromJson(bertJson()).maxLength).toBe(512);
      expect(EncoderTokenizer.fromJson(bertJson(), null).maxLength).toBe(512);
      expect(EncoderTokenizer.fromJson(bertJson(), {}).maxLength).toBe(512);
    });

    it("is 512 for HF's 1e30 'no limit' sentinel and other values that are not sane integers", () => {
      expect(EncoderTokenizer.fromJson(bertJson(), { model_max_length: 1000000000000000019884624838656 }).maxLength).toBe(512);
      for (const v of [0, -5, 1.5, '256', null, Number.POSITIVE_INFINITY]) {
        expect(EncoderTokenizer.fromJson(bertJson(), { model_max_length: v }).maxLength).toBe(512);
      }
    });

    it('truncates the content and keeps the special tokens', () => {
      const t = EncoderTokenizer.fromJson(bertJson(), { model_max_length: 6 });
      const e = t.encode('hello world hello world hello world');
      expect(e.tokens).toEqual(['[CLS]', 'hello', 'world', 'hello', 'world', '[SEP]']);
      expect(e.offsets).toEqual([[0, 0], [0, 5], [6, 11], [12, 17], [18, 23], [0, 0]]);
      expect(e.specialTokensMask).toEqual([1, 0, 0, 0, 0, 1]);
    });
  });

  describe('encode', () => {
    const t = EncoderTokenizer.fromJson(bertJson());

    it('gives ids, tokens, code-point offsets, type ids, masks', () => {
      const e = t.encode('Hello, worlds!');
      expect(e).toEqual({
        ids: [2, 5, 9, 6, 7, 8, 3],
        tokens: ['[CLS]', 'hello', ',', 'world', '##s', '!', '[SEP]'],
        offsets: [[0, 0], [0, 5], [5, 6], [7, 12], [12, 13], [13, 14], [0, 0]],
        typeIds: [0, 0, 0, 0, 0, 0, 0],
        specialTokensMask: [1, 0, 0, 0, 0, 0, 1],
        attentionMask: [1, 1, 1, 1, 1, 1, 1],
      });
    });

    it('counts offsets in code points, not UTF-16 units ("😀é x")', () => {
      const e = t.encode('😀é x');
      expect(e.tokens).toEqual(['[CLS]', '[UNK]', 'x', '[SEP]']);
      expect(e.offsets).toEqual([[0, 0], [0, 2], [3, 4], [0, 0]]);
    });

    it('maps offsets through normalization (accents stripped, NFD input)', () => {
      expect(t.encode('Café naïve').offsets).toEqual([[0, 0], [0, 4], [5, 10], [0, 0]]);
      // a removed trailing mark is not covered: kept chars keep their own alignment, as in the reference
      expect(t.encode('Cafe\u0301 nai\u0308ve').offsets).toEqual([[0, 0], [0, 4], [6, 12], [0, 0]]);
    });

    it('counts a lone surrogate as one code point (U+FFFD, as in UTF-8)', () => {
      const e = t.encode('a\ud800x');
      expect(e.tokens).toEqual(['[CLS]', '[UNK]', '[SEP]']);
      expect(e.offsets[1]).toEqual([0, 3]);
    });

    it('encodes the empty string to the special tokens only', () => {
      expect(t.encode('').tokens).toEqual(['[CLS]', '[SEP]']);
      expect(t.encode(' \t\n').tokens).toEqual(['[CLS]', '[SEP]']);
    });

    it('encodeBatch is encode on each text', () => {
      const texts = ['hello', 'a world!', ''];
      expect(t.encodeBatch(texts)).toEqual(texts.map((x) => t.encode(x)));
    });

    it('ignores the padding of tokenizer.json but can reproduce it', () => {
      const padded = EncoderTokenizer.fromJson(
        bertJson({
          truncation: { direction: 'Right', max_length: 5, strategy: 'LongestFirst', stride: 0 },
          padding: { strategy: 'BatchLongest', direction: 'Right', pad_to_multiple_of: 8, pad_id: 12, pad_type_id: 0, pad_token: '<pad>' },
        }),
      );
      expect(padded.encode('hello world').ids).toEqual([2, 5, 6, 3]);
      const file = padded.encodeWith('hello world hello', padded.fileSettings());
      expect(file.ids).toEqual([2, 5, 6, 5, 3, 12, 12, 12]);
      expect(file.attentionMask).toEqual([1, 1, 1, 1, 1, 0, 0, 0]);
      expect(file.specialTokensMask).toEqual([1, 0, 0, 0, 1, 1, 1, 1]);
    });
  });

  describe('pad', () => {
    it('pads to the longest with the pad id, attention 0 and type id 0', () => {
      const t = EncoderTokenizer.fromJson(bertJson(), { pad_token: '<pad>' });
      expect(t.padId).toBe(12);
      const batch = t.pad(t.encodeBatch(['hello world!', 'x']));
      expect(batch.batchSize).toBe(2);
      expect(batch.sequenceLength).toBe(5);
      expect(Array.from(batch.inputIds)).toEqual([2n, 5n, 6n, 8n, 3n, 2n, 11n, 3n, 12n, 12n]);
      expect(Array.from(batch.attentionMask)).toEqual([1n, 1n, 1n, 1n, 1n, 1n, 1n, 1n, 0n, 0n]);
      expect(Array.from(batch.tokenTypeIds)).toEqual(new Array(10).fill(0n));
      expect(batch.inputIds).toBeInstanceOf(BigInt64Array);
    });

    it('takes the pad id from tokenizer.json padding, then tokenizer_config, then a [PAD]-like token, else 0', () => {
      const withPadding = bertJson({ padding: { strategy: 'BatchLongest', direction: 'Right', pad_id: 10, pad_type_id: 0, pad_token: 'a' } });
      expect(EncoderTokenizer.fromJson(withPadding, { pad_token: '<pad>' }).padId).toBe(10);
      expect(EncoderTokenizer.fromJson(bertJson(), { pad_token: { content: '<pad>' } }).padId).toBe(12);
      expect(EncoderTokenizer.fromJson(bertJson()).padId).toBe(0);
      const vocab = Object.fromEntries(['[UNK]', 'x', '<pad>'].map((t, i) => [t, i]));
      const noPadName = bertJson({ added_tokens: [], post_processor: null, model: { type: 'WordPiece', unk_token: '[UNK]', vocab } });
      expect(EncoderTokenizer.fromJson(noPadName).padId).toBe(2);
      const none = bertJson({ added_tokens: [], post_processor: null, model: { type: 'WordPiece', unk_token: '[UNK]', vocab: { '[UNK]': 0, x: 1 } } });
      expect(EncoderTokenizer.fromJson(none).padId).toBe(0);
    });

    it('handles an empty batch', () => {
      const t = EncoderTokenizer.fromJson(bertJson());
      const b = t.pad([]);
      expect([b.batchSize, b.sequenceLength, b.inputIds.length]).toEqual([0, 0, 0]);
    });
  });

  describe('ConfigError at load', () => {
    it('for garbage instead of tokenizer.json', () => {
      expectConfigError(() => EncoderTokenizer.fromJson('{"model": '), /not valid JSON/);
      expectConfigError(() => EncoderTokenizer.fromJson(42), /must be a JSON object/);
      expectConfigError(() => EncoderTokenizer.fromJson(null), /must be a JSON object/);
      expectConfigError(() => EncoderTokenizer.fromJson([]), /must be a JSON object/);
      expectConfigError(() => EncoderTokenizer.fromJson({ version: '1.0' }), /no "model"/);
      expectConfigError(() => EncoderTokenizer.fromJson(bertJson({ model: { type: 'WordPiece', vocab: 'x' } })), /vocab/);
      expectConfigError(() => EncoderTokenizer.fromJson(bertJson(), '{oops'), /tokenizer_config.json is not valid JSON/);
    });

    it('for a vocab with an id that is not a whole number >= 0, or without its unk token', () => {
      const wordPiece = (vocab: Record<string, unknown>) => bertJson({ model: { type: 'WordPiece', vocab, unk_token: '[UNK]' } });
      expectConfigError(() => EncoderTokenizer.fromJson(wordPiece({ '[UNK]': 0, a: 1.5 })), /^tokenizer: WordPiece vocab has a non-integer id$/);
      expectConfigError(() => EncoderTokenizer.fromJson(wordPiece({ '[UNK]': 0, a: '1' })), /^tokenizer: WordPiece vocab has a non-integer id$/);
      expectConfigError(() => EncoderTokenizer.fromJson(wordPiece({ a: 0 })), /^tokenizer: WordPiece unk_token "\[UNK\]" is not in the vocab$/);
      const bpe = bertJson({ model: { type: 'BPE', vocab: { a: 0, b: -1 }, merges: [] } });
      expectConfigError(() => EncoderTokenizer.fromJson(bpe), /^tokenizer: BPE vocab has a non-integer id$/);
    });

    it('accepts tokenizer.json as text', () => {
      expect(EncoderTokenizer.fromJson(JSON.stringify(bertJson())).encode('hello').ids).toEqual([2, 5, 3]);
    });

    it('for components whose offsets cannot be reproduced', () => {
      expectConfigError(
        () => EncoderTokenizer.fromJson(bertJson({ pre_tokenizer: { type: 'UnicodeScripts' } })),
        /^tokenizer: unsupported pre-tokenizer "UnicodeScripts" \(offsets cannot be computed\)$/,
      );
      expectConfigError(() => EncoderTokenizer.fromJson(bertJson({ normalizer: { type: 'Nmt' } })), /unsupported normalizer "Nmt"/);
      expectConfigError(
        () => EncoderTokenizer.fromJson(bertJson({ normalizer: { type: 'Sequence', normalizers: [{ type: 'NFC' }, { type: 'ByteLevel' }] } })),
        /unsupported normalizer "ByteLevel"/,
      );
      expectConfigError(() => EncoderTokenizer.fromJson(bertJson({ post_processor: { type: 'Fancy' } })), /unsupported post-processor "Fancy"/);
      expectConfigError(
        () => EncoderTokenizer.fromJson(bertJson({ model: { type: 'WordLevel', vocab: { a: 0 }, unk_token: 'a' } })),
        /unsupported model "WordLevel"/,
      );
      expectConfigError(
        () => EncoderTokenizer.fromJson(bertJson({ pre_tokenizer: { type: 'Split', pattern: { Regex: '(?<=a)b' }, behavior: 'Isolated', invert: false } })),
        /unsupported regex in Split pre-tokenizer/,
      );
      expectConfigError(
        () => EncoderTokenizer.fromJson(bertJson({ model: { type: 'BPE', vocab: { a: 0 }, merges: [], dropout: 0.1 } })),
        /dropout/,
      );
      // Rust drops unknown chars and merges across them there; the id library does not
      expectConfigError(
        () => EncoderTokenizer.fromJson(bertJson({ model: { type: 'BPE', vocab: { a: 0, b: 1 }, merges: [], unk_token: null } })),
        /unsupported BPE without unk_token/,
      );
      // Rust then orders a pending unk after later byte tokens; the id library does not
      expectConfigError(
        () => EncoderTokenizer.fromJson(bertJson({ model: { type: 'BPE', vocab: { a: 0, '<unk>': 1, '<0x41>': 2 }, merges: [], unk_token: '<unk>', byte_fallback: true } })),
        /incomplete <0x00>..<0xFF>/,
      );
      expectConfigError(
        () =>
          EncoderTokenizer.fromJson(
            bertJson({ post_processor: { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<x>', type_id: 0 } }], special_tokens: {} } }),
          ),
        /missing the special token "<x>"/,
      );
    });

    it('reports file truncation/padding it cannot reproduce only when asked for them', () => {
      // Left and a stride are reproduced (tokenizer-windows.test.ts); a direction or strategy HF does not have is not
      const t = EncoderTokenizer.fromJson(bertJson({ truncation: { direction: 'Middle', max_length: 8, strategy: 'LongestFirst', stride: 0 } }));
      expect(t.encode('hello').ids).toEqual([2, 5, 3]);
      expectConfigError(() => t.fileSettings(), /unsupported truncation/);
      const left = EncoderTokenizer.fromJson(bertJson({ truncation: { direction: 'Left', max_length: 8, strategy: 'LongestFirst', stride: 2 } }));
      expect(left.fileSettings().truncation).toEqual({ maxLength: 8, strategy: 'longest_first', direction: 'left', stride: 2 });
    });
  });
});
