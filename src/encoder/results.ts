import type {
  EmbeddingResponse,
  SequenceClassificationResult,
  TokenClassification,
  TokenInfo,
} from './schemas.ts';
import { formatFloat32 } from '../shared/float32-json.ts';
import { normalizeInPlace } from './pooling.ts';
import type { Tensor } from './tensor.ts';
import type { Encoding } from './tokenizer/index.ts';

/**
 * Turn one row of a batch's output into spec 2's result shapes. Special tokens (and padding, which the
 * encoding does not hold) are left out, so each entry is a token of the input text.
 */

type EmbeddingResult = EmbeddingResponse['results'][number];

/**
 * `hidden` is [batch, sequence, hidden]. With `normalize`, each token vector is scaled to unit L2 length in float32,
 * dividing by max(norm, 1e-12) as torch's F.normalize does.
 */
export function embeddingResult(hidden: Tensor, row: number, encoding: Encoding, normalize: boolean): EmbeddingResult {
  const [, sequence, width] = hidden.dims;
  const embeddings: EmbeddingResult['embeddings'] = [];
  forEachInputToken(encoding, sequence, (position, tokenInfo) => {
    const embedding = finiteCopy(hidden.data, (row * sequence + position) * width, width);
    if (normalize) normalizeInPlace(embedding);
    embeddings.push({ embedding, token_info: tokenInfo });
  });
  return { embeddings };
}

/** `pooled` is [batch, hidden]: one vector per input, optionally scaled to unit L2 length. */
export function sentenceEmbeddingResult(pooled: Tensor, row: number, normalize: boolean): { embedding: Float32Array } {
  const width = pooled.dims[1];
  const embedding = finiteCopy(pooled.data, row * width, width);
  if (normalize) normalizeInPlace(embedding);
  return { embedding };
}

/** Throws NonFiniteOutputError when `values` holds NaN or ±Infinity, which JSON cannot carry. */
export function requireFinite(values: Float32Array): Float32Array {
  let check = 0;
  for (let i = 0; i < values.length; i++) check += values[i] * 0;
  if (check !== 0) throw new NonFiniteOutputError(values.find((value) => !Number.isFinite(value))!);
  return values;
}

/** `logits` and `scores` are [batch, labels]. */
export function sequenceClassificationResult(
  logits: Tensor,
  scores: Tensor,
  row: number,
  labels: ReadonlyMap<number, string> | null,
): SequenceClassificationResult {
  const width = logits.dims[1];
  const rowScores = scores.data.subarray(row * width, (row + 1) * width);
  const predictedIndex = indexOfMax(rowScores);
  const result: SequenceClassificationResult = {
    logits: finiteCopy(logits.data, row * width, width),
    scores: finiteCopy(rowScores, 0, width),
    predicted_index: predictedIndex,
  };
  if (labels) result.predicted_label = labelOf(labels, predictedIndex);
  return result;
}

/** `logits` and `scores` are [batch, sequence, labels]. */
export function tokenClassificationResult(
  logits: Tensor,
  scores: Tensor,
  row: number,
  encoding: Encoding,
  labels: ReadonlyMap<number, string>,
): { tokens: TokenClassification[] } {
  const [, sequence, width] = logits.dims;
  const tokens: TokenClassification[] = [];
  forEachInputToken(encoding, sequence, (position, tokenInfo) => {
    const start = (row * sequence + position) * width;
    const rowScores = scores.data.subarray(start, start + width);
    const best = indexOfMax(rowScores);
    tokens.push({
      token_info: tokenInfo,
      logits: finiteCopy(logits.data, start, width),
      scores: finiteCopy(rowScores, 0, width),
      label: labelOf(labels, best),
      score: Number(formatFloat32(rowScores[best])),
    });
  });
  return { tokens };
}

/** The configured label, or the `LABEL_<i>` name HF uses for an index without one. */
export function labelOf(labels: ReadonlyMap<number, string>, index: number): string {
  return labels.get(index) ?? `LABEL_${index}`;
}

function forEachInputToken(encoding: Encoding, sequence: number, visit: (position: number, info: TokenInfo) => void): void {
  const count = Math.min(encoding.ids.length, sequence);
  for (let position = 0; position < count; position++) {
    if (encoding.specialTokensMask[position] === 1) continue;
    const [start, end] = encoding.offsets[position];
    visit(position, { token: encoding.tokens[position], token_id: encoding.ids[position], start, end });
  }
}

function indexOfMax(values: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}

/** A value JSON cannot carry (NaN, ±Infinity) in the part of the output a result is made of. */
export class NonFiniteOutputError extends Error {
  readonly value: number;
  constructor(value: number) {
    super(`the model output holds ${value}`);
    this.value = value;
  }
}

/**
 * A copy of `count` values from `start` (a result must not hold a view of the batch's output, which is reused).
 * Throws NonFiniteOutputError for NaN or ±Infinity, which JSON cannot carry.
 */
function finiteCopy(data: Float32Array, start: number, count: number): Float32Array {
  return requireFinite(data.slice(start, start + count));
}
