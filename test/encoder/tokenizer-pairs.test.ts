/**
 * Text pairs (cross-encoders: a query and a document tokenized together) against the Rust reference itself, through
 * its dev-only Node binding `tokenizers@0.23.2`: every family of ../shared/tokenizers with a pair form, the golden
 * corpus texts paired with each other, pairs at the model length, every truncation strategy at small lengths on
 * shaped pairs (odd and even remainders, one side much longer, both long) and seeded random pairs, the file's own
 * truncation and padding, and each post-processor's pair form on synthetic tokenizer.json files. Then the error
 * paths and the truncation arithmetic without the oracle. A failure prints the pair and settings that replay it.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, InputError } from '../../src/encoder/errors.ts';
import { EncoderTokenizer, type EncodeSettings, type Encoding, type TruncationStrategy } from '../../src/encoder/tokenizer/index.ts';
import { longestFirstLengths } from '../../src/encoder/tokenizer/truncation.ts';
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

const oracle = loadOracle();
if (!oracle) console.warn(`tokenizer pair parity: skipped, the dev-only oracle "tokenizers" cannot be loaded: ${oracleProblem}`);
warnIfFixturesMissing('tokenizer pair parity');
const ready = oracle !== null && hasTokenizerFixtures;

const STRATEGIES: readonly TruncationStrategy[] = ['longest_first', 'only_first', 'only_second'];
const ORACLE_STRATEGY = { longest_first: 'LongestFirst', only_first: 'OnlyFirst', only_second: 'OnlySecond' } as const;

type Pair = readonly [string, string];
/** What both sides are compared on; a truncation failure is `{ error: 'truncation' }` on both. */
type Outcome = Omit<Encoding, 'offsets'> & { offsets: number[][] } | { error: string };

async function reference(ref: OracleTokenizer, [a, b]: Pair): Promise<Outcome> {
  try {
    const r = await ref.encode(a, b, { addSpecialTokens: true });
    return {
      ids: r.getIds(),
      tokens: r.getTokens(),
      offsets: r.getOffsets().map((o) => [o[0], o[1]]),
      typeIds: r.getTypeIds(),
      specialTokensMask: r.getSpecialTokensMask(),
      attentionMask: r.getAttentionMask(),
    };
  } catch (error) {
    const message = (error as Error).message;
    return { error: message.startsWith('Truncation error') ? 'truncation' : `reference threw ${message}` };
  }
}

function ours(t: EncoderTokenizer, [a, b]: Pair, settings: EncodeSettings): Outcome {
  try {
    return t.encodeWith(a, settings, b);
  } catch (error) {
    return { error: error instanceof InputError ? 'truncation' : `threw ${String(error)}` };
  }
}

/** Both sides on every pair; the first few differences, each with what replays it (empty when all agree). */
async function mismatches(t: EncoderTokenizer, ref: OracleTokenizer, pairs: readonly Pair[], settings: EncodeSettings): Promise<string[]> {
  const bad: string[] = [];
  for (const pair of pairs) {
    const mine = JSON.stringify(ours(t, pair, settings));
    const theirs = JSON.stringify(await reference(ref, pair));
    if (mine !== theirs && bad.length < 3) {
      bad.push(`${JSON.stringify({ pair, settings })}\n  ours ${mine.slice(0, 700)}\n  ref  ${theirs.slice(0, 700)}`);
    }
  }
  return bad;
}

/** The reference with only this truncation (the file's padding off) and our settings for the same. */
function truncatedTo(ref: OracleTokenizer, maxLength: number, strategy: TruncationStrategy): EncodeSettings {
  ref.disablePadding();
  ref.setTruncation(maxLength, { strategy: ORACLE_STRATEGY[strategy] });
  return { truncation: { maxLength, strategy }, padding: null };
}

function untruncated(ref: OracleTokenizer): EncodeSettings {
  ref.disablePadding();
  ref.disableTruncation();
  return { truncation: null, padding: null };
}

