/**
 * Post-processors (special tokens, type ids, offset trimming) and padding, as in the Rust reference: truncate the
 * content to `max_length - added special tokens` (truncation.ts), then post-process, then pad. A post-processor works
 * as HF's `process_encodings`: on the list of encodings (one per sequence of the input, then the pieces earlier
 * processors of a Sequence made), and `postProcess` concatenates what comes out.
 */
import type { Encoding } from './encoder-tokenizer.ts';
import { ConfigError } from '../errors.ts';
import { isWhitespace } from './unicode.ts';

/** The encoding while it is built (mutated in place); the same shape as the public Encoding. */
export type WorkEncoding = Encoding;

export interface PostProcessor {
  /** Number of special tokens added to a single sequence, or to a pair. */
  addedTokens(pair: boolean): number;
  /** False when the configuration has no form for two sequences (a TemplateProcessing without "pair"). */
  readonly supportsPairs: boolean;
  /** HF's `process_encodings`: the encodings in (type ids already those of their sequence index), the pieces out. */
  processEncodings(encodings: WorkEncoding[], addSpecialTokens: boolean): WorkEncoding[];
}

/**
 * HF's `PostProcessor::process` + `Encoding::merge`: one encoding per sequence (type ids 0 for the first, 1 for the
 * second, as the tokenizer made them), processed, concatenated; offsets stay relative to each sequence's own text.
 */
export function postProcess(processor: PostProcessor | null, encodings: WorkEncoding[], addSpecialTokens: boolean): WorkEncoding {
  const pieces = processor ? processor.processEncodings(encodings, addSpecialTokens) : encodings;
  return pieces.length === 1 ? pieces[0] : concatEncodings(pieces);
}

type Json = Record<string, unknown>;

const G = 0x120; // 'Ġ', the byte-level char of ' '

/** ByteLevel `process_offsets`: trims leading/trailing spaces (Ġ or whitespace) off the offsets. */
function trimOffsets(e: WorkEncoding, addPrefixSpace: boolean): void {
  // Ġ and every whitespace char are BMP, so UTF-16 units can be tested one by one
  const space = (u: number): boolean => u === G || isWhitespace(u);
  for (let i = 0; i < e.tokens.length; i++) {
    const t = e.tokens[i];
    const n = t.length;
    let leading = 0;
    while (leading < n && space(t.charCodeAt(leading))) leading++;
    let trailing = 0;
    while (trailing < n && space(t.charCodeAt(n - 1 - trailing))) trailing++;
    if (leading === 0 && trailing === 0) continue;
    const o = e.offsets[i];
    if (leading > 0) {
      const isFirst = i === 0 || o[0] === 0;
      if (isFirst && addPrefixSpace && leading === 1) leading = 0;
      o[0] = Math.min(o[0] + leading, o[1]);
    }
    if (trailing > 0 && o[1] >= trailing) o[1] = Math.max(o[1] - trailing, o[0]);
  }
}

function specialEncoding(ids: number[], tokens: string[], typeId: number): WorkEncoding {
  return {
    ids: ids.slice(),
    tokens: tokens.slice(),
    offsets: ids.map(() => [0, 0] as [number, number]),
    typeIds: ids.map(() => typeId),
    specialTokensMask: ids.map(() => 1),
    attentionMask: ids.map(() => 1),
  };
}

export function concatEncodings(parts: WorkEncoding[]): WorkEncoding {
  const out: WorkEncoding = { ids: [], tokens: [], offsets: [], typeIds: [], specialTokensMask: [], attentionMask: [] };
  for (const p of parts) {
    for (let i = 0; i < p.ids.length; i++) {
      out.ids.push(p.ids[i]);
      out.tokens.push(p.tokens[i]);
      out.offsets.push(p.offsets[i]);
      out.typeIds.push(p.typeIds[i]);
      out.specialTokensMask.push(p.specialTokensMask[i]);
      out.attentionMask.push(p.attentionMask[i]);
    }
  }
  return out;
}

function pair(v: unknown, what: string): [string, number] {
  if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== 'string' || !Number.isInteger(v[1])) {
    throw new ConfigError(`tokenizer: ${what} must be [token, id]`);
  }
  return [v[0], v[1]];
}

