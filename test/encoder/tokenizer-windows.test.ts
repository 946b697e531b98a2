/**
 * Truncation side and stride (encoderfile's `tokenizer:` block, HF's TruncationParams direction / stride): the encoding
 * and its overflowing windows.
 *
 * 1. Independently of src/: expected windows computed here from the golden files' whole encodings (made by the Rust
 *    reference) with HF's rules written out plainly: the reference tokenizes whole pre-tokens (the golden word ids)
 *    until max_length content tokens, from the start (right) or the end (left); then windows of max_length less the
 *    special tokens, each repeating `stride` tokens of the one before, each wrapped in [CLS] … [SEP].
 * 2. Against the reference itself (the dev-only oracle `tokenizers@0.23.2` that made the goldens), every family, every
 *    golden text, several settings: ids, tokens, offsets, type ids and masks of every window.
 * 3. The server's use: `encode` / `encodeWindows` with TokenizerOptions.truncation, and a stride that cannot work.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, InputError } from '../../src/encoder/errors.ts';
import { EncoderTokenizer, type Encoding } from '../../src/encoder/tokenizer/index.ts';
import {
  FAMILIES,
  type GoldenCase,
  hasTokenizerFixtures,
  loadFamily,
  loadOracle,
  type OracleEncoding,
  oracleProblem,
  warnIfFixturesMissing,
} from '../helpers/tokenizer-fixtures.ts';

warnIfFixturesMissing('tokenizer windows');
const oracle = loadOracle();
if (!oracle) console.warn(`tokenizer windows: the oracle part is skipped, the dev-only oracle "tokenizers" cannot be loaded: ${oracleProblem}`);

type Direction = 'right' | 'left';
const SETTINGS: { maxLength: number; stride: number; direction: Direction }[] = [
  { maxLength: 12, stride: 0, direction: 'right' },
  { maxLength: 12, stride: 3, direction: 'right' },
  { maxLength: 12, stride: 3, direction: 'left' },
  { maxLength: 9, stride: 0, direction: 'left' },
  { maxLength: 16, stride: 13, direction: 'right' },
  { maxLength: 16, stride: 7, direction: 'left' },
  { maxLength: 64, stride: 20, direction: 'left' },
];

interface Window {
  ids: number[];
  offsets: number[][];
}

/** HF's windows of a BERT text, from the golden whole encoding (see the file comment). */
function expectedWindows(c: GoldenCase, addedTokens: Set<string>, maxLength: number, stride: number, direction: Direction): Window[] {
  const g = c.encoding;
  const [cls, sep] = [g.ids[0], g.ids[g.ids.length - 1]];
  const content = g.ids.slice(1, -1).map((id, i) => ({ id, offsets: g.offsets[i + 1], word: (g as unknown as { word_ids: (number | null)[] }).word_ids[i + 1], token: g.tokens[i + 1] }));
  // pre-tokens: runs of one word id; an added token written in the text (not an [UNK] the model gave) is one of its own
  const chars = Array.from(c.text);
  const isAdded = (t: (typeof content)[number]) => addedTokens.has(t.token) && chars.slice(t.offsets[0], t.offsets[1]).join('') === t.token;
  const groups: { start: number; end: number; added: boolean }[] = [];
  content.forEach((t, i) => {
    const last = groups[groups.length - 1];
    if (last && content[last.start].word === t.word && !last.added && !isAdded(t)) last.end = i + 1;
    else groups.push({ start: i, end: i + 1, added: isAdded(t) });
  });
  // the reference stops after the first pre-token that brings the count to max_length (added tokens never stop it)
  let kept = content;
  let total = 0;
  const order = direction === 'right' ? groups : [...groups].reverse();
  for (const group of order) {
    total += group.end - group.start;
    if (!group.added && total >= maxLength) {
      kept = direction === 'right' ? content.slice(0, group.end) : content.slice(group.start);
      break;
    }
  }
  const room = maxLength - 2;
  const ranges: [number, number][] = [];
  if (kept.length <= room) ranges.push([0, kept.length]);
  else if (direction === 'right') {
    for (let start = 0; ; start += room - stride) {
      ranges.push([start, Math.min(start + room, kept.length)]);
      if (start + room >= kept.length) break;
    }
  } else {
    for (let stop = kept.length; ; stop -= room - stride) {
      ranges.push([Math.max(stop - room, 0), stop]);
      if (stop - room <= 0) break;
    }
  }
  return ranges.map(([a, b]) => ({
    ids: [cls, ...kept.slice(a, b).map((t) => t.id), sep],
    offsets: [[0, 0], ...kept.slice(a, b).map((t) => t.offsets), [0, 0]],
  }));
}

