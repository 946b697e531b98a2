/**
 * An alignment-tracking string, the code-point twin of Rust's `NormalizedString`.
 *
 * Rust keeps, for every byte of the normalized string, the byte range of the original string it
 * comes from. Every alignment there is the range of whole original chars, so keeping one
 * [start, end) pair of original CODE POINT offsets per normalized code point is equivalent, and
 * code points are the unit the encoder reports. Offsets here are absolute in the input text
 * (Rust stores them relative to a slice and adds `original_shift` back at the end: same numbers).
 *
 * All edits go through `transformRange`, a port of `NormalizedString::transform_range` driven by
 * (char, change) pairs: change 0 replaces the next original char, -N replaces it and removes N
 * more, +1 inserts a char that shares the alignment of the previously consumed char. The quirks of
 * that bookkeeping (positional consumption, inserts at the very start getting an empty alignment)
 * are reproduced on purpose: they are what the reference reports.
 */
import { codePointsOf, decomposeWithChanges, isWhitespace, lowercaseOf, recomposeWithChanges } from './unicode.ts';

export type SplitBehavior = 'Removed' | 'Isolated' | 'MergedWithPrevious' | 'MergedWithNext' | 'Contiguous';

/** [start, end, isMatch] over normalized code point indices, covering the whole string in order. */
export type PatternMatches = number[]; // flat triples

export class NormalizedString {
  cps: Int32Array;
  starts: Int32Array;
  ends: Int32Array;
  /** `offsets_original()` of Rust: where this (slice of the) string starts and ends in the input. */
  origStart: number;
  origEnd: number;

  constructor(cps: Int32Array, starts: Int32Array, ends: Int32Array, origStart: number, origEnd: number) {
    this.cps = cps;
    this.starts = starts;
    this.ends = ends;
    this.origStart = origStart;
    this.origEnd = origEnd;
  }