const tokenizerOf = (family: Family) => EncoderTokenizer.fromJson(loadFamily(family).tokenizerJson, loadFamily(family).tokenizerConfig);

/** Families whose tokenizer has a pair form; any other is named (there is nothing to compare on it). */
const pairFamilies = ready ? FAMILIES.filter((f) => tokenizerOf(f).supportsPairs()) : [];
for (const f of ready ? FAMILIES.filter((x) => !pairFamilies.includes(x)) : []) {
  console.warn(`tokenizer pair parity: ${f} skipped, its post-processor has no pair form`);
}

/** Content tokens of one text (no special tokens, no truncation). */
const contentLength = (t: EncoderTokenizer, text: string) => t.encodeWith(text, { truncation: null, padding: null }).specialTokensMask.filter((m) => m === 0).length;

describe.skipIf(!ready).each(pairFamilies)('text pairs against the reference: %s', (family) => {
  const texts = () => loadFamily(family).golden.cases.map((c) => c.text);
  const newReference = () => oracle!.Tokenizer.fromFile(loadFamily(family).tokenizerPath);
  /** Empty, golden texts of about 1, 10 and 30 content tokens, and golden texts joined to 150+, for shaped pairs. */
  const shaped = (t: EncoderTokenizer): string[] => {
    const byLength = texts().map((text) => ({ text, n: contentLength(t, text) }));
    const near = (n: number) => byLength.reduce((best, c) => (Math.abs(c.n - n) < Math.abs(best.n - n) ? c : best)).text;
    // joined rather than the corpus's 700-token texts, which one pre-token long (phi-3) are slow to tokenize
    let long = '';
    for (const c of byLength) if (c.n < 100 && contentLength(t, long) < 150) long += `${c.text} `;
    return ['', near(1), near(10), near(30), long];
  };

  it('golden corpus texts paired with each other (and themselves, and empty ones), untruncated', async () => {
    const t = tokenizerOf(family);
    const ref = newReference();
    const all = texts();
    const pairs: Pair[] = all.flatMap((a, i) => [[a, all[(i * 7 + 3) % all.length]] as const, [a, a] as const]);
    pairs.push(['', ''], ['', all[0]], [all[0], ''], [' ', '\n'], ['\u200b', ' \t ']);
    expect(await mismatches(t, ref, pairs, untruncated(ref))).toEqual([]);
  });

  it('encodePair: longest_first at the model length, short and long sides', async () => {
    const t = tokenizerOf(family);
    const ref = newReference();
    truncatedTo(ref, t.maxLength, 'longest_first');
    // long enough to pass any family's model length (4096 for phi-3)
    const corpus = texts().join(' ');
    const long = corpus.repeat(Math.ceil((t.maxLength * 12) / corpus.length));
    const longer = `${long} ${texts()[5]}`;
    const query = 'what is the capital of france?';
    const pairs: Pair[] = [[query, 'Paris is the capital of France.'], [query, long], [long, query], [long, long], [long, longer], [longer, long], ['', long], [long, '']];
    const bad: string[] = [];
    for (const pair of pairs) {
      const mine = JSON.stringify(t.encodePair(pair[0], pair[1]));
      const theirs = JSON.stringify(await reference(ref, pair));
      if (mine !== theirs) bad.push(`encodePair ${JSON.stringify(pair.map((x) => x.slice(0, 60)))} (model length ${t.maxLength})`);
    }
    expect(bad).toEqual([]);
    expect(t.encodePair(query, long).ids.length).toBe(t.maxLength);
  });

  it('longest_first, only_first and only_second at small lengths on shaped pairs (odd and even budgets)', async () => {
    const t = tokenizerOf(family);
    const ref = newReference();
    const sides = shaped(t);
    const pairs: Pair[] = sides.flatMap((a) => sides.map((b) => [a, b] as const));
    const special = t.addedTokens(true);
    const extras = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 15, 16, 31, 32, 63, 64];
    for (const strategy of STRATEGIES) {
      for (const extra of extras) {
        const settings = truncatedTo(ref, special + extra, strategy);
        expect(await mismatches(t, ref, pairs, settings)).toEqual([]);
      }
    }
  });

  it('seeded random pairs under every strategy at small lengths', async () => {
    const t = tokenizerOf(family);
    const ref = newReference();
    const rnd = seededRandom(7919 * (FAMILIES.indexOf(family) + 1));
    const special = t.addedTokens(true);
    for (const strategy of STRATEGIES) {
      for (const extra of [1, 2, 5, 8, 13, 24]) {
        const settings = truncatedTo(ref, special + extra, strategy);
        const pairs: Pair[] = Array.from({ length: 16 }, (_, k) => {
          const text = (n: number) => (rnd() < 0.5 ? tricky(rnd, n) : wild(rnd, n));
          return k % 4 === 0 ? [text(12), text(80)] : k % 4 === 1 ? [text(80), text(12)] : [text(40), text(40)];
        });
        expect(await mismatches(t, ref, pairs, settings)).toEqual([]);
      }
    }
    const settings = untruncated(ref);
    const free: Pair[] = Array.from({ length: 60 }, () => [tricky(rnd, 30), wild(rnd, 30)]);
    expect(await mismatches(t, ref, free, settings)).toEqual([]);
  });

  it("the file's own truncation and padding with pairs (fileSettings)", async () => {
    const t = tokenizerOf(family);
    const ref = newReference(); // as the file configures it
    const sides = shaped(t);
    const pairs: Pair[] = sides.flatMap((a) => sides.map((b) => [a, b] as const));
    const settings = t.fileSettings();
    expect(await mismatches(t, ref, pairs, settings)).toEqual([]);
  });
});

