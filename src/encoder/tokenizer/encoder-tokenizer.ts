/**
 * The tokenizer of the encoder server: tokenizer.json in, ids + code-point offsets + tensors out.
 *
 * Pipeline (that of the Rust reference, `TokenizerImpl::encode_char_offsets`):
 *   added tokens with normalized=false split off the raw text
 *   -> normalizer on each remaining piece -> added tokens with normalized=true split off
 *   -> pre-tokenizer -> model (ids from @huggingface/tokenizers) -> offsets mapped back through
 *      the alignments -> truncation -> post-processor (special tokens, offset trimming) -> padding.
 *
 * Offsets are Unicode code points of the input string (Rust char indices), never UTF-16 units.
 *
 * What the server uses: `encode` truncates to `maxLength` (the model's, else tokenizer_config.json's) at the side
 * and with the strategy of TokenizerOptions.truncation (encoderfile's `tokenizer:` block; default right) and never
 * pads; `encodePair` does the same for a text pair (a cross-encoder's query and document) with the
 * post-processor's pair form; batches are padded by `pad` to their longest member. `encodeWindows` adds HF's
 * overflowing windows (the stride). The truncation and padding stored in tokenizer.json are ignored there, but
 * `encodeWith(text, fileSettings(), pair?)` reproduces them exactly (that is how the golden files' own configuration
 * is checked).
 */
import { ConfigError, InputError } from '../errors.ts';
import { AddedVocabulary, type Split } from './added-vocabulary.ts';
import { type TokenModel, createModel } from './models.ts';
import { NormalizedString } from './normalized-string.ts';
import { type Normalizer, createNormalizer } from './normalizers.ts';
import {
  NO_PAIR_TEMPLATE,
  type PadSpec,
  type PostProcessor,
  type WorkEncoding,
  createPostProcessor,
  padTo,
  postProcess,
} from './post-processors.ts';
import { type PreTokenizer, createPreTokenizer } from './pre-tokenizers.ts';
import { type TextCuts, lastCut, modelPieceStarts, prefixesAreFinal, textCutsOf } from './text-cuts.ts';
import {
  type ContentEncoding,
  FILE_DIRECTIONS,
  FILE_STRATEGIES,
  type TruncationDirection,
  type TruncationStrategy,
  sliceEncoding,
  tokenizeLimit,
  truncateEncodings,
} from './truncation.ts';
import type { WordTokens } from './models.ts';
import { library } from './library.ts';

export type { TruncationDirection, TruncationStrategy } from './truncation.ts';

export interface Encoding {
  /** token ids including special tokens */
  ids: number[];
  /** token strings as the reference gives them */
  tokens: string[];
  /** code-point offsets into the input; [0, 0] for special tokens */
  offsets: [number, number][];
  typeIds: number[];
  /** 1 for special tokens added by the post-processor (and padding) */
  specialTokensMask: number[];
  attentionMask: number[];
}

/** Ready for onnxruntime: row-major [batchSize, sequenceLength]. */
export interface PaddedBatch {
  batchSize: number;
  sequenceLength: number;
  inputIds: BigInt64Array;
  attentionMask: BigInt64Array;
  tokenTypeIds: BigInt64Array;
}

export interface TruncationSettings {
  /** total length including special tokens */
  maxLength: number;
  /**
   * Which text of a pair loses tokens (HF's TruncationStrategy), default longest_first. A single text is cut on the
   * right, except that only_second refuses one that is too long (as HF does).
   */
  strategy?: TruncationStrategy;
  /** Which end of a text is cut (HF's direction): right (default) keeps the start, left keeps the end. */
  direction?: TruncationDirection;
  /**
   * Tokens each overflowing window repeats from the one before (HF's stride, default 0); the windows are what
   * `encodeWindows` returns after the first. Must be below max_length less the special tokens when a text is cut.
   */
  stride?: number;
}

/** How the server cuts texts longer than its maximum length (encoderfile's `tokenizer:` block); default right, longest_first, 0. */
export interface TextTruncation {
  direction: TruncationDirection;
  strategy: TruncationStrategy;
  stride: number;
}

export interface PaddingSettings {
  /** 'longest' pads a single encode to its own length (BatchLongest on a batch of one) */
  strategy: 'longest' | { fixed: number };
  padToMultipleOf?: number;
  padId: number;
  padToken: string;
  padTypeId: number;
}

