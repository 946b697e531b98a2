/**
 * Unicode classes and normalization exactly as the Rust reference (HF `tokenizers`) sees them.
 *
 * The classes come from unicode-tables.ts, measured against the reference; they are expanded once,
 * on first use, into one flag byte per code point. Decompositions come from Node's ICU
 * (String.prototype.normalize) except for the code points the Rust normalizer does not know
 * (NORM_UNKNOWN), and canonical reordering / composition replay the algorithm of the crate
 * `unicode-normalization-alignments`, including the `change` value it attaches to each output char:
 * that value drives the alignment bookkeeping in NormalizedString.transform.
 */
import {
  BERT_PUNCT,
  BERT_REMOVED,
  CCC_RANKS,
  COMBINING_MARK,
  MARK_NONSPACING,
  NORM_UNKNOWN,
  ONIG_LETTER,
  ONIG_NUMBER,
  ONIG_SPACE,
  ONIG_WORD,
  RUST_WHITESPACE,
} from './unicode-tables.ts';

export const F_WHITESPACE = 1;
export const F_BERT_REMOVED = 2;
export const F_BERT_PUNCT = 4;
export const F_MARK_NONSPACING = 8;
export const F_LETTER = 16;
export const F_NUMBER = 32;
export const F_ONIG_SPACE = 64;
export const F_NORM_UNKNOWN = 128;
export const F_ONIG_WORD = 256;
export const F_COMBINING_MARK = 512;

const MAX_CP = 0x110000;

/**
 * Calls `range` for each `a-b` or `a` (hex) of a generated table, with the decimal after a `:` when there is one.
 * Read a character at a time: splitting and slicing the ~2,400 ranges into strings and arrays took ~10 ms of every
 * start-up, in code that runs once and so is never optimised (docs/benchmarks.md).
 */
function forEachRange(table: string, range: (start: number, end: number, rank: number) => void): void {
  let number = 0;
  let base = 16;
  let digits = 0;
  let start = -1;
  let end = -1;
  for (let i = 0; i <= table.length; i++) {
    const c = i < table.length ? table.charCodeAt(i) : 0x2c;
    if (c === 0x2c /* , */) {
      if (digits > 0) {
        if (base === 16) end = number;
        range(start < 0 ? end : start, end, base === 10 ? number : 0);
      }
      number = 0;
      base = 16;
      digits = 0;
      start = -1;
      end = -1;
    } else if (c === 0x2d /* - */) {
      start = number;
      number = 0;
    } else if (c === 0x3a /* : */) {
      end = number;
      number = 0;
      base = 10;
    } else {
      number = number * base + (c <= 0x39 ? c - 0x30 : c - 0x57);
      digits++;
    }
  }
}

/**
 * One flag per range table, set on the code points of its ranges. Expanded by sweeping the ranges' ends in order and
 * filling each run of equal flags at once, instead of setting the 1.1 million code points one at a time.
 */
function expandFlags(tables: [ranges: string, flag: number][]): Uint16Array {
  // an edge is one number: code point * 32 + (16 when the flag is set there, else cleared) + table index; sorted
  // numerically, clearing comes before setting at the same code point
  const edges: number[] = [];
  tables.forEach(([ranges], table) => forEachRange(ranges, (start, end) => edges.push(start * 32 + 16 + table, (end + 1) * 32 + table)));
  const sorted = Int32Array.from(edges).sort();
  const target = new Uint16Array(MAX_CP);
  let value = 0;
  for (let i = 0; i < sorted.length; ) {
    const at = sorted[i] >> 5;
    for (; i < sorted.length && sorted[i] >> 5 === at; i++) {
      const flag = tables[sorted[i] & 15][1];
      value = sorted[i] & 16 ? value | flag : value & ~flag;
    }
    if (value !== 0) target.fill(value, at, i < sorted.length ? sorted[i] >> 5 : MAX_CP);
  }
  return target;
}

let flagTable: Uint16Array | null = null;
let cccTable: Uint8Array | null = null;

/** F_* flags per code point. */
export function flags(): Uint16Array {
  flagTable ??= expandFlags([
    [RUST_WHITESPACE, F_WHITESPACE],
    [BERT_REMOVED, F_BERT_REMOVED],
    [BERT_PUNCT, F_BERT_PUNCT],
    [MARK_NONSPACING, F_MARK_NONSPACING],
    [ONIG_LETTER, F_LETTER],
    [ONIG_NUMBER, F_NUMBER],
    [ONIG_SPACE, F_ONIG_SPACE],
    [NORM_UNKNOWN, F_NORM_UNKNOWN],
    [ONIG_WORD, F_ONIG_WORD],
    [COMBINING_MARK, F_COMBINING_MARK],
  ]);
  return flagTable;
}

