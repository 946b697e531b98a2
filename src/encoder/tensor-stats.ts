/**
 * Statistics and per-slice operations beside tensor.ts (same conventions: 0-based axes, new tensors, float64
 * accumulation): what mozilla-ai/encoderfile's Lua Tensor offers as `layer_norm`, `std`, `clamp`, and the slicing
 * that its `fold_axis` / `map_axis` walk (the callbacks themselves are Lua, in transform/tensor-api.ts).
 */
import { InternalError } from './errors.ts';
import { Tensor, around, resolveAxis, withoutAxis } from './tensor.ts';

/**
 * (x - mean) / sqrt(var + eps) along `axis`, var being the population variance (ddof 0): a layer norm without its
 * learnt scale and shift, as encoderfile's `layer_norm` (and torch's `F.layer_norm` without weights) compute it.
 */
export function layerNorm(t: Tensor, axis: number, eps: number): Tensor {
  const a = resolveAxis(axis, t.rank, 'layer_norm');
  const { outer, length, inner } = around(t.dims, a);
  if (length === 0) throw new InternalError('layer_norm: the axis is empty');
  const src = t.data;
  const out = new Float32Array(src.length);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      const base = o * length * inner + i;
      let total = 0;
      for (let k = 0; k < length; k++) total += src[base + k * inner];
      const mean = total / length;
      let squares = 0;
      for (let k = 0; k < length; k++) squares += (src[base + k * inner] - mean) ** 2;
      const scale = 1 / Math.sqrt(squares / length + eps);
      for (let k = 0; k < length; k++) out[base + k * inner] = (src[base + k * inner] - mean) * scale;
    }
  }
  return new Tensor(out, t.dims);
}

/**
 * Standard deviation of all elements with `ddof` degrees of freedom removed from the count (0: population, 1:
 * sample), as ndarray's `std` that encoderfile calls. ddof must be in 0..size; ddof equal to the size gives NaN.
 */
export function std(t: Tensor, ddof: number): number {
  if (!(ddof >= 0 && ddof <= t.size)) throw new InternalError(`std: ddof ${ddof} is outside 0..${t.size} (the element count)`);
  const src = t.data;
  let total = 0;
  for (let i = 0; i < src.length; i++) total += src[i];
  const mean = total / src.length;
  let squares = 0;
  for (let i = 0; i < src.length; i++) squares += (src[i] - mean) ** 2;
  const dof = src.length - ddof;
  return dof > 0 ? Math.sqrt(squares / dof) : NaN;
}

/**
 * Each element bounded below by `lo` and above by `hi` (null: no bound), `max(lo)` first then `min(hi)`, so inverted
 * bounds give `hi` everywhere; a NaN bound makes every element NaN (encoderfile's, and torch's, clamp).
 */
export function clamp(t: Tensor, lo: number | null, hi: number | null): Tensor {
  const src = t.data;
  const out = new Float32Array(src.length);
  if (Number.isNaN(lo) || Number.isNaN(hi)) return new Tensor(out.fill(NaN), t.dims);
  const low = lo ?? -Infinity;
  const high = hi ?? Infinity;
  for (let i = 0; i < src.length; i++) out[i] = Math.min(Math.max(src[i], low), high);
  return new Tensor(out, t.dims);
}

/** The slice at `index` of `axis` (a copy, the axis removed): one step of ndarray's `axis_iter`. */
export function sliceAt(t: Tensor, axis: number, index: number): Tensor {
  const a = resolveAxis(axis, t.rank, 'slice');
  const { outer, length, inner } = around(t.dims, a);
  if (!(Number.isInteger(index) && index >= 0 && index < length)) throw new InternalError(`slice: index ${index} is outside 0..${length - 1}`);
  const out = new Float32Array(outer * inner);
  for (let o = 0; o < outer; o++) out.set(t.data.subarray((o * length + index) * inner, (o * length + index + 1) * inner), o * inner);
  return new Tensor(out, withoutAxis(t.dims, a));
}

/** Tensors of one shape stacked along a new axis at `axis` (0..rank of the parts): the inverse of `sliceAt`. */
export function stack(parts: readonly Tensor[], axis: number): Tensor {
  if (parts.length === 0) throw new InternalError('stack: nothing to stack');
  const dims = parts[0].dims;
  parts.forEach((p, i) => {
    if (p.rank !== dims.length || p.dims.some((d, k) => d !== dims[k])) {
      throw new InternalError(`stack: part ${i + 1} has dims [${p.dims.join(', ')}] where [${dims.join(', ')}] was expected`);
    }
  });
  if (!(Number.isInteger(axis) && axis >= 0 && axis <= dims.length)) throw new InternalError(`stack: axis ${axis} is outside 0..${dims.length}`);
  const outDims = [...dims.slice(0, axis), parts.length, ...dims.slice(axis)];
  const { outer, length, inner } = around(outDims, axis);
  const out = new Float32Array(outer * length * inner);
  parts.forEach((p, index) => {
    for (let o = 0; o < outer; o++) out.set(p.data.subarray(o * inner, (o + 1) * inner), (o * length + index) * inner);
  });
  return new Tensor(out, outDims);
}