  static fromCodePoints(cps: Int32Array): NormalizedString {
    const n = cps.length;
    const starts = new Int32Array(n);
    const ends = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      starts[i] = i;
      ends[i] = i + 1;
    }
    return new NormalizedString(cps, starts, ends, 0, n);
  }

  static fromString(s: string): NormalizedString {
    return NormalizedString.fromCodePoints(Int32Array.from(codePointsOf(s)));
  }

  get length(): number {
    return this.cps.length;
  }

  toString(): string {
    return codePointsToString(this.cps, 0, this.cps.length);
  }

  /** A slice over normalized indices [a, b) (views, no copy). */
  slice(a: number, b: number): NormalizedString {
    let origStart: number;
    let origEnd: number;
    if (a < b) {
      origStart = this.starts[a];
      origEnd = this.ends[b - 1];
      if (origEnd < origStart) origEnd = origStart;
    } else {
      origStart = this.origStart + a;
      origEnd = origStart;
    }
    return new NormalizedString(
      this.cps.subarray(a, b),
      this.starts.subarray(a, b),
      this.ends.subarray(a, b),
      origStart,
      origEnd,
    );
  }

  /**
   * Original offsets [start, end) of the normalized range [a, b): first char's start, last char's end
   * (Rust `expand_alignments`), or null for an empty range.
   */
  originalRange(a: number, b: number): [number, number] | null {
    if (a >= b) return null;
    return [this.starts[a], this.ends[b - 1]];
  }

  /**
   * The normalized range Rust transforms when asked for `Range::Original(..)`
   * (`convert_offsets`): it skips leading chars with an empty alignment and stops at the first
   * char whose alignment ends past the original length. Returns null when Rust does nothing.
   */
  private fullRange(): [number, number] | null {
    const n = this.cps.length;
    const origLen = this.origEnd - this.origStart;
    if (origLen === 0) return [0, 0];
    let start = -1;
    let end = -1;
    for (let i = 0; i < n; i++) {
      const s = this.starts[i];
      const e = this.ends[i];
      if (!(this.origEnd >= e)) break;
      if (start < 0 && this.origStart <= s && s !== e) start = i;
      end = i + 1;
    }
    if (start >= 0 && end >= 0) return [start, end];
    if (start < 0 && end >= 0) return [end, end];
    return null;
  }

  /** `transform`: (char, change) pairs produced from the whole normalized string. */
  transform(cps: ArrayLike<number>, changes: ArrayLike<number>, count: number, initialOffset: number): void {
    const r = this.fullRange();
    if (r === null) return;
    this.transformRange(r[0], r[1], cps, changes, count, initialOffset);
  }

  /** `transform_range` over normalized indices [a, b). */
  transformRange(
    a: number,
    b: number,
    cps: ArrayLike<number>,
    changes: ArrayLike<number>,
    count: number,
    initialOffset: number,
  ): void {
    const oldLen = this.cps.length;
    const newLen = oldLen - (b - a) + count;
    const nCps = new Int32Array(newLen);
    const nStarts = new Int32Array(newLen);
    const nEnds = new Int32Array(newLen);
    nCps.set(this.cps.subarray(0, a), 0);
    nStarts.set(this.starts.subarray(0, a), 0);
    nEnds.set(this.ends.subarray(0, a), 0);
    let consumed = a + initialOffset; // absolute index of the next original char to replace
    const zero = this.origStart;
    for (let k = 0; k < count; k++) {
      const change = changes[k];
      let s: number;
      let e: number;
      if (change > 0) {
        if (consumed < 1) {
          s = zero;
          e = zero;
        } else {
          s = this.starts[consumed - 1];
          e = this.ends[consumed - 1];
        }
      } else {
        s = this.starts[consumed];
        e = this.ends[consumed];
        consumed += 1 - change;
      }
      nCps[a + k] = cps[k];
      nStarts[a + k] = s;
      nEnds[a + k] = e;
    }
    nCps.set(this.cps.subarray(b), a + count);
    nStarts.set(this.starts.subarray(b), a + count);
    nEnds.set(this.ends.subarray(b), a + count);
    this.cps = nCps;
    this.starts = nStarts;
    this.ends = nEnds;
  }

  /** Keeps chars for which `keep` is true (Rust `filter`: kept chars keep their alignment). */
  filter(keep: (cp: number) => boolean): void {
    const n = this.cps.length;
    const cps: number[] = [];
    const changes: number[] = [];
    // Rust walks backwards and gives each kept char -(number of removed chars right after it).
    let removed = 0;
    for (let i = n - 1; i >= 0; i--) {
      const c = this.cps[i];
      if (keep(c)) {
        cps.push(c);
        changes.push(-removed);
        removed = 0;
      } else {
        removed++;
      }
    }
    cps.reverse();
    changes.reverse();
    if (removed === 0 && cps.length === n) return;
    this.transform(cps, changes, cps.length, removed);
  }

  /** One char to one char. */
  map(fn: (cp: number) => number): void {
    const n = this.cps.length;
    const cps = new Int32Array(n);
    let changed = false;
    for (let i = 0; i < n; i++) {
      const c = fn(this.cps[i]);
      if (c !== this.cps[i]) changed = true;
      cps[i] = c;
    }
    if (!changed) return;
    this.transform(cps, new Int32Array(n), n, 0);
  }

  lowercase(): void {
    const n = this.cps.length;
    const cps: number[] = [];
    const changes: number[] = [];
    let changed = false;
    for (let i = 0; i < n; i++) {
      const c = this.cps[i];
      const l = lowercaseOf(c);
      if (typeof l === 'number') {
        if (l !== c) changed = true;
        cps.push(l);
        changes.push(0);
      } else {
        changed = true;
        for (let k = 0; k < l.length; k++) {
          cps.push(l[k]);
          changes.push(k === 0 ? 0 : 1);
        }
      }
    }
    if (!changed) return;
    this.transform(cps, changes, cps.length, 0);
  }

  /** NFD / NFKD / NFC / NFKC with the change values of unicode-normalization-alignments. */
  unicodeNormalize(form: 'NFD' | 'NFKD' | 'NFC' | 'NFKC'): void {
    const n = this.cps.length;
    let ascii = true;
    for (let i = 0; i < n; i++) {
      if (this.cps[i] >= 0x80) {
        ascii = false;
        break;
      }
    }
    if (ascii) return; // every normalization form is the identity on ASCII, with all changes 0
    const compat = form === 'NFKD' || form === 'NFKC';
    let r = decomposeWithChanges(this.cps, n, compat);
    if (form === 'NFC' || form === 'NFKC') r = recomposeWithChanges(r);
    this.transform(r.cps, r.changes, r.cps.length, 0);
  }

  /** Rust `prepend`: the new chars and the old first char all take the first char's alignment. */
  prepend(s: string): void {
    if (this.cps.length === 0) return;
    const add = codePointsOf(s);
    const cps = [...add, this.cps[0]];
    const changes = cps.map((_, i) => (i === 0 ? 0 : 1));
    this.transformRange(0, 1, cps, changes, cps.length, 0);
  }

  /** Rust `append`. */
  append(s: string): void {
    const n = this.cps.length;
    if (n === 0) return;
    const add = codePointsOf(s);
    const cps = [this.cps[n - 1], ...add];
    const changes = cps.map((_, i) => (i === 0 ? 0 : 1));
    this.transformRange(n - 1, n, cps, changes, cps.length, 0);
  }

  /**
   * Rust `replace`: every match is replaced by `content`, each new char inserted (+1) after all
   * the matched chars were consumed, so they share the alignment of the last matched char.
   */
  replace(matches: PatternMatches, content: number[]): void {
    let offset = 0;
    const changes = content.map(() => 1);
    for (let m = 0; m < matches.length; m += 3) {
      if (matches[m + 2] !== 1) continue;
      const start = matches[m] + offset;
      const end = matches[m + 1] + offset;
      this.transformRange(start, end, content, changes, content.length, end - start);
      offset += content.length - (end - start);
    }
  }

  /** Rust `lrstrip`. */
  strip(left: boolean, right: boolean): void {
    const n = this.cps.length;
    let lead = 0;
    if (left) while (lead < n && isWhitespace(this.cps[lead])) lead++;
    let trail = 0;
    if (right) while (trail < n && isWhitespace(this.cps[n - 1 - trail])) trail++;
    if (lead === 0 && trail === 0) return;
    const cps: number[] = [];
    const changes: number[] = [];
    for (let i = 0; i < n; i++) {
      if (i < lead || i >= n - trail) continue;
      cps.push(this.cps[i]);
      changes.push(i === n - trail - 1 ? -trail : 0);
    }
    this.transform(cps, changes, cps.length, lead);
  }

  /** Rust `split(pattern, behavior)`; empty pieces are kept (the caller drops them, like Rust). */
  split(matches: PatternMatches, behavior: SplitBehavior): NormalizedString[] {
    const out: NormalizedString[] = [];
    const m = matches;
    switch (behavior) {
      case 'Isolated':
        for (let i = 0; i < m.length; i += 3) out.push(this.slice(m[i], m[i + 1]));
        break;
      case 'Removed':
        for (let i = 0; i < m.length; i += 3) if (m[i + 2] !== 1) out.push(this.slice(m[i], m[i + 1]));
        break;
      case 'Contiguous': {
        const acc: number[] = [];
        let prev = false;
        for (let i = 0; i < m.length; i += 3) {
          const isMatch = m[i + 2] === 1;
          if (isMatch === prev && acc.length > 0) acc[acc.length - 1] = m[i + 1];
          else acc.push(m[i], m[i + 1]);
          prev = isMatch;
        }
        for (let i = 0; i < acc.length; i += 2) out.push(this.slice(acc[i], acc[i + 1]));
        break;
      }
      case 'MergedWithPrevious': {
        const acc: number[] = [];
        let prev = false;
        for (let i = 0; i < m.length; i += 3) {
          const isMatch = m[i + 2] === 1;
          if (isMatch && !prev && acc.length > 0) acc[acc.length - 1] = m[i + 1];
          else acc.push(m[i], m[i + 1]);
          prev = isMatch;
        }
        for (let i = 0; i < acc.length; i += 2) out.push(this.slice(acc[i], acc[i + 1]));
        break;
      }
      case 'MergedWithNext': {
        const acc: number[] = []; // pairs, built from the end
        let prev = false;
        for (let i = m.length - 3; i >= 0; i -= 3) {
          const isMatch = m[i + 2] === 1;
          if (isMatch && !prev && acc.length > 0) acc[acc.length - 2] = m[i];
          else acc.push(m[i], m[i + 1]);
          prev = isMatch;
        }
        for (let i = acc.length - 2; i >= 0; i -= 2) out.push(this.slice(acc[i], acc[i + 1]));
        break;
      }
    }
    return out;
  }
}

