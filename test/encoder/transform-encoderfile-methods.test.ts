/**
 * mozilla-ai/encoderfile's tensor methods layer_norm, clamp, std, fold_axis, map_axis (and its truncate_axis that
 * keeps a too-short axis whole), each checked against values computed here with plain loops over nested arrays, not
 * with the project's tensor operations: 1-based axes, layer_norm's population variance and eps inside the root,
 * std's ddof, clamp's optional and inverted bounds, what the fold and map callbacks receive. Then encoderfile's
 * documented Matryoshka recipe (mean pool, layer norm, truncate, normalise), and bad arguments as Lua errors.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { Tensor } from '../../src/encoder/tensor.ts';
import { DEFAULT_LUA_LIBS, DEFAULT_MEMORY_LIMIT_BYTES, LuaTransform } from '../../src/encoder/transform/index.ts';
import { loadLuaModule } from '../../src/encoder/transform/lua-module.ts';
import type { LuaModule } from '../../src/encoder/transform/lua-module.ts';
import { TransformScriptError, TransformState } from '../../src/encoder/transform/transform-state.ts';
import { InternalError } from '../../src/encoder/errors.ts';

let module: LuaModule;
beforeAll(async () => {
  module = await loadLuaModule();
});

type Nested = number | Nested[];

/** [2, 3, 4] values with a spread of signs and sizes, as nested arrays (the reference's own form). */
const NESTED: number[][][] = [0, 1].map((b) => [0, 1, 2].map((s) => [0, 1, 2, 3].map((h) => Math.round(100 * (Math.sin(b * 12 + s * 4 + h + 1) * (1 + b + h))) / 100)));

function tensorOf(nested: Nested): Tensor {
  return Tensor.fromNested(nested as never);
}

function run(script: string, output: Tensor = tensorOf(NESTED), mask?: Tensor, timeoutMs = 5_000): Tensor {
  const state = TransformState.open(module, script, DEFAULT_LUA_LIBS, { timeoutMs, memoryLimitBytes: DEFAULT_MEMORY_LIMIT_BYTES });
  try {
    return state.run(output, mask);
  } finally {
    state.close();
  }
}

function failure(script: string, output?: Tensor, timeoutMs?: number): string {
  try {
    run(script, output, undefined, timeoutMs);
  } catch (error) {
    expect(error).toBeInstanceOf(TransformScriptError);
    return (error as Error).message;
  }
  throw new Error('the script did not fail');
}

/** The nested form of a result, to compare with the plain-loop expectation. */
function nested(t: Tensor): Nested {
  const build = (offset: number, depth: number): Nested => {
    if (depth === t.rank) return t.data[offset];
    const step = t.dims.slice(depth + 1).reduce((a, b) => a * b, 1);
    return Array.from({ length: t.dims[depth] }, (_, i) => build(offset + i * step, depth + 1));
  };
  return build(0, 0);
}

function expectClose(actual: Nested, expected: Nested, digits = 5): void {
  if (typeof expected === 'number') {
    if (Number.isNaN(expected)) expect(actual).toBeNaN();
    else expect(actual as number).toBeCloseTo(expected, digits);
    return;
  }
  expect(Array.isArray(actual)).toBe(true);
  expect((actual as Nested[]).length).toBe(expected.length);
  expected.forEach((e, i) => expectClose((actual as Nested[])[i], e, digits));
}

/** Plain layer norm of one vector: population variance, eps inside the square root. */
function normRow(row: number[], eps: number): number[] {
  const mean = row.reduce((a, b) => a + b, 0) / row.length;
  const variance = row.reduce((a, b) => a + (b - mean) ** 2, 0) / row.length;
  return row.map((v) => (v - mean) / Math.sqrt(variance + eps));
}