function windowsOf(encodings: Encoding[]): Window[] {
  return encodings.map((e) => ({ ids: e.ids, offsets: e.offsets.map(([a, b]) => [a, b]) }));
}

describe.skipIf(!hasTokenizerFixtures)('windows computed from the golden whole encodings (BERT families)', () => {
  for (const family of ['wordpiece-uncased', 'wordpiece-cased'] as const) {
    it(`${family}: every golden text, ${SETTINGS.length} settings of max_length, stride and side`, () => {
      const f = loadFamily(family);
      const added = new Set((f.tokenizerJson as { added_tokens: { content: string }[] }).added_tokens.map((t) => t.content));
      const t = EncoderTokenizer.fromJson(f.tokenizerJson, f.tokenizerConfig);
      // a golden encoding that the file's own truncation cut is not the whole text's: those texts are left out
      const fileMax = (f.golden as unknown as { file_config: { truncation: { max_length: number } | null } }).file_config.truncation?.max_length ?? Infinity;
      const cases = f.golden.cases.filter((c) => c.encoding.ids.length < fileMax);
      expect(cases.length).toBeGreaterThan(40);
      let overflowed = 0;
      for (const s of SETTINGS) {
        for (const c of cases) {
          const ours = windowsOf(t.encodeWithWindows(c.text, { truncation: s, padding: null }));
          expect({ text: c.id, ...s, windows: ours }).toEqual({ text: c.id, ...s, windows: expectedWindows(c, added, s.maxLength, s.stride, s.direction) });
          if (ours.length > 1) overflowed++;
        }
      }
      // the settings do make windows on most texts (the comparison is not of single encodings only)
      expect(overflowed).toBeGreaterThan(60);
    });
  }

  it('left keeps the end of the text, right its start; the first window is what encodeWith gives', () => {
    const f = loadFamily('wordpiece-uncased');
    const t = EncoderTokenizer.fromJson(f.tokenizerJson, f.tokenizerConfig);
    const c = f.golden.cases.find((x) => x.id === 'long_text_over_512_tokens')!;
    const full = c.encoding.ids;
    const left = t.encodeWith(c.text, { truncation: { maxLength: 10, direction: 'left' }, padding: null });
    expect(left.ids).toEqual([full[0], ...full.slice(-9, -1), full[full.length - 1]]);
    const right = t.encodeWith(c.text, { truncation: { maxLength: 10, direction: 'right', stride: 4 }, padding: null });
    expect(right.ids).toEqual([...full.slice(0, 9), full[full.length - 1]]);
  });
});

function oracleWindows(e: OracleEncoding) {
  return [e, ...e.getOverflowing()].map((w) => ({
    ids: w.getIds(),
    tokens: w.getTokens(),
    offsets: w.getOffsets().map(([a, b]) => [a, b]),
    typeIds: w.getTypeIds(),
    specialTokensMask: w.getSpecialTokensMask(),
    attentionMask: w.getAttentionMask(),
  }));
}

describe.skipIf(!hasTokenizerFixtures || !oracle)('windows against the reference (the oracle that made the goldens)', () => {
  for (const family of FAMILIES) {
    it(`${family}: every golden text and window agrees under ${SETTINGS.length} settings`, async () => {
      const f = loadFamily(family);
      const t = EncoderTokenizer.fromJson(f.tokenizerJson, f.tokenizerConfig);
      const ref = oracle!.Tokenizer.fromFile(f.tokenizerPath);
      ref.disablePadding();
      const bad: string[] = [];
      for (const s of SETTINGS) {
        ref.setTruncation(s.maxLength, { stride: s.stride, direction: s.direction });
        for (const c of f.golden.cases) {
          const want = oracleWindows(await ref.encode(c.text, null, { addSpecialTokens: true }));
          const got = t.encodeWithWindows(c.text, { truncation: s, padding: null });
          if (JSON.stringify(got) !== JSON.stringify(want) && bad.length < 3) bad.push(`${c.id} ${JSON.stringify(s)}\n ours ${JSON.stringify(got).slice(0, 400)}\n ref  ${JSON.stringify(want).slice(0, 400)}`);
        }
      }
      expect(bad).toEqual([]);
    });
  }

  it('text pairs cut on the left agree too, under each strategy (a rerank query and document)', async () => {
    const strategies = { LongestFirst: 'longest_first', OnlyFirst: 'only_first', OnlySecond: 'only_second' } as const;
    const bad: string[] = [];
    for (const family of FAMILIES) {
      const f = loadFamily(family);
      const t = EncoderTokenizer.fromJson(f.tokenizerJson, f.tokenizerConfig);
      if (!t.supportsPairs()) continue;
      const ref = oracle!.Tokenizer.fromFile(f.tokenizerPath);
      ref.disablePadding();
      const cases = f.golden.cases;
      for (const [name, strategy] of Object.entries(strategies) as [keyof typeof strategies, (typeof strategies)[keyof typeof strategies]][]) {
        ref.setTruncation(20, { strategy: name, direction: 'left' });
        for (let i = 0; i < cases.length; i++) {
          const [a, b] = [cases[i].text, cases[(i * 7 + 3) % cases.length].text];
          const want = await ref.encode(a, b, { addSpecialTokens: true }).then((r) => ({ ids: r.getIds(), offsets: r.getOffsets() }), () => 'refused');
          let got: unknown;
          try {
            const e = t.encodeWith(a, { truncation: { maxLength: 20, strategy, direction: 'left' }, padding: null }, b);
            got = { ids: e.ids, offsets: e.offsets };
          } catch {
            got = 'refused';
          }
          if (JSON.stringify(got) !== JSON.stringify(want) && bad.length < 3) bad.push(`${family} ${cases[i].id} ${name}\n ours ${JSON.stringify(got).slice(0, 300)}\n ref  ${JSON.stringify(want).slice(0, 300)}`);
        }
      }
    }
    expect(bad).toEqual([]);
  });

  it("a tokenizer.json's own Left truncation with a stride is reproduced by fileSettings()", async () => {
    const f = loadFamily('bpe-bytelevel-roberta');
    const json = { ...(f.tokenizerJson as object), truncation: { direction: 'Left', max_length: 11, strategy: 'LongestFirst', stride: 2 }, padding: null };
    const t = EncoderTokenizer.fromJson(json, f.tokenizerConfig);
    const ref = oracle!.Tokenizer.fromString(JSON.stringify(json));
    for (const c of f.golden.cases) {
      expect(t.encodeWithWindows(c.text, t.fileSettings())).toEqual(oracleWindows(await ref.encode(c.text, null, { addSpecialTokens: true })));
    }
  });
});

