/**
 * Pre-tokenizers of tokenizer.json, ported from the Rust reference on top of NormalizedString so
 * that every split keeps its alignments. A pre-tokenizer maps one split to its sub-splits (empty
 * ones are dropped by the caller, like `PreTokenizedString::split`).
 */
import { ConfigError } from '../errors.ts';
import {
  type NormalizedString,
  type PatternMatches,
  type SplitBehavior,
  matchChars,
  matchRegex,
  matchString,
} from './normalized-string.ts';
import { compileOnigRegex } from './regex.ts';
import { F_BERT_PUNCT, F_LETTER, F_NUMBER, F_ONIG_SPACE, F_ONIG_WORD, F_WHITESPACE, codePointsOf, flags } from './unicode.ts';

export type PreTokenizer = (ns: NormalizedString) => NormalizedString[];

type Json = Record<string, unknown>;

const BEHAVIORS: readonly SplitBehavior[] = ['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous'];

function behaviorOf(cfg: Json, fallback: SplitBehavior): SplitBehavior {
  const b = cfg.behavior ?? fallback;
  if (typeof b !== 'string' || !BEHAVIORS.includes(b as SplitBehavior)) {
    throw new ConfigError(`tokenizer: ${String(cfg.type)} pre-tokenizer has an unknown behavior ${JSON.stringify(b)}`);
  }
  return b as SplitBehavior;
}

function invert(m: PatternMatches): PatternMatches {
  const out = m.slice();
  for (let i = 2; i < out.length; i += 3) out[i] = out[i] === 1 ? 0 : 1;
  return out;
}

/** byte -> char of the GPT-2 byte-level alphabet */
export const BYTE_TO_CHAR: number[] = (() => {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const map: number[] = new Array(256);
  for (const b of bs) map[b] = b;
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (map[b] === undefined) {
      map[b] = 256 + n;
      n++;
    }
  }
  return map;
})();

/**
 * Matches of the ByteLevel regex
 * `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
 * written out by hand over the reference's Oniguruma classes.
 */
export function byteLevelMatches(ns: NormalizedString): PatternMatches {
  const n = ns.len;
  const cps = ns.codePoints();
  if (n === 0) return [0, 0, 0];
  const f = flags();
  const cls = (c: number): number => {
    const x = f[c];
    return x & F_LETTER ? 1 : x & F_NUMBER ? 2 : x & F_ONIG_SPACE ? 3 : 4; // L, N, space, other
  };
  const out: number[] = [];
  let i = 0;
  while (i < n) {
    const c = cps[i];
    let end = -1;
    if (c === 0x27 && i + 1 < n) {
      const d = cps[i + 1];
      if (d === 0x73 || d === 0x74 || d === 0x6d || d === 0x64) end = i + 2; // 's 't 'm 'd
      else if (i + 2 < n) {
        const e = cps[i + 2];
        if ((d === 0x72 && e === 0x65) || (d === 0x76 && e === 0x65) || (d === 0x6c && e === 0x6c)) end = i + 3; // 're 've 'll
      }
    }
    if (end < 0) {
      let j = i;
      if (c === 0x20 && i + 1 < n && cls(cps[i + 1]) !== 3) j = i + 1; // optional leading space
      const k = cls(cps[j]);
      if (k !== 3 && (j === i + 1 || cls(c) !== 3)) {
        end = j + 1;
        while (end < n && cls(cps[end]) === k) end++;
      } else {
        // whitespace run: \s+(?!\S) backs off one char when a non-space follows, else \s+
        end = i + 1;
        while (end < n && cls(cps[end]) === 3) end++;
        if (end < n && end - i > 1) end--;
      }
    }
    out.push(i, end, 1);
    i = end;
  }
  return out;
}

/** ASCII char -> its byte-level char, as a one-char string */
const BYTE_LEVEL_ASCII: string[] = Array.from({ length: 128 }, (_, b) => String.fromCharCode(BYTE_TO_CHAR[b]));