describe('layer_norm(axis, eps)', () => {
  it('normalises along the last axis (3) with the population variance', () => {
    expectClose(nested(run('return output:layer_norm(3, 1e-5)')), NESTED.map((m) => m.map((row) => normRow(row, 1e-5))));
  });

  it('along axis 2 (the tokens of each hidden component) and axis 1', () => {
    const along2 = NESTED.map((m) => {
      const columns = [0, 1, 2, 3].map((h) => normRow(m.map((row) => row[h]), 1e-5));
      return m.map((_, s) => columns.map((col) => col[s]));
    });
    expectClose(nested(run('return output:layer_norm(2, 1e-5)')), along2);
    const along1 = NESTED[0].map((row, s) => row.map((_, h) => normRow([NESTED[0][s][h], NESTED[1][s][h]], 0.5)));
    const expected1 = [0, 1].map((b) => along1.map((row) => row.map((pair) => pair[b])));
    expectClose(nested(run('return output:layer_norm(1, 0.5)')), expected1);
  });

  it('eps matters, defaults to 1e-5, and a constant row stays finite (0)', () => {
    expectClose(nested(run('return output:layer_norm(3, 10)')), NESTED.map((m) => m.map((row) => normRow(row, 10))));
    expectClose(nested(run('return output:layer_norm(-1)')), NESTED.map((m) => m.map((row) => normRow(row, 1e-5))));
    expectClose(nested(run('return output:layer_norm(2, 1e-5)', tensorOf([[5, 5, 5]]))), [[0, 0, 0]]);
  });
});

describe('clamp(min, max)', () => {
  const values = [-5, -1, 0, 0.5, 1, 5];
  const input = tensorOf([values, values.map((v) => v * 3)]);
  const clampPlain = (lo: number, hi: number) => [values, values.map((v) => v * 3)].map((r) => r.map((v) => Math.min(Math.max(v, lo), hi)));

  it('bounds both sides, either side alone (nil), or none', () => {
    expect(nested(run('return output:clamp(-1, 1)', input))).toEqual(clampPlain(-1, 1));
    expect(nested(run('return output:clamp(0)', input))).toEqual(clampPlain(0, Infinity));
    expect(nested(run('return output:clamp(nil, 2)', input))).toEqual(clampPlain(-Infinity, 2));
    expect(nested(run('return output:clamp()', input))).toEqual(clampPlain(-Infinity, Infinity));
    expect(nested(run('return output:clamp(-math.huge, math.huge)', input))).toEqual(clampPlain(-Infinity, Infinity));
  });

  it('inverted bounds give max everywhere; a NaN bound gives NaN everywhere', () => {
    expect(nested(run('return output:clamp(5, 2)', input))).toEqual(clampPlain(5, 2));
    expect(nested(run('return output:clamp(5, 2)', input))).toEqual([values.map(() => 2), values.map(() => 2)]);
    expect(Array.from(run('return output:clamp(0/0, 1)', input).data).every(Number.isNaN)).toBe(true);
  });
});

describe('std(ddof)', () => {
  const flat = NESTED.flat(2);
  const plainStd = (ddof: number) => {
    const mean = flat.reduce((a, b) => a + b, 0) / flat.length;
    return Math.sqrt(flat.reduce((a, b) => a + (b - mean) ** 2, 0) / (flat.length - ddof));
  };

  it('over every element, population (0, the default) or sample (1)', () => {
    const [population, sample, fallback] = run('return Tensor.new({ output:std(0), output:std(1), output:std() })').data;
    expect(population).toBeCloseTo(plainStd(0), 5);
    expect(sample).toBeCloseTo(plainStd(1), 5);
    expect(fallback).toBeCloseTo(plainStd(0), 5);
    expect(sample).toBeGreaterThan(population);
  });

  it('ddof equal to the count is NaN, above it an error', () => {
    expect(run('return Tensor.new({ output:std(3) })', tensorOf([1, 2, 3])).data[0]).toBeNaN();
    expect(failure('return Tensor.new({ output:std(4) })', tensorOf([1, 2, 3]))).toBe('transform line 1: std: ddof 4 is outside 0..3 (the element count)');
    expect(failure('return Tensor.new({ output:std(-1) })')).toBe('transform line 1: std: ddof -1 is outside 0..24 (the element count)');
  });
});

