/**
 * Where a long text can be cut without changing its tokens, so that a text truncated to the model length is
 * tokenized only as far as the truncation needs (an 8 MiB input used to take seconds of the event loop to give 512
 * tokens) and a single-word BPE pipeline (no pre-tokenizer) runs its model piece by piece instead of on one word of
 * millions of chars.
 *
 * A cut is a raw position right before a single ASCII space that has an ASCII letter or digit on both sides
 * (`…word| word…`). For the pipelines accepted below, tokenizing the text before such a cut gives exactly the tokens
 * (ids, strings, offsets) the whole text gives there, because no step looks across it:
 *  - added tokens: none spans "alnum, space" and none with rstrip ends with an alnum, so the matches before the cut
 *    are the same;
 *  - normalizers: each works char by char (or grapheme by grapheme, with a space always a grapheme of its own) except
 *    at the ends of the text, and the text before the cut starts where the whole text starts and does not end in
 *    whitespace; Replace only with patterns that cannot match across an alnum and a space;
 *  - pre-tokenizer ("words"): some step splits at the (normalized) space, and the steps before it are char-local,
 *    so the pre-tokens before the cut are the same and the model sees the same words;
 *  - or no pre-tokenizer and a BPE model ("model"): no merge joins a symbol ending in an alnum with one starting with
 *    the normalized space, so BPE of the whole word is BPE of its pieces split before such spaces, concatenated.
 * Anything else (an unknown combination, a regex not reasoned about here) gets no cuts: it is tokenized whole, as
 * before. The proof is test/encoder/tokenizer-long-inputs.test.ts: every golden family on long texts against the
 * reference implementation.
 */
import type { AddedToken } from './added-vocabulary.ts';
import { type Normalizer, normalizeText } from './normalizers.ts';
import { BYTE_TO_CHAR } from './pre-tokenizers.ts';
import { codePointsOf } from './unicode.ts';

type Json = Record<string, unknown>;

/** How the pipeline may be cut: `space` is the code point the raw space becomes after the normalizer. */
export interface TextCuts {
  /** "words": a pre-tokenizer splits at every cut; "model": the text is one word that BPE may take piece by piece. */
  readonly kind: 'words' | 'model';
  readonly space: number;
}

const SPACE = 0x20;
const METASPACE = 0x2581;

function isAsciiAlnum(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
}

/**
 * The last cut of `text` at or before index `end` (UTF-16) and after `after`, or -1; cutting there keeps
 * text.slice(0, cut).
 */
export function lastCut(text: string, end: number, after = 0): number {
  for (let i = Math.min(end, text.length - 2); i > after; i--) {
    if (text.charCodeAt(i) === SPACE && isAsciiAlnum(text.charCodeAt(i - 1)) && isAsciiAlnum(text.charCodeAt(i + 1))) return i;
  }
  return -1;
}

/**
 * Positions (code points of the normalized word) where a "model" pipeline's word may be split for BPE: before each
 * normalized space that follows an ASCII alnum.
 */
export function modelPieceStarts(word: { length: number; at(i: number): number }, space: number): number[] {
  const starts: number[] = [];
  for (let i = 1; i < word.length; i++) {
    if (word.at(i) === space && isAsciiAlnum(word.at(i - 1))) starts.push(i);
  }
  return starts;
}

/** The cuts the pipeline of `json` allows, or null when it cannot be cut safely. */
export function textCutsOf(json: Json, normalizer: Normalizer | null, addedTokens: readonly AddedToken[]): TextCuts | null {
  if (!normalizerIsLocal(json.normalizer)) return null;
  const space = normalizedSpace(normalizer);
  if (space === undefined) return null;
  if (!addedTokensAllowCuts(addedTokens, normalizer, space)) return null;
  if (json.pre_tokenizer === null || json.pre_tokenizer === undefined) {
    return bpeAllowsPieces(json.model, space) ? { kind: 'model', space } : null;
  }
  return classifyPreTokenizer(json.pre_tokenizer, space).effect === 'split' ? { kind: 'words', space } : null;
}