describe.skipIf(!ready)('pair forms of every post-processor, on synthetic tokenizer.json files', () => {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const read = (family: Family) => (hasTokenizerFixtures ? (loadFamily(family).tokenizerJson as Record<string, any>) : {});
  const bert = read('wordpiece-uncased');
  const roberta = read('bpe-bytelevel-roberta');
  const template = (pair: unknown) => ({
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair,
    special_tokens: { '<s>': { id: '<s>', ids: [0], tokens: ['<s>'] }, '<sep>': { id: '<sep>', ids: [2, 2], tokens: ['</s>', '</s>'] } },
  });
  const fancyPair = [
    { SpecialToken: { id: '<s>', type_id: 3 } },
    { Sequence: { id: 'B', type_id: 2 } },
    { SpecialToken: { id: '<sep>', type_id: 1 } },
    { Sequence: { id: 'A', type_id: 0 } },
  ];
  const cases: Record<string, { base: Record<string, unknown>; postProcessor: unknown; truncation?: unknown; padding?: unknown }> = {
    'BertProcessing (type ids 0 then 1)': { base: bert, postProcessor: { type: 'BertProcessing', sep: ['[SEP]', 102], cls: ['[CLS]', 101] } },
    'RobertaProcessing without trimming': {
      base: roberta,
      postProcessor: { type: 'RobertaProcessing', sep: ['</s>', 2], cls: ['<s>', 0], trim_offsets: false, add_prefix_space: false },
    },
    'RobertaProcessing trimming with add_prefix_space': {
      base: { ...roberta, pre_tokenizer: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true } },
      postProcessor: { type: 'RobertaProcessing', sep: ['</s>', 2], cls: ['<s>', 0], trim_offsets: true, add_prefix_space: true },
    },
    'ByteLevel alone (no special tokens, type ids 0 then 1)': { base: roberta, postProcessor: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true } },
    'no post-processor': { base: roberta, postProcessor: null },
    'TemplateProcessing: B first, multi-token specials, type ids 0-3': { base: roberta, postProcessor: template(fancyPair) },
    'Sequence ByteLevel then TemplateProcessing': {
      base: roberta,
      postProcessor: { type: 'Sequence', processors: [{ type: 'ByteLevel', add_prefix_space: false, trim_offsets: true }, template(fancyPair)] },
    },
    'Sequence TemplateProcessing then ByteLevel (trims each piece)': {
      base: roberta,
      postProcessor: { type: 'Sequence', processors: [template(fancyPair), { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true }] },
    },
    'Sequence BertProcessing then ByteLevel': {
      base: roberta,
      postProcessor: {
        type: 'Sequence',
        processors: [{ type: 'BertProcessing', sep: ['</s>', 2], cls: ['<s>', 0] }, { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true }],
      },
    },
    'file truncation OnlySecond to 24, fixed padding 40': {
      base: bert,
      postProcessor: bert.post_processor,
      truncation: { direction: 'Right', max_length: 24, strategy: 'OnlySecond', stride: 0 },
      padding: { strategy: { Fixed: 40 }, direction: 'Right', pad_to_multiple_of: null, pad_id: 0, pad_type_id: 1, pad_token: '[PAD]' },
    },
    'file truncation OnlyFirst to 13': {
      base: bert,
      postProcessor: bert.post_processor,
      truncation: { direction: 'Right', max_length: 13, strategy: 'OnlyFirst', stride: 0 },
    },
    'file truncation LongestFirst to 9, padding to a multiple of 8': {
      base: roberta,
      postProcessor: roberta.post_processor,
      truncation: { direction: 'Right', max_length: 9, strategy: 'LongestFirst', stride: 0 },
      padding: { strategy: 'BatchLongest', direction: 'Right', pad_to_multiple_of: 8, pad_id: 1, pad_type_id: 0, pad_token: '<pad>' },
    },
  };
  let seed = 300;
  for (const [name, c] of Object.entries(cases)) {
    const s = seed++;
    it(name, async () => {
      const json = { ...c.base, post_processor: c.postProcessor, truncation: c.truncation ?? null, padding: c.padding ?? null };
      const t = EncoderTokenizer.fromJson(json);
      const ref = oracle!.Tokenizer.fromString(JSON.stringify(json));
      const rnd = seededRandom(s);
      const pairs: Pair[] = Array.from({ length: 60 }, () => [tricky(rnd, 30), tricky(rnd, 30)]);
      pairs.push([' hello  world ', '  again '], ['', 'x'], ['x', '']);
      if (c.truncation) {
        // the file's settings as they are
        expect(await mismatches(t, ref, pairs, t.fileSettings())).toEqual([]);
      } else {
        expect(await mismatches(t, ref, pairs, untruncated(ref))).toEqual([]);
        const special = t.addedTokens(true);
        for (const extra of [1, 4, 7]) expect(await mismatches(t, ref, pairs, truncatedTo(ref, special + extra, 'longest_first'))).toEqual([]);
      }
    });
  }

  it('a TemplateProcessing without "pair": the reference refuses the file; ours serves single texts and refuses pairs', async () => {
    const json = { ...bert, post_processor: { ...bert.post_processor, pair: undefined } };
    expect(() => oracle!.Tokenizer.fromString(JSON.stringify(json))).toThrow();
    const t = EncoderTokenizer.fromJson(json);
    expect(t.supportsPairs()).toBe(false);
    expect(() => t.encodePair('a', 'b')).toThrow(ConfigError);
    expect(() => t.encodePair('a', 'b')).toThrow('no "pair" template');
    // single texts are those of the complete file
    const ref = oracle!.Tokenizer.fromString(JSON.stringify(bert));
    ref.disableTruncation();
    const r = await ref.encode('Hello, world', null, { addSpecialTokens: true });
    expect(t.encode('Hello, world').ids).toEqual(r.getIds());
  });
});

