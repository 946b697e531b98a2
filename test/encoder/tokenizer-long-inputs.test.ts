/**
 * Long inputs: a text truncated to the model length is tokenized only as far as the truncation needs (an 8 MiB input
 * used to hold the event loop for seconds before 512 tokens were kept), and the tokens are still exactly those of the
 * Rust reference for the whole text (src/encoder/tokenizer/text-cuts.ts says why cutting is safe). Every golden
 * family; long texts made to put cuts next to words, added tokens, whitespace runs, CJK, marks and emoji.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EncoderTokenizer } from '../../src/encoder/tokenizer/index.ts';
import { NormalizedString } from '../../src/encoder/tokenizer/normalized-string.ts';
import { lastCut } from '../../src/encoder/tokenizer/text-cuts.ts';
import {
  FAMILIES,
  type OracleTokenizer,
  hasTokenizerFixtures,
  loadFamily,
  loadOracle,
  oracleProblem,
  seededRandom,
  tricky,
  warnIfFixturesMissing,
} from '../helpers/tokenizer-fixtures.ts';

const oracle = loadOracle();
if (!oracle) console.warn(`tokenizer long inputs: the oracle part is skipped, "tokenizers" cannot be loaded: ${oracleProblem}`);
warnIfFixturesMissing('tokenizer long inputs');

const MiB = 2 ** 20;
const SENTENCE = 'The quick brown fox jumps over the lazy dog, and naïve café owners write 12345 tests! ';
const PROSE = SENTENCE.repeat(Math.ceil((8 * MiB) / SENTENCE.length)).slice(0, 8 * MiB);

function tokenizerOf(family: (typeof FAMILIES)[number]): EncoderTokenizer {
  const f = loadFamily(family);
  return EncoderTokenizer.fromJson(f.tokenizerJson, f.tokenizerConfig);
}

/** Long text of random words and tricky pieces joined by single spaces (the cut points) and other separators. */
function longText(seed: number, length: number): string {
  const rnd = seededRandom(seed);
  const words = ['alpha', 'Beta', 'gamma7', '42', 'x', 'tokenization', 'naïve', 'über', '日本語', 'don\'t', 'U.S.A.', 'e-mail'];
  let s = '';
  while (s.length < length) {
    const r = rnd();
    if (r < 0.6) s += words[Math.floor(rnd() * words.length)];
    else if (r < 0.9) s += tricky(rnd, 12);
    else s += 'w'.repeat(1 + Math.floor(rnd() * 300)); // long words, sometimes longer than WordPiece's 100
    const g = rnd();
    s += g < 0.8 ? ' ' : g < 0.9 ? '   ' : g < 0.95 ? '\n' : '';
  }
  return s;
}

afterEach(() => vi.restoreAllMocks());

describe.skipIf(!hasTokenizerFixtures)('long inputs are tokenized only as far as the truncation needs', () => {
  for (const family of FAMILIES) {
    it(`${family}: an 8 MiB text truncated to the model length reads a bounded prefix of it`, () => {
      const tokenizer = tokenizerOf(family);
      const lengths: number[] = [];
      const fromString = NormalizedString.fromString.bind(NormalizedString);
      vi.spyOn(NormalizedString, 'fromString').mockImplementation((text: string) => {
        lengths.push(text.length);
        return fromString(text);
      });
      const encoding = tokenizer.encode(PROSE);
      expect(encoding.ids).toHaveLength(tokenizer.maxLength);
      // the longest text the pipeline saw: a prefix in proportion to the model length, not the 8 MiB
      expect(Math.max(...lengths)).toBeLessThanOrEqual(tokenizer.maxLength * 8);
    });
  }
});

async function referenceOf(ref: OracleTokenizer, text: string, pair: string | null) {
  const r = await ref.encode(text, pair, { addSpecialTokens: true });
  return { ids: r.getIds(), tokens: r.getTokens(), offsets: r.getOffsets().map((o) => [o[0], o[1]]), typeIds: r.getTypeIds() };
}