/** Canonical combining class, as a rank that keeps the order of the real classes (0 = starter). */
export function cccRanks(): Uint8Array {
  if (cccTable === null) {
    const table = new Uint8Array(MAX_CP);
    forEachRange(CCC_RANKS, (start, end, rank) => table.fill(rank, start, end + 1));
    cccTable = table;
  }
  return cccTable;
}

/** Rust `char::is_whitespace`. */
export function isWhitespace(cp: number): boolean {
  return (flags()[cp] & F_WHITESPACE) !== 0;
}

/** BertNormalizer `is_chinese_char`. */
export function isChineseChar(cp: number): boolean {
  return (
    (cp >= 0x4e00 && cp <= 0x9fff) ||
    (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) ||
    (cp >= 0x2b920 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0x2f800 && cp <= 0x2fa1f)
  );
}

const lowerCache = new Map<number, number[] | number>();

/**
 * Rust `char::to_lowercase`: context free (Σ always gives σ), possibly several chars (İ gives i̇).
 * Returns a single code point or an array of them. Measured identical to per-char toLowerCase in ICU.
 */
export function lowercaseOf(cp: number): number | number[] {
  if (cp < 0x80) return cp >= 0x41 && cp <= 0x5a ? cp + 32 : cp;
  let r = lowerCache.get(cp);
  if (r === undefined) {
    const s = String.fromCodePoint(cp).toLowerCase();
    const cps = codePointsOf(s);
    r = cps.length === 1 ? cps[0] : cps;
    lowerCache.set(cp, r);
  }
  return r;
}

export function codePointsOf(s: string): number[] {
  const out: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        out.push(((c - 0xd800) << 10) + (d - 0xdc00) + 0x10000);
        i++;
        continue;
      }
    }
    out.push(c);
  }
  return out;
}

const decompCache = [new Map<number, number[] | null>(), new Map<number, number[] | null>()];

/** Full canonical (or compatibility) decomposition of one code point, or null when it maps to itself. */
function decomposition(cp: number, compat: boolean): number[] | null {
  if (cp < 0xa0) return null;
  if (!compat && cp < 0xc0) return null;
  const cache = decompCache[compat ? 1 : 0];
  let r = cache.get(cp);
  if (r === undefined) {
    if (flags()[cp] & F_NORM_UNKNOWN) {
      r = null;
    } else {
      const s = String.fromCodePoint(cp);
      const d = s.normalize(compat ? 'NFKD' : 'NFD');
      r = d === s ? null : codePointsOf(d);
    }
    cache.set(cp, r);
  }
  return r;
}

/** Canonical decomposition as the Rust normalizer knows it, or null when the char is its own. */
export function canonicalDecomposition(cp: number): number[] | null {
  return decomposition(cp, false);
}

/**
 * True when NFD of this char cannot be reordered with its neighbours' marks: the char is a starter
 * and so is the first char of its decomposition.
 */
export function startsWithStarter(cp: number): boolean {
  if (cp < 0x300) return true;
  const ccc = cccRanks();
  if (ccc[cp] !== 0) return false;
  const d = decomposition(cp, false);
  return d === null || ccc[d[0]] === 0;
}

/** Output of a Unicode normalization: code points and the `change` of each (see NormalizedString.transform). */
export interface CharChanges {
  cps: number[];
  changes: number[];
}

/**
 * Decompositions iterator of unicode-normalization-alignments: the first char of each decomposition
 * has change 0, the others +1; runs of non-starters are then stably sorted by combining class and
 * carry their change with them.
 */