/**
 * Whether, for a prefix of any text cut anywhere, the pre-tokens before the prefix's last one are those the whole text
 * gives there, away from the end (encoder-tokenizer.ts keeps a margin): the normalizer works char by char and the
 * pre-tokenizer's steps split left to right looking at most a char ahead. Any other step (an unknown regex, a
 * normalizer not reasoned about) makes a long text be read whole.
 */
export function prefixesAreFinal(json: Json): boolean {
  return normalizerIsLocal(json.normalizer) && preTokenizerIsLocal(json.pre_tokenizer);
}

function preTokenizerIsLocal(cfg: unknown): boolean {
  if (cfg === null || cfg === undefined) return true;
  const c = cfg as Json;
  switch (c.type) {
    case 'BertPreTokenizer':
    case 'Whitespace':
    case 'WhitespaceSplit':
    case 'CharDelimiterSplit':
    case 'Punctuation':
    case 'Digits':
    case 'Metaspace':
    case 'ByteLevel':
    case 'UnicodeScripts':
      return true;
    case 'Split': {
      const pattern = c.pattern as Json | undefined;
      if (c.invert === true) return false;
      if (typeof pattern?.String === 'string') return true;
      const regex = pattern?.Regex;
      return typeof regex === 'string' && (GPT_LIKE_SPLITS.has(regex) || regex === ' {2,}' || regex === '\\p{N}{1,3}');
    }
    case 'Sequence':
      return Array.isArray(c.pretokenizers) && c.pretokenizers.every(preTokenizerIsLocal);
    default:
      return false;
  }
}

/** Normalizers that work char by char (graphemes for Precompiled) away from the ends of the text. */
function normalizerIsLocal(cfg: unknown): boolean {
  if (cfg === null || cfg === undefined) return true;
  const c = cfg as Json;
  switch (c.type) {
    case 'BertNormalizer':
    case 'NFC':
    case 'NFD':
    case 'NFKC':
    case 'NFKD':
    case 'Lowercase':
    case 'StripAccents':
    case 'Strip':
    case 'Prepend':
    case 'Precompiled':
      return true;
    case 'Replace': {
      const pattern = c.pattern as Json | undefined;
      // one char cannot match across a cut; these regexes match whitespace only
      if (typeof pattern?.String === 'string') return codePointsOf(pattern.String).length === 1;
      return pattern?.Regex === ' {2,}' || pattern?.Regex === '\\s+';
    }
    case 'Sequence':
      return Array.isArray(c.normalizers) && c.normalizers.every(normalizerIsLocal);
    default:
      return false;
  }
}

/**
 * What the normalizer makes of a space between two alnums (a space or ▁, anything else is refused), checking that it
 * keeps every ASCII alnum an ASCII alnum (lowercasing, say) and the space one char.
 */
function normalizedSpace(normalizer: Normalizer | null): number | undefined {
  for (let c = 0x30; c <= 0x7a; c++) {
    if (!isAsciiAlnum(c)) continue;
    const cps = codePointsOf(normalizeText(normalizer, String.fromCharCode(c)));
    if (cps.length === 0 || !isAsciiAlnum(cps[cps.length - 1])) return undefined;
  }
  const probe = codePointsOf(normalizeText(normalizer, 'a b'));
  const n = probe.length;
  if (n < 3 || probe[n - 3] !== 0x61 || probe[n - 1] !== 0x62) return undefined;
  const space = probe[n - 2];
  return space === SPACE || space === METASPACE ? space : undefined;
}

/** No added token can match across a cut, nor swallow the space after one (rstrip after an alnum). */
function addedTokensAllowCuts(tokens: readonly AddedToken[], normalizer: Normalizer | null, space: number): boolean {
  return tokens.every((token) => {
    const matched = codePointsOf(token.normalized ? normalizeText(normalizer, token.content) : token.content);
    const after = token.normalized ? space : SPACE;
    for (let i = 0; i + 1 < matched.length; i++) {
      if (isAsciiAlnum(matched[i]) && (matched[i + 1] === after || matched[i + 1] === SPACE)) return false;
    }
    return !(token.rstrip && matched.length > 0 && isAsciiAlnum(matched[matched.length - 1]));
  });
}

/**
 * "split": pre-tokens end at every cut; "neutral": char-local, pieces before the cut unchanged and the piece across
 * it only shortened; "unsafe": anything else. `space` is what the cut's space is when the step sees it (ByteLevel
 * and Metaspace change it for the steps after them).
 */
