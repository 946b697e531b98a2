/**
 * The Lua face of tensor.ts, mirroring mozilla-ai/encoderfile's Tensor: a userdata whose methods
 * call the TypeScript bulk operations, so a script never walks elements one by one (design
 * decision 5). Axes and indices are 1-based, as usual in Lua; a negative axis counts from the end.
 *
 *   arr:softmax(axis?)  arr:argmax(axis?)  arr:lp_normalize(p?, axis?)     (default: last axis, p = 2)
 *   arr:sum_axis(axis)  arr:mean_axis(axis)  arr:max_axis(axis)  arr:min_axis(axis)
 *   arr:mean_pool(mask)  arr:exp()  arr:transpose()  arr:truncate_axis(axis, length)
 *   arr:layer_norm(axis, eps?)  arr:clamp(min?, max?)  arr:std(ddof?)  arr:fold_axis(axis, acc, f)  arr:map_axis(axis, f)
 *   arr:shape()  arr:ndim()  arr:sum()  arr:mean()  arr:max()  arr:min()  arr:get(i, j, ...)
 *   #arr  tostring(arr)  arr == other  -arr  arr + x  arr - x  arr * x  arr / x  (x: number or tensor)
 *   Tensor.new(nested_table) / Tensor(nested_table)
 *   softmax(t, axis?)  argmax(t, axis?)  lp_normalize(t, p?, axis?)  mean_pool(t, mask)
 *
 * argmax returns 1-based indices so that they can be passed to get().
 */
import {
  add,
  argmax,
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
} from '../tensor.ts';
import type { Operand } from '../tensor.ts';
import { clamp, layerNorm, sliceAt, stack, std } from '../tensor-stats.ts';
import type { CFunctionBody, LuaModule, LuaState } from './lua-module.ts';
import { LUA_TFUNCTION, LUA_TNIL, LUA_TNONE, LUA_TNUMBER, LUA_TTABLE, TENSOR_METATABLE } from './lua-module.ts';

/** Nested tables deeper than this are refused by Tensor.new (and cycles end here too). */
const MAX_NESTING = 32;
/** layer_norm's eps when a script leaves it out (encoderfile requires it; its examples and torch use 1e-5). */
const DEFAULT_LAYER_NORM_EPS = 1e-5;

export class TensorApi {
  readonly #module: LuaModule;
  readonly #methods: Record<string, number> = {};
  readonly #metamethods: Record<string, number> = {};
  readonly #tensorNew: number;
  readonly #tensorCall: number;

