/**
 * Fixtures of the tokenizer tests: the real tokenizer.json files and the golden outputs of the Rust
 * reference in ../shared/tokenizers (absent on a fresh clone: suites skip and say why), the
 * dev-only oracle `tokenizers@0.23.2` (the Rust reference's Node binding), and seeded text
 * generators for the parity fuzzing.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { sharedDir } from './shared-fixtures.ts';

export const tokenizersDir = path.join(sharedDir, 'tokenizers');
export const hasTokenizerFixtures = existsSync(path.join(tokenizersDir, 'golden'));

export const FAMILIES = [
  'wordpiece-cased',
  'wordpiece-uncased',
  'wordpiece-uncased-minilm',
  'bpe-bytelevel-roberta',
  'bpe-bytelevel-modernbert',
  'unigram-t5',
  'bpe-sentencepiece-phi3',
] as const;
export type Family = (typeof FAMILIES)[number];

export interface GoldenEncoding {
  ids: number[];
  tokens: string[];
  offsets: [number, number][];
  offsets_utf16: ([number, number] | null)[];
  type_ids: number[];
  attention_mask: number[];
  special_tokens_mask: number[];
}

export interface GoldenCase {
  id: string;
  text: string;
  encoding: GoldenEncoding;
  truncated_512?: { ids: number[]; tokens: string[]; offsets: [number, number][] };
}

export interface Golden {
  family: string;
  cases: GoldenCase[];
  offsets_unit_probe: { text: string; tokens: string[]; offsets: [number, number][] };
  truncate_pad_16: {
    settings: { padding: { pad_id: number; pad_token: string; pad_type_id: number } };
    cases: { id: string; text: string; encoding: GoldenEncoding }[];
  };
}

export interface FamilyFiles {
  tokenizerJson: unknown;
  tokenizerConfig: unknown | null;
  golden: Golden;
  tokenizerPath: string;
}

const cache = new Map<string, FamilyFiles>();

export function loadFamily(family: Family): FamilyFiles {
  let f = cache.get(family);
  if (!f) {
    const dir = path.join(tokenizersDir, family);
    const configPath = path.join(dir, 'tokenizer_config.json');
    f = {
      tokenizerPath: path.join(dir, 'tokenizer.json'),
      tokenizerJson: JSON.parse(readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')),
      tokenizerConfig: existsSync(configPath) ? JSON.parse(readFileSync(configPath, 'utf8')) : null,
      golden: JSON.parse(readFileSync(path.join(tokenizersDir, 'golden', `${family}.json`), 'utf8')) as Golden,
    };
    cache.set(family, f);
  }
  return f;
}

export function warnIfFixturesMissing(suite: string): void {
  if (!hasTokenizerFixtures) console.warn(`${suite}: skipped, ${tokenizersDir} is absent (tokenizer goldens live there)`);
}

/** The reference's Node binding, as far as these tests use it. */
export interface OracleEncoding {
  getIds(): number[];
  getTokens(): string[];
  getOffsets(): number[][];
  getTypeIds(): number[];
  getSpecialTokensMask(): number[];
  getAttentionMask(): number[];
  /** The windows after this one when a truncation cut the text (HF's `overflowing`). */
  getOverflowing(): OracleEncoding[];
}
export interface OracleTokenizer {
  encode(text: string, pair: string | null, options: { addSpecialTokens: boolean }): Promise<OracleEncoding>;
  setTruncation(maxLength: number, options?: { strategy?: 'LongestFirst' | 'OnlyFirst' | 'OnlySecond'; stride?: number; direction?: 'right' | 'left' }): void;
  disableTruncation(): void;
  setPadding(options: { maxLength?: number; padId?: number; padToken?: string; padTypeId?: number; padToMultipleOf?: number }): void;
  disablePadding(): void;
}
export interface Oracle {
  Tokenizer: { fromFile(file: string): OracleTokenizer; fromString(json: string): OracleTokenizer };
}

let oracle: Oracle | null | undefined;
export let oracleProblem = '';