export interface EncodeSettings {
  truncation: TruncationSettings | null;
  padding: PaddingSettings | null;
}

export interface TokenizerOptions {
  /**
   * The model's maximum length (src/encoder/max-length.ts: what its graph runs, reconciled with config.json and
   * tokenizer_config.json), which `encode` truncates to; default: tokenizer_config.json's model_max_length, else 512.
   */
  maxLength?: number;
  /** How `encode` and `encodePair` cut a text longer than maxLength; default right, longest_first, stride 0. */
  truncation?: TextTruncation;
}

/** model_max_length above this is HF's "no limit" sentinel (1e30) or nonsense: the default applies. */
const MAX_SANE_LENGTH = 1_000_000;
const DEFAULT_MAX_LENGTH = 512;
/**
 * A text truncated to `limit` tokens is first tokenized up to a cut near `limit * PREFIX_CHARS_PER_TOKEN` chars (at
 * least MIN_PREFIX), then four times as far while that is not enough (text-cuts.ts).
 */
const PREFIX_CHARS_PER_TOKEN = 8;
const MIN_PREFIX = 4096;
/**
 * Pre-tokens and word pieces that end within this many code points of the end of a prefix may differ from what the
 * whole text gives there (a normalizer composing across the cut, a regex looking one char ahead, BPE merges near the
 * end of a word): a prefix's tokens count only up to there.
 */
const PREFIX_MARGIN = 64;
/** A word longer than this (code points) is tokenized in growing prefixes when only its first tokens are kept. */
const LONG_WORD = 2048;
/** Past this many code points (or 24 per token needed) a long word's first tokens are taken from a prefix unchecked (longWordTokens). */
const SETTLE_LIMIT = 16_384;

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parseJson(v: unknown, what: string): unknown {
  if (typeof v !== 'string' && !(v instanceof Uint8Array)) return v;
  try {
    return JSON.parse(typeof v === 'string' ? v : new TextDecoder().decode(v));
  } catch (cause) {
    throw new ConfigError(`${what} is not valid JSON`, { cause });
  }
}

/** Whether the pre-tokenizer config contains a ByteLevel step (possibly inside a Sequence). */
function hasByteLevel(cfg: unknown): boolean {
  if (!isObject(cfg)) return false;
  if (cfg.type === 'ByteLevel') return true;
  return cfg.type === 'Sequence' && Array.isArray(cfg.pretokenizers) && cfg.pretokenizers.some(hasByteLevel);
}

export class EncoderTokenizer {
  /** TokenizerOptions.maxLength, else model_max_length of tokenizer_config.json when it is a sane integer, else 512 */
  readonly maxLength: number;
  /** How `encode` and `encodePair` cut (TokenizerOptions.truncation). */
  readonly truncation: TextTruncation;
  private readonly model: TokenModel;
  private readonly normalizer: Normalizer | null;
  private readonly preTokenizer: PreTokenizer | null;
  private readonly postProcessor: PostProcessor | null;
  private readonly added: AddedVocabulary;
  /** Where long texts may be cut without changing their tokens; null when the pipeline cannot be cut. */
  private readonly cuts: TextCuts | null;
  /** Whether a prefix of a text gives the whole text's pre-tokens up to its last one (prefix-safety.ts). */
  private readonly prefixesAreFinal: boolean;
  private readonly padSpec: PadSpec;
  private readonly fileTruncation: TruncationSettings | null = null;
  private readonly filePadding: PaddingSettings | null = null;
  /** Why the truncation / padding of tokenizer.json cannot be reproduced (they are not used by `encode`). */
  private readonly fileSettingsProblem: string | null = null;
  private readonly sourceJson: Json;
  private readonly sourceConfig: Json | null;
  /** @huggingface/tokenizers' own tokenizer, made at the first `decode` (its decoders are what decoding needs). */
  private decoder: InstanceType<typeof library.Tokenizer> | null = null;

