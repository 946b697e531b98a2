/**
 * The tensor object that Lua scripts see: every method against the TypeScript operation it calls,
 * with Lua's 1-based axes. Scripts run in a TransformState directly, so any result shape is allowed.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import {
  add,
  argmax,
  div,
  exp,
  lpNormalize,
  maxAxis,
  meanAxis,
  meanPool,
  minAxis,
  mul,
  softmax,
  sub,
  sumAxis,
  Tensor,
  transpose,
  truncateAxis,
} from '../../src/encoder/tensor.ts';
import { DEFAULT_LUA_LIBS, DEFAULT_MEMORY_LIMIT_BYTES } from '../../src/encoder/transform/index.ts';
import { loadLuaModule } from '../../src/encoder/transform/lua-module.ts';
import type { LuaModule } from '../../src/encoder/transform/lua-module.ts';
import { TransformScriptError, TransformState } from '../../src/encoder/transform/transform-state.ts';

let module: LuaModule;
beforeAll(async () => {
  module = await loadLuaModule();
});

function sample(dims: number[], seed = 1): Tensor {
  const size = dims.reduce((a, b) => a * b, 1);
  return new Tensor(Float32Array.from({ length: size }, (_, i) => 3 * Math.sin(i * 1.7 + seed)), dims);
}

/** Runs an inline script once on `output` (and `mask`) and returns what it returned. */
function lua(script: string, output: Tensor = sample([2, 3, 4]), mask?: Tensor): Tensor {
  const state = TransformState.open(module, script, DEFAULT_LUA_LIBS, { timeoutMs: 5_000, memoryLimitBytes: DEFAULT_MEMORY_LIMIT_BYTES });
  try {
    return state.run(output, mask);
  } finally {
    state.close();
  }
}

/** The numbers a Lua expression list evaluates to (collected into a rank-1 tensor). */
function values(expressions: string, output?: Tensor, mask?: Tensor): number[] {
  return Array.from(lua(`return Tensor.new({ ${expressions} })`, output, mask).data);
}

/** The message of the TransformScriptError a script raises. */
function failure(script: string, output?: Tensor): string {
  try {
    lua(script, output);
  } catch (error) {
    expect(error).toBeInstanceOf(TransformScriptError);
    return (error as Error).message;
  }
  throw new Error('the script did not fail');
}

function expectSame(actual: Tensor, expected: Tensor): void {
  expect(actual.dims).toEqual(expected.dims);
  expect(Array.from(actual.data)).toEqual(Array.from(expected.data));
}

