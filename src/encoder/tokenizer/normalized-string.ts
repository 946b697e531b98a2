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

/** The buffer's text, computed once and shared by all slices of the same buffer. */
interface BufferText {
  text: string | null;
  /** whether the buffer has only BMP code points (then code point i is UTF-16 unit i) */
  bmp: boolean;
}

const SURROGATE = /[\uD800-\uDFFF]/;
const utf16Decoder = new TextDecoder('utf-16le');

export class NormalizedString {
  /** Code points, original starts and original ends; this string is [off, off + len) of them. */
  cps: Int32Array;
  starts: Int32Array;
  ends: Int32Array;
  off: number;
  len: number;
  /** `offsets_original()` of Rust: where this (slice of the) string starts and ends in the input. */
  origStart: number;
  origEnd: number;
  private buffer: BufferText;

  constructor(
    cps: Int32Array,
    starts: Int32Array,
    ends: Int32Array,
    off: number,
    len: number,
    origStart: number,
    origEnd: number,
    buffer?: BufferText,
  ) {
    this.cps = cps;
    this.starts = starts;
    this.ends = ends;
    this.off = off;
    this.len = len;
    this.origStart = origStart;
    this.origEnd = origEnd;
    this.buffer = buffer ?? { text: null, bmp: false };
  }

