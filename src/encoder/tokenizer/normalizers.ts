/**
 * Normalizers of tokenizer.json, alignment-aware ports of the Rust reference. Each one edits a
 * NormalizedString the way the reference does, step by step, so offsets stay exact.
 */
import { ConfigError } from '../errors.ts';
import { NormalizedString, matchRegex, matchString } from './normalized-string.ts';
import { PrecompiledCharsmap } from './precompiled.ts';
import { compileOnigRegex } from './regex.ts';
import {
  F_BERT_REMOVED,
  F_COMBINING_MARK,
  F_MARK_NONSPACING,
  F_WHITESPACE,
  canonicalDecomposition,
  codePointsOf,
  flags,
  isChineseChar,
  lowercaseOf,
  startsWithStarter,
} from './unicode.ts';

export type Normalizer = (ns: NormalizedString) => void;

type Json = Record<string, unknown>;

function bool(cfg: Json, key: string, fallback: boolean): boolean {
  const v = cfg[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'boolean') throw new ConfigError(`tokenizer: ${String(cfg.type)} option "${key}" must be a boolean`);
  return v;
}

function str(cfg: Json, key: string): string {
  const v = cfg[key];
  if (typeof v !== 'string') throw new ConfigError(`tokenizer: ${String(cfg.type)} option "${key}" must be a string`);
  return v;
}

function bertNormalizer(cfg: Json): Normalizer {
  const cleanText = bool(cfg, 'clean_text', true);
  const chinese = bool(cfg, 'handle_chinese_chars', true);
  const lowercase = bool(cfg, 'lowercase', true);
  const stripAccents = cfg.strip_accents === undefined || cfg.strip_accents === null ? lowercase : bool(cfg, 'strip_accents', lowercase);
  const f = flags();
  const keep = (c: number): boolean => (f[c] & F_BERT_REMOVED) === 0;
  const toSpace = (c: number): number => ((f[c] & F_WHITESPACE) !== 0 ? 0x20 : c);
  const notMn = (c: number): boolean => (f[c] & F_MARK_NONSPACING) === 0;

  /**
   * Single pass, when every step is local to one input char (all its outputs share its
   * alignment): true unless the NFD step could reorder marks across chars, i.e. unless some char
   * is a non-starter or decomposes to one first. Gives exactly the step-by-step result then.
   */
  const fast = (ns: NormalizedString): boolean => {
    const n = ns.len;
    if (!ns.coversAll()) return false;
    // printable ASCII (+ \t \n \r): nothing removed, decomposed or inserted; chars map one to one
    let printable = true;
    for (let i = 0; i < n; i++) {
      const c = ns.at(i);
      if (c > 0x7e || (c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d)) {
        printable = false;
        break;
      }
    }
    if (printable) {
      let text = ns.toString();
      if (lowercase) text = text.toLowerCase();
      if (cleanText) text = text.replace(/[\t\n\r]/g, ' ');
      const cps = new Int32Array(n);
      for (let i = 0; i < n; i++) cps[i] = text.charCodeAt(i);
      ns.setContent(cps, ns.starts.subarray(ns.off, ns.off + n), ns.ends.subarray(ns.off, ns.off + n), n, text);
      return true;
    }
    if (stripAccents) {
      for (let i = 0; i < n; i++) if (!startsWithStarter(ns.at(i))) return false;
    }
    let cap = n * 3 + 8;
    let cps = new Int32Array(cap);
    let starts = new Int32Array(cap);
    let ends = new Int32Array(cap);
    let m = 0;
    let s = 0;
    let e = 0;
    const emit = (c: number): void => {
      if (m === cap) {
        cap *= 2;
        const a = new Int32Array(cap);
        a.set(cps);
        cps = a;
        const b = new Int32Array(cap);
        b.set(starts);
        starts = b;
        const d = new Int32Array(cap);
        d.set(ends);
        ends = d;
      }
      cps[m] = c;
      starts[m] = s;
      ends[m] = e;
      m++;
    };
    const emitLower = (c: number): void => {
      if (!lowercase) return emit(c);
      const l = lowercaseOf(c);
      if (typeof l === 'number') emit(l);
      else for (const x of l) emit(x);
    };
    const emitStripped = (c: number): void => {
      if (!stripAccents) return emitLower(c);
      const d = canonicalDecomposition(c);
      if (d === null) {
        if (notMn(c)) emitLower(c);
      } else {
        for (const x of d) if (notMn(x)) emitLower(x);
      }
    };
    for (let i = 0; i < n; i++) {
      let c = ns.at(i);
      s = ns.startOf(i);
      e = ns.endOf(i);
      if (cleanText) {
        if (!keep(c)) continue;
        c = toSpace(c);
      }
      if (chinese && isChineseChar(c)) {
        emitStripped(0x20);
        emitStripped(c);
        emitStripped(0x20);
      } else {
        emitStripped(c);
      }
    }
    ns.setContent(cps, starts, ends, m);
    return true;
  };

  return (ns) => {
    if (fast(ns)) return;
    if (cleanText) {
      ns.filter(keep);
      ns.map(toSpace);
    }
    if (chinese) {
      const n = ns.length;
      let any = false;
      for (let i = 0; i < n; i++) {
        if (isChineseChar(ns.at(i))) {
          any = true;
          break;
        }
      }
      if (any) {
        const cps: number[] = [];
        const changes: number[] = [];
        for (let i = 0; i < n; i++) {
          const c = ns.at(i);
          if (isChineseChar(c)) {
            cps.push(0x20, c, 0x20);
            changes.push(0, 1, 1);
          } else {
            cps.push(c);
            changes.push(0);
          }
        }
        ns.transform(cps, changes, cps.length, 0);
      }
    }
    if (stripAccents) {
      ns.unicodeNormalize('NFD');
      ns.filter(notMn);
    }
    if (lowercase) ns.lowercase();
  };
}