describe('tensor methods call the TypeScript operations (1-based axes)', () => {
  const t = sample([2, 3, 4]);

  it('softmax(axis), defaulting to the last axis, also as a global', () => {
    for (const axis of [1, 2, 3]) expectSame(lua(`return output:softmax(${axis})`, t), softmax(t, axis - 1));
    expectSame(lua('return output:softmax()', t), softmax(t, 2));
    expectSame(lua('return output:softmax(-1)', t), softmax(t, 2));
    expectSame(lua('return softmax(output, 2)', t), softmax(t, 1));
  });

  it('argmax(axis) gives 1-based indices with the axis removed', () => {
    for (const axis of [1, 2, 3]) expectSame(lua(`return output:argmax(${axis})`, t), add(argmax(t, axis - 1), 1));
    expectSame(lua('return argmax(output, 3)', t), add(argmax(t, 2), 1));
    // The index reads back the maximum through get().
    const [index, best, max] = values('output:argmax(3):get(2, 3), output:get(2, 3, output:argmax(3):get(2, 3)), output:max_axis(3):get(2, 3)', t);
    expect(index).toBeGreaterThanOrEqual(1);
    expect(best).toBe(max);
  });

  it('lp_normalize(p, axis) with defaults p = 2 and the last axis, also as a global', () => {
    expectSame(lua('return output:lp_normalize()', t), lpNormalize(t, 2, 2));
    expectSame(lua('return output:lp_normalize(1, 2)', t), lpNormalize(t, 1, 1));
    expectSame(lua('return output:lp_normalize(math.huge, 1)', t), lpNormalize(t, Infinity, 0));
    expectSame(lua('return lp_normalize(output)', t), lpNormalize(t, 2, 2));
    expectSame(lua('return lp_normalize(output, 3, 2)', t), lpNormalize(t, 3, 1));
  });

  it('sum_axis, mean_axis, max_axis, min_axis remove the axis', () => {
    const ops = { sum_axis: sumAxis, mean_axis: meanAxis, max_axis: maxAxis, min_axis: minAxis };
    for (const [name, op] of Object.entries(ops)) {
      for (const axis of [1, 2, 3]) expectSame(lua(`return output:${name}(${axis})`, t), op(t, axis - 1));
    }
  });

  it('mean_pool(mask) as a method and a global', () => {
    const mask = Tensor.fromNested([
      [1, 1, 0],
      [1, 0, 0],
    ]);
    expectSame(lua('return output:mean_pool(mask)', t, mask), meanPool(t, mask));
    expectSame(lua('return mean_pool(output, mask)', t, mask), meanPool(t, mask));
  });

  it('exp, transpose and truncate_axis', () => {
    expectSame(lua('return output:exp()', t), exp(t));
    expectSame(lua('return output:transpose()', t), transpose(t));
    expectSame(lua('return output:truncate_axis(3, 2)', t), truncateAxis(t, 2, 2));
  });

  it('shape, ndim, #, sum, mean, max, min, get', () => {
    expect(values('table.unpack(output:shape())', t)).toEqual([2, 3, 4]);
    expect(values('output:ndim(), #output', t)).toEqual([3, 24]);
    const [total, average, largest, smallest] = values('output:sum(), output:mean(), output:max(), output:min()', t);
    expect(total).toBeCloseTo(t.sum(), 4);
    expect(average).toBeCloseTo(t.mean(), 5);
    expect(largest).toBe(t.max());
    expect(smallest).toBe(t.min());
    expect(values('output:get(1, 1, 1), output:get(2, 3, 4), output:get(1, 2, 3)', t)).toEqual([
      t.data[0],
      t.data[23],
      t.data[1 * 4 + 2],
    ]);
    expect(lua("assert(math.type(output:ndim()) == 'integer' and math.type(#output) == 'integer') return output", t)).toBe(t);
  });

  it('arithmetic with numbers on either side, tensors, broadcasting and unary minus', () => {
    const bias = Tensor.fromNested([1, 2, 3, 4]);
    expectSame(lua('return output + 1', t), add(t, 1));
    expectSame(lua('return 1 - output', t), sub(1, t));
    expectSame(lua('return output * 2.5', t), mul(t, 2.5));
    expectSame(lua('return 2 / output', t), div(2, t));
    expectSame(lua('return output / output', t), div(t, t));
    expectSame(lua('return output - Tensor.new({1, 2, 3, 4})', t), sub(t, bias));
    expectSame(lua('return -output', t), mul(t, -1));
  });

  it('tostring, equality and a protected metatable', () => {
    const small = Tensor.fromNested([[[1, 2]]]);
    expect(lua("assert(tostring(output) == 'Tensor(dims=[1, 1, 2], [[[1, 2]]])') return output", small)).toBe(small);
    lua("assert(output == Tensor.new({{{1, 2}}})) assert(output ~= Tensor.new({{{1, 3}}})) return output", small);
    lua("assert(getmetatable(output) == 'Tensor') assert(type(output) == 'userdata') return output", small);
    expect(failure('setmetatable(output, {}) return output', small)).toBe(
      "transform line 1: bad argument #1 to 'setmetatable' (table expected, got Tensor)",
    );
  });

  it('methods return new tensors and never modify the input', () => {
    const before = t.data.slice();
    lua('local a = output:softmax(3) local b = output * 2 local c = output:lp_normalize() return output', t);
    expect(t.data).toEqual(before);
  });
});

describe('Tensor.new', () => {
  it('builds tensors from nested tables, numbers and other tensors', () => {
    expectSame(lua('return Tensor.new({{1, 2, 3}, {4, 5, 6}})'), Tensor.fromNested([[1, 2, 3], [4, 5, 6]]));
    expectSame(lua('return Tensor({1.5, -2})'), Tensor.fromNested([1.5, -2]));
    expectSame(lua('return Tensor.new(7)'), new Tensor(Float32Array.of(7), []));
    expectSame(lua('return Tensor.new({})'), new Tensor(new Float32Array(0), [0]));
    const copy = lua('return Tensor.new(output)');
    expect(copy.data).not.toBe(sample([2, 3, 4]).data);
    expectSame(copy, sample([2, 3, 4]));
  });

  it('rejects ragged tables, non-numbers and non-tables with the line', () => {
    expect(failure('\nreturn Tensor.new({{1, 2}, {3}})')).toBe(
      'transform line 2: Tensor.new: ragged table: level 2 has 1 entries where 2 were expected',
    );
    expect(failure('return Tensor.new({1, {2}})')).toMatch(/^transform line 1: Tensor.new: ragged table: a table at level 1/);
    expect(failure('return Tensor.new({{1}, 2})')).toMatch(/ragged table: a number at level 1/);
    expect(failure("return Tensor.new({1, 'x'})")).toBe('transform line 1: Tensor.new: table entries must be numbers or tables, got string');
    expect(failure("return Tensor('abc')")).toBe('transform line 1: Tensor: bad argument #2 (table of numbers expected, got string)');
    expect(failure('local t = {} t[1] = t return Tensor.new(t)')).toMatch(/nested deeper than 32 levels/);
  });
});