function byteLevel(cfg: Json): PreTokenizer {
  const addPrefixSpace = cfg.add_prefix_space === undefined ? true : cfg.add_prefix_space === true;
  const useRegex = cfg.use_regex === undefined ? true : cfg.use_regex === true;
  const encoder = new TextEncoder();
  return (ns) => {
    if (addPrefixSpace && (ns.length === 0 || ns.at(0) !== 0x20)) ns.prepend(' ');
    const pieces = useRegex ? ns.split(byteLevelMatches(ns), 'Isolated') : [ns];
    for (const p of pieces) {
      const n = p.length;
      if (n === 0) continue;
      let ascii = true;
      for (let i = 0; i < n; i++) {
        if (p.at(i) >= 0x80) {
          ascii = false;
          break;
        }
      }
      if (ascii) {
        // one byte-level char per char: the alignments stay, only the chars change
        const cps = new Int32Array(n);
        let text = '';
        for (let i = 0; i < n; i++) {
          const c = p.at(i);
          cps[i] = BYTE_TO_CHAR[c];
          text += BYTE_LEVEL_ASCII[c];
        }
        p.setContent(cps, p.starts.subarray(p.off, p.off + n), p.ends.subarray(p.off, p.off + n), n, text);
        continue;
      }
      const cps: number[] = [];
      const changes: number[] = [];
      for (let i = 0; i < n; i++) {
        const c = p.at(i);
        if (c < 0x80) {
          cps.push(BYTE_TO_CHAR[c]);
          changes.push(0);
        } else {
          const bytes = encoder.encode(String.fromCodePoint(c));
          for (let k = 0; k < bytes.length; k++) {
            cps.push(BYTE_TO_CHAR[bytes[k]]);
            changes.push(k === 0 ? 0 : 1);
          }
        }
      }
      p.transform(cps, changes, cps.length, 0);
    }
    return pieces;
  };
}

function metaspace(cfg: Json): PreTokenizer {
  const replacement = typeof cfg.replacement === 'string' ? cfg.replacement : '\u2581';
  const rep = codePointsOf(replacement);
  if (rep.length !== 1) throw new ConfigError('tokenizer: Metaspace replacement must be one char');
  let scheme: string;
  if (cfg.add_prefix_space === false) {
    if (cfg.prepend_scheme !== undefined && cfg.prepend_scheme !== null && cfg.prepend_scheme !== 'never') {
      throw new ConfigError('tokenizer: Metaspace add_prefix_space false contradicts prepend_scheme');
    }
    scheme = 'never';
  } else {
    scheme = typeof cfg.prepend_scheme === 'string' ? cfg.prepend_scheme : 'always';
  }
  if (!['always', 'first', 'never'].includes(scheme)) throw new ConfigError(`tokenizer: unknown Metaspace prepend_scheme "${scheme}"`);
  const split = cfg.split === undefined || cfg.split === null ? true : cfg.split === true;
  const space = [0x20];
  const r = rep[0];
  return (ns) => {
    ns.replace(matchString(ns, space), rep);
    const starts = ns.length > 0 && ns.at(0) === r;
    if (scheme === 'always' && !starts) ns.prepend(replacement);
    else if (scheme === 'first' && !starts && ns.origStart === 0) ns.prepend(replacement);
    if (!split) return [ns];
    return ns.split(
      matchChars(ns, (c) => c === r),
      'MergedWithNext',
    );
  };
}

/**
 * Whitespace pre-tokenizer: Rust splits on `Invert(\w+|[^\w\s]+)` with Removed, so the regex
 * matches are kept (flag 0) and the whitespace gaps between them removed (flag 1).
 */
function whitespaceMatches(ns: NormalizedString): PatternMatches {
  const n = ns.len;
  const cps = ns.codePoints();
  if (n === 0) return [0, 0, 0];
  const f = flags();
  const word = (c: number): boolean => (f[c] & F_ONIG_WORD) !== 0;
  const space = (c: number): boolean => (f[c] & F_ONIG_SPACE) !== 0;
  const out: number[] = [];
  let prev = 0;
  let i = 0;
  while (i < n) {
    const c = cps[i];
    if (space(c)) {
      i++;
      continue;
    }
    const w = word(c);
    let end = i + 1;
    while (end < n && (w ? word(cps[end]) : !word(cps[end]) && !space(cps[end]))) end++;
    if (prev < i) out.push(prev, i, 1);
    out.push(i, end, 0);
    prev = end;
    i = end;
  }
  if (prev < n) out.push(prev, n, 1);
  return out;
}