/** Why a tokenizer refuses text pairs (HF cannot even load such a tokenizer.json). */
export const NO_PAIR_TEMPLATE = 'tokenizer: the TemplateProcessing post-processor has no "pair" template, so it cannot encode text pairs';

/** Every token's type id set to `typeId` (in place). */
function setTypeIds(e: WorkEncoding, typeId: number): void {
  e.typeIds = e.ids.map(() => typeId);
}

/**
 * BertProcessing: `[CLS] A [SEP]` then `B [SEP]`, type ids as they come (0, then 1 for B and its [SEP]).
 * RobertaProcessing: offsets trimmed, every type id 0, `<s> A </s>` then `</s> B </s>`. Either way the first
 * encoding of the list is treated as the first sequence and every other one as a following one (HF's loop).
 */
function bertLike(c: Json, roberta: boolean): PostProcessor {
  const sep = pair(c.sep, `${String(c.type)} "sep"`);
  const cls = pair(c.cls, `${String(c.type)} "cls"`);
  const trim = roberta && c.trim_offsets !== false;
  const addPrefixSpace = c.add_prefix_space !== false;
  const special = (token: [string, number], typeId: number) => specialEncoding([token[1]], [token[0]], typeId);
  return {
    addedTokens: (isPair) => (isPair ? (roberta ? 4 : 3) : 2),
    supportsPairs: true,
    processEncodings(encodings, add) {
      if (roberta) {
        for (const e of encodings) {
          if (trim) trimOffsets(e, addPrefixSpace);
          setTypeIds(e, 0);
        }
      }
      if (!add) return encodings;
      return encodings.flatMap((e, i) => {
        if (i === 0) return [special(cls, 0), e, special(sep, 0)];
        return roberta ? [special(sep, 0), e, special(sep, 0)] : [e, special(sep, 1)];
      });
    },
  };
}

/**
 * TemplateProcessing: the `single` template for one encoding, `pair` for two, each Sequence piece taking its type
 * id; special tokens only when they are added. HF cannot load a template without `pair`; here it serves single
 * texts and refuses pairs.
 */
function template(c: Json): PostProcessor {
  const single = c.single;
  if (!Array.isArray(single)) throw new ConfigError('tokenizer: TemplateProcessing needs a "single" template');
  if (c.pair !== undefined && c.pair !== null && !Array.isArray(c.pair)) {
    throw new ConfigError('tokenizer: TemplateProcessing "pair" must be a template list');
  }
  const specials = (c.special_tokens ?? {}) as Record<string, { ids?: unknown; tokens?: unknown }>;
  type Piece = { kind: 'seq'; index: 0 | 1; typeId: number } | { kind: 'special'; ids: number[]; tokens: string[]; typeId: number };
  const parse = (p: unknown): Piece => {
    const o = (p ?? {}) as Json;
    if (o.Sequence && typeof o.Sequence === 'object') {
      const s = o.Sequence as Json;
      return { kind: 'seq', index: s.id === 'B' ? 1 : 0, typeId: Number.isInteger(s.type_id) ? (s.type_id as number) : 0 };
    }
    if (o.SpecialToken && typeof o.SpecialToken === 'object') {
      const s = o.SpecialToken as Json;
      const name = String(s.id);
      const spec = specials[name];
      if (!spec || !Array.isArray(spec.ids) || !Array.isArray(spec.tokens) || spec.ids.length !== spec.tokens.length) {
        throw new ConfigError(`tokenizer: TemplateProcessing is missing the special token "${name}"`);
      }
      return {
        kind: 'special',
        ids: spec.ids as number[],
        tokens: spec.tokens as string[],
        typeId: Number.isInteger(s.type_id) ? (s.type_id as number) : 0,
      };
    }
    throw new ConfigError('tokenizer: TemplateProcessing template pieces must be Sequence or SpecialToken');
  };
  const singlePieces = single.map(parse);
  const pairPieces = Array.isArray(c.pair) ? c.pair.map(parse) : null;
  // HF indexes the encodings by the sequence id: B in the single template panics there
  if (singlePieces.some((p) => p.kind === 'seq' && p.index === 1)) {
    throw new ConfigError('tokenizer: the TemplateProcessing "single" template uses sequence B');
  }
  const specialCount = (pieces: Piece[]) => pieces.reduce((n, p) => n + (p.kind === 'special' ? p.ids.length : 0), 0);
  const addedSingle = specialCount(singlePieces);
  const addedPair = pairPieces ? specialCount(pairPieces) : 0;
  return {
    addedTokens: (isPair) => (isPair ? addedPair : addedSingle),
    supportsPairs: pairPieces !== null,
    processEncodings(encodings, add) {
      const pieces = encodings.length === 1 ? singlePieces : encodings.length === 2 ? pairPieces : null;
      if (!pieces) {
        throw new ConfigError(
          encodings.length === 2
            ? NO_PAIR_TEMPLATE
            : 'tokenizer: TemplateProcessing cannot follow a post-processor that added special tokens (HF cannot either)',
        );
      }
      const used = new Set<WorkEncoding>();
      const out: WorkEncoding[] = [];
      for (const p of pieces) {
        if (p.kind === 'special') {
          if (add) out.push(specialEncoding(p.ids, p.tokens, p.typeId));
          continue;
        }
        const e = encodings[p.index];
        // a sequence the template repeats is a copy each time (HF clones), so later steps cannot alter it twice
        const piece = used.has(e) ? copyEncoding(e) : e;
        used.add(e);
        setTypeIds(piece, p.typeId);
        out.push(piece);
      }
      return out;
    },
  };
}

