/**
 * Dense float32 tensors and the bulk operations the predict pipeline and Lua transforms use
 * (design decision 5). Every operation returns a new tensor and never mutates its inputs.
 *
 * Axes are 0-based; a negative axis counts from the end (-1 is the last axis). Loops run over
 * the flat Float32Array with the tensor viewed as [outer, axis length, inner], so there is no
 * per-element allocation; sums accumulate in float64 and are stored as float32.
 *
 * Misuse (an axis out of range, shapes that do not match) is a bug of the caller, so it throws
 * an InternalError with a message that names the operation.
 */
import { InternalError } from './errors.ts';

/** A number or arbitrarily nested arrays of numbers, e.g. [[1, 2], [3, 4]]. */
export type NestedNumbers = number | readonly NestedNumbers[];

/** An attention mask: a [batch, seq] tensor or a flat batch*seq array of 0/1 (int64 masks allowed). */
export type MaskLike = Tensor | ArrayLike<number> | ArrayLike<bigint>;

export class Tensor {
  readonly data: Float32Array;
  readonly dims: readonly number[];

  constructor(data: Float32Array, dims: readonly number[]) {
    for (const dim of dims) {
      if (!Number.isInteger(dim) || dim < 0) {
        throw new InternalError(`tensor: invalid dims [${dims.join(', ')}]`);
      }
    }
    const size = productOf(dims);
    if (size !== data.length) {
      throw new InternalError(
        `tensor: dims [${dims.join(', ')}] hold ${size} values but the data has ${data.length}`,
      );
    }
    this.data = data;
    this.dims = Object.freeze([...dims]);
  }

  /** A tensor of zeros. */
  static zeros(dims: readonly number[]): Tensor {
    return new Tensor(new Float32Array(productOf(dims)), dims);
  }

  /** Builds a tensor from nested arrays; a bare number gives a rank-0 tensor. Ragged input throws. */
  static fromNested(nested: NestedNumbers): Tensor {
    const dims: number[] = [];
    for (let level: NestedNumbers = nested; Array.isArray(level); level = (level as readonly NestedNumbers[])[0]) {
      dims.push(level.length);
      if (level.length === 0) break;
    }
    const data = new Float32Array(productOf(dims));
    let next = 0;
    const visit = (value: NestedNumbers, depth: number): void => {
      if (depth === dims.length) {
        if (typeof value !== 'number') throw new InternalError('tensor: nested arrays are ragged');
        data[next++] = value;
        return;
      }
      if (!Array.isArray(value) || value.length !== dims[depth]) {
        throw new InternalError('tensor: nested arrays are ragged');
      }
      for (const item of value as readonly NestedNumbers[]) visit(item, depth + 1);
    };
    visit(nested, 0);
    return new Tensor(data, dims);
  }

  get rank(): number {
    return this.dims.length;
  }

  get size(): number {
    return this.data.length;
  }

  /** The values as nested arrays (for small tensors: results, tests). */
  toNested(): NestedNumbers {
    if (this.rank === 0) return this.data[0];
    const strides = stridesOf(this.dims);
    const build = (depth: number, offset: number): NestedNumbers[] => {
      const out: NestedNumbers[] = new Array(this.dims[depth]);
      for (let i = 0; i < this.dims[depth]; i++) {
        const at = offset + i * strides[depth];
        out[i] = depth === this.rank - 1 ? this.data[at] : build(depth + 1, at);
      }
      return out;
    };
    return build(0, 0);
  }

  sum(): number {
    return sum(this);
  }

  mean(): number {
    return mean(this);
  }

  max(): number {
    return max(this);
  }

  min(): number {
    return min(this);
  }

  /** numpy-like summary: long axes show their first and last 3 entries around "...". */
  toString(): string {
    const strides = stridesOf(this.dims);
    const format = (v: number): string => (Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6))));
    const render = (depth: number, offset: number): string => {
      if (depth === this.rank) return format(this.data[offset]);
      const n = this.dims[depth];
      const parts: string[] = [];
      const shown = n > 6 ? [0, 1, 2, -1, n - 3, n - 2, n - 1] : Array.from({ length: n }, (_, i) => i);
      for (const i of shown) parts.push(i < 0 ? '...' : render(depth + 1, offset + i * strides[depth]));
      return `[${parts.join(', ')}]`;
    };
    return `Tensor(dims=[${this.dims.join(', ')}], ${render(0, 0)})`;
  }
}

