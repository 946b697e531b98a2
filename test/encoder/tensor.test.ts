import { describe, expect, it } from 'vitest';
import { InternalError } from '../../src/encoder/errors.ts';
import {
  add,
  argmax,
  broadcastDims,
  div,
  exp,
  lpNormalize,
  max,
  maxAxis,
  mean,
  meanAxis,
  meanPool,
  min,
  minAxis,
  mul,
  softmax,
  sub,
  sum,
  sumAxis,
  Tensor,
  transpose,
  truncateAxis,
} from '../../src/encoder/tensor.ts';

// ---------------------------------------------------------------------------------------------
// Naive references: index arithmetic written out per element, independent of the fast loops.

/** Deterministic pseudo-random values in [-4, 4). */
function randomTensor(dims: number[], seed = 1): Tensor {
  let state = seed >>> 0 || 1;
  const size = dims.reduce((a, b) => a * b, 1);
  const data = new Float32Array(size);
  for (let i = 0; i < size; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    data[i] = (state / 2 ** 32) * 8 - 4;
  }
  return new Tensor(data, dims);
}

function strides(dims: readonly number[]): number[] {
  const s = new Array<number>(dims.length).fill(1);
  for (let i = dims.length - 2; i >= 0; i--) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

function unravel(flat: number, dims: readonly number[]): number[] {
  return strides(dims).map((s, i) => Math.floor(flat / s) % dims[i]);
}

function ravel(index: readonly number[], dims: readonly number[]): number {
  const s = strides(dims);
  return index.reduce((acc, v, i) => acc + v * s[i], 0);
}

/** Values of the 1-D slice through `index` along `axis`. */
function slice(t: Tensor, index: readonly number[], axis: number): number[] {
  const values: number[] = [];
  for (let k = 0; k < t.dims[axis]; k++) {
    const at = [...index];
    at[axis] = k;
    values.push(t.data[ravel(at, t.dims)]);
  }
  return values;
}

/** For every element of the result with the axis removed: fn(slice) . */
function naiveReduce(t: Tensor, axis: number, fn: (values: number[]) => number): Tensor {
  const dims = t.dims.filter((_, i) => i !== axis);
  const size = dims.reduce((a, b) => a * b, 1);
  const data = new Float32Array(size);
  for (let i = 0; i < size; i++) {
    const index = unravel(i, dims);
    index.splice(axis, 0, 0);
    data[i] = fn(slice(t, index, axis));
  }
  return new Tensor(data, dims);
}

/** For every slice along the axis: the slice mapped by fn, written back in place. */
function naiveMapAxis(t: Tensor, axis: number, fn: (values: number[]) => number[]): Tensor {
  const out = new Float32Array(t.size);
  for (let i = 0; i < t.size; i++) {
    const index = unravel(i, t.dims);
    if (index[axis] !== 0) continue;
    const mapped = fn(slice(t, index, axis));
    for (let k = 0; k < mapped.length; k++) {
      const at = [...index];
      at[axis] = k;
      out[ravel(at, t.dims)] = mapped[k];
    }
  }
  return new Tensor(out, t.dims);
}

function expectClose(actual: Tensor, expected: Tensor, tolerance = 1e-6): void {
  expect(actual.dims).toEqual(expected.dims);
  expect(actual.data.length).toBe(expected.data.length);
  for (let i = 0; i < actual.data.length; i++) {
    const a = actual.data[i];
    const e = expected.data[i];
    if (Math.abs(a - e) > tolerance * Math.max(1, Math.abs(e))) {
      throw new Error(`mismatch at ${i}: ${a} vs ${e}`);
    }
  }
}

const SHAPES: number[][] = [[7], [3, 5], [2, 3, 4], [2, 3, 4, 5]];

// ---------------------------------------------------------------------------------------------

describe('Tensor', () => {
  it('keeps data and dims, with rank and size', () => {
    const t = new Tensor(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
    expect(t.rank).toBe(2);
    expect(t.size).toBe(6);
    expect(t.dims).toEqual([2, 3]);
    expect(Object.isFrozen(t.dims)).toBe(true);
  });

  it('copies the dims it is given', () => {
    const dims = [2, 2];
    const t = new Tensor(new Float32Array(4), dims);
    dims[0] = 4;
    expect(t.dims).toEqual([2, 2]);
  });

  it('rejects dims that do not match the data length', () => {
    expect(() => new Tensor(new Float32Array(5), [2, 3])).toThrow(InternalError);
    expect(() => new Tensor(new Float32Array(5), [2, 3])).toThrow('dims [2, 3] hold 6 values but the data has 5');
  });

  it('rejects negative or fractional dims', () => {
    expect(() => new Tensor(new Float32Array(0), [-1, 0])).toThrow('invalid dims');
    expect(() => new Tensor(new Float32Array(2), [1.5, 2])).toThrow('invalid dims');
  });

  it('allows rank 0 (one value) and empty tensors', () => {
    expect(new Tensor(new Float32Array([3]), []).size).toBe(1);
    expect(new Tensor(new Float32Array(0), [2, 0]).size).toBe(0);
  });

  it('round-trips nested arrays', () => {
    const t = Tensor.fromNested([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(t.dims).toEqual([2, 3]);
    expect(Array.from(t.data)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(t.toNested()).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(Tensor.fromNested(5).dims).toEqual([]);
    expect(Tensor.fromNested([]).dims).toEqual([0]);
  });

  it('rejects ragged nested arrays', () => {
    expect(() => Tensor.fromNested([[1, 2], [3]])).toThrow('ragged');
    expect(() => Tensor.fromNested([[1, 2], 3] as never)).toThrow('ragged');
  });

  it('prints a summary that elides long axes', () => {
    expect(String(Tensor.fromNested([[1, 2.5]]))).toBe('Tensor(dims=[1, 2], [[1, 2.5]])');
    const long = String(new Tensor(Float32Array.from({ length: 10 }, (_, i) => i), [10]));
    expect(long).toBe('Tensor(dims=[10], [0, 1, 2, ..., 7, 8, 9])');
  });
});

describe('softmax', () => {
  for (const dims of SHAPES) {
    for (let axis = 0; axis < dims.length; axis++) {
      it(`matches the reference on [${dims}] along axis ${axis}`, () => {
        const t = randomTensor(dims, dims.length * 10 + axis);
        const expected = naiveMapAxis(t, axis, (values) => {
          const m = Math.max(...values);
          const e = values.map((v) => Math.exp(v - m));
          const total = e.reduce((a, b) => a + b, 0);
          return e.map((v) => v / total);
        });
        expectClose(softmax(t, axis), expected);
      });
    }
  }

  it('makes rows that sum to 1 within 1e-6 on a [32, 128, 384]-like array', () => {
    const t = randomTensor([4, 16, 384], 7);
    const s = softmax(t, 2);
    for (let row = 0; row < 4 * 16; row++) {
      let total = 0;
      for (let j = 0; j < 384; j++) total += s.data[row * 384 + j];
      expect(Math.abs(total - 1)).toBeLessThan(1e-6);
    }
  });

  it('is stable for large logits', () => {
    const s = softmax(Tensor.fromNested([[1000, 1001, 1002]]), -1);
    expect(Array.from(s.data).every(Number.isFinite)).toBe(true);
    expect(s.data[2]).toBeCloseTo(0.66524, 4);
  });

  it('defaults to the last axis and accepts negative axes', () => {
    const t = randomTensor([2, 3, 4]);
    expectClose(softmax(t), softmax(t, 2));
    expectClose(softmax(t, -2), softmax(t, 1));
  });

  it('rejects an axis out of range', () => {
    const t = randomTensor([2, 3]);
    expect(() => softmax(t, 2)).toThrow(InternalError);
    expect(() => softmax(t, 2)).toThrow('softmax: axis 2 is out of range for a tensor of rank 2 (valid axes are -2..1)');
    expect(() => softmax(t, -3)).toThrow('out of range');
    expect(() => softmax(t, 0.5)).toThrow('out of range');
  });

  it('does not modify its input', () => {
    const t = randomTensor([2, 3]);
    const copy = t.data.slice();
    softmax(t, 1);
    expect(t.data).toEqual(copy);
  });
});

describe('argmax', () => {
  for (const dims of SHAPES) {
    for (let axis = 0; axis < dims.length; axis++) {
      it(`matches the reference on [${dims}] along axis ${axis}`, () => {
        const t = randomTensor(dims, 3 + axis);
        const expected = naiveReduce(t, axis, (values) => values.indexOf(Math.max(...values)));
        expectClose(argmax(t, axis), expected, 0);
      });
    }
  }

  it('removes the axis and picks the first of equal values', () => {
    const r = argmax(Tensor.fromNested([[1, 3, 3], [2, 0, 1]]), 1);
    expect(r.dims).toEqual([2]);
    expect(Array.from(r.data)).toEqual([1, 0]);
  });

  it('rejects an empty axis and an axis out of range', () => {
    expect(() => argmax(new Tensor(new Float32Array(0), [2, 0]), 1)).toThrow('argmax: axis 1 is empty');
    expect(() => argmax(randomTensor([2, 3]), 5)).toThrow('argmax: axis 5 is out of range');
  });
});

describe('lpNormalize', () => {
  const norm = (values: number[], p: number): number =>
    p === Infinity
      ? Math.max(...values.map(Math.abs))
      : values.reduce((acc, v) => acc + Math.abs(v) ** p, 0) ** (1 / p);

  for (const p of [2, 1, 3, Infinity]) {
    for (const dims of SHAPES) {
      for (let axis = 0; axis < dims.length; axis++) {
        it(`matches the reference for p=${p} on [${dims}] along axis ${axis}`, () => {
          const t = randomTensor(dims, 11 + axis);
          const expected = naiveMapAxis(t, axis, (values) => {
            const n = Math.max(norm(values, p), 1e-12);
            return values.map((v) => v / n);
          });
          expectClose(lpNormalize(t, p, axis), expected, 1e-5);
        });
      }
    }
  }

  it('makes L2 rows of unit length', () => {
    const t = randomTensor([4, 16, 384], 5);
    const n = lpNormalize(t, 2, -1);
    for (let row = 0; row < 4 * 16; row++) {
      let total = 0;
      for (let j = 0; j < 384; j++) total += n.data[row * 384 + j] ** 2;
      expect(Math.abs(Math.sqrt(total) - 1)).toBeLessThan(1e-5);
    }
  });

  it('divides by 1e-12 instead of a zero norm, like torch F.normalize', () => {
    const n = lpNormalize(Tensor.fromNested([[0, 0], [3, 4]]));
    expect(Array.from(n.data)).toEqual([0, 0, Math.fround(0.6), Math.fround(0.8)]);
    const tiny = lpNormalize(Tensor.fromNested([[1e-13, 0]]));
    expect(tiny.data[0]).toBeCloseTo(0.1, 6);
  });

  it('rejects p <= 0 and an axis out of range', () => {
    const t = randomTensor([2, 3]);
    expect(() => lpNormalize(t, 0)).toThrow('lp_normalize: p must be a number > 0, got 0');
    expect(() => lpNormalize(t, Number.NaN)).toThrow('p must be a number > 0');
    expect(() => lpNormalize(t, 2, 3)).toThrow('lp_normalize: axis 3 is out of range');
  });
});

describe('axis reductions', () => {
  const cases = [
    { name: 'sumAxis', fn: sumAxis, ref: (v: number[]) => v.reduce((a, b) => a + b, 0) },
    { name: 'meanAxis', fn: meanAxis, ref: (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length },
    { name: 'maxAxis', fn: maxAxis, ref: (v: number[]) => Math.max(...v) },
    { name: 'minAxis', fn: minAxis, ref: (v: number[]) => Math.min(...v) },
  ];
  for (const { name, fn, ref } of cases) {
    for (const dims of SHAPES) {
      for (let axis = 0; axis < dims.length; axis++) {
        it(`${name} matches the reference on [${dims}] along axis ${axis}`, () => {
          const t = randomTensor(dims, 21 + axis);
          expectClose(fn(t, axis), naiveReduce(t, axis, ref), 1e-5);
        });
      }
    }
    it(`${name} accepts negative axes and rejects axes out of range`, () => {
      const t = randomTensor([2, 3, 4]);
      expectClose(fn(t, -1), fn(t, 2));
      expect(() => fn(t, 3)).toThrow(/axis 3 is out of range/);
      expect(() => fn(t, -4)).toThrow(InternalError);
    });
  }

  it('sums an empty axis to 0 and refuses max/min of it', () => {
    const empty = new Tensor(new Float32Array(0), [2, 0]);
    expect(Array.from(sumAxis(empty, 1).data)).toEqual([0, 0]);
    expect(() => maxAxis(empty, 1)).toThrow('max_axis: axis 1 is empty');
    expect(() => minAxis(empty, 1)).toThrow('min_axis: axis 1 is empty');
  });
});

describe('meanPool', () => {
  function naiveMeanPool(t: Tensor, mask: number[]): Tensor {
    const [batch, seq, hidden] = t.dims;
    const out = new Float32Array(batch * hidden);
    for (let b = 0; b < batch; b++) {
      const count = mask.slice(b * seq, (b + 1) * seq).reduce((a, c) => a + c, 0);
      for (let h = 0; h < hidden; h++) {
        let total = 0;
        for (let s = 0; s < seq; s++) total += mask[b * seq + s] * t.data[(b * seq + s) * hidden + h];
        out[b * hidden + h] = count > 0 ? total / count : 0;
      }
    }
    return new Tensor(out, [batch, hidden]);
  }

  it('matches the masked-mean reference with a Tensor mask', () => {
    const t = randomTensor([3, 5, 8], 2);
    const mask = [1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0];
    const pooled = meanPool(t, new Tensor(Float32Array.from(mask), [3, 5]));
    expectClose(pooled, naiveMeanPool(t, mask), 1e-6);
  });

  it('accepts flat number and int64 arrays as masks', () => {
    const t = randomTensor([2, 3, 4], 9);
    const mask = [1, 0, 1, 1, 1, 0];
    expectClose(meanPool(t, mask), naiveMeanPool(t, mask));
    expectClose(meanPool(t, BigInt64Array.from(mask.map(BigInt))), naiveMeanPool(t, mask));
  });

  it('ignores masked tokens entirely', () => {
    const t = Tensor.fromNested([[[10, 0], [99, 99], [20, 0]]]);
    expect(meanPool(t, [1, 0, 1]).toNested()).toEqual([[15, 0]]);
  });

  it('gives zeros for an all-zero mask instead of NaN', () => {
    const pooled = meanPool(randomTensor([2, 2, 3]), [0, 0, 1, 1]);
    expect(Array.from(pooled.data.subarray(0, 3))).toEqual([0, 0, 0]);
    expect(Array.from(pooled.data).every(Number.isFinite)).toBe(true);
  });

  it('rejects a tensor that is not [batch, seq, hidden] and masks of the wrong shape', () => {
    expect(() => meanPool(randomTensor([2, 3]), [1, 1, 1, 1, 1, 1])).toThrow('mean_pool: expected a [batch, seq, hidden] tensor');
    expect(() => meanPool(randomTensor([2, 3, 4]), [1, 1])).toThrow('mask has 2 values, expected batch*seq = 6');
    expect(() => meanPool(randomTensor([2, 3, 4]), Tensor.zeros([3, 2]))).toThrow('mask dims [3, 2] do not match [batch, seq] = [2, 3]');
  });
});

describe('elementwise', () => {
  const ops = [
    { name: 'add', fn: add, ref: (a: number, b: number) => a + b },
    { name: 'sub', fn: sub, ref: (a: number, b: number) => a - b },
    { name: 'mul', fn: mul, ref: (a: number, b: number) => a * b },
    { name: 'div', fn: div, ref: (a: number, b: number) => a / b },
  ];

  /** Broadcast reference: each output index maps to input indices with size-1 axes pinned to 0. */
  function naiveBinary(a: Tensor, b: Tensor, f: (x: number, y: number) => number): Tensor {
    const dims = broadcastDims(a.dims, b.dims)!;
    const out = new Float32Array(dims.reduce((x, y) => x * y, 1));
    const pick = (t: Tensor, index: number[]): number => {
      const own = index.slice(index.length - t.rank).map((v, i) => (t.dims[i] === 1 ? 0 : v));
      return t.data[ravel(own, t.dims)];
    };
    for (let i = 0; i < out.length; i++) {
      const index = unravel(i, dims);
      out[i] = f(pick(a, index), pick(b, index));
    }
    return new Tensor(out, dims);
  }

  for (const { name, fn, ref } of ops) {
    it(`${name} with a scalar on either side`, () => {
      const t = randomTensor([2, 3], 4);
      expectClose(fn(t, 2.5), new Tensor(t.data.map((v) => ref(v, 2.5)), t.dims));
      expectClose(fn(2.5, t), new Tensor(t.data.map((v) => ref(2.5, v)), t.dims));
    });

    it(`${name} with same-shape and broadcast tensors`, () => {
      const pairs: [number[], number[]][] = [
        [[2, 3, 4], [2, 3, 4]],
        [[2, 3, 4], [4]],
        [[2, 3, 4], [2, 3, 1]],
        [[2, 1, 4], [3, 1]],
        [[1], [2, 3]],
        [[2, 3, 4], []],
      ];
      for (const [da, db] of pairs) {
        const a = randomTensor(da, 31);
        const b = new Tensor(randomTensor(db, 32).data.map((v) => v + 5), db); // no division by ~0
        expectClose(fn(a, b), naiveBinary(a, b, ref));
      }
    });
  }

  it('rejects shapes that cannot be broadcast and two scalars', () => {
    expect(() => add(randomTensor([2, 3]), randomTensor([2]))).toThrow('add: dims [2, 3] and [2] cannot be broadcast together');
    expect(() => mul(2, 3)).toThrow('at least one operand must be a tensor');
  });

  it('exp matches Math.exp', () => {
    const t = randomTensor([3, 4]);
    expectClose(exp(t), new Tensor(t.data.map(Math.exp), t.dims));
  });
});

describe('transpose', () => {
  it('swaps the last two axes of each matrix', () => {
    const t = randomTensor([2, 3, 4]);
    const r = transpose(t);
    expect(r.dims).toEqual([2, 4, 3]);
    for (let b = 0; b < 2; b++) {
      for (let i = 0; i < 3; i++) {
        for (let j = 0; j < 4; j++) {
          expect(r.data[ravel([b, j, i], r.dims)]).toBe(t.data[ravel([b, i, j], t.dims)]);
        }
      }
    }
    expect(transpose(r).data).toEqual(t.data);
  });

  it('copies a tensor of rank < 2', () => {
    const t = Tensor.fromNested([1, 2, 3]);
    const r = transpose(t);
    expect(r.toNested()).toEqual([1, 2, 3]);
    expect(r.data).not.toBe(t.data);
  });
});

describe('truncateAxis', () => {
  it('keeps the first entries along any axis', () => {
    const t = randomTensor([2, 3, 4], 13);
    for (let axis = 0; axis < 3; axis++) {
      for (let length = 0; length <= t.dims[axis]; length++) {
        const r = truncateAxis(t, axis, length);
        const dims = [...t.dims];
        dims[axis] = length;
        expect(r.dims).toEqual(dims);
        for (let i = 0; i < r.size; i++) {
          expect(r.data[i]).toBe(t.data[ravel(unravel(i, dims), t.dims)]);
        }
      }
    }
  });

  it('rejects lengths beyond the axis and axes out of range', () => {
    const t = randomTensor([2, 3]);
    expect(() => truncateAxis(t, 1, 4)).toThrow('truncate_axis: length 4 is outside 0..3');
    expect(() => truncateAxis(t, 1, -1)).toThrow('outside');
    expect(() => truncateAxis(t, 2, 1)).toThrow('truncate_axis: axis 2 is out of range');
  });
});

describe('whole-tensor reductions', () => {
  it('sum, mean, max, min match the reference (functions and methods)', () => {
    const t = randomTensor([3, 4, 5], 8);
    const values = Array.from(t.data);
    const total = values.reduce((a, b) => a + b, 0);
    expect(sum(t)).toBeCloseTo(total, 4);
    expect(t.sum()).toBe(sum(t));
    expect(mean(t)).toBeCloseTo(total / values.length, 6);
    expect(t.mean()).toBe(mean(t));
    expect(max(t)).toBe(Math.max(...values));
    expect(t.max()).toBe(max(t));
    expect(min(t)).toBe(Math.min(...values));
    expect(t.min()).toBe(min(t));
  });

  it('sum of an empty tensor is 0, max/min of one throw', () => {
    const empty = new Tensor(new Float32Array(0), [0]);
    expect(sum(empty)).toBe(0);
    expect(() => max(empty)).toThrow('max: the tensor is empty');
    expect(() => min(empty)).toThrow('min: the tensor is empty');
  });
});
