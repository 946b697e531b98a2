/**
 * The SentencePiece `precompiled_charsmap` normalizer (T5, ALBERT, XLM-R, ...), read from its binary
 * form: a little-endian u32 trie size, a darts-clone double-array trie over UTF-8 bytes, then the
 * NUL-separated replacement strings. The trie lookup (shortest matching prefix), the grapheme walk
 * and the `change` values follow the Rust reference (`spm_precompiled` + tokenizers' `Precompiled`
 * normalizer) exactly, because they decide the offsets: e.g. a removed char is folded into the
 * previous transformation, so when nothing precedes it the next char inherits its alignment.
 */
import { ConfigError } from '../errors.ts';
import type { NormalizedString } from './normalized-string.ts';
import { codePointsOf } from './unicode.ts';

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

export class PrecompiledCharsmap {
  private readonly units: Uint32Array;
  private readonly blob: Uint8Array;
  private readonly charCache = new Map<number, number[] | null>();
  private segmenter: Intl.Segmenter | null = null;

  constructor(base64: string) {
    const bytes = Buffer.from(base64, 'base64');
    if (bytes.length < 4) throw new ConfigError('tokenizer: Precompiled normalizer has an empty precompiled_charsmap');
    const trieSize = bytes.readUInt32LE(0);
    if (trieSize % 4 !== 0 || trieSize === 0 || 4 + trieSize > bytes.length) {
      throw new ConfigError('tokenizer: Precompiled normalizer has a malformed precompiled_charsmap');
    }
    this.units = new Uint32Array(trieSize / 4);
    for (let i = 0; i < this.units.length; i++) this.units[i] = bytes.readUInt32LE(4 + i * 4);
    this.blob = new Uint8Array(bytes.subarray(4 + trieSize));
    try {
      decoder.decode(this.blob);
    } catch (cause) {
      throw new ConfigError('tokenizer: Precompiled normalizer replacement strings are not UTF-8', { cause });
    }
  }

  /** Value of the SHORTEST key that is a prefix of `key` (spm_precompiled takes results[0]). */
  private lookup(key: Uint8Array): number {
    const u = this.units;
    let pos = (u[0] >>> 10) << ((u[0] & (1 << 9)) >>> 6);
    for (let i = 0; i < key.length; i++) {
      const c = key[i];
      if (c === 0) break;
      pos ^= c;
      if (pos >= u.length) return -1;
      const unit = u[pos];
      if ((unit & ((1 << 31) | 0xff)) >>> 0 !== c) return -1;
      pos ^= (unit >>> 10) << ((unit & (1 << 9)) >>> 6);
      if ((unit >>> 8) & 1) {
        if (pos >= u.length) return -1;
        return u[pos] & 0x7fffffff;
      }
    }
    return -1;
  }

  /** The replacement of a chunk of text, as code points, or null when the trie has none. */
  transform(chunk: string): number[] | null {
    const index = this.lookup(encoder.encode(chunk));
    if (index < 0) return null;
    let end = index;
    while (end < this.blob.length && this.blob[end] !== 0) end++;
    return codePointsOf(decoder.decode(this.blob.subarray(index, end)));
  }

  private transformChar(cp: number): number[] | null {
    let r = this.charCache.get(cp);
    if (r === undefined) {
      r = this.transform(String.fromCodePoint(cp));
      this.charCache.set(cp, r);
    }
    return r;
  }

  /** Grapheme boundaries (extended clusters) as code point indices, including 0 and n. */
  private graphemeBounds(ns: NormalizedString): number[] {
    const n = ns.length;
    let simple = true;
    for (let i = 0; i < n; i++) {
      const c = ns.at(i);
      if (c >= 0x80 || (c === 0x0d && i + 1 < n && ns.at(i + 1) === 0x0a)) {
        simple = false;
        break;
      }
    }
    const bounds: number[] = [];
    if (simple) {
      for (let i = 0; i <= n; i++) bounds.push(i);
      return bounds;
    }
    this.segmenter ??= new Intl.Segmenter(undefined, { granularity: 'grapheme' });
    const s = ns.toString();
    let cpIndex = 0;
    let u16 = 0;
    for (const seg of this.segmenter.segment(s)) {
      while (u16 < seg.index) {
        const c = s.charCodeAt(u16);
        u16 += c >= 0xd800 && c <= 0xdbff && u16 + 1 < s.length ? 2 : 1;
        cpIndex++;
      }
      bounds.push(cpIndex);
    }
    bounds.push(n);
    return bounds;
  }

  normalize(ns: NormalizedString): void {
    const n = ns.length;
    if (n === 0) return;
    const bounds = this.graphemeBounds(ns);
    const cps: number[] = [];
    const changes: number[] = [];
    let modified = false;
    // tokenizers' `replace`: the new chars replace (change 0); when longer, the last `diff` of them
    // become insertions; when shorter, the last transformation so far (possibly a previous char's)
    // also removes the difference.
    const emit = (norm: number[], oldCount: number): void => {
      for (const c of norm) {
        cps.push(c);
        changes.push(0);
      }
      const diff = norm.length - oldCount;
      if (diff > 0) {
        for (let k = changes.length - diff; k < changes.length; k++) changes[k] = 1;
      } else if (diff < 0 && changes.length > 0) {
        changes[changes.length - 1] += diff;
      }
    };
    for (let g = 0; g + 1 < bounds.length; g++) {
      const a = bounds[g];
      const b = bounds[g + 1];
      if (a === b) continue;
      if (b - a === 1) {
        const norm = this.transformChar(ns.at(a));
        if (norm !== null) {
          modified = true;
          emit(norm, 1);
        } else {
          cps.push(ns.at(a));
          changes.push(0);
        }
        continue;
      }
      let bytes = 0;
      for (let i = a; i < b; i++) {
        const c = ns.at(i);
        bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
      }
      if (bytes < 6) {
        let chunk = '';
        for (let i = a; i < b; i++) chunk += String.fromCodePoint(ns.at(i));
        const norm = this.transform(chunk);
        if (norm !== null) {
          modified = true;
          emit(norm, b - a);
          continue;
        }
      }
      for (let i = a; i < b; i++) {
        const norm = this.transformChar(ns.at(i));
        if (norm !== null) {
          modified = true;
          emit(norm, 1);
        } else {
          cps.push(ns.at(i));
          changes.push(0);
        }
      }
    }
    if (modified) ns.transform(cps, changes, cps.length, 0);
  }
}