function replaceNormalizer(cfg: Json): Normalizer {
  const pattern = cfg.pattern as Json | undefined;
  const content = codePointsOf(str(cfg, 'content'));
  if (pattern && typeof pattern.String === 'string') {
    const pat = codePointsOf(pattern.String);
    return (ns) => ns.replace(matchString(ns, pat), content);
  }
  if (pattern && typeof pattern.Regex === 'string') {
    const re = compileOnigRegex(pattern.Regex, 'Replace normalizer');
    return (ns) => ns.replace(matchRegex(ns, re), content);
  }
  throw new ConfigError('tokenizer: Replace normalizer needs a String or Regex pattern');
}

export function createNormalizer(cfg: unknown): Normalizer | null {
  if (cfg === null || cfg === undefined) return null;
  if (typeof cfg !== 'object' || Array.isArray(cfg)) throw new ConfigError('tokenizer: "normalizer" must be an object or null');
  const c = cfg as Json;
  switch (c.type) {
    case 'BertNormalizer':
      return bertNormalizer(c);
    case 'NFC':
    case 'NFD':
    case 'NFKC':
    case 'NFKD': {
      const form = c.type;
      return (ns) => ns.unicodeNormalize(form);
    }
    case 'Lowercase':
      return (ns) => ns.lowercase();
    case 'StripAccents': {
      const f = flags();
      return (ns) => ns.filter((cp) => (f[cp] & F_COMBINING_MARK) === 0);
    }
    case 'Strip': {
      const left = bool(c, 'strip_left', true);
      const right = bool(c, 'strip_right', true);
      return (ns) => ns.strip(left, right);
    }
    case 'Prepend': {
      const prepend = str(c, 'prepend');
      return (ns) => ns.prepend(prepend);
    }
    case 'Replace':
      return replaceNormalizer(c);
    case 'Precompiled': {
      const map = new PrecompiledCharsmap(str(c, 'precompiled_charsmap'));
      return (ns) => map.normalize(ns);
    }
    case 'Sequence': {
      if (!Array.isArray(c.normalizers)) throw new ConfigError('tokenizer: Sequence normalizer needs a "normalizers" list');
      const steps = c.normalizers.map((n) => createNormalizer(n)).filter((n): n is Normalizer => n !== null);
      return (ns) => {
        for (const step of steps) step(ns);
      };
    }
    default:
      throw new ConfigError(`tokenizer: unsupported normalizer "${String(c.type)}" (offsets cannot be computed)`);
  }
}

/** Runs the normalizer on a copy of `text` and returns the normalized text (for added tokens). */
export function normalizeText(normalizer: Normalizer | null, text: string): string {
  const ns = NormalizedString.fromString(text);
  if (normalizer) normalizer(ns);
  return ns.toString();
}