// ---------------------------------------------------------------------------------------------
// Shape helpers

function productOf(dims: readonly number[]): number {
  let size = 1;
  for (const dim of dims) size *= dim;
  return size;
}

/** Row-major strides in elements. */
export function stridesOf(dims: readonly number[]): number[] {
  const strides = new Array<number>(dims.length);
  let stride = 1;
  for (let i = dims.length - 1; i >= 0; i--) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return strides;
}

/** Resolves a 0-based (or negative) axis against a rank, or throws a clear error. */
export function resolveAxis(axis: number, rank: number, op: string): number {
  if (!Number.isInteger(axis) || axis < -rank || axis >= rank) {
    const valid = rank === 0 ? 'it has no axes' : `valid axes are ${-rank}..${rank - 1}`;
    throw new InternalError(`${op}: axis ${axis} is out of range for a tensor of rank ${rank} (${valid})`);
  }
  return axis < 0 ? axis + rank : axis;
}

/** The tensor seen as [outer, length, inner] around `axis`. */
export function around(dims: readonly number[], axis: number): { outer: number; length: number; inner: number } {
  let outer = 1;
  for (let i = 0; i < axis; i++) outer *= dims[i];
  let inner = 1;
  for (let i = axis + 1; i < dims.length; i++) inner *= dims[i];
  return { outer, length: dims[axis], inner };
}

export function withoutAxis(dims: readonly number[], axis: number): number[] {
  return dims.filter((_, i) => i !== axis);
}

// ---------------------------------------------------------------------------------------------
// Along one axis

/** Numerically stable softmax along `axis` (the maximum is subtracted before exp). */
export function softmax(t: Tensor, axis = -1): Tensor {
  const a = resolveAxis(axis, t.rank, 'softmax');
  const { outer, length, inner } = around(t.dims, a);
  const src = t.data;
  const out = new Float32Array(src.length);
  if (length === 0) return new Tensor(out, t.dims);
  if (inner === 1) {
    for (let base = 0, end = outer * length; base < end; base += length) {
      const stop = base + length;
      let maxValue = -Infinity;
      for (let i = base; i < stop; i++) if (src[i] > maxValue) maxValue = src[i];
      let total = 0;
      for (let i = base; i < stop; i++) {
        const e = Math.exp(src[i] - maxValue);
        out[i] = e;
        total += e;
      }
      const scale = 1 / total;
      for (let i = base; i < stop; i++) out[i] *= scale;
    }
    return new Tensor(out, t.dims);
  }
  const maxima = new Float64Array(inner);
  const totals = new Float64Array(inner);
  const block = length * inner;
  for (let base = 0; base < outer * block; base += block) {
    maxima.fill(-Infinity);
    for (let row = base; row < base + block; row += inner) {
      for (let j = 0; j < inner; j++) if (src[row + j] > maxima[j]) maxima[j] = src[row + j];
    }
    totals.fill(0);
    for (let row = base; row < base + block; row += inner) {
      for (let j = 0; j < inner; j++) {
        const e = Math.exp(src[row + j] - maxima[j]);
        out[row + j] = e;
        totals[j] += e;
      }
    }
    for (let j = 0; j < inner; j++) totals[j] = 1 / totals[j];
    for (let row = base; row < base + block; row += inner) {
      for (let j = 0; j < inner; j++) out[row + j] *= totals[j];
    }
  }
  return new Tensor(out, t.dims);
}

