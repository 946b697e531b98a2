/**
 * Pooling: one vector per text from its token vectors, as sentence-transformers' Pooling module computes it
 * (sentence_transformers/models/Pooling.py), so that a served model gives the vectors `model.encode()` gives:
 * - mean: the mask-weighted mean over every attended token, [CLS] and [SEP] included, divided by max(count, 1e-9);
 * - cls: the first token's vector;
 * - max: the largest value per component over the attended tokens;
 * - last: the vector of the last attended token (right padding).
 * Sums accumulate in float64 and are stored as float32, like the tensor operations of tensor.ts.
 */
import type { Pooling } from './config.ts';
import { InternalError } from './errors.ts';
import { Tensor } from './tensor.ts';

/** [batch, seq, hidden] with a [batch, seq] mask → [batch, hidden]. */
export function poolTokens(hidden: Tensor, mask: Tensor, pooling: Pooling): Tensor {
  if (hidden.rank !== 3 || mask.rank !== 2 || mask.dims[0] !== hidden.dims[0] || mask.dims[1] !== hidden.dims[1]) {
    throw new InternalError(`pooling: expected [batch, seq, hidden] and a [batch, seq] mask, got [${hidden.dims.join(', ')}] and [${mask.dims.join(', ')}]`);
  }
  const [batch, seq, width] = hidden.dims;
  const out = new Float32Array(batch * width);
  for (let row = 0; row < batch; row++) {
    poolInto(out.subarray(row * width, (row + 1) * width), hidden.data, row * seq * width, width, mask.data.subarray(row * seq, (row + 1) * seq), pooling);
  }
  return new Tensor(out, [batch, width]);
}

/** The pooled vector of one row of [batch, seq, hidden] whose first `length` tokens are attended (no padding among them). */
export function poolRow(hidden: Tensor, row: number, length: number, pooling: Pooling): Float32Array {
  const [, seq, width] = hidden.dims;
  if (!(length >= 1 && length <= seq)) throw new InternalError(`pooling: a row of ${length} tokens in a sequence of ${seq}`);
  const out = new Float32Array(width);
  poolInto(out, hidden.data, row * seq * width, width, new Float32Array(length).fill(1), pooling);
  return out;
}

/** Pools the tokens at `start` (`mask.length` of them, `width` values each) of `data` into `out`. */
function poolInto(out: Float32Array, data: Float32Array, start: number, width: number, mask: Float32Array, pooling: Pooling): void {
  switch (pooling) {
    case 'cls':
      out.set(data.subarray(start, start + width));
      return;
    case 'last': {
      let last = -1;
      for (let t = 0; t < mask.length; t++) if (mask[t] !== 0) last = t;
      // A row with no attended token: sentence-transformers would index -1 (the last position); zeros say it plainly.
      if (last >= 0) out.set(data.subarray(start + last * width, start + (last + 1) * width));
      return;
    }
    case 'max': {
      // sentence-transformers sets masked positions to -1e9 before the max; an all-masked row therefore gives -1e9.
      out.fill(-1e9);
      for (let t = 0; t < mask.length; t++) {
        if (mask[t] === 0) continue;
        const at = start + t * width;
        for (let j = 0; j < width; j++) if (data[at + j] > out[j]) out[j] = data[at + j];
      }
      return;
    }
    case 'mean': {
      const sums = new Float64Array(width);
      let count = 0;
      for (let t = 0; t < mask.length; t++) {
        const weight = mask[t];
        if (weight === 0) continue;
        count += weight;
        const at = start + t * width;
        for (let j = 0; j < width; j++) sums[j] += weight * data[at + j];
      }
      const scale = 1 / Math.max(count, 1e-9);
      for (let j = 0; j < width; j++) out[j] = sums[j] * scale;
      return;
    }
  }
}

/** Scales `vector` in place to unit L2 length, dividing by max(norm, 1e-12) as torch's F.normalize does. */
export function normalizeInPlace(vector: Float32Array): Float32Array {
  let squares = 0;
  for (let i = 0; i < vector.length; i++) squares += vector[i] * vector[i];
  const scale = 1 / Math.max(Math.sqrt(squares), 1e-12);
  for (let i = 0; i < vector.length; i++) vector[i] *= scale;
  return vector;
}