describe('bad arguments are Lua errors that name the line', () => {
  it('axes out of range, zero, fractional or not numbers', () => {
    expect(failure('return output:softmax(4)')).toBe(
      'transform line 1: softmax: axis 4 is out of range for a tensor with 3 axes (use 1..3, or -3..-1 from the end)',
    );
    expect(failure('\n\nreturn output:sum_axis(0)')).toMatch(/^transform line 3: sum_axis: axis 0 is out of range/);
    expect(failure('return output:argmax(-4)')).toMatch(/argmax: axis -4 is out of range/);
    expect(failure('return output:mean_axis(1.5)')).toBe('transform line 1: mean_axis: bad argument #2 (axis: integer expected, got 1.5)');
    expect(failure("return output:max_axis('x')")).toBe('transform line 1: max_axis: bad argument #2 (axis: integer expected, got string)');
    expect(failure('return output:min_axis()')).toBe('transform line 1: min_axis: bad argument #2 (axis: integer expected, got no value)');
  });

  it('wrong self, masks, p, indices and operands', () => {
    expect(failure('return output.softmax(3)')).toBe('transform line 1: softmax: bad argument #1 (tensor: tensor expected, got number)');
    expect(failure('return softmax({1, 2})')).toBe('transform line 1: softmax: bad argument #1 (tensor: tensor expected, got table)');
    expect(failure('return output:mean_pool(nil)')).toBe('transform line 1: mean_pool: bad argument #2 (mask: tensor expected, got nil)');
    expect(failure('return output:mean_pool(Tensor.new({{1, 1}}))')).toBe(
      'transform line 1: mean_pool: mask dims [1, 2] do not match [batch, seq] = [2, 3]',
    );
    expect(failure('return output:lp_normalize(0)')).toBe('transform line 1: lp_normalize: p must be > 0, got 0');
    expect(failure('return Tensor.new({output:get(3, 1, 1)})')).toBe('transform line 1: get: index 1 is 3, outside 1..2');
    expect(failure('return Tensor.new({output:get(1, 1)})')).toBe(
      'transform line 1: get: expected 3 indices for a tensor with dims [2, 3, 4], got 2',
    );
    expect(failure("return output + 'x'")).toBe('transform line 1: add: tensor or number expected, got string');
    expect(failure('return output * Tensor.new({1, 2})')).toBe(
      'transform line 1: mul: dims [2, 3, 4] and [2] cannot be broadcast together',
    );
    expect(failure('return output:truncate_axis(3, -1)')).toBe('transform line 1: truncate_axis: length -1 is below 0');
  });

  it('a script can catch them with pcall', () => {
    const out = lua("local ok, err = pcall(output.softmax, output, 9) assert(not ok and err:find('out of range')) return output");
    expect(out.dims).toEqual([2, 3, 4]);
  });
});

describe('data crosses in bulk', () => {
  it('hands the same Float32Array in and out (no per-element tables)', () => {
    const t = sample([2, 16, 384]);
    const out = lua('return output', t);
    expect(out).toBe(t);
    expect(out.data).toBe(t.data);
    // The tensor is opaque userdata, not a table of numbers.
    expect(failure("assert(type(output) == 'userdata') assert(output[1] == nil) return output[1]", t)).toBe(
      'transform: Postprocess is not defined and the script returns no value',
    );
  });

  it('round-trips a 2x16x384 tensor through lp_normalize', () => {
    const t = sample([2, 16, 384]);
    expectSame(lua('return lp_normalize(output)', t), lpNormalize(t));
  });

  it('releases tensors that Lua no longer references', () => {
    // Each call makes 4 tensor handles (input, 2 intermediates, result); they must not pile up,
    // even when the script keeps a large table of its own.
    const script = 'big = big or {} for i = 1, 1000 do big[i] = {i} end\nreturn (output * 2):softmax(3):lp_normalize()';
    const before = module.handles.live;
    const state = TransformState.open(module, script, DEFAULT_LUA_LIBS, { timeoutMs: undefined, memoryLimitBytes: DEFAULT_MEMORY_LIMIT_BYTES });
    try {
      const t = sample([2, 3, 4]);
      let peak = 0;
      for (let i = 0; i < 300; i++) {
        state.run(t, undefined);
        peak = Math.max(peak, module.handles.live - before);
      }
      expect(peak).toBeLessThanOrEqual(8);
    } finally {
      state.close();
    }
    expect(module.handles.live).toBe(before);
  });
});
