/**
 * Post-processors (special tokens, type ids, offset trimming), truncation and padding, as in the
 * Rust reference: truncate the content to `max_length - added special tokens`, then post-process,
 * then pad.
 */
import type { Encoding } from './encoder-tokenizer.ts';
import { ConfigError, InputError } from '../errors.ts';
import { isWhitespace } from './unicode.ts';

/** The encoding while it is built (mutated in place); the same shape as the public Encoding. */
export type WorkEncoding = Encoding;

export interface PostProcessor {
  /** Number of special tokens added to a single sequence, or to a pair. */
  addedTokens(pair?: boolean): number;
  process(e: WorkEncoding, addSpecialTokens: boolean): WorkEncoding;
  /** Two sequences as one: the pair form of the special tokens and type ids (HF's `process` with a pair). */
  processPair(a: WorkEncoding, b: WorkEncoding, addSpecialTokens: boolean): WorkEncoding;
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

/** Without special tokens, a pair is its two sequences one after the other (HF's default merge). */
function mergedPair(a: WorkEncoding, b: WorkEncoding): WorkEncoding {
  return concatEncodings([a, b]);
}

function bertLike(c: Json, roberta: boolean): PostProcessor {
  const sep = pair(c.sep, `${String(c.type)} "sep"`);
  const cls = pair(c.cls, `${String(c.type)} "cls"`);
  const trim = roberta && c.trim_offsets !== false;
  const addPrefixSpace = c.add_prefix_space !== false;
  const clsOf = (typeId: number) => specialEncoding([cls[1]], [cls[0]], typeId);
  const sepOf = (typeId: number) => specialEncoding([sep[1]], [sep[0]], typeId);
  // BERT: [CLS] A [SEP] B [SEP], B and its [SEP] of type 1. RoBERTa: <s> A </s></s> B </s>, every type 0.
  const pairType = roberta ? 0 : 1;
  return {
    addedTokens: (isPair = false) => (isPair ? (roberta ? 4 : 3) : 2),
    process(e, add) {
      if (trim) trimOffsets(e, addPrefixSpace);
      e.typeIds = e.ids.map(() => 0);
      if (!add) return e;
      return concatEncodings([clsOf(0), e, sepOf(0)]);
    },
    processPair(a, b, add) {
      if (trim) {
        trimOffsets(a, addPrefixSpace);
        trimOffsets(b, addPrefixSpace);
      }
      a.typeIds = a.ids.map(() => 0);
      b.typeIds = b.ids.map(() => pairType);
      if (!add) return mergedPair(a, b);
      return roberta ? concatEncodings([clsOf(0), a, sepOf(0), sepOf(0), b, sepOf(0)]) : concatEncodings([clsOf(0), a, sepOf(0), b, sepOf(1)]);
    },
  };
}

function template(c: Json): PostProcessor {
  const single = c.single;
  if (!Array.isArray(single)) throw new ConfigError('tokenizer: TemplateProcessing needs a "single" template');
  const specials = (c.special_tokens ?? {}) as Record<string, { ids?: unknown; tokens?: unknown }>;
  type Piece = { kind: 'seq'; id: 'A' | 'B'; typeId: number } | { kind: 'special'; ids: number[]; tokens: string[]; typeId: number };
  const parse = (p: unknown): Piece => {
    const o = (p ?? {}) as Json;
    if (o.Sequence && typeof o.Sequence === 'object') {
      const s = o.Sequence as Json;
      return { kind: 'seq', id: s.id === 'B' ? 'B' : 'A', typeId: Number.isInteger(s.type_id) ? (s.type_id as number) : 0 };
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
  const pieces = single.map(parse);
  const pairPieces = Array.isArray(c.pair) ? c.pair.map(parse) : null;
  const specialCount = (template: Piece[]) => template.reduce((n, p) => n + (p.kind === 'special' ? p.ids.length : 0), 0);
  const added = specialCount(pieces);
  const pairAdded = pairPieces ? specialCount(pairPieces) : added;
  const apply = (template: Piece[], sequences: Record<'A' | 'B', WorkEncoding>, add: boolean): WorkEncoding => {
    const parts: WorkEncoding[] = [];
    for (const p of template) {
      if (p.kind === 'seq') {
        const e = sequences[p.id];
        e.typeIds = e.ids.map(() => p.typeId);
        parts.push(e);
      } else if (add) {
        parts.push(specialEncoding(p.ids, p.tokens, p.typeId));
      }
    }
    return concatEncodings(parts);
  };
  return {
    addedTokens: (isPair = false) => (isPair ? pairAdded : added),
    process: (e, add) => apply(pieces, { A: e, B: e }, add),
    processPair(a, b, add) {
      // HF applies the pair template only with special tokens; without, the two sequences keep their type ids.
      if (!add) return mergedPair(a, b);
      if (!pairPieces) throw new InputError("this model's tokenizer has no template for text pairs (TemplateProcessing without \"pair\")");
      return apply(pairPieces, { A: a, B: b }, add);
    },
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
      const trim = c.trim_offsets !== false;
      const addPrefixSpace = c.add_prefix_space !== false;
      return {
        addedTokens: () => 0,
        process(e) {
          if (trim) trimOffsets(e, addPrefixSpace);
          return e;
        },
        processPair(a, b) {
          if (trim) {
            trimOffsets(a, addPrefixSpace);
            trimOffsets(b, addPrefixSpace);
          }
          return mergedPair(a, b);
        },
      };
    }
    case 'Sequence': {
      if (!Array.isArray(c.processors)) throw new ConfigError('tokenizer: Sequence post-processor needs a "processors" list');
      const steps = c.processors.map((p) => createPostProcessor(p)).filter((p): p is PostProcessor => p !== null);
      return {
        addedTokens: (isPair = false) => steps.reduce((n, s) => n + s.addedTokens(isPair), 0),
        process(e, add) {
          for (const s of steps) e = s.process(e, add);
          return e;
        },
        processPair(a, b, add) {
          // Every step but the last sees the two sequences apart (HF passes the list of encodings along); the
          // sequences are merged once, by the last step.
          const last = steps.at(-1);
          if (!last) return mergedPair(a, b);
          for (const s of steps.slice(0, -1)) {
            a = s.process(a, false);
            b = s.process(b, false);
          }
          return last.processPair(a, b, add);
        },
      };
    }
    default:
      throw new ConfigError(`tokenizer: unsupported post-processor "${String(c.type)}" (offsets cannot be computed)`);
  }
}

/** Right truncation of one sequence to `max` tokens (stride 0). */
export function truncate(e: WorkEncoding, max: number): void {
  if (e.ids.length <= max) return;
  e.ids.length = max;
  e.tokens.length = max;
  e.offsets.length = max;
  e.typeIds.length = max;
  e.specialTokensMask.length = max;
  e.attentionMask.length = max;
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
