/**
 * Parity with the Rust reference itself, through its dev-only Node binding `tokenizers@0.23.2`
 * (never imported by src/): seeded random and wild texts on every golden family, the whole golden
 * corpus under other truncation/padding settings, every supported component on synthetic
 * tokenizer.json files, and the Unicode tables in src/ against the reference, code point by code
 * point. Bounded and deterministic; a failure prints the text that replays it.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EncoderTokenizer, type EncodeSettings } from '../../src/encoder/tokenizer/index.ts';
import * as tables from '../../src/encoder/tokenizer/unicode-tables.ts';
import {
  FAMILIES,
  type Family,
  type OracleTokenizer,
  hasTokenizerFixtures,
  loadFamily,
  loadOracle,
  oracleProblem,
  seededRandom,
  tricky,
  warnIfFixturesMissing,
  wild,
} from '../helpers/tokenizer-fixtures.ts';
import { cccToString, probeTables, toRanges } from '../helpers/unicode-probe.ts';

const oracle = loadOracle();
if (!oracle) console.warn(`tokenizer oracle parity: skipped, the dev-only oracle "tokenizers" cannot be loaded: ${oracleProblem}`);
warnIfFixturesMissing('tokenizer oracle parity');
const ready = oracle !== null && hasTokenizerFixtures;

interface Comparable {
  ids: number[];
  tokens: string[];
  offsets: number[][];
  typeIds: number[];
  specialTokensMask: number[];
  attentionMask: number[];
}

async function reference(ref: OracleTokenizer, text: string): Promise<Comparable> {
  const r = await ref.encode(text, null, { addSpecialTokens: true });
  return {
    ids: r.getIds(),
    tokens: r.getTokens(),
    offsets: r.getOffsets().map((o) => [o[0], o[1]]),
    typeIds: r.getTypeIds(),
    specialTokensMask: r.getSpecialTokensMask(),
    attentionMask: r.getAttentionMask(),
  };
}

function ours(t: EncoderTokenizer, text: string, settings: EncodeSettings): Comparable | string {
  try {
    return t.encodeWith(text, settings);
  } catch (error) {
    return `threw ${(error as Error).message}`;
  }
}

/** Runs texts through both and returns the first few mismatches (empty when all agree). */
async function mismatches(t: EncoderTokenizer, ref: OracleTokenizer, texts: string[], settings: EncodeSettings): Promise<string[]> {
  const bad: string[] = [];
  for (const text of texts) {
    const a = ours(t, text, settings);
    const b = await reference(ref, text);
    const sa = JSON.stringify(a);
    const sb = JSON.stringify(b);
    if (sa !== sb && bad.length < 3) bad.push(`${JSON.stringify(text)}\n  ours ${sa.slice(0, 600)}\n  ref  ${sb.slice(0, 600)}`);
  }
  return bad;
}

const NONE: EncodeSettings = { truncation: null, padding: null };