/** Index of the largest value along `axis` (first one on ties), as floats; the axis is removed. */
export function argmax(t: Tensor, axis = -1): Tensor {
  const a = resolveAxis(axis, t.rank, 'argmax');
  const { outer, length, inner } = around(t.dims, a);
  if (length === 0) throw new InternalError(`argmax: axis ${axis} is empty`);
  const src = t.data;
  const out = new Float32Array(outer * inner);
  if (inner === 1) {
    for (let o = 0, base = 0; o < outer; o++, base += length) {
      let best = src[base];
      let bestIndex = 0;
      for (let k = 1; k < length; k++) {
        if (src[base + k] > best) {
          best = src[base + k];
          bestIndex = k;
        }
      }
      out[o] = bestIndex;
    }
    return new Tensor(out, withoutAxis(t.dims, a));
  }
  const best = new Float32Array(inner);
  for (let o = 0; o < outer; o++) {
    const base = o * length * inner;
    const target = o * inner;
    best.set(src.subarray(base, base + inner));
    // out[target + j] is already 0, the index of the first slice.
    for (let k = 1; k < length; k++) {
      const row = base + k * inner;
      for (let j = 0; j < inner; j++) {
        if (src[row + j] > best[j]) {
          best[j] = src[row + j];
          out[target + j] = k;
        }
      }
    }
  }
  return new Tensor(out, withoutAxis(t.dims, a));
}

/** Norm along an axis, summed in float64. p = Infinity gives the largest absolute value. */
function normOf(sumOfPowers: number, p: number): number {
  if (p === 2) return Math.sqrt(sumOfPowers);
  if (p === 1 || p === Infinity) return sumOfPowers;
  return sumOfPowers ** (1 / p);
}

function powerOf(v: number, p: number): number {
  if (p === 2) return v * v;
  if (p === 1) return Math.abs(v);
  return Math.abs(v) ** p;
}

/** x / max(||x||_p, 1e-12) along `axis`, like torch.nn.functional.normalize. */
export function lpNormalize(t: Tensor, p = 2, axis = -1): Tensor {
  if (typeof p !== 'number' || !(p > 0)) {
    throw new InternalError(`lp_normalize: p must be a number > 0, got ${p}`);
  }
  const a = resolveAxis(axis, t.rank, 'lp_normalize');
  const { outer, length, inner } = around(t.dims, a);
  const src = t.data;
  const out = new Float32Array(src.length);
  if (inner === 1) {
    for (let base = 0, end = outer * length; base < end; base += length) {
      const stop = base + length;
      let acc = 0;
      if (p === 2) {
        for (let i = base; i < stop; i++) acc += src[i] * src[i];
      } else if (p === Infinity) {
        for (let i = base; i < stop; i++) acc = Math.max(acc, Math.abs(src[i]));
      } else {
        for (let i = base; i < stop; i++) acc += powerOf(src[i], p);
      }
      const scale = 1 / Math.max(normOf(acc, p), 1e-12);
      for (let i = base; i < stop; i++) out[i] = src[i] * scale;
    }
    return new Tensor(out, t.dims);
  }
  const scales = new Float64Array(inner);
  const block = length * inner;
  for (let base = 0; base < outer * block; base += block) {
    scales.fill(0);
    for (let row = base; row < base + block; row += inner) {
      for (let j = 0; j < inner; j++) {
        scales[j] = p === Infinity ? Math.max(scales[j], Math.abs(src[row + j])) : scales[j] + powerOf(src[row + j], p);
      }
    }
    for (let j = 0; j < inner; j++) scales[j] = 1 / Math.max(normOf(scales[j], p), 1e-12);
    for (let row = base; row < base + block; row += inner) {
      for (let j = 0; j < inner; j++) out[row + j] = src[row + j] * scales[j];
    }
  }
  return new Tensor(out, t.dims);
}

type Reduction = 'sum' | 'max' | 'min';

