/**
 * The tokenization models. Ids come from @huggingface/tokenizers (design decision 4): each
 * pre-token is handed to the library's WordPiece / BPE / Unigram model, and this layer only works
 * out which chars of the pre-token each returned token covers, the way the Rust reference reports
 * it (WordPiece: sub-word lengths, [UNK] covers the whole word; BPE: byte-fallback tokens such as
 * <0xE2> each carry their char's span, unknown chars fuse into one unk when fuse_unk; Unigram:
 * pieces, unknown pieces keep their text as token string like Rust).
 *
 * Results per distinct word are cached (bounded), which is where most of the time goes for
 * WordPiece on real text.
 */
import { type LibraryModel, library } from './library.ts';
import { BYTE_TO_CHAR } from './pre-tokenizers.ts';
import { ConfigError, InternalError } from '../errors.ts';

/** Tokens of one pre-token: ids, strings and [start, end) char ranges inside the pre-token. */
export interface WordTokens {
  ids: number[];
  tokens: string[];
  starts: number[];
  ends: number[];
}

export interface TokenModel {
  readonly kind: 'WordPiece' | 'BPE' | 'Unigram';
  readonly vocabSize: number;
  tokenToId(token: string): number | undefined;
  idToToken(id: number): string | undefined;
  tokenizeWord(word: string, length: number): WordTokens;
}

type Json = Record<string, unknown>;

const WORD_CACHE_LIMIT = 50_000;
/** Longer words are rare and would make the cache heavy. */
const CACHED_WORD_LENGTH = 128;

function cpLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0xd800 || c > 0xdbff || i + 1 >= s.length) n++;
    else {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
      n++;
    }
  }
  return n;
}

/** Rust's model type inference for files written without `model.type`. */
export function modelType(model: Json): string {
  if (typeof model.type === 'string') return model.type;
  if (Array.isArray(model.vocab)) return 'Unigram';
  if ('merges' in model) return 'BPE';
  if ('continuing_subword_prefix' in model || 'max_input_chars_per_word' in model) return 'WordPiece';
  if (model.vocab && typeof model.vocab === 'object') return 'WordLevel';
  return 'unknown';
}

/** The vocabulary lookups every model shares, and per-word results (shared by reference: callers must not modify them). */
abstract class CachedModel {
  readonly vocabSize: number;
  protected readonly vocab: Map<string, number>;
  private readonly tokensById: string[];
  private cache = new Map<string, WordTokens>();

  constructor(vocab: Map<string, number>, tokensById: string[], vocabSize = tokensById.length) {
    this.vocab = vocab;
    this.tokensById = tokensById;
    this.vocabSize = vocabSize;
  }

  tokenToId(token: string): number | undefined {
    return this.vocab.get(token);
  }

  idToToken(id: number): string | undefined {
    return this.tokensById[id];
  }

  protected abstract compute(word: string, length: number): WordTokens;

  tokenizeWord(word: string, length: number): WordTokens {
    if (word.length > CACHED_WORD_LENGTH) return this.compute(word, length);
    let r = this.cache.get(word);
    if (r === undefined) {
      r = this.compute(word, length);
      if (this.cache.size >= WORD_CACHE_LIMIT) this.cache.clear();
      this.cache.set(word, r);
    }
    return r;
  }
}

function vocabObject(model: Json, name: string): Record<string, number> {
  const vocab = model.vocab;
  if (!vocab || typeof vocab !== 'object' || Array.isArray(vocab)) {
    throw new ConfigError(`tokenizer: ${name} model needs a vocab object`);
  }
  return vocab as Record<string, number>;
}

/**
 * The vocabulary the library model built from the vocab object (its token → id map and id → token array), its ids
 * checked: building a second map of a 30k-token vocabulary cost as much again as the library's (~40 ms of a
 * BERT tokenizer's load, docs/benchmarks.md, session 10), and a map is quicker to check than the object.
 */
function libraryVocab(lib: LibraryModel, name: string): [Map<string, number>, string[]] {
  for (const id of lib.tokens_to_ids.values()) {
    if (!Number.isInteger(id) || id < 0) throw new ConfigError(`tokenizer: ${name} vocab has a non-integer id`);
  }
  return [lib.tokens_to_ids, lib.vocab];
}

class WordPieceModel extends CachedModel implements TokenModel {
  readonly kind = 'WordPiece' as const;
  private readonly lib: LibraryModel;
  private readonly unk: string;
  private readonly unkId: number;
  private readonly prefixLength: number;

