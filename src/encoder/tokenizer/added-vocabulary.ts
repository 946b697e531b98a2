/**
 * Added tokens (special and not), split out of the text before the model runs, as the Rust
 * reference's `AddedVocabulary` does: first the tokens with `normalized: false` on the raw text,
 * then the `normalized: true` ones (matched in their normalized form) on each normalized remainder.
 * Matching is leftmost-longest and non-overlapping (Aho-Corasick LeftmostLongest), then the
 * `single_word`, `lstrip` and `rstrip` flags widen or drop each match; a stripped match covers the
 * whitespace, and its token string is the matched text, like the reference.
 */
import { ConfigError } from '../errors.ts';
import type { NormalizedString } from './normalized-string.ts';
import { type Normalizer, normalizeText } from './normalizers.ts';
import type { TokenModel } from './models.ts';
import { codePointsOf, isWhitespace } from './unicode.ts';

export interface AddedToken {
  id: number;
  content: string;
  singleWord: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
  special: boolean;
}

interface TrieNode {
  next: Map<number, TrieNode>;
  /** index of the pattern ending here (lowest wins on duplicates) */
  pattern: number;
}

class PatternTrie {
  readonly root: TrieNode = { next: new Map(), pattern: -1 };
  readonly tokens: AddedToken[] = [];
  /** first code points of the patterns, one bit each below 0x10000; astral ones in a set */
  readonly firstBmp = new Uint8Array(0x2000);
  readonly firstAstral = new Set<number>();

  add(pattern: number[], token: AddedToken): void {
    if (pattern.length === 0) return;
    let node = this.root;
    for (const c of pattern) {
      let n = node.next.get(c);
      if (!n) {
        n = { next: new Map(), pattern: -1 };
        node.next.set(c, n);
      }
      node = n;
    }
    if (node.pattern < 0) node.pattern = this.tokens.length;
    this.tokens.push(token);
    const c = pattern[0];
    if (c < 0x10000) this.firstBmp[c >> 3] |= 1 << (c & 7);
    else this.firstAstral.add(c);
  }

  get empty(): boolean {
    return this.tokens.length === 0;
  }
}

const WORD_CHAR = /^[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]$/u;

function isWordChar(cp: number): boolean {
  return WORD_CHAR.test(String.fromCodePoint(cp));
}

/** A piece of the input: its string, and the added token it is when it is one. */
export interface Split {
  ns: NormalizedString;
  token: AddedToken | null;
}

export class AddedVocabulary {
  readonly tokens: AddedToken[];
  private readonly byId = new Map<number, AddedToken>();
  private readonly byContent = new Map<string, number>();
  private readonly raw = new PatternTrie();
  private readonly normalized = new PatternTrie();