function split(cfg: Json): PreTokenizer {
  const pattern = cfg.pattern as Json | undefined;
  const behavior = behaviorOf(cfg, 'Isolated');
  const inv = cfg.invert === true;
  if (pattern && typeof pattern.String === 'string') {
    const pat = codePointsOf(pattern.String);
    return (ns) => {
      const m = matchString(ns, pat);
      return ns.split(inv ? invert(m) : m, behavior);
    };
  }
  if (pattern && typeof pattern.Regex === 'string') {
    const re = compileOnigRegex(pattern.Regex, 'Split pre-tokenizer');
    return (ns) => {
      const m = matchRegex(ns, re);
      return ns.split(inv ? invert(m) : m, behavior);
    };
  }
  throw new ConfigError('tokenizer: Split pre-tokenizer needs a String or Regex pattern');
}

export function createPreTokenizer(cfg: unknown): PreTokenizer | null {
  if (cfg === null || cfg === undefined) return null;
  if (typeof cfg !== 'object' || Array.isArray(cfg)) throw new ConfigError('tokenizer: "pre_tokenizer" must be an object or null');
  const c = cfg as Json;
  const f = flags();
  switch (c.type) {
    case 'BertPreTokenizer':
      // split on whitespace (removed), then on punctuation (isolated), in one pass
      return (ns) => {
        const out: NormalizedString[] = [];
        const n = ns.len;
        let start = 0;
        for (let i = 0; i < n; i++) {
          const x = f[ns.at(i)];
          if (x & F_WHITESPACE) {
            if (start < i) out.push(ns.slice(start, i));
            start = i + 1;
          } else if (x & F_BERT_PUNCT) {
            if (start < i) out.push(ns.slice(start, i));
            out.push(ns.slice(i, i + 1));
            start = i + 1;
          }
        }
        if (start < n) out.push(ns.slice(start, n));
        return out;
      };
    case 'WhitespaceSplit':
      return (ns) => ns.split(matchChars(ns, (cp) => (f[cp] & F_WHITESPACE) !== 0), 'Removed');
    case 'Whitespace':
      return (ns) => ns.split(whitespaceMatches(ns), 'Removed');
    case 'ByteLevel':
      return byteLevel(c);
    case 'Metaspace':
      return metaspace(c);
    case 'Split':
      return split(c);
    case 'Punctuation': {
      const behavior = behaviorOf(c, 'Isolated');
      return (ns) => ns.split(matchChars(ns, (cp) => (f[cp] & F_BERT_PUNCT) !== 0), behavior);
    }
    case 'Digits': {
      const individual = c.individual_digits === true;
      return (ns) =>
        ns.split(
          matchChars(ns, (cp) => cp >= 0x30 && cp <= 0x39),
          individual ? 'Isolated' : 'Contiguous',
        );
    }
    case 'CharDelimiterSplit': {
      const d = codePointsOf(typeof c.delimiter === 'string' ? c.delimiter : '');
      if (d.length !== 1) throw new ConfigError('tokenizer: CharDelimiterSplit needs a one-char delimiter');
      return (ns) => ns.split(matchChars(ns, (cp) => cp === d[0]), 'Removed');
    }
    case 'Sequence': {
      if (!Array.isArray(c.pretokenizers)) throw new ConfigError('tokenizer: Sequence pre-tokenizer needs a "pretokenizers" list');
      const steps = c.pretokenizers.map((p) => createPreTokenizer(p)).filter((p): p is PreTokenizer => p !== null);
      return (ns) => {
        let pieces = [ns];
        for (const step of steps) {
          const next: NormalizedString[] = [];
          for (const p of pieces) for (const q of step(p)) if (q.length > 0) next.push(q);
          pieces = next;
        }
        return pieces;
      };
    }
    default:
      throw new ConfigError(`tokenizer: unsupported pre-tokenizer "${String(c.type)}" (offsets cannot be computed)`);
  }
}