  private constructor(json: Json, config: Json | null, options: TokenizerOptions) {
    this.sourceJson = json;
    this.sourceConfig = config;
    const eos = config && typeof config.eos_token === 'string' ? config.eos_token : undefined;
    this.model = createModel(json.model, eos, hasByteLevel(json.pre_tokenizer));
    this.normalizer = createNormalizer(json.normalizer);
    this.preTokenizer = createPreTokenizer(json.pre_tokenizer);
    this.postProcessor = createPostProcessor(json.post_processor);
    this.added = new AddedVocabulary(json.added_tokens, this.model, this.normalizer);
    this.cuts = textCutsOf(json, this.normalizer, this.added.tokens);
    this.prefixesAreFinal = prefixesAreFinal(json);
    try {
      this.fileTruncation = this.parseTruncation(json.truncation);
      this.filePadding = this.parsePadding(json.padding);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      this.fileSettingsProblem = error.message;
    }

    const mml = config?.model_max_length;
    this.maxLength =
      options.maxLength ?? (typeof mml === 'number' && Number.isInteger(mml) && mml > 0 && mml <= MAX_SANE_LENGTH ? mml : DEFAULT_MAX_LENGTH);
    if (this.maxLength <= this.addedTokens()) {
      const what = options.maxLength === undefined ? 'model_max_length' : "the model's maximum length";
      throw new ConfigError(`tokenizer: ${what} ${this.maxLength} leaves no room next to the special tokens`);
    }
    this.padSpec = this.resolvePad(config);
    this.truncation = options.truncation ?? { direction: 'right', strategy: 'longest_first', stride: 0 };
    const room = this.maxLength - this.addedTokens();
    if (!(Number.isSafeInteger(this.truncation.stride) && this.truncation.stride >= 0 && this.truncation.stride < room)) {
      throw new ConfigError(`tokenizer: stride ${this.truncation.stride} must be at least 0 and below ${room}, the tokens a window holds besides the special tokens (max length ${this.maxLength})`);
    }
  }

  /**
   * Builds a tokenizer from the parsed tokenizer.json (or its text) and the optional
   * tokenizer_config.json. Anything unusable or not reproducible exactly is a ConfigError.
   */
  static fromJson(tokenizerJson: unknown, tokenizerConfig?: unknown | null, options: TokenizerOptions = {}): EncoderTokenizer {
    const { maxLength } = options;
    if (maxLength !== undefined && !(Number.isSafeInteger(maxLength) && maxLength > 0)) {
      throw new ConfigError(`tokenizer: the maximum length must be a positive integer, got ${String(maxLength)}`);
    }
    const json = parseJson(tokenizerJson, 'tokenizer: tokenizer.json');
    if (!isObject(json)) throw new ConfigError('tokenizer: tokenizer.json must be a JSON object');
    if (!isObject(json.model)) throw new ConfigError('tokenizer: tokenizer.json has no "model" object');
    const config = tokenizerConfig === undefined || tokenizerConfig === null ? null : parseJson(tokenizerConfig, 'tokenizer: tokenizer_config.json');
    if (config !== null && !isObject(config)) throw new ConfigError('tokenizer: tokenizer_config.json must be a JSON object');
    try {
      return new EncoderTokenizer(json, config, options);
    } catch (error) {
      if (error instanceof ConfigError) throw error;
      throw new ConfigError(`tokenizer: cannot load tokenizer.json: ${(error as Error).message}`, { cause: error });
    }
  }

  /** Special tokens the post-processor adds to one sequence, or to a pair. */
  addedTokens(pair = false): number {
    return this.postProcessor?.addedTokens(pair) ?? 0;
  }

  /** Whether the post-processor has a form for two texts (not so: a TemplateProcessing without "pair"). */
  supportsPairs(): boolean {
    return this.postProcessor?.supportsPairs ?? true;
  }

  /** How a long text truncated to a limit is cut before it is tokenized (text-cuts.ts); null: it is read whole. */
  get cutKind(): TextCuts['kind'] | null {
    return this.cuts?.kind ?? null;
  }

  /** Id of the padding token used by `pad`. */
  get padId(): number {
    return this.padSpec.padId;
  }

  tokenToId(token: string): number | undefined {
    return this.added.tokenToId(token) ?? this.model.tokenToId(token);
  }

  idToToken(id: number): string | undefined {
    return this.added.idToToken(id) ?? this.model.idToToken(id);
  }