describe.skipIf(!hasTokenizerFixtures || !oracle)('long inputs agree with the reference', () => {
  for (const family of FAMILIES) {
    it(`${family}: long texts and pairs under several truncation lengths give the reference's ids and offsets`, { timeout: 180_000 }, async () => {
      const tokenizer = tokenizerOf(family);
      const ref = oracle!.Tokenizer.fromFile(loadFamily(family).tokenizerPath);
      ref.disablePadding();
      // The reference is quadratic on one long word, which is what a pipeline without pre-tokenizer (phi3) makes of
      // a text: shorter texts there, still longer than the first prefix tried (4096 chars).
      const oneWord = (loadFamily(family).tokenizerJson as { pre_tokenizer: unknown }).pre_tokenizer === null;
      const length = oneWord ? 5_000 : 60_000;
      const seeds = oneWord ? [1, 2, 3] : [1, 2, 3, 4, 5, 6];
      const texts = [PROSE.slice(0, oneWord ? length : length * 5), ...seeds.map((seed) => longText(seed, length))];
      const bad: string[] = [];
      for (const maxLength of oneWord ? [17, 64, 300] : [tokenizer.maxLength, 17, 64, 300, 2000]) {
        if (maxLength <= tokenizer.addedTokens(true)) continue;
        ref.setTruncation(maxLength);
        const cases: [string, string | null][] = [
          ...texts.map((t): [string, string | null] => [t, null]),
          [texts[1], texts[2]],
          [texts[3].slice(0, 3000), texts.at(-1)!],
          ['short query', texts.at(-2)!],
        ];
        for (const [text, pair] of cases) {
          const settings = { truncation: { maxLength }, padding: null };
          const e = pair === null ? tokenizer.encodeWith(text, settings) : tokenizer.encodeWith(text, settings, pair);
          const ours = { ids: e.ids, tokens: e.tokens, offsets: e.offsets, typeIds: e.typeIds };
          const theirs = await referenceOf(ref, text, pair);
          if (JSON.stringify(ours) !== JSON.stringify(theirs) && bad.length < 3) {
            bad.push(`max ${maxLength}, text of ${text.length}${pair === null ? '' : ` + ${pair.length}`} chars starting ${JSON.stringify(text.slice(0, 40))}`);
          }
        }
      }
      expect(bad).toEqual([]);
    });
  }
});

/** The content tokens (no specials) of the reference, as "id@start-end" strings. */
async function contentTokens(ref: OracleTokenizer, text: string): Promise<string[]> {
  const r = await ref.encode(text, null, { addSpecialTokens: true });
  const offsets = r.getOffsets();
  const special = r.getSpecialTokensMask();
  return r.getIds().flatMap((id, i) => (special[i] === 1 ? [] : [`${id}@${offsets[i][0]}-${offsets[i][1]}`]));
}

function cutsOf(text: string): number[] {
  const cuts: number[] = [];
  for (let i = lastCut(text, text.length); i > 0; i = lastCut(text, i - 1)) cuts.push(i);
  return cuts;
}

describe.skipIf(!hasTokenizerFixtures || !oracle)('a cut never changes the tokens before it (the reference itself)', () => {
  for (const family of FAMILIES) {
    it(`${family}: the reference's tokens of the text before each cut are the first tokens of the whole text`, { timeout: 120_000 }, async () => {
      const ref = oracle!.Tokenizer.fromFile(loadFamily(family).tokenizerPath);
      ref.disablePadding();
      ref.disableTruncation();
      const bad: string[] = [];
      let checked = 0;
      for (let seed = 11; seed < 27; seed++) {
        const text = longText(seed, 2500);
        const whole = await contentTokens(ref, text);
        for (const cut of cutsOf(text)) {
          const before = await contentTokens(ref, text.slice(0, cut));
          checked++;
          if (JSON.stringify(before) !== JSON.stringify(whole.slice(0, before.length)) && bad.length < 3) {
            bad.push(`seed ${seed}, cut ${cut}: ${JSON.stringify(text.slice(Math.max(0, cut - 30), cut + 10))}`);
          }
        }
      }
      expect(checked).toBeGreaterThan(400);
      expect(bad).toEqual([]);
    });
  }
});