describe.skipIf(!hasTokenizerFixtures)('the server tokenizer with a truncation side and stride', () => {
  const f = hasTokenizerFixtures ? loadFamily('wordpiece-uncased') : null;
  const text = 'one two three four five six seven eight nine ten eleven twelve';
  const tokenizer = (truncation: { direction: Direction; strategy: 'longest_first' | 'only_first' | 'only_second'; stride: number }) =>
    EncoderTokenizer.fromJson(f!.tokenizerJson, f!.tokenizerConfig, { maxLength: 8, truncation });

  it('encode cuts at the configured side; encodeWindows adds the overflowing windows', () => {
    const left = tokenizer({ direction: 'left', strategy: 'longest_first', stride: 2 });
    expect(left.encode(text).tokens).toEqual(['[CLS]', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve', '[SEP]']);
    // HF tokenized the last 8 pre-tokens (five … twelve): two windows of 6 sharing 2 tokens
    expect(left.encodeWindows(text).map((e) => e.tokens)).toEqual([
      ['[CLS]', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve', '[SEP]'],
      ['[CLS]', 'five', 'six', 'seven', 'eight', '[SEP]'],
    ]);
    const right = tokenizer({ direction: 'right', strategy: 'longest_first', stride: 0 });
    expect(right.encode(text).tokens).toEqual(['[CLS]', 'one', 'two', 'three', 'four', 'five', 'six', '[SEP]']);
    expect(right.encodeWindows('one two').map((e) => e.tokens)).toEqual([['[CLS]', 'one', 'two', '[SEP]']]);
  });

  it('only_second refuses a long single text, as the reference does', () => {
    expect(() => tokenizer({ direction: 'right', strategy: 'only_second', stride: 0 }).encode(text)).toThrow(InputError);
    expect(tokenizer({ direction: 'right', strategy: 'only_second', stride: 0 }).encode('one two').tokens).toEqual(['[CLS]', 'one', 'two', '[SEP]']);
  });

  it('a stride not below the tokens a window holds is a ConfigError when the tokenizer is made (HF would panic on the first long text)', () => {
    expect(() => tokenizer({ direction: 'right', strategy: 'longest_first', stride: 6 })).toThrow(ConfigError);
    expect(() => tokenizer({ direction: 'right', strategy: 'longest_first', stride: 6 })).toThrow(
      'tokenizer: stride 6 must be at least 0 and below 6, the tokens a window holds besides the special tokens (max length 8)',
    );
    expect(tokenizer({ direction: 'right', strategy: 'longest_first', stride: 5 }).encodeWindows(text)).toHaveLength(3);
    const t = EncoderTokenizer.fromJson(f!.tokenizerJson, f!.tokenizerConfig);
    expect(() => t.encodeWithWindows(text, { truncation: { maxLength: 6, stride: 4 }, padding: null })).toThrow(
      'truncation stride 4 must be below the 4 tokens a window holds besides the special tokens',
    );
  });
});