  /**
   * The truncation and padding stored in tokenizer.json, for reproducing the file's own behaviour
   * (`encode` does not use them). ConfigError when they use options not reproduced here.
   */
  fileSettings(): EncodeSettings {
    if (this.fileSettingsProblem !== null) throw new ConfigError(this.fileSettingsProblem);
    return { truncation: this.fileTruncation, padding: this.filePadding };
  }

  /**
   * Token ids back to text through tokenizer.json's decoder (@huggingface/tokenizers), special tokens left out when
   * `skipSpecialTokens`. InputError for an id that is not in the vocabulary.
   */
  decode(ids: readonly number[], skipSpecialTokens: boolean): string {
    ids.forEach((id, position) => {
      if (!Number.isSafeInteger(id) || this.idToToken(id) === undefined) throw new InputError(`ids[${position}]: token id ${String(id)} is not in the vocabulary`, { field: 'ids' });
    });
    if (ids.length === 0) return '';
    this.decoder ??= new library.Tokenizer(this.sourceJson, this.sourceConfig ?? {});
    return this.decoder.decode([...ids], { skip_special_tokens: skipSpecialTokens });
  }

  /** With special tokens, truncated to maxLength (content first, then the specials) as `truncation` says, no padding. */
  encode(text: string): Encoding {
    return this.encodeWith(text, { truncation: { maxLength: this.maxLength, ...this.truncation }, padding: null });
  }

  /**
   * `encode` with HF's overflowing windows: the encoding, then one per further window of the text (`truncation.stride`
   * tokens repeated from the window before), each with its special tokens. One element when the text fits.
   */
  encodeWindows(text: string): Encoding[] {
    return this.encodeAll(text, { truncation: { maxLength: this.maxLength, ...this.truncation }, padding: null }, undefined, true);
  }

  encodeBatch(texts: string[]): Encoding[] {
    return texts.map((t) => this.encode(t));
  }

  /**
   * Two texts as one input, as a cross-encoder reads a query and a document: the post-processor's pair form
   * (`[CLS] A [SEP] B [SEP]` with type ids 0 then 1 for BERT, `<s> A </s></s> B </s>` for RoBERTa, a template's
   * `pair`), truncated to maxLength as `truncation` says (HF's default pair strategy longest_first), no padding. Offsets of the second
   * text's tokens are into the second text. ConfigError when the tokenizer has no pair form (`supportsPairs`).
   */
  encodePair(text: string, pair: string): Encoding {
    return this.encodeWith(text, { truncation: { maxLength: this.maxLength, ...this.truncation }, padding: null }, pair);
  }

  /**
   * One text, or a pair, with explicit truncation / padding (Rust's TruncationParams / PaddingParams semantics, right
   * padding). InputError when the truncation cannot be met (max_length below the special tokens, a text too short for
   * only_first / only_second, a stride not below what a window holds).
   */
  encodeWith(text: string, settings: EncodeSettings, pair?: string): Encoding {
    return this.encodeAll(text, settings, pair, false)[0];
  }

  /**
   * `encodeWith` and, for a single text cut by its truncation, its overflowing windows after it (HF's
   * `getOverflowing()`, with their special tokens and padding). A pair has no windows here.
   */
  encodeWithWindows(text: string, settings: EncodeSettings): Encoding[] {
    return this.encodeAll(text, settings, undefined, true);
  }