  constructor(model: Json) {
    const vocab = vocabObject(model, 'WordPiece');
    const unk = model.unk_token ?? '[UNK]';
    if (typeof unk !== 'string') throw new ConfigError('tokenizer: WordPiece unk_token must be a string');
    const prefix = model.continuing_subword_prefix ?? '##';
    if (typeof prefix !== 'string') throw new ConfigError('tokenizer: WordPiece continuing_subword_prefix must be a string');
    const maxChars = model.max_input_chars_per_word ?? 100;
    if (!Number.isInteger(maxChars)) throw new ConfigError('tokenizer: WordPiece max_input_chars_per_word must be an integer');
    const lib = new library.WordPiece({
      type: 'WordPiece',
      vocab,
      unk_token: unk,
      continuing_subword_prefix: prefix,
      max_input_chars_per_word: maxChars,
    });
    const [ids, tokens] = libraryVocab(lib, 'WordPiece');
    super(ids, tokens, ids.size);
    if (!this.vocab.has(unk)) throw new ConfigError(`tokenizer: WordPiece unk_token "${unk}" is not in the vocab`);
    this.lib = lib;
    this.unk = unk;
    this.unkId = this.vocab.get(unk) as number;
    this.prefixLength = cpLength(prefix);
  }

  protected compute(word: string, length: number): WordTokens {
    const tokens = callModel(this.lib, word);
    if (tokens.length === 1) {
      const t = tokens[0];
      return { ids: [t === this.unk ? this.unkId : (this.vocab.get(t) as number)], tokens: [t], starts: [0], ends: [length] };
    }
    const r: WordTokens = { ids: [], tokens: [], starts: [], ends: [] };
    let pos = 0;
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      const id = this.vocab.get(t);
      if (id === undefined || t === this.unk) throw new InternalError(`tokenizer: WordPiece returned an unexpected token "${t}"`);
      const len = cpLength(t) - (i > 0 ? this.prefixLength : 0);
      r.ids.push(id);
      r.tokens.push(t);
      r.starts.push(pos);
      pos += len;
      r.ends.push(pos);
    }
    if (pos !== length) throw new InternalError(`tokenizer: WordPiece pieces of "${word}" do not cover the word`);
    return r;
  }
}

const BYTE_TOKEN = /^<0x[0-9A-F]{2}>$/;

class BpeModel extends CachedModel implements TokenModel {
  readonly kind = 'BPE' as const;
  private readonly lib: LibraryModel;
  private readonly unk: string | null;
  private readonly fuseUnk: boolean;
  private readonly byteFallback: boolean;
  private readonly suffix: string;
  private readonly encoder = new TextEncoder();