describe.skipIf(!hasTokenizerFixtures)('pipelines without exact cuts: prefixes with a margin, or the whole text', () => {
  // read in the tests, not here: a skipped describe still runs its body
  const base = () => loadFamily('wordpiece-uncased').tokenizerJson as Record<string, unknown>;
  const added = (content: string, flags: Partial<Record<'lstrip' | 'rstrip' | 'normalized', boolean>> = {}) => ({
    id: 40_000, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true, ...flags,
  });

  it('cuts the golden families: by words, and phi3 (no pre-tokenizer) by BPE pieces', () => {
    const kinds = Object.fromEntries(FAMILIES.map((family) => [family, tokenizerOf(family).cutKind]));
    expect(kinds).toEqual({
      'wordpiece-cased': 'words',
      'wordpiece-uncased': 'words',
      'wordpiece-uncased-minilm': 'words',
      'bpe-bytelevel-roberta': 'words',
      'bpe-bytelevel-modernbert': 'words',
      'unigram-t5': 'words',
      'bpe-sentencepiece-phi3': 'model',
    });
  });

  const readLengths = () => {
    const lengths: number[] = [];
    const fromString = NormalizedString.fromString.bind(NormalizedString);
    vi.spyOn(NormalizedString, 'fromString').mockImplementation((text: string) => {
      lengths.push(text.length);
      return fromString(text);
    });
    return lengths;
  };
  // the added tokens of the cases below, and whitespace runs after them, all along the text
  const text = (SENTENCE + 'New York [X]x    ').repeat(Math.ceil(100_000 / SENTENCE.length)).slice(0, 100_000);

  it.each([
    ['an added token holding "alnum space"', { added_tokens: [added('New York')] }],
    ['an rstrip added token ending in an alnum', { added_tokens: [added('[X]x', { rstrip: true })] }],
    ['a normalizer that turns the space into something else', { normalizer: { type: 'Replace', pattern: { String: ' ' }, content: '_' } }],
    ['a pre-tokenizer that does not split at spaces', { pre_tokenizer: { type: 'Punctuation' } }],
    ['a Split that merges the space into the word before it', { pre_tokenizer: { type: 'Split', pattern: { Regex: '\\s+' }, behavior: 'MergedWithPrevious', invert: false } }],
  ])('%s: no exact cuts, yet a prefix cut anywhere gives the reference\'s tokens far enough before its end', async (_name, change) => {
    const json = { ...base(), ...change };
    const tokenizer = EncoderTokenizer.fromJson(json);
    expect(tokenizer.cutKind).toBeNull();
    const lengths = readLengths();
    const ours = tokenizer.encode(text);
    expect(Math.max(...lengths)).toBeLessThan(text.length / 4);
    if (oracle) {
      const ref = oracle.Tokenizer.fromString(JSON.stringify(json));
      ref.setTruncation(tokenizer.maxLength);
      const theirs = await referenceOf(ref, text, null);
      expect({ ids: ours.ids, offsets: ours.offsets }).toEqual({ ids: theirs.ids, offsets: theirs.offsets });
    }
  });

  it.each([
    ['a Replace regex that can match across a cut', { normalizer: { type: 'Replace', pattern: { Regex: '\\p{N}{1,3}' }, content: '#' } }],
    ['an inverted Split (not reasoned about)', { pre_tokenizer: { type: 'Split', pattern: { Regex: '\\s+' }, behavior: 'Isolated', invert: true } }],
    ['no pre-tokenizer with a WordPiece model', { pre_tokenizer: null }],
  ])('%s: the whole text is read', (_name, change) => {
    const tokenizer = EncoderTokenizer.fromJson({ ...base(), ...change });
    expect(tokenizer.cutKind).toBeNull();
    const lengths = readLengths();
    tokenizer.encode(text);
    expect(Math.max(...lengths)).toBe(text.length);
  });
});