  private encodeAll(text: string, settings: EncodeSettings, pair: string | undefined, withWindows: boolean): Encoding[] {
    if (typeof text !== 'string') throw new InputError('text must be a string');
    if (pair !== undefined && typeof pair !== 'string') throw new InputError('the second text of a pair must be a string');
    const isPair = pair !== undefined;
    if (isPair && !this.supportsPairs()) {
      throw new ConfigError(NO_PAIR_TEMPLATE);
    }
    const t = settings.truncation;
    const plan = { strategy: t?.strategy ?? 'longest_first', direction: t?.direction ?? 'right', stride: t?.stride ?? 0 } as const;
    const max = t ? t.maxLength - this.addedTokens(isPair) : Infinity;
    if (max < 0) throw new InputError(`truncation max_length ${t?.maxLength} is below the special tokens`);
    // the type ids HF gives each sequence before the post-processor (which may set others)
    const limitOf = (index: 0 | 1) => (t ? tokenizeLimit(t.maxLength, plan.strategy, index) : Infinity);
    // overflowing windows hold the rest of what HF tokenized: its early exit at whole pre-tokens, never a shortcut within one
    const a = this.encodeContent(text, 0, limitOf(0), isPair || withWindows, plan.direction, withWindows);
    const b = isPair ? this.encodeContent(pair, 1, limitOf(1), true, plan.direction) : null;
    const overflowing = t ? truncateEncodings(a, b, max, plan) : [];
    const encodings = [b ? [a, b] : [a], ...(withWindows ? overflowing.map((window) => [window]) : [])].map((parts) =>
      postProcess(this.postProcessor, parts, true),
    );
    const p = settings.padding;
    if (p) {
      for (const e of encodings) {
        let target = typeof p.strategy === 'object' ? p.strategy.fixed : e.ids.length;
        const m = p.padToMultipleOf ?? 0;
        if (m > 0 && target % m !== 0) target += m - (target % m);
        padTo(e, target, { padId: p.padId, padToken: p.padToken, padTypeId: p.padTypeId });
      }
    }
    return encodings;
  }

  /** Pads to the longest encoding with the pad id; attention 0 and type id 0 on padding. */
  pad(encodings: Encoding[]): PaddedBatch {
    const batchSize = encodings.length;
    let sequenceLength = 0;
    for (const e of encodings) sequenceLength = Math.max(sequenceLength, e.ids.length);
    const size = batchSize * sequenceLength;
    const inputIds = new BigInt64Array(size);
    const attentionMask = new BigInt64Array(size);
    const tokenTypeIds = new BigInt64Array(size);
    const pad = BigInt(this.padSpec.padId);
    for (let b = 0; b < batchSize; b++) {
      const e = encodings[b];
      const row = b * sequenceLength;
      const n = e.ids.length;
      for (let i = 0; i < n; i++) {
        inputIds[row + i] = BigInt(e.ids[i]);
        attentionMask[row + i] = BigInt(e.attentionMask[i]);
        tokenTypeIds[row + i] = BigInt(e.typeIds[i]);
      }
      if (pad !== 0n) inputIds.fill(pad, row + n, row + sequenceLength);
    }
    return { batchSize, sequenceLength, inputIds, attentionMask, tokenTypeIds };
  }

  /**
   * Everything before truncation and post-processing: the content tokens with their offsets, of type `typeId`.
   * Stops after the first pre-token that brings the count to `limit` or more (HF's early exit, truncation.ts). A long
   * text is tokenized only as far as that exit needs, from prefixes of growing size: cut where the pipeline allows an
   * exact cut (text-cuts.ts), else anywhere, keeping what lies far enough before the cut (tokenizeUpTo), and a long
   * word gives only its first tokens (longWordTokens). The work on a text of megabytes is thus bounded by the limit,
   * whatever its script or shape. `exactCount`: the count at the exit must be HF's (a pair compares the two), which a
   * cut inside HF's one word cannot give: such an encoding is marked as holding more than it counts.
   */
  private encodeContent(text: string, typeId: number, limit: number, exactCount: boolean, direction: TruncationDirection, wholeWords = false): ContentEncoding {
    if (direction === 'left' && limit !== Infinity) return this.encodeContentFromEnd(text, typeId, limit, exactCount);
    const cuts = this.cuts;
    if (limit !== Infinity) {
      const first = Math.max(MIN_PREFIX, limit * PREFIX_CHARS_PER_TOKEN);
      if (cuts !== null && !(exactCount && cuts.kind === 'model')) {
        // a prefix with no cut has none in any shorter prefix: each search starts where the last one ended
        for (let size = first, searched = 0; size < text.length; searched = size, size *= 4) {
          const cut = lastCut(text, size, searched);
          if (cut < 0) continue;
          const e = emptyEncoding();
          if (this.tokenizeUpTo(text.slice(0, cut), typeId, limit, exactCount, e, Infinity, undefined, wholeWords)) return e;
        }
      }
      if (this.prefixesAreFinal) {
        for (let size = first; size < text.length; size *= 4) {
          const prefix = text.slice(0, isLowSurrogate(text.charCodeAt(size)) ? size - 1 : size);
          const e = emptyEncoding();
          if (this.tokenizeUpTo(prefix, typeId, limit, exactCount, e, codePointCount(prefix) - PREFIX_MARGIN, undefined, wholeWords)) return e;
        }
      }
    }
    const e = emptyEncoding();
    this.tokenizeUpTo(text, typeId, limit, exactCount, e, Infinity, undefined, wholeWords);
    return e;
  }