/** The dev-only oracle, or null (with `oracleProblem` set) when it cannot be loaded here. */
export function loadOracle(): Oracle | null {
  if (oracle === undefined) {
    try {
      oracle = createRequire(import.meta.url)('tokenizers') as Oracle;
    } catch (error) {
      oracle = null;
      oracleProblem = (error as Error).message;
    }
  }
  return oracle;
}

/** Deterministic generator (LCG) so that failures replay. */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) & 0x7fffffff;
    return s / 0x7fffffff;
  };
}

const POOLS = [
  'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789',
  '     \t\n\r',
  ".,;:!?'\"()[]{}<>-_/\\@#$%^&*+=~`|",
  'éèêëàâäôöûüçñÉÀÇßİıŉǄǅǆﬀﬁﬃ',
  '\u0301\u0300\u0302\u0308\u0323\u0327\u0316\u0334\u0345\u034f\u0361\u05b0\u0610\u093c\u094d\u0e31\u20d7\u20e3\ufe0f\u200d\u200c\u200b\u00ad\ufeff',
  '日本語中文你好世界テキストカタカナひらがな한국어텍스트',
  '😀👍🏽👨‍👩‍👧🇺🇸🏳️‍🌈❤️🤗🫠',
  'مرحبا שלום नमस्ते สวัสดี Привет Ελληνικά ΟΔΥΣΣΕΥΣ',
  'ＦＵＬＬｗｉｄｔｈ１２３①½²™℃㎏ｶﾞ',
  '\u0000\u0001\u0007\u001f\u007f\u0085\u00a0\u1680\u2000\u2028\u3000\ufffd\ue000',
  '▁ ▁▁',
  '[CLS][SEP][MASK]<s></s><mask><unk><pad>[UNK]<|endoftext|><|user|>|||EMAIL_ADDRESS|||<extra_id_0>',
  'ạâậ\u1100\u1161\u11a8가각ṩǖ\u0f73\u0344\u0b47\u0b3e',
].map((p) => Array.from(p));

const MARKS = [
  ...Array.from({ length: 0x70 }, (_, i) => String.fromCodePoint(0x300 + i)),
  ...'\u0591\u05c1\u0610\u064b\u0670\u093c\u094d\u09bc\u0e38\u0f71\u0f72\u0f80\u1dc0\u20d0\u302a\u3099\ufe20\u0c3c\u1ac0\u0897',
  '\u{1d165}',
  '\u{1d16d}',
  '\u{1e8d0}',
];

/** Text from a mix of tricky pools (words, spaces, accents, marks, CJK, emoji, controls, specials). */
export function tricky(rnd: () => number, maxLength = 40): string {
  const len = Math.floor(rnd() * maxLength);
  let s = '';
  for (let i = 0; i < len; i++) {
    const p = POOLS[Math.floor(rnd() * POOLS.length)];
    const k = rnd() < 0.3 ? 1 + Math.floor(rnd() * 6) : 1;
    for (let j = 0; j < k; j++) s += p[Math.floor(rnd() * p.length)];
  }
  return s;
}

/** Random code points of any plane, stacks of combining marks, spaces. */
export function wild(rnd: () => number, maxLength = 30): string {
  const len = Math.floor(rnd() * maxLength);
  let s = '';
  for (let i = 0; i < len; i++) {
    const r = rnd();
    if (r < 0.35) {
      for (;;) {
        const q = rnd();
        const cp = Math.floor(rnd() * (q < 0.5 ? 0x3000 : q < 0.8 ? 0x10000 : 0x110000));
        if (cp >= 0xd800 && cp <= 0xdfff) continue;
        s += String.fromCodePoint(cp);
        break;
      }
    } else if (r < 0.6) s += MARKS[Math.floor(rnd() * MARKS.length)];
    else if (r < 0.75) s += ' ';
    else {
      const p = POOLS[Math.floor(rnd() * POOLS.length)];
      s += p[Math.floor(rnd() * p.length)];
    }
  }
  return s;
}