export function codePointsToString(cps: ArrayLike<number>, a: number, b: number): string {
  let s = '';
  for (let i = a; i < b; i++) {
    const c = cps[i];
    if (c < 0x10000) s += String.fromCharCode(c);
    else s += String.fromCharCode(0xd800 + ((c - 0x10000) >> 10), 0xdc00 + ((c - 0x10000) & 0x3ff));
  }
  return s;
}

/** Pattern = a char predicate: every matching char is a match of its own. */
export function matchChars(cps: ArrayLike<number>, n: number, pred: (cp: number) => boolean): PatternMatches {
  if (n === 0) return [0, 0, 0];
  const out: number[] = [];
  let last = 0;
  for (let i = 0; i < n; i++) {
    if (pred(cps[i])) {
      if (last < i) out.push(last, i, 0);
      out.push(i, i + 1, 1);
      last = i + 1;
    }
  }
  if (n > last) out.push(last, n, 0);
  return out;
}

/** Pattern = a literal string: non-overlapping occurrences, left to right. */
export function matchString(cps: ArrayLike<number>, n: number, pat: number[]): PatternMatches {
  if (pat.length === 0 || n === 0) return [0, n, 0];
  const out: number[] = [];
  let prev = 0;
  let i = 0;
  while (i + pat.length <= n) {
    let ok = true;
    for (let k = 0; k < pat.length; k++) {
      if (cps[i + k] !== pat[k]) {
        ok = false;
        break;
      }
    }
    if (ok) {
      if (prev < i) out.push(prev, i, 0);
      out.push(i, i + pat.length, 1);
      i += pat.length;
      prev = i;
    } else {
      i++;
    }
  }
  if (prev < n) out.push(prev, n, 0);
  return out;
}

/** Pattern = a JS RegExp (global, unicode) run over the string; indices converted to code points. */
export function matchRegex(ns: NormalizedString, re: RegExp): PatternMatches {
  const n = ns.length;
  if (n === 0) return [0, 0, 0];
  const s = ns.toString();
  // UTF-16 index -> code point index
  const toCp = new Int32Array(s.length + 1);
  let cp = 0;
  for (let i = 0; i < s.length; i++) {
    toCp[i] = cp;
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        toCp[i + 1] = cp;
        i++;
      }
    }
    cp++;
  }
  toCp[s.length] = cp;
  const out: number[] = [];
  let prev = 0;
  re.lastIndex = 0;
  for (;;) {
    const m = re.exec(s);
    if (m === null) break;
    const a = toCp[m.index];
    const b = toCp[m.index + m[0].length];
    if (m[0].length === 0) {
      re.lastIndex = m.index + (s.codePointAt(m.index)! > 0xffff ? 2 : 1);
      if (m.index >= s.length) break;
    }
    if (prev !== a) out.push(prev, a, 0);
    out.push(a, b, 1);
    prev = b;
  }
  if (prev !== n) out.push(prev, n, 0);
  return out;
}