  /**
   * The content of a text truncated on the left: HF's early exit from the end (`tokenize_with_limit`, direction Left)
   * keeps the pre-tokens from the last one back to the first that brings the count to `limit` or more (added tokens
   * count but never stop it) and drops the ones before. The whole text is tokenized to find them.
   */
  private encodeContentFromEnd(text: string, typeId: number, limit: number, exactCount: boolean): ContentEncoding {
    const e = emptyEncoding();
    const groups: PreTokenEnd[] = [];
    this.tokenizeUpTo(text, typeId, Infinity, exactCount, e, Infinity, groups);
    let total = 0;
    let first = groups.length;
    for (let g = groups.length - 1; g >= 0; g--) {
      total += groups[g].end - (g > 0 ? groups[g - 1].end : 0);
      first = g;
      if (!groups[g].added && total >= limit) break;
    }
    const start = first > 0 ? groups[first - 1].end : 0;
    return start === 0 ? e : { ...sliceEncoding(e, start, e.ids.length) };
  }

  /**
   * Tokenizes `text` into `e` until the early exit at `limit`; whether it got there. `text` may be a prefix of the
   * input: then the exit counts only at a pre-token that is not the prefix's last and ends by `finalEnd` (code points
   * of the input), since the ones after it may change as the input goes on.
   */
  private tokenizeUpTo(text: string, typeId: number, limit: number, exactCount: boolean, e: ContentEncoding, finalEnd: number, groups?: PreTokenEnd[], wholeWords = false): boolean {
    const root = NormalizedString.fromString(text);
    if (root.length === 0) return false;
    const first: Split[] = [];
    this.added.splitRaw(root, first);
    const splits: Split[] = [];
    for (const s of first) {
      if (s.token) {
        splits.push(s);
        continue;
      }
      if (this.normalizer) this.normalizer(s.ns);
      this.added.splitNormalized(s.ns, splits);
    }
    const modelCuts = this.cuts?.kind === 'model' ? this.cuts : null;
    const isFinal = (w: NormalizedString, last: boolean) => finalEnd === Infinity || (!last && w.endOf(w.length - 1) <= finalEnd);
    for (let si = 0; si < splits.length; si++) {
      const s = splits[si];
      if (s.token) {
        const ns = s.ns;
        const r = ns.originalRange(0, ns.length) as [number, number];
        this.pushToken(e, s.token.id, ns.toString(), r[0], r[1], typeId);
        groups?.push({ end: e.ids.length, added: true });
        // HF stops only at a tokenized pre-token, which matters for a pair's counts; a single text truncated to the
        // limit keeps these tokens whatever follows (a run of added whitespace tokens would else be read to its end)
        if (!exactCount && e.ids.length >= limit && (finalEnd === Infinity || (si < splits.length - 1 && r[1] <= finalEnd))) return true;
        continue;
      }
      const words = (this.preTokenizer ? this.preTokenizer(s.ns) : [s.ns]).filter((w) => w.length > 0);
      for (let k = 0; k < words.length; k++) {
        const w = words[k];
        const last = si === splits.length - 1 && k === words.length - 1;
        // the prefix's last pre-token, which may go on in the text: a long one is cut or the prefix grows
        const open = last && finalEnd !== Infinity;
        if (modelCuts === null) {
          const read = this.tokenizeWord(w, typeId, e, wholeWords ? Infinity : limit, open);
          if (read !== 'whole') return read === 'capped' && this.capped(e, exactCount);
        } else {
          // one word of any length: BPE of its pieces is BPE of the word (text-cuts.ts), and much faster
          let from = 0;
          const ends = [...modelPieceStarts(w, modelCuts.space), w.length];
          for (let p = 0; p < ends.length; p++) {
            const piece = w.slice(from, ends[p]);
            from = ends[p];
            const read = this.tokenizeWord(piece, typeId, e, wholeWords ? Infinity : limit, open && p === ends.length - 1);
            if (read !== 'whole') return read === 'capped' && this.capped(e, exactCount);
            if (!exactCount && e.ids.length >= limit && isFinal(piece, last && p === ends.length - 1)) return true;
          }
        }
        groups?.push({ end: e.ids.length, added: false });
        // added tokens count toward the limit but only a tokenized pre-token stops it, as in HF
        if (e.ids.length >= limit) return isFinal(w, last);
      }
    }
    return false;
  }

