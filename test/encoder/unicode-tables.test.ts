import { describe, expect, it } from 'vitest';
import * as tables from '../../src/encoder/tokenizer/unicode-tables.ts';
import {
  F_BERT_PUNCT,
  F_BERT_REMOVED,
  F_COMBINING_MARK,
  F_LETTER,
  F_MARK_NONSPACING,
  F_NORM_UNKNOWN,
  F_NUMBER,
  F_ONIG_SPACE,
  F_ONIG_WORD,
  F_WHITESPACE,
  cccRanks,
  flags,
} from '../../src/encoder/tokenizer/unicode.ts';

const MAX_CP = 0x110000;

/** Every code point of a generated range table, expanded the plain way. */
function expand(ranges: string, into: Uint16Array, value: number, or: boolean): void {
  for (const part of ranges.split(',').filter(Boolean)) {
    const [a, b = a] = part.split('-').map((hex) => parseInt(hex, 16));
    for (let cp = a; cp <= b; cp++) into[cp] = or ? into[cp] | value : value;
  }
}

describe('code point tables (expanded from the generated ranges by sweeping their ends)', () => {
  it('give every code point the flags of a full expansion of the generated ranges', () => {
    const expected = new Uint16Array(MAX_CP);
    const byFlag: [string, number][] = [
      [tables.RUST_WHITESPACE, F_WHITESPACE],
      [tables.BERT_REMOVED, F_BERT_REMOVED],
      [tables.BERT_PUNCT, F_BERT_PUNCT],
      [tables.MARK_NONSPACING, F_MARK_NONSPACING],
      [tables.ONIG_LETTER, F_LETTER],
      [tables.ONIG_NUMBER, F_NUMBER],
      [tables.ONIG_SPACE, F_ONIG_SPACE],
      [tables.NORM_UNKNOWN, F_NORM_UNKNOWN],
      [tables.ONIG_WORD, F_ONIG_WORD],
      [tables.COMBINING_MARK, F_COMBINING_MARK],
    ];
    for (const [ranges, flag] of byFlag) expand(ranges, expected, flag, true);
    const actual = flags();
    expect(actual.length).toBe(MAX_CP);
    const mismatches: string[] = [];
    for (let cp = 0; cp < MAX_CP && mismatches.length < 5; cp++) {
      if (actual[cp] !== expected[cp]) mismatches.push(`U+${cp.toString(16)}: ${actual[cp]} != ${expected[cp]}`);
    }
    expect(mismatches).toEqual([]);
    // spot checks that the expansion itself is the expected one
    expect(actual[0x41] & F_LETTER).toBe(F_LETTER);
    expect(actual[0x20] & F_WHITESPACE).toBe(F_WHITESPACE);
    expect(actual[0x4e00] & F_LETTER).toBe(F_LETTER);
    expect(actual[0x10ffff]).toBe(0);
  });

  it('give every code point the combining-class rank of a full expansion', () => {
    const expected = new Uint16Array(MAX_CP);
    for (const part of tables.CCC_RANKS.split(',')) {
      const [range, rank] = part.split(':');
      expand(range, expected, Number(rank), false);
    }
    const actual = cccRanks();
    expect(actual.length).toBe(MAX_CP);
    const mismatches: string[] = [];
    for (let cp = 0; cp < MAX_CP && mismatches.length < 5; cp++) {
      if (actual[cp] !== expected[cp]) mismatches.push(`U+${cp.toString(16)}: ${actual[cp]} != ${expected[cp]}`);
    }
    expect(mismatches).toEqual([]);
    expect(actual[0x301]).toBeGreaterThan(0); // combining acute accent
    expect(actual[0x61]).toBe(0);
  });

  it('keep a flag set where one range of a table ends right before the next begins', () => {
    // 0x300-0x36f and 0x370... : adjacent ranges exist in the generated tables; check every such seam
    const actual = flags();
    for (const ranges of [tables.ONIG_LETTER, tables.ONIG_WORD, tables.BERT_REMOVED]) {
      const bounds = ranges.split(',').map((part) => part.split('-').map((hex) => parseInt(hex, 16)));
      for (let i = 1; i < bounds.length; i++) {
        const previousEnd = bounds[i - 1].at(-1)!;
        if (bounds[i][0] === previousEnd + 1) expect(actual[bounds[i][0]]).not.toBe(0);
      }
    }
  });
});