function reduceAxis(t: Tensor, axis: number, kind: Reduction, op: string): { out: Float64Array; length: number; dims: number[] } {
  const a = resolveAxis(axis, t.rank, op);
  const { outer, length, inner } = around(t.dims, a);
  if (length === 0 && kind !== 'sum') throw new InternalError(`${op}: axis ${axis} is empty`);
  const src = t.data;
  const out = new Float64Array(outer * inner);
  for (let o = 0; o < outer; o++) {
    const base = o * length * inner;
    const target = o * inner;
    if (kind !== 'sum') for (let j = 0; j < inner; j++) out[target + j] = src[base + j];
    for (let k = kind === 'sum' ? 0 : 1; k < length; k++) {
      const row = base + k * inner;
      if (kind === 'sum') {
        for (let j = 0; j < inner; j++) out[target + j] += src[row + j];
      } else if (kind === 'max') {
        for (let j = 0; j < inner; j++) if (src[row + j] > out[target + j]) out[target + j] = src[row + j];
      } else {
        for (let j = 0; j < inner; j++) if (src[row + j] < out[target + j]) out[target + j] = src[row + j];
      }
    }
  }
  return { out, length, dims: withoutAxis(t.dims, a) };
}

/** Sum along `axis`; the axis is removed. */
export function sumAxis(t: Tensor, axis: number): Tensor {
  const { out, dims } = reduceAxis(t, axis, 'sum', 'sum_axis');
  return new Tensor(Float32Array.from(out), dims);
}

/** Mean along `axis`; the axis is removed (an empty axis gives NaN, like numpy). */
export function meanAxis(t: Tensor, axis: number): Tensor {
  const { out, length, dims } = reduceAxis(t, axis, 'sum', 'mean_axis');
  const result = new Float32Array(out.length);
  for (let i = 0; i < out.length; i++) result[i] = out[i] / length;
  return new Tensor(result, dims);
}

/** Maximum along `axis`; the axis is removed. */
export function maxAxis(t: Tensor, axis: number): Tensor {
  const { out, dims } = reduceAxis(t, axis, 'max', 'max_axis');
  return new Tensor(Float32Array.from(out), dims);
}

/** Minimum along `axis`; the axis is removed. */
export function minAxis(t: Tensor, axis: number): Tensor {
  const { out, dims } = reduceAxis(t, axis, 'min', 'min_axis');
  return new Tensor(Float32Array.from(out), dims);
}

/**
 * Masked mean over the sequence axis: [batch, seq, hidden] with a [batch, seq] mask → [batch, hidden].
 * Mask values weight the tokens (0 drops one); a row whose mask is all zero gives zeros.
 */
export function meanPool(t: Tensor, mask: MaskLike): Tensor {
  if (t.rank !== 3) {
    throw new InternalError(`mean_pool: expected a [batch, seq, hidden] tensor, got dims [${t.dims.join(', ')}]`);
  }
  const [batch, seq, hidden] = t.dims;
  let weights: ArrayLike<number> | ArrayLike<bigint>;
  if (mask instanceof Tensor) {
    if (mask.rank !== 2 || mask.dims[0] !== batch || mask.dims[1] !== seq) {
      throw new InternalError(
        `mean_pool: mask dims [${mask.dims.join(', ')}] do not match [batch, seq] = [${batch}, ${seq}]`,
      );
    }
    weights = mask.data;
  } else {
    if (mask.length !== batch * seq) {
      throw new InternalError(`mean_pool: mask has ${mask.length} values, expected batch*seq = ${batch * seq}`);
    }
    weights = mask;
  }
  const src = t.data;
  const out = new Float32Array(batch * hidden);
  const acc = new Float64Array(hidden);
  for (let b = 0; b < batch; b++) {
    acc.fill(0);
    let count = 0;
    for (let s = 0; s < seq; s++) {
      const w = Number(weights[b * seq + s]);
      if (w === 0) continue;
      count += w;
      const row = (b * seq + s) * hidden;
      if (w === 1) {
        for (let j = 0; j < hidden; j++) acc[j] += src[row + j];
      } else {
        for (let j = 0; j < hidden; j++) acc[j] += w * src[row + j];
      }
    }
    if (count > 0) {
      const scale = 1 / count;
      const target = b * hidden;
      for (let j = 0; j < hidden; j++) out[target + j] = acc[j] * scale;
    }
  }
  return new Tensor(out, [batch, hidden]);
}

// ---------------------------------------------------------------------------------------------
// Elementwise

export function exp(t: Tensor): Tensor {
  const src = t.data;
  const out = new Float32Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = Math.exp(src[i]);
  return new Tensor(out, t.dims);
}