  static fromString(s: string): NormalizedString {
    const buf = new Int32Array(s.length);
    let n = 0;
    if (!SURROGATE.test(s)) {
      for (let i = 0; i < s.length; i++) buf[i] = s.charCodeAt(i);
      n = s.length;
      const starts = new Int32Array(n);
      const ends = new Int32Array(n);
      for (let i = 0; i < n; i++) {
        starts[i] = i;
        ends[i] = i + 1;
      }
      return new NormalizedString(buf, starts, ends, 0, n, 0, n, { text: s, bmp: true });
    }
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
        const d = s.charCodeAt(i + 1);
        if (d >= 0xdc00 && d <= 0xdfff) {
          buf[n++] = ((c - 0xd800) << 10) + (d - 0xdc00) + 0x10000;
          i++;
          continue;
        }
      }
      // a lone surrogate becomes U+FFFD, as in the UTF-8 the reference works on (one code point either way)
      buf[n++] = c >= 0xd800 && c <= 0xdfff ? 0xfffd : c;
    }
    const starts = new Int32Array(n);
    const ends = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      starts[i] = i;
      ends[i] = i + 1;
    }
    return new NormalizedString(buf.subarray(0, n), starts, ends, 0, n, 0, n);
  }

  get length(): number {
    return this.len;
  }

  /** i-th code point (0-based in this string). */
  at(i: number): number {
    return this.cps[this.off + i];
  }

  /** Original start / end of the i-th code point. */
  startOf(i: number): number {
    return this.starts[this.off + i];
  }

  endOf(i: number): number {
    return this.ends[this.off + i];
  }

  /** The code points of this string (a view). */
  codePoints(): Int32Array {
    return this.cps.subarray(this.off, this.off + this.len);
  }

  toString(): string {
    const b = this.buffer;
    if (b.text === null) {
      let bmp = true;
      for (let i = 0; i < this.cps.length; i++) {
        if (this.cps[i] > 0xffff) {
          bmp = false;
          break;
        }
      }
      b.bmp = bmp;
      if (!bmp) b.text = '';
      else if (this.cps.length < 256) b.text = codePointsToString(this.cps, 0, this.cps.length);
      else b.text = utf16Decoder.decode(Uint16Array.from(this.cps));
    }
    if (b.bmp) return b.text.slice(this.off, this.off + this.len);
    return codePointsToString(this.cps, this.off, this.off + this.len);
  }

  /** A slice over normalized indices [a, b) (shares the arrays). */
  slice(a: number, b: number): NormalizedString {
    let origStart: number;
    let origEnd: number;
    if (a < b) {
      origStart = this.starts[this.off + a];
      origEnd = this.ends[this.off + b - 1];
      if (origEnd < origStart) origEnd = origStart;
    } else {
      origStart = this.origStart + a;
      origEnd = origStart;
    }
    return new NormalizedString(this.cps, this.starts, this.ends, this.off + a, b - a, origStart, origEnd, this.buffer);
  }

  /**
   * Original offsets [start, end) of the normalized range [a, b): first char's start, last char's end
   * (Rust `expand_alignments`), or null for an empty range.
   */
  originalRange(a: number, b: number): [number, number] | null {
    if (a >= b) return null;
    return [this.starts[this.off + a], this.ends[this.off + b - 1]];
  }

  /** Whether every char has a non-empty alignment inside [origStart, origEnd] (Rust then transforms all of it). */
  coversAll(): boolean {
    const { starts, ends, origStart, origEnd } = this;
    for (let i = this.off, end = this.off + this.len; i < end; i++) {
      const s = starts[i];
      const e = ends[i];
      if (s === e || s < origStart || e > origEnd) return false;
    }
    return true;
  }

  /** Replaces the content with fresh arrays (alignments included). */
  setContent(cps: Int32Array, starts: Int32Array, ends: Int32Array, len: number, text?: string): void {
    this.buffer = text === undefined ? { text: null, bmp: false } : { text, bmp: true };
    this.cps = cps;
    this.starts = starts;
    this.ends = ends;
    this.off = 0;
    this.len = len;
  }

  /**
   * The normalized range Rust transforms when asked for `Range::Original(..)`
   * (`convert_offsets`): it skips leading chars with an empty alignment and stops at the first
   * char whose alignment ends past the original length. Returns null when Rust does nothing.
   */
  private fullRange(): [number, number] | null {
    const n = this.len;
    const origLen = this.origEnd - this.origStart;
    if (origLen === 0) return [0, 0];
    let start = -1;
    let end = -1;
    for (let i = 0; i < n; i++) {
      const s = this.starts[this.off + i];
      const e = this.ends[this.off + i];
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
    const off = this.off;
    const oldLen = this.len;
    const newLen = oldLen - (b - a) + count;
    const nCps = new Int32Array(newLen);
    const nStarts = new Int32Array(newLen);
    const nEnds = new Int32Array(newLen);
    nCps.set(this.cps.subarray(off, off + a), 0);
    nStarts.set(this.starts.subarray(off, off + a), 0);
    nEnds.set(this.ends.subarray(off, off + a), 0);
    let consumed = a + initialOffset; // index of the next original char to replace
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
          s = this.starts[off + consumed - 1];
          e = this.ends[off + consumed - 1];
        }
      } else {
        s = this.starts[off + consumed];
        e = this.ends[off + consumed];
        consumed += 1 - change;
      }
      nCps[a + k] = cps[k];
      nStarts[a + k] = s;
      nEnds[a + k] = e;
    }
    nCps.set(this.cps.subarray(off + b, off + oldLen), a + count);
    nStarts.set(this.starts.subarray(off + b, off + oldLen), a + count);
    nEnds.set(this.ends.subarray(off + b, off + oldLen), a + count);
    this.setContent(nCps, nStarts, nEnds, newLen);
  }

  /** Keeps chars for which `keep` is true (Rust `filter`: kept chars keep their alignment). */
  filter(keep: (cp: number) => boolean): void {
    const n = this.len;
    let any = false;
    for (let i = 0; i < n; i++) {
      if (!keep(this.cps[this.off + i])) {
        any = true;
        break;
      }
    }
    if (!any) return;
    const cps: number[] = [];
    const changes: number[] = [];
    // Rust walks backwards and gives each kept char -(number of removed chars right after it).
    let removed = 0;
    for (let i = n - 1; i >= 0; i--) {
      const c = this.cps[this.off + i];
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
    this.transform(cps, changes, cps.length, removed);
  }

  /** Whether `fn` changes any char; most text needs no rewrite, so the common case allocates nothing. */
  private changesAny(fn: (cp: number) => number | number[]): boolean {
    for (let i = 0; i < this.len; i++) {
      const c = this.cps[this.off + i];
      if (fn(c) !== c) return true;
    }
    return false;
  }

  /** One char to one char. */
  map(fn: (cp: number) => number): void {
    const n = this.len;
    if (!this.changesAny(fn)) return;
    const cps = new Int32Array(n);
    for (let i = 0; i < n; i++) cps[i] = fn(this.cps[this.off + i]);
    this.transform(cps, new Int32Array(n), n, 0);
  }

  lowercase(): void {
    const n = this.len;
    if (!this.changesAny(lowercaseOf)) return;
    const cps: number[] = [];
    const changes: number[] = [];
    for (let i = 0; i < n; i++) {
      const l = lowercaseOf(this.cps[this.off + i]);
      if (typeof l === 'number') {
        cps.push(l);
        changes.push(0);
      } else {
        for (let k = 0; k < l.length; k++) {
          cps.push(l[k]);
          changes.push(k === 0 ? 0 : 1);
        }
      }
    }
    this.transform(cps, changes, cps.length, 0);
  }

  /** NFD / NFKD / NFC / NFKC with the change values of unicode-normalization-alignments. */
  unicodeNormalize(form: 'NFD' | 'NFKD' | 'NFC' | 'NFKC'): void {
    const n = this.len;
    let ascii = true;
    for (let i = 0; i < n; i++) {
      if (this.cps[this.off + i] >= 0x80) {
        ascii = false;
        break;
      }
    }
    if (ascii) return; // every normalization form is the identity on ASCII, with all changes 0
    const compat = form === 'NFKD' || form === 'NFKC';
    let r = decomposeWithChanges(this.codePoints(), n, compat);
    if (form === 'NFC' || form === 'NFKC') r = recomposeWithChanges(r);
    this.transform(r.cps, r.changes, r.cps.length, 0);
  }

  /** Rust `prepend`: the new chars and the old first char all take the first char's alignment. */
  prepend(s: string): void {
    if (this.len === 0) return;
    const add = codePointsOf(s);
    const cps = [...add, this.at(0)];
    const changes = cps.map((_, i) => (i === 0 ? 0 : 1));
    this.transformRange(0, 1, cps, changes, cps.length, 0);
  }

  /** Rust `append`. */
  append(s: string): void {
    const n = this.len;
    if (n === 0) return;
    const add = codePointsOf(s);
    const cps = [this.at(n - 1), ...add];
    const changes = cps.map((_, i) => (i === 0 ? 0 : 1));
    this.transformRange(n - 1, n, cps, changes, cps.length, 0);
  }

  /**
   * Rust `replace`: every match is replaced by `content`, each new char inserted (+1) after all
   * the matched chars were consumed, so they share the alignment of the last matched char (of the
   * char before, for an empty match). Rust does one transform_range per match; the result is the
   * same as this single pass, which stays linear on long texts.
   */
  replace(matches: PatternMatches, content: number[]): void {
    let count = 0;
    for (let m = 0; m < matches.length; m += 3) if (matches[m + 2] === 1) count++;
    if (count === 0) return;
    const n = this.len;
    const off = this.off;
    let cap = n + count * content.length;
    const cps = new Int32Array(cap);
    const starts = new Int32Array(cap);
    const ends = new Int32Array(cap);
    let w = 0;
    let prev = 0;
    for (let m = 0; m < matches.length; m += 3) {
      if (matches[m + 2] !== 1) continue;
      const a = matches[m];
      const b = matches[m + 1];
      for (let i = prev; i < a; i++) {
        cps[w] = this.cps[off + i];
        starts[w] = this.starts[off + i];
        ends[w] = this.ends[off + i];
        w++;
      }
      let s: number;
      let e: number;
      if (b > a) {
        s = this.starts[off + b - 1];
        e = this.ends[off + b - 1];
      } else if (w > 0) {
        s = starts[w - 1];
        e = ends[w - 1];
      } else {
        s = this.origStart;
        e = this.origStart;
      }
      for (const c of content) {
        cps[w] = c;
        starts[w] = s;
        ends[w] = e;
        w++;
      }
      prev = b;
    }
    for (let i = prev; i < n; i++) {
      cps[w] = this.cps[off + i];
      starts[w] = this.starts[off + i];
      ends[w] = this.ends[off + i];
      w++;
    }
    cap = w;
    this.setContent(cps.subarray(0, cap), starts.subarray(0, cap), ends.subarray(0, cap), cap);
  }

  /** Rust `lrstrip`: the last kept char also removes the trailing whitespace. */
  strip(left: boolean, right: boolean): void {
    const n = this.len;
    let lead = 0;
    if (left) while (lead < n && isWhitespace(this.at(lead))) lead++;
    let trail = 0;
    if (right) while (trail < n - lead && isWhitespace(this.at(n - 1 - trail))) trail++;
    if (lead === 0 && trail === 0) return;
    const cps: number[] = [];
    const changes: number[] = [];
    for (let i = lead; i < n - trail; i++) {
      cps.push(this.at(i));
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

export function codePointsToString(cps: Int32Array, a: number, b: number): string {
  // Longer runs of BMP chars go through String.fromCharCode in chunks; short or astral runs char by char.
  if (b - a > 16 && isBmpRun(cps, a, b)) {
    let s = '';
    for (let i = a; i < b; i += 64) s += String.fromCharCode.apply(null, cps.subarray(i, Math.min(b, i + 64)) as unknown as number[]);
    return s;
  }
  let s = '';
  for (let i = a; i < b; i++) {
    const c = cps[i];
    if (c < 0x10000) s += String.fromCharCode(c);
    else s += String.fromCharCode(0xd800 + ((c - 0x10000) >> 10), 0xdc00 + ((c - 0x10000) & 0x3ff));
  }
  return s;
}

function isBmpRun(cps: Int32Array, a: number, b: number): boolean {
  for (let i = a; i < b; i++) if (cps[i] > 0xffff) return false;
  return true;
}

/** Pattern = a char predicate: every matching char is a match of its own. */
export function matchChars(ns: NormalizedString, pred: (cp: number) => boolean): PatternMatches {
  const n = ns.len;
  const cps = ns.cps;
  const off = ns.off;
  if (n === 0) return [0, 0, 0];
  const out: number[] = [];
  let last = 0;
  for (let i = 0; i < n; i++) {
    if (pred(cps[off + i])) {
      if (last < i) out.push(last, i, 0);
      out.push(i, i + 1, 1);
      last = i + 1;
    }
  }
  if (n > last) out.push(last, n, 0);
  return out;
}

/** Pattern = a literal string: non-overlapping occurrences, left to right. */
export function matchString(ns: NormalizedString, pat: number[]): PatternMatches {
  const n = ns.len;
  const cps = ns.cps;
  const off = ns.off;
  if (pat.length === 0 || n === 0) return [0, n, 0];
  const out: number[] = [];
  let prev = 0;
  let i = 0;
  while (i + pat.length <= n) {
    let ok = true;
    for (let k = 0; k < pat.length; k++) {
      if (cps[off + i + k] !== pat[k]) {
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
