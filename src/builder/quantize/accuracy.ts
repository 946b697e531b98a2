/**
 * The arithmetic of the int8 accuracy gate: how far the int8 model's outputs are from the fp32 model's on the same
 * batch. Embeddings ([batch, hidden] pooled, or [batch, sequence, hidden] per token, padding left out through the
 * attention mask): the smallest and the mean cosine of matching vectors. Classification logits ([batch, labels] or
 * [batch, sequence, labels]): the share of rows whose argmax label is unchanged and the largest absolute difference
 * of a softmax score. A vector or row holding NaN or an infinity counts as the worst case (cosine -1, a changed label,
 * score difference 1), so that no floor passes it by accident.
 */
import { InternalError } from '../../encoder/errors.ts';

/** An output as onnxruntime gives it: float32 values in row-major order, and their dims. */
export interface OutputTensor {
  data: Float32Array;
  dims: readonly number[];
}

/** attention_mask, [batch, sequence]: non-zero for a real token, 0 for padding. */
export type TokenMask = ArrayLike<number | bigint>;

export interface EmbeddingComparison {
  kind: 'embedding';
  /** How many vectors were compared (tokens, or inputs for pooled outputs). */
  vectors: number;
  minCosine: number;
  meanCosine: number;
}

export interface LabelComparison {
  kind: 'classification';
  /** How many rows were compared (inputs, or tokens for token classification). */
  predictions: number;
  /** Share of rows, 0..1, whose argmax is the same in both. */
  labelAgreement: number;
  maxScoreDifference: number;
}

export type OutputComparison = EmbeddingComparison | LabelComparison;

/** Compares two outputs of one kind: `embedding` vectors or `classification` logits. */
export function compareOutputs(kind: OutputComparison['kind'], fp32: OutputTensor, int8: OutputTensor, mask?: TokenMask): OutputComparison {
  return kind === 'embedding' ? compareEmbeddings(fp32, int8, mask) : compareLogits(fp32, int8, mask);
}

/** Cosines between matching vectors of the last axis; with rank 3, only the tokens `mask` marks as real. */
export function compareEmbeddings(fp32: OutputTensor, int8: OutputTensor, mask?: TokenMask): EmbeddingComparison {
  const rows = realRows(fp32, int8, mask);
  const width = lastDim(fp32);
  let min = 1;
  let sum = 0;
  for (const row of rows) {
    const cosine = cosineOf(fp32.data.subarray(row * width, (row + 1) * width), int8.data.subarray(row * width, (row + 1) * width));
    min = Math.min(min, cosine);
    sum += cosine;
  }
  return { kind: 'embedding', vectors: rows.length, minCosine: min, meanCosine: rows.length > 0 ? sum / rows.length : 1 };
}

/** Argmax agreement and softmax score differences of logits along the last axis. */
export function compareLogits(fp32: OutputTensor, int8: OutputTensor, mask?: TokenMask): LabelComparison {
  return compareScores({ data: softmax(fp32), dims: fp32.dims }, { data: softmax(int8), dims: int8.dims }, mask);
}

/** As compareLogits, for scores that are already probabilities (a pipeline's `scores`). */
export function compareScores(fp32: OutputTensor, int8: OutputTensor, mask?: TokenMask): LabelComparison {
  const rows = realRows(fp32, int8, mask);
  const width = lastDim(fp32);
  let same = 0;
  let largest = 0;
  for (const row of rows) {
    const a = fp32.data.subarray(row * width, (row + 1) * width);
    const b = int8.data.subarray(row * width, (row + 1) * width);
    if (!allFinite(a) || !allFinite(b)) {
      largest = Math.max(largest, 1);
      continue;
    }
    if (argmax(a) === argmax(b)) same++;
    for (let k = 0; k < width; k++) largest = Math.max(largest, Math.abs(a[k] - b[k]));
  }
  return { kind: 'classification', predictions: rows.length, labelAgreement: rows.length > 0 ? same / rows.length : 1, maxScoreDifference: largest };
}

/** The indexes of the vectors to compare: every row of a rank-2 output, the masked-in tokens of a rank-3 one. */
function realRows(fp32: OutputTensor, int8: OutputTensor, mask: TokenMask | undefined): number[] {
  const { dims } = fp32;
  if (dims.length !== int8.dims.length || dims.some((dim, i) => dim !== int8.dims[i])) {
    throw new InternalError(`the fp32 and int8 outputs differ in shape: [${dims.join(', ')}] and [${int8.dims.join(', ')}]`);
  }
  if (dims.length !== 2 && dims.length !== 3) throw new InternalError(`expected an output of rank 2 or 3, got [${dims.join(', ')}]`);
  const count = dims.slice(0, -1).reduce((product, dim) => product * dim, 1);
  if (fp32.data.length !== count * lastDim(fp32) || int8.data.length !== fp32.data.length) {
    throw new InternalError(`an output holds ${fp32.data.length} and ${int8.data.length} values, not the ${count * lastDim(fp32)} its dims say`);
  }
  const rows = Array.from({ length: count }, (_, row) => row);
  if (dims.length === 2 || mask === undefined) return rows;
  if (mask.length !== count) throw new InternalError(`the attention mask has ${mask.length} values, not the ${count} of [${dims.slice(0, 2).join(', ')}]`);
  return rows.filter((row) => Number(mask[row]) !== 0);
}

function lastDim(tensor: OutputTensor): number {
  return tensor.dims[tensor.dims.length - 1];
}

function cosineOf(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let aa = 0;
  let bb = 0;
  for (let k = 0; k < a.length; k++) {
    dot += a[k] * b[k];
    aa += a[k] * a[k];
    bb += b[k] * b[k];
  }
  if (aa === 0 && bb === 0) return 1; // two zero vectors are the same vector
  const cosine = dot / Math.sqrt(aa * bb);
  // an infinity or NaN (or one zero vector) is as far apart as vectors get
  return Number.isFinite(cosine) ? Math.max(-1, Math.min(1, cosine)) : -1;
}

function softmax(tensor: OutputTensor): Float32Array {
  const width = lastDim(tensor);
  const out = new Float32Array(tensor.data.length);
  for (let start = 0; start < tensor.data.length; start += width) {
    const row = tensor.data.subarray(start, start + width);
    let max = -Infinity;
    for (const value of row) max = Math.max(max, value);
    let sum = 0;
    for (let k = 0; k < width; k++) sum += Math.exp(row[k] - max);
    for (let k = 0; k < width; k++) out[start + k] = Math.exp(row[k] - max) / sum;
  }
  return out;
}

function argmax(row: Float32Array): number {
  let best = 0;
  for (let k = 1; k < row.length; k++) if (row[k] > row[best]) best = k;
  return best;
}

function allFinite(row: Float32Array): boolean {
  for (const value of row) if (!Number.isFinite(value)) return false;
  return true;
}