describe.skipIf(!ready)('tokenizer oracle parity', () => {
  describe('golden families on generated text', () => {
    for (const family of FAMILIES) {
      it(`${family}: 400 tricky + 400 wild texts agree with the reference`, async () => {
        const f = loadFamily(family);
        const t = EncoderTokenizer.fromJson(f.tokenizerJson, f.tokenizerConfig);
        const ref = oracle!.Tokenizer.fromFile(f.tokenizerPath);
        ref.disableTruncation();
        ref.disablePadding();
        const rnd = seededRandom(FAMILIES.indexOf(family) + 1);
        const texts = [...Array.from({ length: 400 }, () => tricky(rnd)), ...Array.from({ length: 400 }, () => wild(rnd))];
        expect(await mismatches(t, ref, texts, NONE)).toEqual([]);
      });
    }
  });

  describe('long runs of combining marks (stable reordering of long runs)', () => {
    const marks = [...Array.from({ length: 0x70 }, (_, i) => String.fromCodePoint(0x300 + i)), ...'\u0591\u05b0\u093c\u094d\u0e38\u1dc0\u20d0\u302a'];
    for (const family of ['bpe-bytelevel-modernbert', 'wordpiece-uncased', 'unigram-t5'] as const) {
      it(`${family}: zalgo words with up to 120 marks agree with the reference`, async () => {
        const f = loadFamily(family);
        const t = EncoderTokenizer.fromJson(f.tokenizerJson, f.tokenizerConfig);
        const ref = oracle!.Tokenizer.fromFile(f.tokenizerPath);
        ref.disableTruncation();
        ref.disablePadding();
        const rnd = seededRandom(900);
        const texts = Array.from({ length: 40 }, () => {
          let s = '';
          for (let w = 0; w < 3; w++) {
            s += 'aeoÅé'[Math.floor(rnd() * 5)];
            const n = Math.floor(rnd() * 120);
            for (let k = 0; k < n; k++) s += marks[Math.floor(rnd() * marks.length)];
            s += ' ';
          }
          return s;
        });
        expect(await mismatches(t, ref, texts, NONE)).toEqual([]);
      });
    }
  });

  describe('golden corpus under other truncation and padding', () => {
    const variants: { name: string; settings: EncodeSettings; apply(ref: OracleTokenizer, padId: number): void }[] = [
      { name: 'truncation 5', settings: { truncation: { maxLength: 5 }, padding: null }, apply: (r) => r.setTruncation(5) },
      { name: 'truncation 17', settings: { truncation: { maxLength: 17 }, padding: null }, apply: (r) => r.setTruncation(17) },
      { name: 'truncation 64', settings: { truncation: { maxLength: 64 }, padding: null }, apply: (r) => r.setTruncation(64) },
      { name: 'truncation 300', settings: { truncation: { maxLength: 300 }, padding: null }, apply: (r) => r.setTruncation(300) },
      {
        name: 'truncation 40, padding to a multiple of 8',
        settings: { truncation: { maxLength: 40 }, padding: { strategy: 'longest', padToMultipleOf: 8, padId: 0, padToken: '[PAD]', padTypeId: 0 } },
        apply: (r) => {
          r.setTruncation(40);
          r.setPadding({ padToMultipleOf: 8, padId: 0, padToken: '[PAD]', padTypeId: 0 });
        },
      },
      {
        name: 'fixed padding 48',
        settings: { truncation: null, padding: { strategy: { fixed: 48 }, padId: 3, padToken: '<x>', padTypeId: 1 } },
        apply: (r) => r.setPadding({ maxLength: 48, padId: 3, padToken: '<x>', padTypeId: 1 }),
      },
    ];
    for (const family of FAMILIES) {
      it(`${family}: every golden text agrees with the reference under ${variants.length} settings`, async () => {
        const f = loadFamily(family);
        const t = EncoderTokenizer.fromJson(f.tokenizerJson, f.tokenizerConfig);
        const texts = f.golden.cases.map((c) => c.text);
        for (const v of variants) {
          const ref = oracle!.Tokenizer.fromFile(f.tokenizerPath);
          ref.disableTruncation();
          ref.disablePadding();
          v.apply(ref, 0);
          expect({ variant: v.name, bad: await mismatches(t, ref, texts, v.settings) }).toEqual({ variant: v.name, bad: [] });
        }
      });
    }
  });

  describe('every supported component on synthetic tokenizer.json files', () => {
    const read = (family: Family) => (hasTokenizerFixtures ? (loadFamily(family).tokenizerJson as Record<string, any>) : {}); // eslint-disable-line @typescript-eslint/no-explicit-any
    const phi = read('bpe-sentencepiece-phi3');
    const t5 = read('unigram-t5');
    // phi-3's vocab without merges: one token (or byte-fallback bytes) per char, so every char's offsets show
    const base = {
      version: '1.0',
      truncation: null,
      padding: null,
      decoder: null,
      added_tokens: phi.added_tokens,
      model: hasTokenizerFixtures ? { ...phi.model, merges: [], fuse_unk: false } : null,
    };
    const normalizers: Record<string, unknown> = {
      NFC: { type: 'NFC' },
      NFD: { type: 'NFD' },
      NFKC: { type: 'NFKC' },
      NFKD: { type: 'NFKD' },
      Lowercase: { type: 'Lowercase' },
      StripAccents: { type: 'StripAccents' },
      'Strip both': { type: 'Strip', strip_left: true, strip_right: true },
      'Strip right': { type: 'Strip', strip_left: false, strip_right: true },
      Prepend: { type: 'Prepend', prepend: '▁' },
      'Replace string': { type: 'Replace', pattern: { String: ' ' }, content: '▁' },
      'Replace longer': { type: 'Replace', pattern: { String: 'ab' }, content: 'XYZ' },
      'Replace by nothing': { type: 'Replace', pattern: { String: 'a' }, content: '' },
      'Replace regex': { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' },
      Precompiled: t5.normalizer,
      'BertNormalizer cased': { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: false },
      'BertNormalizer uncased': { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
      'BertNormalizer strip only': { type: 'BertNormalizer', clean_text: false, handle_chinese_chars: false, strip_accents: true, lowercase: false },
      'Sequence NFKD StripAccents Lowercase': { type: 'Sequence', normalizers: [{ type: 'NFKD' }, { type: 'StripAccents' }, { type: 'Lowercase' }] },
      'Sequence Precompiled NFKC Lowercase': { type: 'Sequence', normalizers: [t5.normalizer, { type: 'NFKC' }, { type: 'Lowercase' }] },
      'Sequence Prepend NFKC': { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, { type: 'NFKC' }] },
    };
    const preTokenizers: Record<string, unknown> = {
      Whitespace: { type: 'Whitespace' },
      WhitespaceSplit: { type: 'WhitespaceSplit' },
      BertPreTokenizer: { type: 'BertPreTokenizer' },
      ...Object.fromEntries(
        ['Isolated', 'Removed', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous'].map((b) => [`Punctuation ${b}`, { type: 'Punctuation', behavior: b }]),
      ),
      Digits: { type: 'Digits', individual_digits: false },
      'Digits individual': { type: 'Digits', individual_digits: true },
      'Metaspace always': { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
      'Metaspace first': { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: true },
      'Metaspace never, no split': { type: 'Metaspace', replacement: '▁', prepend_scheme: 'never', split: false },
      'Metaspace legacy add_prefix_space': { type: 'Metaspace', replacement: '▁', str_rep: '▁', add_prefix_space: true },
      ByteLevel: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
      'ByteLevel no regex': { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      'Split string removed': { type: 'Split', pattern: { String: ' ' }, behavior: 'Removed', invert: false },
      'Split string inverted': { type: 'Split', pattern: { String: 'a' }, behavior: 'Isolated', invert: true },
      'Split GPT-2 regex': {
        type: 'Split',
        pattern: { Regex: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+" },
        behavior: 'Isolated',
        invert: false,
      },
      'Split Llama-3 regex': {
        type: 'Split',
        pattern: {
          Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        },
        behavior: 'Isolated',
        invert: false,
      },
      'Split Qwen2 regex': {
        type: 'Split',
        pattern: {
          Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        },
        behavior: 'Isolated',
        invert: false,
      },
      'Split digits regex': { type: 'Split', pattern: { Regex: '\\p{N}{1,3}' }, behavior: 'Isolated', invert: false },
      'Split whitespace regex merged with next': { type: 'Split', pattern: { Regex: '\\s+' }, behavior: 'MergedWithNext', invert: false },
      CharDelimiterSplit: { type: 'CharDelimiterSplit', delimiter: 'a' },
      Sequence: {
        type: 'Sequence',
        pretokenizers: [{ type: 'WhitespaceSplit' }, { type: 'Digits', individual_digits: true }, { type: 'Punctuation', behavior: 'Isolated' }],
      },
    };
    const byteLevelPre = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true };
    const postProcessors: Record<string, unknown> = {
      BertProcessing: { type: 'BertProcessing', sep: ['</s>', 2], cls: ['<s>', 1] },
      RobertaProcessing: { type: 'RobertaProcessing', sep: ['</s>', 2], cls: ['<s>', 1], trim_offsets: true, add_prefix_space: true },
      'RobertaProcessing without prefix space': { type: 'RobertaProcessing', sep: ['</s>', 2], cls: ['<s>', 1], trim_offsets: true, add_prefix_space: false },
      ByteLevel: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true },
      'Sequence ByteLevel + TemplateProcessing': {
        type: 'Sequence',
        processors: [
          { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true },
          {
            type: 'TemplateProcessing',
            single: [{ SpecialToken: { id: '<s>', type_id: 1 } }, { Sequence: { id: 'A', type_id: 3 } }],
            pair: [{ Sequence: { id: 'A', type_id: 0 } }],
            special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } },
          },
        ],
      },
    };
    const token = (id: number, content: string, flags: Record<string, boolean>) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: true,
      special: false,
      ...flags,
    });
    const addedTokens: Record<string, unknown[]> = {
      single_word: [token(40000, 'ab', { single_word: true, normalized: false }), token(40001, 'c', { single_word: true })],
      'lstrip and rstrip': [
        token(1, '<s>', { lstrip: true, rstrip: true, normalized: false, special: true }),
        token(40002, 'X', { lstrip: true }),
        token(40003, 'b', { rstrip: true }),
      ],
      'overlapping, longest first': [
        token(40004, 'abc', { normalized: false }),
        token(40005, 'bcX', { normalized: false }),
        token(40006, 'ab', { normalized: false }),
        token(40007, '  ', {}),
        token(40008, ' ', {}),
      ],
      'matched after normalization': [token(40009, 'ABC', {}), token(40010, 'Étè', {}), token(40011, 'İ', {})],
    };
    const POOL = Array.from(
      "abcabcXYZ<s>ABCÉtèİ019 .,!?'\"-_/ \t\n\r  éÉßİıǅﬁ½²™ｶﾞＡ①\u0301\u0300\u0323\u0308\u0345\u034f\u200d\u200b\u00ad\ufeff\u0000\u0085\u00a0\u3000日本中文😀👍🏽🇺🇸▁ΣΟΔ가각ạâ\u1100\u1161\u0f73\u0344\u0b47\u0b3e[X]",
    );
    const texts = (seed: number): string[] => {
      const rnd = seededRandom(seed);
      return Array.from({ length: 150 }, () => {
        let s = '';
        const n = Math.floor(rnd() * 25);
        for (let i = 0; i < n; i++) s += POOL[Math.floor(rnd() * POOL.length)];
        return s;
      });
    };
    const check = async (json: object, seed: number) => {
      const t = EncoderTokenizer.fromJson(json);
      const ref = oracle!.Tokenizer.fromString(JSON.stringify(json));
      return mismatches(t, ref, texts(seed), NONE);
    };
    let seed = 100;
    for (const [name, normalizer] of Object.entries(normalizers)) {
      const s = seed++;
      it(`normalizer ${name}`, async () => {
        expect(await check({ ...base, normalizer, pre_tokenizer: null, post_processor: null }, s)).toEqual([]);
      });
    }
    for (const [name, preTokenizer] of Object.entries(preTokenizers)) {
      const s = seed++;
      it(`pre-tokenizer ${name}`, async () => {
        expect(await check({ ...base, normalizer: null, pre_tokenizer: preTokenizer, post_processor: null }, s)).toEqual([]);
      });
    }
    for (const [name, postProcessor] of Object.entries(postProcessors)) {
      const s = seed++;
      it(`post-processor ${name}`, async () => {
        expect(await check({ ...base, normalizer: null, pre_tokenizer: byteLevelPre, post_processor: postProcessor }, s)).toEqual([]);
      });
    }
    for (const [name, added] of Object.entries(addedTokens)) {
      const s = seed++;
      it(`added tokens: ${name}`, async () => {
        const json = {
          ...base,
          added_tokens: added,
          normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKD' }, { type: 'Lowercase' }] },
          pre_tokenizer: { type: 'WhitespaceSplit' },
          post_processor: null,
        };
        expect(await check(json, s)).toEqual([]);
      });
    }
  });

  describe('model options on small synthetic vocabularies', () => {
    const bytes = Object.fromEntries(Array.from({ length: 256 }, (_, b) => [`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, 100 + b]));
    const vocab = { '<unk>': 0, a: 1, b: 2, c: 3, ab: 4, abc: 5, é: 6, x: 7, y: 8 };
    const merges = ['a b', 'ab c'];
    const models: Record<string, object> = {
      'BPE with unk': { type: 'BPE', vocab, merges, unk_token: '<unk>', fuse_unk: false },
      'BPE with unk, fuse_unk': { type: 'BPE', vocab, merges, unk_token: '<unk>', fuse_unk: true },
      'BPE with byte_fallback': { type: 'BPE', vocab: { ...vocab, ...bytes }, merges, unk_token: '<unk>', byte_fallback: true, fuse_unk: true },
      'BPE with end_of_word_suffix': {
        type: 'BPE',
        vocab: { '<unk>': 0, a: 1, b: 2, c: 3, 'a</w>': 4, 'b</w>': 5, 'c</w>': 6, ab: 7, 'abc</w>': 8, 'ab</w>': 9 },
        merges: ['a b', 'ab c</w>', 'a b</w>'],
        unk_token: '<unk>',
        end_of_word_suffix: '</w>',
      },
      'WordPiece with a small max_input_chars_per_word': {
        type: 'WordPiece',
        vocab: { '[UNK]': 0, a: 1, b: 2, '##a': 3, '##b': 4, '##c': 5, ab: 6, é: 7 },
        unk_token: '[UNK]',
        continuing_subword_prefix: '##',
        max_input_chars_per_word: 5,
      },
      'Unigram with unknown pieces': {
        type: 'Unigram',
        unk_id: 0,
        vocab: [['<unk>', 0], ['a', -1], ['b', -1.5], ['ab', -2], ['abc', -2.2], ['c', -3], ['é', -4]],
      },
    };
    const POOL = Array.from('aabbccdé €😀 xyz');
    let seed = 500;
    for (const [name, model] of Object.entries(models)) {
      const s = seed++;
      it(name, async () => {
        const json = { version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null, pre_tokenizer: { type: 'WhitespaceSplit' }, post_processor: null, decoder: null, model };
        const rnd = seededRandom(s);
        const texts = Array.from({ length: 300 }, () => {
          let t = '';
          const n = Math.floor(rnd() * 14);
          for (let i = 0; i < n; i++) t += POOL[Math.floor(rnd() * POOL.length)];
          return t;
        });
        expect(await mismatches(EncoderTokenizer.fromJson(json), oracle!.Tokenizer.fromString(JSON.stringify(json)), texts, NONE)).toEqual([]);
      });
    }
  });

  it('the Unicode tables in src/ are the classes of the reference, code point by code point', { timeout: 120_000 }, () => {
    const t = probeTables();
    expect(tables.RUST_WHITESPACE).toBe(toRanges(t.whitespace));
    expect(tables.BERT_REMOVED).toBe(toRanges(t.bertRemoved));
    expect(tables.BERT_PUNCT).toBe(toRanges(t.bertPunct));
    expect(tables.MARK_NONSPACING).toBe(toRanges(t.markNonspacing));
    expect(tables.COMBINING_MARK).toBe(toRanges(t.combiningMark));
    expect(tables.ONIG_LETTER).toBe(toRanges(t.onigLetter));
    expect(tables.ONIG_NUMBER).toBe(toRanges(t.onigNumber));
    expect(tables.ONIG_SPACE).toBe(toRanges(t.onigSpace));
    expect(tables.ONIG_WORD).toBe(toRanges(t.onigWord));
    expect(tables.NORM_UNKNOWN).toBe(toRanges(t.normUnknown));
    expect(tables.CCC_RANKS).toBe(cccToString(t.cccRanks));
  });

  it('the golden corpus texts are those of the fixtures (sanity)', () => {
    const f = loadFamily('wordpiece-uncased');
    expect(f.golden.cases.length).toBe(43);
    expect(readFileSync(f.tokenizerPath, 'utf8').length).toBeGreaterThan(0);
  });
});