describe('fold_axis(axis, acc, f)', () => {
  it('folds each slice along the axis, from acc each time, in row-major order: a rank-1 result', () => {
    // axis 1: one result per batch row, over its 12 values
    expectClose(nested(run('return output:fold_axis(1, 0, function(acc, x) return acc + x end)')), NESTED.map((m) => m.flat().reduce((a, b) => a + b, 0)), 4);
    // axis 3: one result per hidden index, over the 6 values of the batch and tokens
    const perHidden = [0, 1, 2, 3].map((h) => NESTED.flatMap((m) => m.map((row) => row[h])).reduce((a, b) => a * 0.5 + b, 1));
    expectClose(nested(run('return output:fold_axis(3, 1, function(acc, x) return acc * 0.5 + x end)')), perHidden, 4);
  });

  it('the callback sees the order of the elements (it is not only a sum)', () => {
    const input = tensorOf([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    // acc * 10 + x writes the digits in the order they came
    expect(nested(run('return output:fold_axis(1, 0, function(acc, x) return acc * 10 + x end)', input))).toEqual([123, 456]);
    expect(nested(run('return output:fold_axis(2, 0, function(acc, x) return acc * 10 + x end)', input))).toEqual([14, 25, 36]);
  });

  it('refuses a callback that returns no number, a missing function or acc, and stops one that loops', () => {
    expect(failure('return output:fold_axis(1, 0, function(acc, x) return "x" end)')).toBe(
      'transform line 1: fold_axis: the function must return a number, it returned string',
    );
    expect(failure('return output:fold_axis(1, 0, 3)')).toBe('transform line 1: fold_axis: bad argument #4 (function expected, got number)');
    expect(failure('return output:fold_axis(1, function(a, x) return a end)')).toBe(
      'transform line 1: fold_axis: bad argument #3 (acc: number expected, got function)',
    );
    expect(failure('return output:fold_axis(1, 0, function(acc, x) error("boom") end)')).toBe('transform line 1: boom');
    expect(failure('return output:fold_axis(1, 0, function(acc, x)\n  while true do end\nend)', undefined, 50)).toBe(
      'transform line 2: the transform ran longer than its limit of 50 ms',
    );
  });
  it('stops a callback that catches the error of its time limit, and the transform keeps working', async () => {
    const script = 'function Postprocess(arr)\n  if arr:sum() > 0 then arr:fold_axis(1, 0, function(a, x) while true do pcall(function() while true do end end) end end) end\n  return arr\nend';
    const transform = await LuaTransform.create(script, { modelType: 'sequence_classification', timeoutMs: 30 });
    try {
      await expect(async () => transform.run(tensorOf([[1, 2]]))).rejects.toThrow(
        'transform: the transform ran longer than its limit of 30 ms and caught the error that stopped it',
      );
      expect(nested(transform.run(tensorOf([[-1, -2]])))).toEqual([[-1, -2]]);
    } finally {
      transform.close();
    }
  });
});

describe('map_axis(axis, f)', () => {
  it('gives f each slice along the axis as a tensor (axis removed) and stacks the results back on that axis', () => {
    const seen = run('return output:map_axis(2, function(slice) seen_dims = seen_dims or slice:shape() return slice * 2 end) + 0');
    expectClose(nested(seen), NESTED.map((m) => m.map((row) => row.map((v) => v * 2))));
    const dims = run('output:map_axis(2, function(slice) d = slice:shape() return slice end) return Tensor.new(d)');
    expect(Array.from(dims.data)).toEqual([2, 4]);
  });

  it('per-slice work along the last axis: each token vector scaled by its own maximum', () => {
    const expected = NESTED.map((m) => m.map((row) => row.map((v) => v / Math.max(...row))));
    expectClose(nested(run('return output:map_axis(1, function(m) return m:map_axis(1, function(row) return row / row:max() end) end)')), expected);
  });

  it('a slice may map to another shape, the same for all, or to a nested table', () => {
    const firstTwo = NESTED.map((m) => m.map((row) => row.slice(0, 2)));
    expectClose(nested(run('return output:map_axis(1, function(m) return m:truncate_axis(2, 2) end)')), firstTwo);
    expect(nested(run('return output:map_axis(1, function(m) return {1, 2} end)'))).toEqual([
      [1, 2],
      [1, 2],
    ]);
  });

  it('refuses results of different shapes, non-tensors, a bad axis and a missing function', () => {
    expect(failure('n = 0 return output:map_axis(1, function(m) n = n + 1 return m:truncate_axis(1, n) end)')).toBe(
      'transform line 1: map_axis: the function returned dims [2, 4] for index 2 and [1, 4] for index 1; every slice must map to one shape',
    );
    expect(failure('return output:map_axis(1, function(m) return "no" end)')).toBe('transform line 1: map_axis: the function must return a tensor, it returned string');
    expect(failure('return output:map_axis(3, function(m) return Tensor.new(1) end)')).toBe(
      'transform line 1: map_axis: the function returned rank-0 tensors, which cannot be stacked back along axis 3',
    );
    expect(failure('return output:map_axis(4, function(m) return m end)')).toBe(
      'transform line 1: map_axis: axis 4 is out of range for a tensor with 3 axes (use 1..3, or -3..-1 from the end)',
    );
    expect(failure('return output:map_axis(1)')).toBe('transform line 1: map_axis: bad argument #3 (function expected, got no value)');
  });
});

describe('bad arguments of the five methods are Lua errors, never a crash', () => {
  it('axes and types', () => {
    expect(failure('return output:layer_norm(0, 1e-5)')).toBe(
      'transform line 1: layer_norm: axis 0 is out of range for a tensor with 3 axes (use 1..3, or -3..-1 from the end)',
    );
    expect(failure('return output:layer_norm()')).toBe('transform line 1: layer_norm: bad argument #2 (axis: integer expected, got no value)');
    expect(failure('return output:layer_norm(3, "x")')).toBe('transform line 1: layer_norm: bad argument #3 (eps: number expected, got string)');
    expect(failure('return output:layer_norm(3, -1)')).toBe('transform line 1: layer_norm: eps must be >= 0, got -1');
    expect(failure('return output:clamp("a")')).toBe('transform line 1: clamp: bad argument #2 (min: number expected, got string)');
    expect(failure('return output:fold_axis(1.5, 0, function(a) return a end)')).toBe(
      'transform line 1: fold_axis: bad argument #2 (axis: integer expected, got 1.5)',
    );
    expect(failure('return Tensor.new({ output.std(3) })')).toBe('transform line 1: std: bad argument #1 (tensor: tensor expected, got number)');
  });

  it('a nested table where a tensor argument goes, as encoderfile converts it', () => {
    const plain = NESTED.map((m) => m.map((row) => row.map((v, h) => v + [1, 2, 3, 4][h])));
    expectClose(nested(run('return output + {1, 2, 3, 4}')), plain);
    expectClose(nested(run('return {1, 2, 3, 4} + output')), plain);
    const pooled = NESTED.map((m) => [0, 1, 2, 3].map((h) => (m[0][h] + m[1][h]) / 2));
    expectClose(nested(run('return output:mean_pool({{1, 1, 0}, {1, 1, 0}})')), pooled);
    expect(failure('return output + {1, {2}}')).toBe('transform line 1: add: ragged table: a table at level 1 where numbers were expected');
  });

  it('truncate_axis beyond the axis keeps it whole, as encoderfile does', () => {
    expectClose(nested(run('return output:truncate_axis(3, 512)')), NESTED);
  });
});

describe("encoderfile's Matryoshka recipe (mean pool, layer_norm, truncate_axis, lp_normalize)", () => {
  const RECIPE = `
MatryoshkaDim = 3
Eps = 1e-5
function Postprocess(arr, mask)
    local embeddings = arr:mean_pool(mask)
    embeddings = embeddings:layer_norm(2, Eps)
    embeddings = embeddings:truncate_axis(2, MatryoshkaDim)
    embeddings = embeddings:lp_normalize(2.0, 2)
    return embeddings
end`;
  const mask = [
    [1, 1, 1],
    [1, 1, 0],
  ];
  const expected = NESTED.map((m, b) => {
    const kept = m.filter((_, s) => mask[b][s] === 1);
    const pooled = [0, 1, 2, 3].map((h) => kept.reduce((a, row) => a + row[h], 0) / kept.length);
    const short = normRow(pooled, 1e-5).slice(0, 3);
    const norm = Math.sqrt(short.reduce((a, v) => a + v * v, 0));
    return short.map((v) => v / norm);
  });

  it('gives the plain computation, with unit-length vectors', () => {
    const result = run(RECIPE, tensorOf(NESTED), tensorOf(mask));
    expect(result.dims).toEqual([2, 3]);
    expectClose(nested(result), expected);
  });

  it('runs as a sentence_embedding transform (the model type encoderfile uses it with)', async () => {
    const transform = await LuaTransform.create(RECIPE, { modelType: 'sentence_embedding' });
    try {
      const out = transform.run(tensorOf(NESTED), tensorOf(mask));
      expectClose(nested(out), expected);
      await expect(async () => transform.run(tensorOf([[[1, 2, 3, 4]]]), tensorOf([[1, 1]]))).rejects.toBeInstanceOf(InternalError);
    } finally {
      transform.close();
    }
  });
});