export type BinaryOp = 'add' | 'sub' | 'mul' | 'div';
export type Operand = Tensor | number;

export function add(a: Operand, b: Operand): Tensor {
  return elementwise(a, b, 'add');
}

export function sub(a: Operand, b: Operand): Tensor {
  return elementwise(a, b, 'sub');
}

export function mul(a: Operand, b: Operand): Tensor {
  return elementwise(a, b, 'mul');
}

export function div(a: Operand, b: Operand): Tensor {
  return elementwise(a, b, 'div');
}

/** Output dims of numpy-style broadcasting, or undefined when the shapes are incompatible. */
export function broadcastDims(a: readonly number[], b: readonly number[]): number[] | undefined {
  const rank = Math.max(a.length, b.length);
  const dims = new Array<number>(rank);
  for (let i = 0; i < rank; i++) {
    const da = i < rank - a.length ? 1 : a[i - (rank - a.length)];
    const db = i < rank - b.length ? 1 : b[i - (rank - b.length)];
    if (da !== db && da !== 1 && db !== 1) return undefined;
    dims[i] = da === 1 ? db : da;
  }
  return dims;
}

/** `a op b` with a tensor and a number, or two tensors of the same or broadcastable dims. */
export function elementwise(a: Operand, b: Operand, op: BinaryOp): Tensor {
  if (typeof a === 'number' && typeof b === 'number') {
    throw new InternalError(`${op}: at least one operand must be a tensor`);
  }
  if (typeof b === 'number') return withScalar((a as Tensor).data, b, op, false, (a as Tensor).dims);
  if (typeof a === 'number') return withScalar(b.data, a, op, true, b.dims);
  if (sameDims(a.dims, b.dims)) {
    const out = new Float32Array(a.size);
    applyRow(op, out, 0, a.data, 0, 1, b.data, 0, 1, a.size);
    return new Tensor(out, a.dims);
  }
  const dims = broadcastDims(a.dims, b.dims);
  if (dims === undefined) {
    throw new InternalError(
      `${op}: dims [${a.dims.join(', ')}] and [${b.dims.join(', ')}] cannot be broadcast together`,
    );
  }
  return broadcast(a, b, dims, op);
}