  constructor(model: Json) {
    const vocab = vocabObject(model, 'BPE');
    if (!Array.isArray(model.merges)) throw new ConfigError('tokenizer: BPE model needs a merges array');
    for (const m of model.merges) {
      const ok =
        (typeof m === 'string' && m.split(' ').length === 2) ||
        (Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && typeof m[1] === 'string');
      if (!ok) throw new ConfigError('tokenizer: BPE merges must be "a b" strings or [a, b] pairs');
    }
    if (model.dropout !== undefined && model.dropout !== null && model.dropout !== 0) {
      throw new ConfigError('tokenizer: unsupported BPE option "dropout" (random, offsets cannot be reproduced)');
    }
    if (typeof model.continuing_subword_prefix === 'string' && model.continuing_subword_prefix !== '') {
      throw new ConfigError('tokenizer: unsupported BPE option "continuing_subword_prefix" (the id library ignores it)');
    }
    const suffix = model.end_of_word_suffix;
    if (suffix !== undefined && suffix !== null && typeof suffix !== 'string') {
      throw new ConfigError('tokenizer: BPE end_of_word_suffix must be a string');
    }
    if (model.continuing_subword_suffix !== undefined && model.continuing_subword_suffix !== null) {
      throw new ConfigError('tokenizer: unsupported BPE option "continuing_subword_suffix"');
    }
    const unk = model.unk_token ?? null;
    if (unk !== null && typeof unk !== 'string') throw new ConfigError('tokenizer: BPE unk_token must be a string or null');
    const knownUnk = unk !== null && Object.hasOwn(vocab, unk) ? unk : null;
    const lib = new library.BPE({ ...model, type: 'BPE', unk_token: knownUnk });
    const [ids, tokens] = libraryVocab(lib, 'BPE');
    super(ids, tokens, ids.size);
    this.lib = lib;
    this.unk = knownUnk;
    this.fuseUnk = model.fuse_unk === true;
    this.byteFallback = model.byte_fallback === true;
    this.suffix = typeof suffix === 'string' ? suffix : '';
    if (this.byteFallback) {
      for (let b = 0; b < 256; b++) {
        if (!this.vocab.has(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`)) {
          // Rust then emits a pending unk after later byte tokens; the id library does not
          throw new ConfigError('tokenizer: unsupported BPE byte_fallback with an incomplete <0x00>..<0xFF> vocab');
        }
      }
    }
  }

  /**
   * Without unk token or byte fallback, Rust drops unknown chars and then merges the chars on both
   * sides of them, which the id library does not: only safe when nothing can be unknown.
   */
  get mayDropChars(): boolean {
    return this.unk === null && !this.byteFallback;
  }

  /**
   * Whether the vocab has the byte-level char of every byte that UTF-8 text can contain (all but
   * 0xC0, 0xC1, 0xF5..0xFF), so that no byte-level pre-token holds an unknown char.
   */
  coversByteLevelAlphabet(alphabet: readonly number[]): boolean {
    for (let b = 0; b < 256; b++) {
      if (b === 0xc0 || b === 0xc1 || b >= 0xf5) continue;
      if (!this.known(String.fromCodePoint(alphabet[b]), false)) return false;
    }
    return true;
  }

  /** Whether Rust's merge_word finds this char (with the end-of-word suffix when last) in the vocab. */
  private known(ch: string, last: boolean): boolean {
    return this.vocab.has(last && this.suffix ? ch + this.suffix : ch);
  }

  /** Whether byte fallback can spell this char (all its <0xXX> tokens are in the vocab). */
  private spellable(ch: string): boolean {
    if (!this.byteFallback) return false;
    for (const b of this.encoder.encode(ch)) {
      if (!this.vocab.has(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`)) return false;
    }
    return true;
  }

  /** A char Rust cannot tokenize: it becomes the unk token, or disappears without one. */
  private unknown(chars: string[], pos: number): boolean {
    const ch = chars[pos];
    return !this.known(ch, pos === chars.length - 1) && !this.spellable(ch);
  }

  protected compute(word: string, length: number): WordTokens {
    const tokens = callModel(this.lib, word);
    const chars = Array.from(word);
    const r: WordTokens = { ids: [], tokens: [], starts: [], ends: [] };
    let pos = 0;
    let u16 = 0; // UTF-16 index of chars[pos] in word
    const advance = (to: number): void => {
      while (pos < to) u16 += chars[pos++].length;
    };
    let pendingBytes = 0; // byte-fallback tokens still owed to chars[pos]
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      const id = this.vocab.get(t);
      if (id === undefined) throw new InternalError(`tokenizer: BPE returned a token outside the vocab: "${t}"`);
      if (pendingBytes === 0) {
        if (t === this.unk && pos < length && this.unknown(chars, pos)) {
          // unknown char(s): one unk, or one per run of unknown chars with fuse_unk
          let end = pos + 1;
          if (this.fuseUnk) while (end < length && this.unknown(chars, end)) end++;
          push(r, id, t, pos, end);
          advance(end);
          continue;
        }
        // a real token: its text is the next chars of the word (the suffix ends the last one)
        let text = t;
        if (this.suffix && i === tokens.length - 1 && text.endsWith(this.suffix)) text = text.slice(0, -this.suffix.length);
        if (text.length > 0 && word.startsWith(text, u16)) {
          const n = cpLength(text);
          push(r, id, t, pos, pos + n);
          advance(pos + n);
          continue;
        }
        if (!(this.byteFallback && BYTE_TOKEN.test(t) && pos < length)) {
          throw new InternalError(`tokenizer: cannot align BPE token "${t}" with "${word}"`);
        }
        pendingBytes = this.encoder.encode(chars[pos]).length;
      }
      push(r, id, t, pos, pos + 1);
      pendingBytes--;
      if (pendingBytes === 0) advance(pos + 1);
    }
    if (pos !== length || pendingBytes !== 0) throw new InternalError(`tokenizer: BPE tokens of "${word}" do not cover the word`);
    return r;
  }

}

/** The library's model entry point (`_call`: encode, then fuse_unk when the model asks for it). */
function callModel(lib: LibraryModel, word: string): string[] {
  return lib([word]);
}

type UnigramLibraryModel = LibraryModel & { tokenize(word: string): string[]; unk_token_id: number };

/**
 * Unknown pieces fused as the library Unigram's `_call` does after its Viterbi (its fuse_unk), without its
 * `push(...pieces)`, which overflows the stack on a word of ~100k pieces and more.
 */
function fuseUnknown(pieces: readonly string[], lib: UnigramLibraryModel): string[] {
  const ids = lib.tokens_to_ids;
  const unk = lib.unk_token_id;
  const fused: string[] = [];
  for (let i = 0; i < pieces.length; ) {
    const first = pieces[i];
    if ((ids.get(first) ?? unk) !== unk) {
      fused.push(first);
      i++;
      continue;
    }
    const run = [first];
    while (++i < pieces.length && (ids.get(pieces[i]) ?? unk) === unk) run.push(pieces[i]);
    // the library appends to a run unless it starts with the unknown token's own text (then it drops the rest);
    // joined once here: appending one char at a time re-hashed the growing string at every step
    fused.push(ids.get(first) === unk ? first : run.join(''));
  }
  return fused;
}