  /** An encoding that stopped inside a long word: HF would count the rest of the word too (encodeContent). */
  private capped(e: ContentEncoding, exactCount: boolean): boolean {
    if (exactCount) e.countsMore = true;
    return true;
  }

  /**
   * Tokenizes a pre-token into `e`: whole, or when it is long and the limit leaves room for fewer tokens than it may
   * hold, only its first tokens (longWordTokens): 'capped'. `open`: the pre-token ends a prefix of the text and may
   * go on; a long one that no prefix of it settles is left for a longer prefix of the text ('grow').
   */
  private tokenizeWord(w: NormalizedString, typeId: number, e: WorkEncoding, limit = Infinity, open = false): 'whole' | 'capped' | 'grow' {
    const needed = limit - e.ids.length;
    const long = w.length > LONG_WORD && needed > 0 && needed !== Infinity && this.model.kind !== 'WordPiece';
    // a prefix of the text too short for this word to settle in: no work spent on it, the text's prefix grows
    if (long && open && w.length < 2 * settleLimitOf(needed)) return 'grow';
    const first = long ? this.longWordTokens(w, needed) : null;
    if (long && open && first === null) return 'grow';
    const t = first ?? this.model.tokenizeWord(w.toString(), w.length);
    for (let k = 0; k < t.ids.length; k++) {
      const a = t.starts[k];
      const b = t.ends[k];
      if (a < b) this.pushToken(e, t.ids[k], t.tokens[k], w.startOf(a), w.endOf(b - 1), typeId);
      else this.pushToken(e, t.ids[k], t.tokens[k], w.origStart + a, w.origStart + b, typeId);
    }
    return first === null ? 'whole' : 'capped';
  }

  /**
   * The first `needed` tokens of a long word, from prefixes of it: those of a prefix that end PREFIX_MARGIN before its
   * end, when a prefix a quarter longer gives the same ones. BPE merges and Unigram's best path can reach across a
   * whole word; the longer prefix checks that they did not here, and the reference implementation's results on long
   * words of every script are the tests' proof (test/encoder/tokenizer-hostile-inputs.test.ts). Unigram on a run of
   * one char never settles (its best path puts the odd pieces first): past `settleLimit` code points the prefix's
   * tokens are taken as they are, the one place where the tokens may differ from the reference's (docs/tokenizer.md).
   * null: the word is shorter than a settled prefix needs.
   */
  private longWordTokens(w: NormalizedString, needed: number): WordTokens | null {
    const settleLimit = settleLimitOf(needed);
    let size = Math.max(LONG_WORD / 2, needed * 4);
    while (size < w.length) {
      const a = this.model.tokenizeWord(w.slice(0, size).toString(), size);
      let kept = 0;
      while (kept < needed && kept < a.ids.length && a.ends[kept] <= size - PREFIX_MARGIN) kept++;
      if (kept < needed) {
        // long tokens (runs of one char merge far): grow by what the tokens so far say a token takes, and a bit more
        size = kept > 0 ? Math.ceil((size * needed * 1.25) / kept) + PREFIX_MARGIN : size * 4;
        continue;
      }
      const check = Math.min(w.length, size + Math.max(4 * PREFIX_MARGIN, size >> 2));
      const b = size >= settleLimit ? a : this.model.tokenizeWord(w.slice(0, check).toString(), check);
      let same = b.ids.length >= needed;
      for (let k = 0; same && k < needed; k++) same = a.ids[k] === b.ids[k] && a.starts[k] === b.starts[k] && a.ends[k] === b.ends[k];
      if (same) return { ids: a.ids.slice(0, needed), tokens: a.tokens.slice(0, needed), starts: a.starts.slice(0, needed), ends: a.ends.slice(0, needed) };
      size = Math.min(check * 2, Math.max(settleLimit, size + 1));
    }
    return null;
  }