  constructor(spec: unknown, model: TokenModel, normalizer: Normalizer | null) {
    if (spec === undefined || spec === null) spec = [];
    if (!Array.isArray(spec)) throw new ConfigError('tokenizer: "added_tokens" must be a list');
    const special: AddedToken[] = [];
    const classic: AddedToken[] = [];
    const specialSet = new Set<string>();
    const parsed: AddedToken[] = spec.map((t, i) => {
      if (!t || typeof t !== 'object') throw new ConfigError(`tokenizer: added_tokens[${i}] must be an object`);
      const o = t as Record<string, unknown>;
      if (typeof o.content !== 'string') throw new ConfigError(`tokenizer: added_tokens[${i}] needs a string content`);
      const b = (k: string, d: boolean): boolean => (typeof o[k] === 'boolean' ? (o[k] as boolean) : d);
      const isSpecial = b('special', false);
      return {
        id: Number.isInteger(o.id) ? (o.id as number) : -1,
        content: o.content,
        singleWord: b('single_word', false),
        lstrip: b('lstrip', false),
        rstrip: b('rstrip', false),
        normalized: b('normalized', !isSpecial),
        special: isSpecial,
      };
    });
    // Rust AddedVocabulary::add_tokens: ids come from the added map, then the model, then the next free id
    for (const tok of parsed) {
      if (tok.special && tok.content !== '' && !specialSet.has(tok.content)) {
        specialSet.add(tok.content);
        special.push(tok);
      }
    }
    for (const tok of parsed) {
      if (tok.content === '') continue;
      let id = this.byContent.get(tok.content) ?? model.tokenToId(tok.content);
      if (id === undefined) {
        let max = -1;
        for (const v of this.byContent.values()) max = Math.max(max, v);
        id = max < 0 ? model.vocabSize : max >= model.vocabSize || model.vocabSize === 0 ? max + 1 : model.vocabSize;
      }
      const resolved = { ...tok, id };
      this.byContent.set(tok.content, id);
      this.byId.set(id, resolved);
      if (!specialSet.has(tok.content)) classic.push(resolved);
      else {
        const k = special.findIndex((s) => s.content === tok.content);
        if (k >= 0) special[k] = resolved;
      }
    }
    this.tokens = [...this.byId.values()];
    for (const tok of [...special, ...classic]) {
      const current = this.byId.get(this.byContent.get(tok.content) as number) as AddedToken;
      if (tok.normalized) this.normalized.add(codePointsOf(normalizeText(normalizer, tok.content)), current);
      else this.raw.add(codePointsOf(tok.content), current);
    }
  }

  tokenToId(content: string): number | undefined {
    return this.byContent.get(content);
  }

  idToToken(id: number): string | undefined {
    return this.byId.get(id)?.content;
  }

  hasRawPatterns(): boolean {
    return !this.raw.empty;
  }

  /** Split on the `normalized: false` tokens (raw text). */
  splitRaw(ns: NormalizedString, out: Split[]): void {
    this.splitWith(ns, this.raw, out);
  }

  /** Split on the `normalized: true` tokens (text already normalized). */
  splitNormalized(ns: NormalizedString, out: Split[]): void {
    this.splitWith(ns, this.normalized, out);
  }

  private splitWith(ns: NormalizedString, trie: PatternTrie, out: Split[]): void {
    const n = ns.length;
    if (trie.empty || n === 0) {
      if (n > 0) out.push({ ns, token: null });
      return;
    }
    const cps = ns.codePoints();
    let startOffset = 0;
    let i = 0;
    while (i < n) {
      const c0 = cps[i];
      if (c0 < 0x10000 ? (trie.firstBmp[c0 >> 3] & (1 << (c0 & 7))) === 0 : !trie.firstAstral.has(c0)) {
        i++;
        continue;
      }
      // longest pattern starting at i
      let node: TrieNode | undefined = trie.root;
      let best = -1;
      let bestEnd = -1;
      for (let j = i; j < n; j++) {
        node = node.next.get(cps[j]);
        if (!node) break;
        if (node.pattern >= 0) {
          best = node.pattern;
          bestEnd = j + 1;
        }
      }
      if (best < 0) {
        i++;
        continue;
      }
      let start = i;
      let stop = bestEnd;
      i = bestEnd; // non-overlapping: the search resumes after the match, kept or not
      const tok = trie.tokens[best];
      if (tok.singleWord) {
        const startSpace = start === 0 || !isWordChar(cps[start - 1]);
        const stopSpace = stop === n || !isWordChar(cps[stop]);
        if (!startSpace || !stopSpace) continue;
      }
      if (tok.lstrip) {
        let s = start;
        while (s > 0 && isWhitespace(cps[s - 1])) s--;
        start = Math.max(s, startOffset);
      }
      if (tok.rstrip) {
        while (stop < n && isWhitespace(cps[stop])) stop++;
      }
      if (startOffset < start) out.push({ ns: ns.slice(startOffset, start), token: null });
      out.push({ ns: ns.slice(start, stop), token: tok });
      startOffset = stop;
    }
    if (startOffset !== n) out.push({ ns: ns.slice(startOffset, n), token: null });
  }
}
