/**
 * Hostile inputs: texts of one shape repeated — punctuation without spaces, CJK, one huge word, emoji, combining
 * marks, whitespace runs, digits — have no cut a word-level rule can use, and used to be tokenized whole: an 8 MiB
 * input took seconds to minutes (byte-level BPE and Unigram on a word of millions of chars) to keep 512 tokens.
 * Truncated to the model length, the tokenizer now reads prefixes of the text and of its long words
 * (encoder-tokenizer.ts): the work is bounded by the limit, and the tokens are the reference implementation's, for
 * every golden family. The one documented exception: Unigram on a word that no prefix settles (a run of one char,
 * whose best path puts its odd pieces first), past the settle limit.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EncoderTokenizer } from '../../src/encoder/tokenizer/index.ts';
import { NormalizedString } from '../../src/encoder/tokenizer/normalized-string.ts';
import { FAMILIES, type Family, hasTokenizerFixtures, loadFamily, loadOracle, oracleProblem, warnIfFixturesMissing } from '../helpers/tokenizer-fixtures.ts';

const oracle = loadOracle();
if (!oracle) console.warn(`tokenizer hostile inputs: the oracle part is skipped, "tokenizers" cannot be loaded: ${oracleProblem}`);
warnIfFixturesMissing('tokenizer hostile inputs');

const SHAPES: Record<string, (length: number) => string> = {
  dots: (n) => '.'.repeat(n),
  cjk: (n) => '中文字'.repeat(Math.ceil(n / 3)).slice(0, n),
  'one word': (n) => 'a'.repeat(n),
  emoji: (n) => '😀'.repeat(Math.ceil(n / 2)),
  'combining marks': (n) => 'e\u0301'.repeat(Math.ceil(n / 2)),
  spaces: (n) => `x${' '.repeat(n)}y`,
  newlines: (n) => 'a\n'.repeat(Math.ceil(n / 2)),
  digits: (n) => '7'.repeat(n),
  'two chars': (n) => 'ab'.repeat(Math.ceil(n / 2)),
  mixed: (n) => '中.😀e\u0301 x'.repeat(Math.ceil(n / 8)),
};

/** Unigram on these never settles (a run of one pattern): past the settle limit its first pieces may differ. */
const UNSETTLED_UNIGRAM = new Set(['dots', 'digits', 'two chars', 'one word']);

function tokenizerOf(family: Family): EncoderTokenizer {
  const f = loadFamily(family);
  return EncoderTokenizer.fromJson(f.tokenizerJson, f.tokenizerConfig);
}

afterEach(() => vi.restoreAllMocks());

describe.skipIf(!hasTokenizerFixtures || !oracle)('hostile inputs give the reference\'s tokens', () => {
  for (const family of FAMILIES) {
    it(`${family}: every shape, alone and as the document of a pair, at the model length and at 64`, { timeout: 300_000 }, async () => {
      const tokenizer = tokenizerOf(family);
      const ref = oracle!.Tokenizer.fromFile(loadFamily(family).tokenizerPath);
      ref.disablePadding();
      const unigram = family === 'unigram-t5';
      const bad: string[] = [];
      for (const maxLength of [tokenizer.maxLength, 64]) {
        ref.setTruncation(maxLength);
        for (const [shape, make] of Object.entries(SHAPES)) {
          // longer than the prefixes first tried, within what the reference does quickly; Unigram's runs of one
          // pattern within the settle limit
          const text = make(unigram && UNSETTLED_UNIGRAM.has(shape) ? 12_000 : 40_000);
          for (const query of [null, 'what is in it?']) {
            const settings = { truncation: { maxLength }, padding: null };
            const ours = query === null ? tokenizer.encodeWith(text, settings) : tokenizer.encodeWith(query, settings, text);
            const theirs = await ref.encode(query ?? text, query === null ? null : text, { addSpecialTokens: true });
            const same = JSON.stringify([ours.ids, ours.offsets]) === JSON.stringify([theirs.getIds(), theirs.getOffsets().map((o) => [o[0], o[1]])]);
            if (!same) bad.push(`${shape}${query === null ? '' : ' (pair)'} at ${maxLength}`);
          }
        }
      }
      expect(bad).toEqual([]);
    });
  }
});

describe.skipIf(!hasTokenizerFixtures)('an 8 MiB hostile input is tokenized in bounded work', () => {
  const MiB = 2 ** 20;
  for (const family of FAMILIES) {
    it(`${family}: every shape keeps the model length, reading a bounded prefix of the text`, { timeout: 300_000 }, () => {
      const tokenizer = tokenizerOf(family);
      const read: Record<string, number> = {};
      for (const [shape, make] of Object.entries(SHAPES)) {
        const text = make(8 * MiB);
        const lengths: number[] = [];
        const fromString = NormalizedString.fromString.bind(NormalizedString);
        const spy = vi.spyOn(NormalizedString, 'fromString').mockImplementation((prefix: string) => {
          lengths.push(prefix.length);
          return fromString(prefix);
        });
        const encoding = tokenizer.encode(text);
        spy.mockRestore();
        read[shape] = Math.max(...lengths);
        expect(encoding.ids.length, shape).toBeLessThanOrEqual(tokenizer.maxLength);
        expect(encoding.offsets.every(([start, end]) => start <= end && end <= text.length), shape).toBe(true);
      }
      // WordPiece makes a word longer than max_input_chars_per_word one [UNK] whose offsets end where the word ends,
      // which only reading to there tells: a linear walk, on the tokenizer thread (docs/tokenizer.md)
      // which only reading to there tells: a linear walk, on the tokenizer thread (docs/tokenizer.md); so does a
      // text whose whitespace gives no tokens, for the token after it
      const wholeWord = family.startsWith('wordpiece') ? new Set(['one word', 'emoji', 'combining marks', 'digits', 'two chars', 'spaces']) : new Set<string>();
      // a run of chars that no Unigram piece holds is one unknown piece, which ends where the run ends
      if (family === 'unigram-t5') for (const shape of ['cjk', 'emoji', 'spaces']) wholeWord.add(shape);
      const bounded = Object.entries(read).filter(([shape]) => !wholeWord.has(shape));
      // prefixes grow 4-fold to twice what settles a long word (24 code points per token, at least 16,384)
      const bound = 8 * Math.max(16_384, 24 * tokenizer.maxLength) + 65_536;
      expect(bounded.filter(([, length]) => length > bound), JSON.stringify(read)).toEqual([]);
    });
  }
});