  private pushToken(e: WorkEncoding, id: number, token: string, start: number, end: number, typeId: number): void {
    e.ids.push(id);
    e.tokens.push(token);
    e.offsets.push([start, end]);
    e.typeIds.push(typeId);
    e.specialTokensMask.push(0);
    e.attentionMask.push(1);
  }

  private parseTruncation(t: unknown): TruncationSettings | null {
    if (t === undefined || t === null) return null;
    if (!isObject(t)) throw new ConfigError('tokenizer: "truncation" must be an object or null');
    const o = t;
    if (!Number.isInteger(o.max_length) || (o.max_length as number) < 0) {
      throw new ConfigError('tokenizer: truncation.max_length must be a non-negative integer');
    }
    const direction = FILE_DIRECTIONS[String(o.direction ?? 'Right')];
    const strategy = FILE_STRATEGIES[String(o.strategy ?? 'LongestFirst')];
    const stride = o.stride ?? 0;
    if (direction === undefined || strategy === undefined || !(Number.isSafeInteger(stride) && (stride as number) >= 0)) {
      throw new ConfigError('tokenizer: unsupported truncation (direction Right or Left, strategy LongestFirst, OnlyFirst or OnlySecond, stride a non-negative integer)');
    }
    return { maxLength: o.max_length as number, strategy, direction, stride: stride as number };
  }

  private parsePadding(p: unknown): PaddingSettings | null {
    if (p === undefined || p === null) return null;
    if (!isObject(p)) throw new ConfigError('tokenizer: "padding" must be an object or null');
    if ((p.direction ?? 'Right') !== 'Right') throw new ConfigError('tokenizer: unsupported padding direction (only right padding)');
    let strategy: PaddingSettings['strategy'];
    if (p.strategy === 'BatchLongest' || p.strategy === undefined) strategy = 'longest';
    else if (isObject(p.strategy) && Number.isInteger(p.strategy.Fixed)) strategy = { fixed: p.strategy.Fixed as number };
    else throw new ConfigError('tokenizer: unsupported padding strategy');
    const m = p.pad_to_multiple_of;
    return {
      strategy,
      padToMultipleOf: Number.isInteger(m) && (m as number) > 0 ? (m as number) : undefined,
      padId: Number.isInteger(p.pad_id) ? (p.pad_id as number) : 0,
      padToken: typeof p.pad_token === 'string' ? p.pad_token : '[PAD]',
      padTypeId: Number.isInteger(p.pad_type_id) ? (p.pad_type_id as number) : 0,
    };
  }

  /** Pad token: tokenizer.json padding, else tokenizer_config pad_token, else a known pad special token, else id 0. */
  private resolvePad(config: Json | null): PadSpec {
    if (this.filePadding) {
      return { padId: this.filePadding.padId, padToken: this.filePadding.padToken, padTypeId: this.filePadding.padTypeId };
    }
    const candidates: string[] = [];
    const fromConfig = config?.pad_token;
    if (typeof fromConfig === 'string') candidates.push(fromConfig);
    else if (isObject(fromConfig) && typeof fromConfig.content === 'string') candidates.push(fromConfig.content);
    candidates.push('[PAD]', '<pad>', '<|padding|>', '<|pad|>');
    for (const c of candidates) {
      const id = this.tokenToId(c);
      if (id !== undefined) return { padId: id, padToken: c, padTypeId: 0 };
    }
    return { padId: 0, padToken: this.idToToken(0) ?? '', padTypeId: 0 };
  }
}

function settleLimitOf(needed: number): number {
  return Math.max(SETTLE_LIMIT, needed * 24);
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

function codePointCount(text: string): number {
  let count = text.length;
  for (let i = 0; i < text.length; i++) if (isLowSurrogate(text.charCodeAt(i))) count--;
  return count;
}

/** Where a split ends in the content tokens (their count after it), and whether it was an added token. */
interface PreTokenEnd {
  end: number;
  added: boolean;
}

function emptyEncoding(): ContentEncoding {
  return { ids: [], tokens: [], offsets: [], typeIds: [], specialTokensMask: [], attentionMask: [] };
}