export function decomposeWithChanges(input: ArrayLike<number>, length: number, compat: boolean): CharChanges {
  const ccc = cccRanks();
  const cps: number[] = [];
  const changes: number[] = [];
  const classes: number[] = [];
  let pending = 0; // start of the part of the buffer not sorted yet
  const sortPending = (): void => {
    const n = cps.length - pending;
    if (n > 16) {
      // long runs of marks (zalgo): a stable O(n log n) sort instead of insertion sort
      const order = Array.from({ length: n }, (_, k) => pending + k).sort((x, y) => classes[x] - classes[y] || x - y);
      const c0 = order.map((k) => cps[k]);
      const h0 = order.map((k) => changes[k]);
      const k0 = order.map((k) => classes[k]);
      for (let k = 0; k < n; k++) {
        cps[pending + k] = c0[k];
        changes[pending + k] = h0[k];
        classes[pending + k] = k0[k];
      }
    } else if (n > 1) {
      // insertion sort: stable, and runs are tiny
      for (let i = pending + 1; i < cps.length; i++) {
        const c = classes[i];
        if (c >= classes[i - 1]) continue;
        const cp = cps[i];
        const ch = changes[i];
        let j = i - 1;
        while (j >= pending && classes[j] > c) {
          cps[j + 1] = cps[j];
          changes[j + 1] = changes[j];
          classes[j + 1] = classes[j];
          j--;
        }
        cps[j + 1] = cp;
        changes[j + 1] = ch;
        classes[j + 1] = c;
      }
    }
    pending = cps.length;
  };
  const push = (cp: number, change: number): void => {
    const c = ccc[cp];
    if (c === 0) sortPending();
    cps.push(cp);
    changes.push(change);
    classes.push(c);
  };
  for (let i = 0; i < length; i++) {
    const cp = input[i];
    const d = decomposition(cp, compat);
    if (d === null) {
      push(cp, 0);
    } else {
      for (let k = 0; k < d.length; k++) push(d[k], k === 0 ? 0 : 1);
    }
  }
  sortPending();
  return { cps, changes };
}

const composeCache = new Map<number, number>();

/** Primary composite of (a, b), or -1. */
function compose(a: number, b: number): number {
  const key = a * MAX_CP + b;
  let r = composeCache.get(key);
  if (r === undefined) {
    r = -1;
    const f = flags();
    if (!(f[a] & F_NORM_UNKNOWN) && !(f[b] & F_NORM_UNKNOWN)) {
      const sa = String.fromCodePoint(a);
      const sb = String.fromCodePoint(b);
      const c = (sa + sb).normalize('NFC');
      const cp = c.codePointAt(0) as number;
      if (c.length > 0 && String.fromCodePoint(cp) === c && !(f[cp] & F_NORM_UNKNOWN)) {
        // only a primary composite whose decomposition really is (a, b)
        if (c.normalize('NFD') === sa.normalize('NFD') + sb) r = cp;
      }
    }
    composeCache.set(key, r);
  }
  return r;
}

/**
 * Recompositions iterator of unicode-normalization-alignments over a decomposed stream. A composed
 * char gets change `k.change + ch.change - 1`: it keeps the alignment of the first char only.
 */
export function recomposeWithChanges(d: CharChanges): CharChanges {
  const ccc = cccRanks();
  const outCps: number[] = [];
  const outCh: number[] = [];
  let composeeCp = -1;
  let composeeCh = 0;
  let lastCcc = -1; // -1 = None
  const bufCps: number[] = [];
  const bufCh: number[] = [];
  const flushBuffer = (): void => {
    for (let i = 0; i < bufCps.length; i++) {
      outCps.push(bufCps[i]);
      outCh.push(bufCh[i]);
    }
    bufCps.length = 0;
    bufCh.length = 0;
  };
  for (let i = 0; i < d.cps.length; i++) {
    const ch = d.cps[i];
    const change = d.changes[i];
    const chClass = ccc[ch];
    if (composeeCp < 0) {
      if (chClass !== 0) {
        outCps.push(ch);
        outCh.push(change);
        continue;
      }
      composeeCp = ch;
      composeeCh = change;
      continue;
    }
    if (lastCcc < 0) {
      const r = compose(composeeCp, ch);
      if (r >= 0) {
        composeeCp = r;
        composeeCh = composeeCh + change - 1;
        continue;
      }
      if (chClass === 0) {
        outCps.push(composeeCp);
        outCh.push(composeeCh);
        composeeCp = ch;
        composeeCh = change;
        continue;
      }
      bufCps.push(ch);
      bufCh.push(change);
      lastCcc = chClass;
    } else {
      if (lastCcc >= chClass) {
        if (chClass === 0) {
          outCps.push(composeeCp);
          outCh.push(composeeCh);
          flushBuffer();
          composeeCp = ch;
          composeeCh = change;
          lastCcc = -1;
          continue;
        }
        bufCps.push(ch);
        bufCh.push(change);
        lastCcc = chClass;
        continue;
      }
      const r = compose(composeeCp, ch);
      if (r >= 0) {
        composeeCp = r;
        composeeCh = composeeCh + change - 1;
        continue;
      }
      bufCps.push(ch);
      bufCh.push(change);
      lastCcc = chClass;
    }
  }
  if (composeeCp >= 0) {
    outCps.push(composeeCp);
    outCh.push(composeeCh);
  }
  flushBuffer();
  return { cps: outCps, changes: outCh };
}