type Effect = 'split' | 'neutral' | 'unsafe';

const GPT_LIKE_SPLITS = new Set([
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  '\\s+',
]);

function classifyPreTokenizer(cfg: unknown, space: number): { effect: Effect; space: number } {
  const c = (cfg ?? {}) as Json;
  const onSpace = (effect: Effect): { effect: Effect; space: number } => ({ effect: space === SPACE ? effect : 'unsafe', space });
  switch (c.type) {
    case 'BertPreTokenizer':
    case 'WhitespaceSplit':
    case 'Whitespace':
      return onSpace('split');
    case 'CharDelimiterSplit':
      return { effect: typeof c.delimiter === 'string' && codePointsOf(c.delimiter)[0] === space ? 'split' : 'neutral', space };
    case 'Punctuation':
    case 'Digits':
      return { effect: 'neutral', space };
    case 'Metaspace': {
      const replacement = codePointsOf(typeof c.replacement === 'string' ? c.replacement : '\u2581')[0];
      const becomes = space === SPACE ? replacement : space;
      if (c.split === false) return { effect: 'neutral', space: becomes };
      return { effect: becomes === replacement ? 'split' : 'unsafe', space: becomes };
    }
    case 'ByteLevel': {
      if (c.use_regex === false) return { effect: 'neutral', space: space < 0x80 ? BYTE_TO_CHAR[space] : space };
      return onSpace('split');
    }
    case 'Split': {
      const pattern = c.pattern as Json | undefined;
      const behavior = c.behavior ?? 'Isolated';
      if (c.invert === true) return { effect: 'unsafe', space };
      if (typeof pattern?.Regex === 'string') {
        if (GPT_LIKE_SPLITS.has(pattern.Regex) && (behavior === 'Isolated' || behavior === 'Removed')) return onSpace('split');
        // matches of these never hold an alnum or a lone space
        if (pattern.Regex === ' {2,}' || pattern.Regex === '\\p{N}{1,3}') return { effect: 'neutral', space };
        return { effect: 'unsafe', space };
      }
      if (typeof pattern?.String === 'string') {
        const cps = codePointsOf(pattern.String);
        if (cps.length === 1 && cps[0] === space && (behavior === 'Isolated' || behavior === 'Removed')) return { effect: 'split', space };
        if (cps.length > 0 && !cps.some((p) => isAsciiAlnum(p) || p === space)) return { effect: 'neutral', space };
      }
      return { effect: 'unsafe', space };
    }
    case 'Sequence': {
      if (!Array.isArray(c.pretokenizers)) return { effect: 'unsafe', space };
      let current = space;
      let effect: Effect = 'neutral';
      for (const step of c.pretokenizers) {
        // once the pre-tokens end at the cut, later steps only see pieces that are the same in both texts
        if (effect === 'split') break;
        const result = classifyPreTokenizer(step, current);
        if (result.effect === 'unsafe') return result;
        effect = result.effect;
        current = result.space;
      }
      return { effect, space: current };
    }
    default:
      return { effect: 'unsafe', space };
  }
}

/** BPE whose merges never join a symbol ending in an ASCII alnum with one starting with `space`. */
function bpeAllowsPieces(model: unknown, space: number): boolean {
  const m = (model ?? {}) as Json;
  const isBpe = m.type === 'BPE' || (m.type === undefined && 'merges' in m);
  if (!isBpe || !Array.isArray(m.merges) || m.ignore_merges === true) return false;
  if (typeof m.end_of_word_suffix === 'string' && m.end_of_word_suffix !== '') return false;
  // an unknown space could fuse with an unknown char before it (fuse_unk)
  const vocab = m.vocab as Json | undefined;
  if (!vocab || typeof vocab !== 'object' || !(String.fromCodePoint(space) in vocab)) return false;
  return m.merges.every((merge) => {
    const [left, right] = typeof merge === 'string' ? merge.split(' ') : (merge as string[]);
    const last = left.codePointAt(left.length - 1) ?? 0;
    return !(isAsciiAlnum(last) && right.codePointAt(0) === space);
  });
}