function push(r: WordTokens, id: number, t: string, s: number, e: number): void {
  r.ids.push(id);
  r.tokens.push(t);
  r.starts.push(s);
  r.ends.push(e);
}

class UnigramModel extends CachedModel implements TokenModel {
  readonly kind = 'Unigram' as const;
  private readonly lib: LibraryModel;
  private readonly unkId: number;
  /** Every char of every piece: a char outside it is an unknown piece on every path of the lattice. */
  private readonly pieceChars = new Set<number>();

  constructor(model: Json, eosToken: string | undefined) {
    const vocab = model.vocab;
    if (!Array.isArray(vocab) || vocab.length === 0) throw new ConfigError('tokenizer: Unigram model needs a non-empty vocab list');
    for (const entry of vocab) {
      if (!Array.isArray(entry) || typeof entry[0] !== 'string' || typeof entry[1] !== 'number') {
        throw new ConfigError('tokenizer: Unigram vocab entries must be [piece, score]');
      }
    }
    if (model.byte_fallback === true) throw new ConfigError('tokenizer: unsupported Unigram option "byte_fallback"');
    const unkId = model.unk_id;
    if (!Number.isInteger(unkId) || (unkId as number) < 0 || (unkId as number) >= vocab.length) {
      throw new ConfigError('tokenizer: unsupported Unigram model without a valid unk_id');
    }
    const pieces = vocab.map((e) => e[0] as string);
    const ids = new Map<string, number>();
    pieces.forEach((piece, i) => {
      if (!ids.has(piece)) ids.set(piece, i); // a repeated piece keeps its first id, as in Rust
    });
    super(ids, pieces);
    this.unkId = unkId as number;
    for (const piece of pieces) for (const char of piece) this.pieceChars.add(char.codePointAt(0)!);
    this.lib = new library.Unigram({ ...model, type: 'Unigram' }, eosToken ?? '</s>');
  }


  protected compute(word: string, length: number): WordTokens {
    const pieces = fuseUnknown(this.knownRuns(word).flatMap((run) => (run.known ? (this.lib as UnigramLibraryModel).tokenize(run.text) : [...run.text])), this.lib as UnigramLibraryModel);
    const r: WordTokens = { ids: [], tokens: [], starts: [], ends: [] };
    let pos = 0;
    for (const p of pieces) {
      const n = cpLength(p);
      push(r, this.vocab.get(p) ?? this.unkId, p, pos, pos + n);
      pos += n;
    }
    if (pos !== length) throw new InternalError(`tokenizer: Unigram pieces of "${word}" do not cover the word`);
    return r;
  }

  /**
   * The word in runs of chars that some piece holds and runs of chars none does. A char no piece holds is an unknown
   * node on every path of the Viterbi lattice, so the best path of the word is the best paths of the known runs
   * between such chars, each of them one unknown piece: the same pieces, without a lattice over a run of thousands of
   * unknown chars (a CJK text through an English vocabulary took seconds per 100k chars).
   */
  private knownRuns(word: string): { text: string; known: boolean }[] {
    const runs: { text: string; known: boolean }[] = [];
    let from = 0;
    let known: boolean | null = null;
    for (let i = 0; i < word.length; ) {
      const cp = word.codePointAt(i)!;
      const isKnown = this.pieceChars.has(cp);
      if (known !== null && isKnown !== known) {
        runs.push({ text: word.slice(from, i), known });
        from = i;
      }
      known = isKnown;
      i += cp > 0xffff ? 2 : 1;
    }
    if (known !== null) runs.push({ text: word.slice(from), known });
    return runs;
  }
}

/**
 * @param byteLevel whether a ByteLevel pre-tokenizer turns every pre-token into the byte-level alphabet
 */
export function createModel(model: unknown, eosToken: string | undefined, byteLevel = false): TokenModel {
  if (!model || typeof model !== 'object' || Array.isArray(model)) throw new ConfigError('tokenizer: "model" must be an object');
  const m = model as Json;
  const type = modelType(m);
  switch (type) {
    case 'WordPiece':
      return new WordPieceModel(m);
    case 'BPE': {
      const bpe = new BpeModel(m);
      if (bpe.mayDropChars && !(byteLevel && bpe.coversByteLevelAlphabet(BYTE_TO_CHAR))) {
        throw new ConfigError(
          'tokenizer: unsupported BPE without unk_token or byte_fallback outside a byte-level alphabet (Rust drops unknown chars and merges across them)',
        );
      }
      return bpe;
    }
    case 'Unigram':
      return new UnigramModel(m, eosToken);
    default:
      throw new ConfigError(`tokenizer: unsupported model "${type}" (no ids from @huggingface/tokenizers)`);
  }
}