function sameDims(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function withScalar(src: Float32Array, s: number, op: BinaryOp, scalarFirst: boolean, dims: readonly number[]): Tensor {
  const out = new Float32Array(src.length);
  const n = src.length;
  switch (op) {
    case 'add':
      for (let i = 0; i < n; i++) out[i] = src[i] + s;
      break;
    case 'mul':
      for (let i = 0; i < n; i++) out[i] = src[i] * s;
      break;
    case 'sub':
      if (scalarFirst) for (let i = 0; i < n; i++) out[i] = s - src[i];
      else for (let i = 0; i < n; i++) out[i] = src[i] - s;
      break;
    case 'div':
      if (scalarFirst) for (let i = 0; i < n; i++) out[i] = s / src[i];
      else for (let i = 0; i < n; i++) out[i] = src[i] / s;
      break;
  }
  return new Tensor(out, dims);
}

/** out[o + j] = x[xo + j*xs] op y[yo + j*ys] for j < n (a stride of 0 repeats a broadcast value). */
function applyRow(
  op: BinaryOp,
  out: Float32Array,
  o: number,
  x: Float32Array,
  xo: number,
  xs: number,
  y: Float32Array,
  yo: number,
  ys: number,
  n: number,
): void {
  switch (op) {
    case 'add':
      for (let j = 0; j < n; j++) out[o + j] = x[xo + j * xs] + y[yo + j * ys];
      break;
    case 'sub':
      for (let j = 0; j < n; j++) out[o + j] = x[xo + j * xs] - y[yo + j * ys];
      break;
    case 'mul':
      for (let j = 0; j < n; j++) out[o + j] = x[xo + j * xs] * y[yo + j * ys];
      break;
    case 'div':
      for (let j = 0; j < n; j++) out[o + j] = x[xo + j * xs] / y[yo + j * ys];
      break;
  }
}

/** Strides of `dims` aligned to an output of rank `rank`, 0 where the input is broadcast. */
function broadcastStrides(dims: readonly number[], rank: number): number[] {
  const own = stridesOf(dims);
  const strides = new Array<number>(rank).fill(0);
  for (let i = 0; i < dims.length; i++) {
    strides[rank - dims.length + i] = dims[i] === 1 ? 0 : own[i];
  }
  return strides;
}

function broadcast(a: Tensor, b: Tensor, dims: number[], op: BinaryOp): Tensor {
  const rank = dims.length;
  const out = new Float32Array(productOf(dims));
  if (out.length === 0) return new Tensor(out, dims);
  const as = broadcastStrides(a.dims, rank);
  const bs = broadcastStrides(b.dims, rank);
  const last = rank - 1;
  const rowLength = dims[last];
  const rows = out.length / rowLength;
  // An odometer over all axes but the last keeps both input offsets without divisions.
  const index = new Array<number>(rank).fill(0);
  let ao = 0;
  let bo = 0;
  for (let r = 0; r < rows; r++) {
    applyRow(op, out, r * rowLength, a.data, ao, as[last], b.data, bo, bs[last], rowLength);
    for (let axis = last - 1; axis >= 0; axis--) {
      index[axis]++;
      ao += as[axis];
      bo += bs[axis];
      if (index[axis] < dims[axis]) break;
      ao -= as[axis] * dims[axis];
      bo -= bs[axis] * dims[axis];
      index[axis] = 0;
    }
  }
  return new Tensor(out, dims);
}

// ---------------------------------------------------------------------------------------------
// Layout and whole-tensor reductions

/** Swaps the last two axes; a tensor of rank < 2 is returned as a copy. */
export function transpose(t: Tensor): Tensor {
  if (t.rank < 2) return new Tensor(t.data.slice(), t.dims);
  const rows = t.dims[t.rank - 2];
  const cols = t.dims[t.rank - 1];
  const matrix = rows * cols;
  const src = t.data;
  const out = new Float32Array(src.length);
  for (let base = 0; base < src.length; base += matrix) {
    for (let i = 0; i < rows; i++) {
      const from = base + i * cols;
      for (let j = 0; j < cols; j++) out[base + j * rows + i] = src[from + j];
    }
  }
  const dims = [...t.dims];
  dims[t.rank - 2] = cols;
  dims[t.rank - 1] = rows;
  return new Tensor(out, dims);
}

/** The first `length` entries along `axis` (matryoshka-style truncation of embeddings). */
export function truncateAxis(t: Tensor, axis: number, length: number): Tensor {
  const a = resolveAxis(axis, t.rank, 'truncate_axis');
  if (!Number.isInteger(length) || length < 0 || length > t.dims[a]) {
    throw new InternalError(`truncate_axis: length ${length} is outside 0..${t.dims[a]}`);
  }
  const { outer, length: full, inner } = around(t.dims, a);
  const keep = length * inner;
  const out = new Float32Array(outer * keep);
  for (let o = 0; o < outer; o++) out.set(t.data.subarray(o * full * inner, o * full * inner + keep), o * keep);
  const dims = [...t.dims];
  dims[a] = length;
  return new Tensor(out, dims);
}

/** Sum of all elements (0 for an empty tensor). */
export function sum(t: Tensor): number {
  const src = t.data;
  let total = 0;
  for (let i = 0; i < src.length; i++) total += src[i];
  return total;
}

/** Mean of all elements (NaN for an empty tensor). */
export function mean(t: Tensor): number {
  return sum(t) / t.size;
}

/** Largest element; throws on an empty tensor. */
export function max(t: Tensor): number {
  if (t.size === 0) throw new InternalError('max: the tensor is empty');
  const src = t.data;
  let best = src[0];
  for (let i = 1; i < src.length; i++) if (src[i] > best) best = src[i];
  return best;
}

/** Smallest element; throws on an empty tensor. */
export function min(t: Tensor): number {
  if (t.size === 0) throw new InternalError('min: the tensor is empty');
  const src = t.data;
  let best = src[0];
  for (let i = 1; i < src.length; i++) if (src[i] < best) best = src[i];
  return best;
}