function copyEncoding(e: WorkEncoding): WorkEncoding {
  return {
    ids: e.ids.slice(),
    tokens: e.tokens.slice(),
    offsets: e.offsets.map((o) => [o[0], o[1]] as [number, number]),
    typeIds: e.typeIds.slice(),
    specialTokensMask: e.specialTokensMask.slice(),
    attentionMask: e.attentionMask.slice(),
  };
}

export function createPostProcessor(cfg: unknown): PostProcessor | null {
  if (cfg === null || cfg === undefined) return null;
  if (typeof cfg !== 'object' || Array.isArray(cfg)) throw new ConfigError('tokenizer: "post_processor" must be an object or null');
  const c = cfg as Json;
  switch (c.type) {
    case 'BertProcessing':
      return bertLike(c, false);
    case 'RobertaProcessing':
      return bertLike(c, true);
    case 'TemplateProcessing':
      return template(c);
    case 'ByteLevel': {
      // trims offsets only: no special tokens, and each sequence keeps its type id (0, then 1)
      const trim = c.trim_offsets !== false;
      const addPrefixSpace = c.add_prefix_space !== false;
      return {
        addedTokens: () => 0,
        supportsPairs: true,
        processEncodings(encodings) {
          if (trim) for (const e of encodings) trimOffsets(e, addPrefixSpace);
          return encodings;
        },
      };
    }
    case 'Sequence': {
      if (!Array.isArray(c.processors)) throw new ConfigError('tokenizer: Sequence post-processor needs a "processors" list');
      const steps = c.processors.map((p) => createPostProcessor(p)).filter((p): p is PostProcessor => p !== null);
      return {
        addedTokens: (isPair) => steps.reduce((n, s) => n + s.addedTokens(isPair), 0),
        supportsPairs: steps.every((s) => s.supportsPairs),
        processEncodings(encodings, add) {
          // each step takes the whole list the previous one gave (HF chains process_encodings)
          for (const s of steps) encodings = s.processEncodings(encodings, add);
          return encodings;
        },
      };
    }
    default:
      throw new ConfigError(`tokenizer: unsupported post-processor "${String(c.type)}" (offsets cannot be computed)`);
  }
}

export interface PadSpec {
  padId: number;
  padToken: string;
  padTypeId: number;
}

/** Right padding to `length` (no-op when already as long). */
export function padTo(e: WorkEncoding, length: number, spec: PadSpec): void {
  while (e.ids.length < length) {
    e.ids.push(spec.padId);
    e.tokens.push(spec.padToken);
    e.offsets.push([0, 0]);
    e.typeIds.push(spec.padTypeId);
    e.specialTokensMask.push(1);
    e.attentionMask.push(0);
  }
}