describe('pairs without the oracle: shapes, truncation arithmetic and errors', () => {
  const bertJson = {
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab: { '[UNK]': 0, '[CLS]': 1, '[SEP]': 2, a: 3, b: 4 } },
    normalizer: null,
    pre_tokenizer: { type: 'Whitespace' },
    post_processor: { type: 'BertProcessing', sep: ['[SEP]', 2], cls: ['[CLS]', 1] },
    added_tokens: [],
  };
  const bert = () => EncoderTokenizer.fromJson(bertJson);
  const words = (n: number, w: string) => Array.from({ length: n }, () => w).join(' ');
  const count = (e: Encoding, token: string) => e.tokens.filter((x) => x === token).length;
  const cut = (strategy: TruncationStrategy, maxLength: number): EncodeSettings => ({ truncation: { maxLength, strategy }, padding: null });

  it('BERT pairs: [CLS] A [SEP] B [SEP], type ids 0 then 1, offsets of B into B, specials [0, 0] and masked', () => {
    const e = bert().encodePair('a b', ' b  a');
    expect(e.tokens).toEqual(['[CLS]', 'a', 'b', '[SEP]', 'b', 'a', '[SEP]']);
    expect(e.typeIds).toEqual([0, 0, 0, 0, 1, 1, 1]);
    expect(e.specialTokensMask).toEqual([1, 0, 0, 1, 0, 0, 1]);
    expect(e.attentionMask).toEqual([1, 1, 1, 1, 1, 1, 1]);
    expect(e.offsets).toEqual([[0, 0], [0, 1], [2, 3], [0, 0], [1, 2], [4, 5], [0, 0]]);
  });

  it('RoBERTa pairs: <s> A </s></s> B </s>, every type id 0', () => {
    const t = EncoderTokenizer.fromJson({ ...bertJson, post_processor: { type: 'RobertaProcessing', sep: ['[SEP]', 2], cls: ['[CLS]', 1], trim_offsets: false } });
    const e = t.encodePair('a', 'b');
    expect(e.tokens).toEqual(['[CLS]', 'a', '[SEP]', '[SEP]', 'b', '[SEP]']);
    expect(e.typeIds).toEqual([0, 0, 0, 0, 0, 0]);
    expect(t.addedTokens(true)).toBe(4);
  });

  it('longest_first arithmetic: fills the budget, keeps the shorter whole when it can, else halves with the odd token to the longer', () => {
    for (let max = 1; max <= 12; max++) {
      for (let la = 0; la <= 14; la++) {
        for (let lb = 0; lb <= 14; lb++) {
          if (la + lb <= max) continue; // no truncation then
          const [ka, kb] = longestFirstLengths(la, lb, max).map((k, i) => Math.min(k, i === 0 ? la : lb));
          const where = JSON.stringify({ max, la, lb, ka, kb });
          expect(ka + kb, where).toBe(max);
          const [short, kShort, kLong] = la <= lb ? [la, ka, kb] : [lb, kb, ka];
          if (short <= max / 2) expect(kShort, where).toBe(short);
          else {
            expect(kShort, where).toBe(Math.floor(max / 2));
            // a tie counts the first text as the shorter one: the second gets the odd token
            expect(kLong, where).toBe(Math.ceil(max / 2));
          }
        }
      }
    }
  });

  it('longest_first compares the lengths HF tokenized, which stop at max_length tokens (its early exit)', () => {
    // 5 and 4 tokens, max_length 4 (budget 1 next to 3 specials): the first text is tokenized only up to 4 tokens, so
    // the two tie and the second gets the token; with the full lengths truncation.rs would give it to the first.
    const e = bert().encodeWith(words(5, 'a'), cut('longest_first', 4), words(4, 'b'));
    expect(e.tokens).toEqual(['[CLS]', '[SEP]', 'b', '[SEP]']);
    expect(longestFirstLengths(5, 4, 1)).toEqual([1, 0]);
    // below max_length the full lengths count: 7 and 3 tokens, budget 5 -> the shorter keeps 2, the longer 3
    const f = bert().encodeWith(words(7, 'a'), cut('longest_first', 8), words(3, 'b'));
    expect([count(f, 'a'), count(f, 'b')]).toEqual([3, 2]);
  });

  it('only_first / only_second cut one text, and fail with an InputError when it is too short to lose enough', () => {
    const t = bert();
    const first = t.encodeWith(words(4, 'a'), cut('only_first', 6), words(2, 'b'));
    expect([count(first, 'a'), count(first, 'b')]).toEqual([1, 2]);
    const second = t.encodeWith(words(2, 'a'), cut('only_second', 6), words(4, 'b'));
    expect([count(second, 'a'), count(second, 'b')]).toEqual([2, 1]);
    expect(() => t.encodeWith('a', cut('only_first', 5), words(3, 'b'))).toThrow(InputError);
    expect(() => t.encodeWith('a', cut('only_first', 5), words(3, 'b'))).toThrow('by truncating only the first text (only_first)');
    expect(() => t.encodeWith(words(3, 'a'), cut('only_second', 5), 'b')).toThrow('by truncating only the second text (only_second)');
    // removing every token of the text is not enough either (HF: target_len > to_remove)
    expect(() => t.encodeWith(words(2, 'a'), cut('only_first', 5), words(2, 'b'))).toThrow(InputError);
  });

  it('a budget of 0 next to the special tokens empties both texts, whatever the strategy', () => {
    for (const strategy of STRATEGIES) {
      expect(bert().encodeWith('a a', cut(strategy, 3), 'b b').tokens).toEqual(['[CLS]', '[SEP]', '[SEP]']);
    }
  });

  it('single texts: only_first is right truncation, only_second refuses a text that needs cutting', () => {
    const t = bert();
    expect(t.encodeWith(words(4, 'a'), cut('only_first', 4), undefined).tokens).toEqual(['[CLS]', 'a', 'a', '[SEP]']);
    expect(t.encodeWith(words(2, 'a'), cut('only_second', 4)).tokens).toEqual(['[CLS]', 'a', 'a', '[SEP]']);
    expect(() => t.encodeWith(words(3, 'a'), cut('only_second', 4))).toThrow(InputError);
    expect(() => t.encodeWith(words(3, 'a'), cut('only_second', 4))).toThrow('truncation only_second needs a second text');
  });

  it('max_length below the special tokens of a pair is an InputError (a single text still fits)', () => {
    const t = bert();
    expect(() => t.encodeWith('a', cut('longest_first', 2), 'b')).toThrow('truncation max_length 2 is below the special tokens');
    expect(t.encodeWith('a', cut('longest_first', 2)).tokens).toEqual(['[CLS]', '[SEP]']);
  });

  it('a second text that is not a string is an InputError', () => {
    expect(() => bert().encodePair('a', 3 as unknown as string)).toThrow(InputError);
    expect(() => bert().encodePair(null as unknown as string, 'b')).toThrow(InputError);
  });

  it('templates: no "pair" refuses pairs (also inside a Sequence), B in "single" is refused at load', () => {
    const single = { type: 'TemplateProcessing', single: [{ Sequence: { id: 'A', type_id: 0 } }], special_tokens: {} };
    const t = EncoderTokenizer.fromJson({ ...bertJson, post_processor: single });
    expect(t.supportsPairs()).toBe(false);
    expect(() => t.encodePair('a', 'b')).toThrow(ConfigError);
    expect(t.encode('a b').ids).toEqual([3, 4]);
    const inSequence = EncoderTokenizer.fromJson({ ...bertJson, post_processor: { type: 'Sequence', processors: [{ type: 'ByteLevel' }, single] } });
    expect(inSequence.supportsPairs()).toBe(false);
    expect(() => inSequence.encodeWith('a', { truncation: null, padding: null }, 'b')).toThrow('no "pair" template');
    expect(bert().supportsPairs()).toBe(true);
    const usesB = { ...single, single: [{ Sequence: { id: 'B', type_id: 0 } }] };
    expect(() => EncoderTokenizer.fromJson({ ...bertJson, post_processor: usesB })).toThrow('"single" template uses sequence B');
  });
});