  constructor(module: LuaModule) {
    this.#module = module;
    const lua = module.lua;
    const define = (table: Record<string, number>, name: string, body: CFunctionBody, errorName = name): void => {
      table[name] = module.cfunction(errorName, body);
    };
    const pushTensor = (L: LuaState, t: Tensor): number => {
      module.pushTensor(L, t);
      return 1;
    };
    const pushNumber = (L: LuaState, n: number): number => {
      lua.lua_pushnumber(L, n);
      return 1;
    };
    const self = (L: LuaState): Tensor => this.#checkTensor(L, 1);

    // Methods; the same functions serve as globals, where argument 1 is the tensor.
    define(this.#methods, 'softmax', (L) => {
      const t = self(L);
      return pushTensor(L, softmax(t, this.#axis(L, 2, t, true)));
    });
    define(this.#methods, 'argmax', (L) => {
      const t = self(L);
      return pushTensor(L, add(argmax(t, this.#axis(L, 2, t, true)), 1));
    });
    define(this.#methods, 'lp_normalize', (L) => {
      const t = self(L);
      const p = this.#optNumber(L, 2, 2, 'p');
      if (!(p > 0)) throw new Error(`p must be > 0, got ${p}`);
      return pushTensor(L, lpNormalize(t, p, this.#axis(L, 3, t, true)));
    });
    const reductions = { sum_axis: sumAxis, mean_axis: meanAxis, max_axis: maxAxis, min_axis: minAxis };
    for (const [name, op] of Object.entries(reductions)) {
      define(this.#methods, name, (L) => {
        const t = self(L);
        return pushTensor(L, op(t, this.#axis(L, 2, t, false)));
      });
    }
    define(this.#methods, 'mean_pool', (L) => {
      const t = self(L);
      const mask = this.#checkTensor(L, 2, 'mask');
      if (t.rank !== 3) throw new Error(`expected a [batch, seq, hidden] tensor, got dims [${t.dims.join(', ')}]`);
      if (mask.rank !== 2 || mask.dims[0] !== t.dims[0] || mask.dims[1] !== t.dims[1]) {
        throw new Error(`mask dims [${mask.dims.join(', ')}] do not match [batch, seq] = [${t.dims[0]}, ${t.dims[1]}]`);
      }
      return pushTensor(L, meanPool(t, mask));
    });
    define(this.#methods, 'truncate_axis', (L) => {
      const t = self(L);
      const axis = this.#axis(L, 2, t, false);
      const length = this.#checkInteger(L, 3, 'length');
      if (length < 0) throw new Error(`length ${length} is below 0`);
      // more than the axis holds keeps it whole, as encoderfile's truncate_axis does (a Matryoshka size above the model's)
      return pushTensor(L, truncateAxis(t, axis, Math.min(length, t.dims[axis])));
    });
    define(this.#methods, 'layer_norm', (L) => {
      const t = self(L);
      const axis = this.#axis(L, 2, t, false);
      const eps = this.#optNumber(L, 3, DEFAULT_LAYER_NORM_EPS, 'eps');
      if (!(eps >= 0)) throw new Error(`eps must be >= 0, got ${eps}`);
      return pushTensor(L, layerNorm(t, axis, eps));
    });
    define(this.#methods, 'clamp', (L) => {
      const t = self(L);
      const bound = (index: number, what: string): number | null => {
        const type = lua.lua_type(L, index);
        return type === LUA_TNONE || type === LUA_TNIL ? null : this.#optNumber(L, index, NaN, what);
      };
      return pushTensor(L, clamp(t, bound(2, 'min'), bound(3, 'max')));
    });
    define(this.#methods, 'std', (L) => {
      const t = self(L);
      const ddof = this.#optNumber(L, 2, 0, 'ddof');
      if (!(ddof >= 0 && ddof <= t.size)) throw new Error(`ddof ${ddof} is outside 0..${t.size} (the element count)`);
      return pushNumber(L, std(t, ddof));
    });
    // encoderfile's fold_axis: for each index along the axis, f(acc, x) over the slice's elements in row-major order,
    // starting from `acc` each time; a rank-1 tensor of the results.
    define(this.#methods, 'fold_axis', (L) => {
      const t = self(L);
      const axis = this.#axis(L, 2, t, false);
      if (lua.lua_type(L, 3) !== LUA_TNUMBER) throw new Error(`bad argument #3 (acc: number expected, got ${module.typeName(L, 3)})`);
      const initial = lua.lua_tonumberx(L, 3, null);
      this.#checkFunction(L, 4);
      const results = new Float32Array(t.dims[axis]);
      for (let index = 0; index < results.length; index++) {
        const slice = sliceAt(t, axis, index).data;
        let acc = initial;
        for (let k = 0; k < slice.length; k++) {
          lua.lua_pushvalue(L, 4);
          lua.lua_pushnumber(L, acc);
          lua.lua_pushnumber(L, slice[k]);
          lua.lua_callk(L, 2, 1, 0, null);
          if (lua.lua_type(L, -1) !== LUA_TNUMBER) {
            throw new Error(`the function must return a number, it returned ${module.typeName(L, -1)}`);
          }
          acc = lua.lua_tonumberx(L, -1, null);
          lua.lua_settop(L, -2);
        }
        results[index] = acc;
      }
      return pushTensor(L, new Tensor(results, [results.length]));
    });
    // encoderfile's map_axis: f receives each slice along the axis as a tensor (the axis removed) and returns a tensor
    // (or nested table) of one shape for all; the results are stacked back along the same axis.
    define(this.#methods, 'map_axis', (L) => {
      const t = self(L);
      const axis = this.#axis(L, 2, t, false);
      this.#checkFunction(L, 3);
      const parts: Tensor[] = [];
      for (let index = 0; index < t.dims[axis]; index++) {
        lua.lua_pushvalue(L, 3);
        module.pushTensor(L, sliceAt(t, axis, index));
        lua.lua_callk(L, 1, 1, 0, null);
        const type = lua.lua_type(L, -1);
        const part = type === LUA_TTABLE ? this.#fromLua(L, lua.lua_gettop(L)) : module.toTensor(L, -1);
        if (part === undefined) throw new Error(`the function must return a tensor, it returned ${module.typeName(L, -1)}`);
        if (parts.length > 0 && (part.rank !== parts[0].rank || part.dims.some((d, k) => d !== parts[0].dims[k]))) {
          throw new Error(`the function returned dims [${part.dims.join(', ')}] for index ${index + 1} and [${parts[0].dims.join(', ')}] for index 1; every slice must map to one shape`);
        }
        parts.push(part);
        lua.lua_settop(L, -2);
      }
      if (parts.length === 0) throw new Error(`axis ${axis + 1} is empty: there is nothing to map`);
      if (axis > parts[0].rank) {
        throw new Error(`the function returned rank-${parts[0].rank} tensors, which cannot be stacked back along axis ${axis + 1}`);
      }
      return pushTensor(L, stack(parts, axis));
    });
    define(this.#methods, 'exp', (L) => pushTensor(L, exp(self(L))));
    define(this.#methods, 'transpose', (L) => pushTensor(L, transpose(self(L))));
    define(this.#methods, 'shape', (L) => {
      const dims = self(L).dims;
      lua.lua_createtable(L, dims.length, 0);
      for (let i = 0; i < dims.length; i++) {
        lua.lua_pushinteger(L, BigInt(dims[i]));
        lua.lua_rawseti(L, -2, BigInt(i + 1));
      }
      return 1;
    });
    define(this.#methods, 'ndim', (L) => {
      lua.lua_pushinteger(L, BigInt(self(L).rank));
      return 1;
    });
    define(this.#methods, 'sum', (L) => pushNumber(L, sum(self(L))));
    define(this.#methods, 'mean', (L) => pushNumber(L, mean(self(L))));
    define(this.#methods, 'max', (L) => pushNumber(L, max(self(L))));
    define(this.#methods, 'min', (L) => pushNumber(L, min(self(L))));
    define(this.#methods, 'get', (L) => {
      const t = self(L);
      const count = lua.lua_gettop(L) - 1;
      if (count !== t.rank) throw new Error(`expected ${t.rank} indices for a tensor with dims [${t.dims.join(', ')}], got ${count}`);
      let flat = 0;
      for (let d = 0; d < t.rank; d++) {
        const index = this.#checkInteger(L, d + 2, `index ${d + 1}`);
        if (index < 1 || index > t.dims[d]) {
          throw new Error(`index ${d + 1} is ${index}, outside 1..${t.dims[d]}`);
        }
        flat = flat * t.dims[d] + (index - 1);
      }
      return pushNumber(L, t.data[flat]);
    });

    // Metamethods
    const arithmetic = { __add: add, __sub: sub, __mul: mul, __div: div };
    for (const [event, op] of Object.entries(arithmetic)) {
      define(this.#metamethods, event, (L) => pushTensor(L, op(this.#operand(L, 1), this.#operand(L, 2))), event.slice(2));
    }
    define(this.#metamethods, '__unm', (L) => pushTensor(L, mul(self(L), -1)), 'unm');
    define(this.#metamethods, '__len', (L) => {
      lua.lua_pushinteger(L, BigInt(self(L).size));
      return 1;
    }, 'len');
    define(this.#metamethods, '__tostring', (L) => {
      lua.lua_pushstring(L, String(self(L)));
      return 1;
    }, 'tostring');
    define(this.#metamethods, '__eq', (L) => {
      const a = module.toTensor(L, 1);
      const b = module.toTensor(L, 2);
      const equal =
        a !== undefined &&
        b !== undefined &&
        a.rank === b.rank &&
        a.dims.every((d, i) => d === b.dims[i]) &&
        a.data.every((v, i) => v === b.data[i]);
      lua.lua_pushboolean(L, equal ? 1 : 0);
      return 1;
    }, 'eq');
    define(this.#metamethods, '__gc', (L) => {
      module.releaseTensor(L, 1);
      return 0;
    }, 'gc');

    this.#tensorNew = module.cfunction('Tensor.new', (L) => pushTensor(L, this.#fromLua(L, 1)));
    // Tensor(t) calls the Tensor table's __call with the table itself as argument 1.
    this.#tensorCall = module.cfunction('Tensor', (L) => pushTensor(L, this.#fromLua(L, 2)));
  }

  /** Creates the Tensor metatable and the globals Tensor, softmax, argmax, lp_normalize, mean_pool. */
  install(L: LuaState): void {
    const lua = this.#module.lua;
    lua.luaL_newmetatable(L, TENSOR_METATABLE);
    lua.lua_createtable(L, 0, Object.keys(this.#methods).length);
    for (const [name, fn] of Object.entries(this.#methods)) {
      lua.lua_pushcclosure(L, fn, 0);
      lua.lua_setfield(L, -2, name);
    }
    lua.lua_setfield(L, -2, '__index');
    for (const [name, fn] of Object.entries(this.#metamethods)) {
      lua.lua_pushcclosure(L, fn, 0);
      lua.lua_setfield(L, -2, name);
    }
    // getmetatable(arr) returns this string and setmetatable on a tensor is refused.
    lua.lua_pushstring(L, 'Tensor');
    lua.lua_setfield(L, -2, '__metatable');
    lua.lua_settop(L, -2);

    lua.lua_createtable(L, 0, 1);
    lua.lua_pushcclosure(L, this.#tensorNew, 0);
    lua.lua_setfield(L, -2, 'new');
    lua.lua_createtable(L, 0, 1);
    lua.lua_pushcclosure(L, this.#tensorCall, 0);
    lua.lua_setfield(L, -2, '__call');
    lua.lua_setmetatable(L, -2);
    lua.lua_setglobal(L, 'Tensor');

    for (const name of ['softmax', 'argmax', 'lp_normalize', 'mean_pool']) {
      lua.lua_pushcclosure(L, this.#methods[name], 0);
      lua.lua_setglobal(L, name);
    }
  }

  /** A tensor argument; past the first (the tensor a method is called on), a nested table too, as encoderfile takes it. */
  #checkTensor(L: LuaState, index: number, what = 'tensor'): Tensor {
    const tensor = this.#module.toTensor(L, index) ?? (index > 1 && this.#module.lua.lua_type(L, index) === LUA_TTABLE ? this.#fromLua(L, index) : undefined);
    if (tensor === undefined) {
      throw new Error(`bad argument #${index} (${what}: tensor expected, got ${this.#module.typeName(L, index)})`);
    }
    return tensor;
  }

  #operand(L: LuaState, index: number): Operand {
    if (this.#module.lua.lua_type(L, index) === LUA_TNUMBER) return this.#module.lua.lua_tonumberx(L, index, null);
    const tensor = this.#module.toTensor(L, index) ?? (this.#module.lua.lua_type(L, index) === LUA_TTABLE ? this.#fromLua(L, index) : undefined);
    if (tensor === undefined) throw new Error(`tensor or number expected, got ${this.#module.typeName(L, index)}`);
    return tensor;
  }

  #checkFunction(L: LuaState, index: number): void {
    if (this.#module.lua.lua_type(L, index) !== LUA_TFUNCTION) {
      throw new Error(`bad argument #${index} (function expected, got ${this.#module.typeName(L, index)})`);
    }
  }

  #optNumber(L: LuaState, index: number, fallback: number, what: string): number {
    const type = this.#module.lua.lua_type(L, index);
    if (type === LUA_TNONE || type === LUA_TNIL) return fallback;
    if (type !== LUA_TNUMBER) {
      throw new Error(`bad argument #${index} (${what}: number expected, got ${this.#module.typeName(L, index)})`);
    }
    return this.#module.lua.lua_tonumberx(L, index, null);
  }

  #checkInteger(L: LuaState, index: number, what: string): number {
    const lua = this.#module.lua;
    const value = lua.lua_type(L, index) === LUA_TNUMBER ? lua.lua_tonumberx(L, index, null) : undefined;
    if (value === undefined || !Number.isInteger(value)) {
      const got = value === undefined ? this.#module.typeName(L, index) : String(value);
      throw new Error(`bad argument #${index} (${what}: integer expected, got ${got})`);
    }
    return value;
  }

  /** A 1-based (or negative) Lua axis as a 0-based one; optional ones default to the last axis. */
  #axis(L: LuaState, index: number, t: Tensor, optional: boolean): number {
    const type = this.#module.lua.lua_type(L, index);
    if (optional && (type === LUA_TNONE || type === LUA_TNIL)) {
      if (t.rank === 0) throw new Error('the tensor has no axes');
      return t.rank - 1;
    }
    const axis = this.#checkInteger(L, index, 'axis');
    if (axis === 0 || axis > t.rank || axis < -t.rank) {
      const valid = t.rank === 0 ? 'it has none' : `use 1..${t.rank}, or -${t.rank}..-1 from the end`;
      throw new Error(`axis ${axis} is out of range for a tensor with ${t.rank} axes (${valid})`);
    }
    return axis > 0 ? axis - 1 : t.rank + axis;
  }

  /** Tensor.new(value): a nested table of numbers, a number (rank 0) or a tensor (copied). */
  #fromLua(L: LuaState, index: number): Tensor {
    const module = this.#module;
    const lua = module.lua;
    const existing = module.toTensor(L, index);
    if (existing) return new Tensor(existing.data.slice(), existing.dims);
    const type = lua.lua_type(L, index);
    if (type === LUA_TNUMBER) return new Tensor(Float32Array.of(lua.lua_tonumberx(L, index, null)), []);
    if (type !== LUA_TTABLE) throw new Error(`bad argument #${index} (table of numbers expected, got ${module.typeName(L, index)})`);

    // Element by element: meant for small constant tables written in a script.
    const dims: number[] = [];
    const values: number[] = [];
    let leafDepth = -1;
    const visit = (tableIndex: number, depth: number): void => {
      if (depth >= MAX_NESTING) throw new Error(`tables nested deeper than ${MAX_NESTING} levels`);
      // lua_rawlen returns a 64-bit lua_Unsigned, i.e. a BigInt.
      const length = Number(lua.lua_rawlen(L, tableIndex));
      if (depth === dims.length) dims.push(length);
      else if (dims[depth] !== length) {
        throw new Error(`ragged table: level ${depth + 1} has ${length} entries where ${dims[depth]} were expected`);
      }
      for (let i = 1; i <= length; i++) {
        const itemType = lua.lua_rawgeti(L, tableIndex, BigInt(i));
        try {
          if (itemType === LUA_TNUMBER) {
            if (leafDepth === -1) leafDepth = depth;
            if (leafDepth !== depth) throw new Error(`ragged table: a number at level ${depth + 1} where tables were expected`);
            values.push(lua.lua_tonumberx(L, -1, null));
          } else if (itemType === LUA_TTABLE) {
            if (leafDepth !== -1 && leafDepth <= depth) {
              throw new Error(`ragged table: a table at level ${depth + 1} where numbers were expected`);
            }
            visit(lua.lua_gettop(L), depth + 1);
          } else {
            throw new Error(`table entries must be numbers or tables, got ${module.typeName(L, -1)}`);
          }
        } finally {
          lua.lua_settop(L, -2);
        }
      }
    };
    visit(lua.lua_absindex(L, index), 0);
    if (dims.reduce((a, b) => a * b, 1) !== values.length) throw new Error('ragged table');
    return new Tensor(Float32Array.from(values), dims);
  }
}

const apis = new WeakMap<LuaModule, TensorApi>();

/** The tensor API of a Lua module (its C functions are registered once per module). */
export function tensorApiFor(module: LuaModule): TensorApi {
  let api = apis.get(module);
  if (api === undefined) {
    api = new TensorApi(module);
    apis.set(module, api);
  }
  return api;
}
