/**
 * LuaTransform and checkTransform: the two script forms, which libraries a script sees, state
 * reuse, and how failures surface (ConfigError at build/check time, InternalError per request).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigError, InternalError } from '../../src/encoder/errors.ts';
import { lpNormalize, softmax, Tensor } from '../../src/encoder/tensor.ts';
import { checkTransform, DEFAULT_LUA_LIBS, LuaTransform } from '../../src/encoder/transform/index.ts';
import type { CheckTransformOptions, LuaLibrary, LuaTransformOptions } from '../../src/encoder/transform/index.ts';
import { loadLuaModule } from '../../src/encoder/transform/lua-module.ts';

function sample(dims: number[], seed = 1): Tensor {
  const size = dims.reduce((a, b) => a * b, 1);
  return new Tensor(Float32Array.from({ length: size }, (_, i) => 3 * Math.sin(i * 1.3 + seed)), dims);
}

const open: LuaTransform[] = [];
async function transform(script: string, options: Partial<LuaTransformOptions> = {}): Promise<LuaTransform> {
  const t = await LuaTransform.create(script, { modelType: 'token_classification', ...options });
  open.push(t);
  return t;
}
afterEach(() => {
  for (const t of open.splice(0)) t.close();
  vi.restoreAllMocks();
});

/** The error a promise rejects with or a function throws. */
async function caught(action: () => unknown): Promise<Error> {
  try {
    await action();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a failure');
}

async function checkError(script: string, options: Partial<CheckTransformOptions> = {}): Promise<Error> {
  return caught(() =>
    checkTransform(script, { modelType: 'token_classification', outputDims: [2, 3, 4], ...options }),
  );
}

describe('script forms', () => {
  it('calls a global Postprocess(arr, mask)', async () => {
    const t = await transform('function Postprocess(arr, mask)\n  return arr:softmax(3)\nend');
    const output = sample([2, 3, 4]);
    expect(t.run(output).data).toEqual(softmax(output, 2).data);
  });

  it('passes the mask as the second argument (nil when absent)', async () => {
    const t = await transform(
      'function Postprocess(arr, mask)\n  if mask == nil then return arr end\n  return arr * mask:sum()\nend',
    );
    const output = sample([2, 3, 4]);
    expect(t.run(output)).toBe(output);
    const mask = Tensor.fromNested([
      [1, 1, 0],
      [1, 0, 0],
    ]);
    expect(t.run(output, mask).data).toEqual(output.data.map((v) => Math.fround(v * 3)));
  });

  it('runs an inline script with the globals output and mask and serves what it returns', async () => {
    const t = await transform('return lp_normalize(output)', { modelType: 'embedding' });
    const output = sample([2, 16, 384]);
    expect(t.run(output).data).toEqual(lpNormalize(output).data);
    const pooled = await transform('return output * mask:mean()', { modelType: 'embedding' });
    const mask = Tensor.fromNested([[1, 0]]);
    expect(pooled.run(sample([1, 2, 3]), mask).data).toEqual(sample([1, 2, 3]).data.map((v) => Math.fround(v * 0.5)));
  });

  it('sets the globals output and mask only while the script chunk runs', async () => {
    const t = await transform(
      'top_level_saw_output = output ~= nil\n' +
        'function Postprocess(arr, mask)\n  assert(top_level_saw_output)\n  assert(output == nil and mask ~= nil)\n  return arr\nend',
    );
    const mask = Tensor.fromNested([[1, 1]]);
    t.run(sample([1, 2, 3]), mask);
    t.run(sample([1, 2, 3]), mask);
  });
});

describe('state reuse', () => {
  it('keeps globals across calls of a Postprocess script without creating a new Lua state', async () => {
    const t = await transform('calls = 0\nfunction Postprocess(arr)\n  calls = calls + 1\n  return arr * calls\nend');
    const newState = vi.spyOn((await loadLuaModule()).lua, 'luaL_newstate');
    const output = Tensor.fromNested([[[1, 2]]]);
    expect(Array.from(t.run(output).data)).toEqual([1, 2]);
    expect(Array.from(t.run(output).data)).toEqual([2, 4]);
    expect(Array.from(t.run(output).data)).toEqual([3, 6]);
    expect(newState).not.toHaveBeenCalled();
  });

  it('keeps globals across calls of an inline script (the chunk reruns in the same state)', async () => {
    const t = await transform('counter = (counter or 0) + 1\nreturn output + counter');
    const output = Tensor.fromNested([[[0]]]);
    expect([t.run(output), t.run(output), t.run(output)].map((r) => r.data[0])).toEqual([1, 2, 3]);
  });

  it('runs the top level of a Postprocess script once', async () => {
    const t = await transform('loads = (loads or 0) + 1\nfunction Postprocess(arr) return arr + loads end');
    const output = Tensor.fromNested([[[0]]]);
    expect([t.run(output), t.run(output)].map((r) => r.data[0])).toEqual([1, 1]);
  });

  it('serves concurrent callers one at a time with correct results', async () => {
    const t = await transform('function Postprocess(arr) return arr:softmax(3) end');
    const inputs = Array.from({ length: 8 }, (_, i) => sample([1, 4, 5], i));
    const results = await Promise.all(inputs.map(async (input) => t.run(input)));
    results.forEach((r, i) => expect(r.data).toEqual(softmax(inputs[i], 2).data));
  });

  it('keeps separate transforms apart', async () => {
    const a = await transform('x = 1\nfunction Postprocess(arr) return arr + x end');
    const b = await transform('function Postprocess(arr) return arr + (x or 10) end');
    const output = Tensor.fromNested([[[0]]]);
    expect([a.run(output).data[0], b.run(output).data[0]]).toEqual([1, 10]);
  });
});

describe('libraries', () => {
  async function probe(expression: string, libs?: readonly LuaLibrary[]): Promise<boolean> {
    const t = await transform(`return output + ((${expression}) and 1 or 0)`, libs ? { libs } : {});
    return t.run(Tensor.fromNested([[[0]]])).data[0] === 1;
  }

  it('opens table, string and math by default and keeps the base library', async () => {
    expect(DEFAULT_LUA_LIBS).toEqual(['table', 'string', 'math']);
    expect(await probe("table.concat({'a', 'b'}) == 'ab'")).toBe(true);
    expect(await probe("string.upper('x') == 'X' and ('y'):upper() == 'Y'")).toBe(true);
    expect(await probe('math.sqrt(9) == 3')).toBe(true);
    expect(await probe("type(pairs) == 'function' and type(pcall) == 'function' and type(setmetatable) == 'function'")).toBe(true);
    expect(await probe("tostring(1) == '1' and select('#', 1, 2) == 2 and type(ipairs) == 'function'")).toBe(true);
  });

  it('has no io, os, package, require, dofile, loadfile, debug, coroutine or utf8 by default', async () => {
    for (const name of ['io', 'os', 'package', 'require', 'dofile', 'loadfile', 'debug', 'coroutine', 'utf8']) {
      expect(await probe(`${name} == nil`), name).toBe(true);
    }
  });

  it('opens each listed library, and only those', async () => {
    expect(await probe("type(io.write) == 'function' and type(dofile) == 'function' and type(loadfile) == 'function'", ['io'])).toBe(true);
    expect(await probe("type(os.time()) == 'number' and os.exit ~= nil", ['os'])).toBe(true);
    expect(await probe("type(package.path) == 'string' and type(require) == 'function'", ['package'])).toBe(true);
    expect(await probe("utf8.char(72) == 'H'", ['utf8'])).toBe(true);
    expect(await probe('coroutine.wrap(function() coroutine.yield(7) end)() == 7', ['coroutine'])).toBe(true);
    expect(await probe('io == nil and os == nil and require == nil', ['utf8'])).toBe(true);
  });

  it('lua_libs: [math] means string and table are absent', async () => {
    expect(await probe('string == nil and table == nil and math ~= nil', ['math'])).toBe(true);
    const t = await transform("return output + #(('x'):upper())", { libs: ['math'] });
    const error = await caught(() => t.run(Tensor.fromNested([[[0]]])));
    expect(error).toBeInstanceOf(InternalError);
    expect(error.message).toMatch(/^transform line 1: attempt to index a string value/);
  });

  it('require loads standard modules when package is listed', async () => {
    expect(await probe("require('string') == string", ['package', 'string'])).toBe(true);
  });

  it('refuses os.exit, which would end the server', async () => {
    const t = await transform('function Postprocess(arr)\n  os.exit(1)\nend', { libs: ['os'] });
    const error = await caught(() => t.run(Tensor.fromNested([[[0]]])));
    expect(error).toBeInstanceOf(InternalError);
    expect(error.message).toBe('transform line 2: os.exit is not available in a transform');
  });

  it('load accepts text only (binary chunks could escape the sandbox)', async () => {
    expect(await probe("load('return 1')() == 1")).toBe(true);
    expect(await probe("select(2, load(string.dump(function() end))):find('binary') ~= nil")).toBe(true);
    expect(await probe("load('return x', 'n', 'b', {x = 1})() == 1")).toBe(true);
  });

  it('print writes to stderr, never stdout', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const t = await transform("function Postprocess(arr) print('shape', #arr, nil) return arr end");
    t.run(sample([1, 2, 3]));
    expect(stderr).toHaveBeenCalledWith('shape\t6\tnil\n');
  });

  it('io.write and io.stdout write to stderr too, so a transform with io cannot corrupt JSON on stdout', () => {
    // In a process of its own: the Lua runtime's stdout is bound when the wasm module starts.
    const dir = mkdtempSync(join(tmpdir(), 'transform-stdout-'));
    const script = join(dir, 'run.ts');
    const transformModule = join(import.meta.dirname, '../../src/encoder/transform/index.ts');
    const tensorModule = join(import.meta.dirname, '../../src/encoder/tensor.ts');
    writeFileSync(
      script,
      `import { LuaTransform } from ${JSON.stringify(transformModule)};
import { Tensor } from ${JSON.stringify(tensorModule)};
const t = await LuaTransform.create('function Postprocess(arr) io.write("a\\\\n") io.stdout:write("b\\\\n") io.stdout:flush() return arr end', { modelType: 'embedding', libs: ['io'] });
t.run(Tensor.fromNested([[[1]]]));
process.stdout.write('done');
`,
    );
    const child = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 30_000 });
    rmSync(dir, { recursive: true, force: true });
    expect({ status: child.status, stdout: child.stdout }, child.stderr).toEqual({ status: 0, stdout: 'done' });
    expect(child.stderr).toContain('a\nb\n');
  });

  it('rejects unknown library names', async () => {
    const error = await caught(() => LuaTransform.create('return output', { modelType: 'embedding', libs: ['debug' as LuaLibrary] }));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe(
      'transform: unknown Lua library "debug" (valid: coroutine, table, io, os, string, utf8, math, package)',
    );
  });
});

describe('checkTransform (build time): every problem is a ConfigError naming the line', () => {
  it('accepts valid scripts of each model type', async () => {
    await checkTransform('function Postprocess(arr) return arr:softmax(3) end', {
      modelType: 'token_classification',
      outputDims: [2, 3, 5],
    });
    await checkTransform('function Postprocess(arr) return arr:softmax(2) end', {
      modelType: 'sequence_classification',
      outputDims: [2, 4],
    });
    await checkTransform('return lp_normalize(output)', { modelType: 'embedding', outputDims: [2, 3, 8] });
  });

  it('a script without Postprocess that returns nothing', async () => {
    const error = await checkError('local x = 1\nx = x + 1');
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe('transform: Postprocess is not defined and the script returns no value');
  });

  it('a syntax error, with its line', async () => {
    const error = await checkError('function Postprocess(arr)\n  local x = = 1\n  return arr\nend');
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe("transform line 2: unexpected symbol near '='");
  });

  it('a runtime error in Postprocess, with its line', async () => {
    const error = await checkError('function Postprocess(arr)\n  local t = nil\n  return t.field\nend');
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe("transform line 3: attempt to index a nil value (local 't')");
  });

  it('a runtime error at the top level and an error() raised by the script', async () => {
    expect((await checkError('\n\nundefined_function()')).message).toBe(
      "transform line 3: attempt to call a nil value (global 'undefined_function')",
    );
    expect((await checkError("function Postprocess(arr)\n  error('labels are missing')\nend")).message).toBe(
      'transform line 2: labels are missing',
    );
    expect((await checkError("function Postprocess(arr)\n  error('plain', 0)\nend")).message).toBe('transform: plain');
    expect((await checkError('function Postprocess(arr)\n  error({})\nend')).message).toBe(
      'transform: (error object is a table value)',
    );
  });

  it('a bad call of a tensor method, with its line', async () => {
    const error = await checkError('function Postprocess(arr)\n\n  return arr:softmax(4)\nend');
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe(
      'transform line 3: softmax: axis 4 is out of range for a tensor with 3 axes (use 1..3, or -3..-1 from the end)',
    );
  });

  it('a return value that is not a tensor', async () => {
    expect((await checkError('function Postprocess(arr) return 42 end')).message).toBe(
      'transform: Postprocess must return a tensor, got number (Tensor.new(t) builds one from a table)',
    );
    expect((await checkError('function Postprocess(arr) return {1, 2} end')).message).toMatch(
      /^transform: Postprocess must return a tensor, got table/,
    );
    expect((await checkError('function Postprocess(arr) end')).message).toMatch(/must return a tensor, got nil/);
    expect((await checkError("return 'text'")).message).toMatch(/^transform: the script must return a tensor, got string/);
    expect((await checkError('Postprocess = 3')).message).toBe('transform: Postprocess must be a function, got number');
  });

  it('shape rules: token classification keeps [batch, seq, labels] exactly', async () => {
    const error = await checkError('function Postprocess(arr) return arr:argmax(3) end');
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe('transform: a token_classification transform must return [batch, seq, labels] = [2, 3, 4], got [2, 3]');
    expect((await checkError('function Postprocess(arr) return arr:truncate_axis(3, 2) end')).message).toMatch(/got \[2, 3, 2\]/);
  });

  it('shape rules: sequence classification keeps [batch, labels] exactly', async () => {
    const options = { modelType: 'sequence_classification', outputDims: [2, 4] } as const;
    expect((await checkError('return output:truncate_axis(2, 3)', options)).message).toBe(
      'transform: a sequence_classification transform must return [batch, labels] = [2, 4], got [2, 3]',
    );
    expect((await checkError('return output:transpose()', options)).message).toMatch(/got \[4, 2\]/);
  });

  it('shape rules: embeddings keep [batch, seq] and may truncate hidden (matryoshka)', async () => {
    const options = { modelType: 'embedding', outputDims: [2, 3, 8] } as const;
    await checkTransform('return lp_normalize(output:truncate_axis(3, 4))', options);
    expect((await checkError('return output:truncate_axis(3, 0)', options)).message).toBe(
      'transform: an embedding transform must return [batch, seq, hidden] = [2, 3, hidden > 0] (hidden may be truncated), got [2, 3, 0]',
    );
    expect((await checkError('return output:mean_pool(mask)', options)).message).toMatch(/got \[2, 8\]$/);
    expect((await checkError('return output:truncate_axis(2, 2)', options)).message).toMatch(/got \[2, 2, 8\]$/);
  });

  it('passes a [batch, seq] mask with padding for token-level outputs, none for sequence classification', async () => {
    await checkTransform(
      'function Postprocess(arr, mask)\n  assert(mask:shape()[1] == 2 and mask:shape()[2] == 3)\n  assert(mask:sum() == 5)\n  return arr\nend',
      { modelType: 'token_classification', outputDims: [2, 3, 4] },
    );
    await checkTransform('function Postprocess(arr, mask) assert(mask == nil) return arr end', {
      modelType: 'sequence_classification',
      outputDims: [2, 4],
    });
  });

  it('stops a runaway loop', async () => {
    const error = await checkError('function Postprocess(arr)\n  while true do end\nend', { timeoutMs: 50 });
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe('transform line 2: the transform ran longer than its limit of 50 ms');
  });

  it('rejects output dims that do not fit the model type', async () => {
    const error = await checkError('return output', { modelType: 'sequence_classification', outputDims: [2, 3, 4] });
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe('transform: cannot check against output dims [2, 3, 4] of a sequence_classification model');
  });
});

describe('LuaTransform.create', () => {
  it('reports a syntax error as a ConfigError with the line', async () => {
    const error = await caught(() => LuaTransform.create('\nfunction Postprocess(arr)\n  return arr:\nend', { modelType: 'embedding' }));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toMatch(/^transform line 4: /);
  });

  it('loads the Lua runtime from an explicit wasm path, and says when the file is missing', async () => {
    const wasmoonDir = dirname(createRequire(import.meta.url).resolve('wasmoon'));
    const t = await transform('return output', { wasmPath: join(wasmoonDir, 'glue.wasm') });
    expect(t.run(sample([1, 2, 3])).dims).toEqual([1, 2, 3]);
    const error = await caught(() => LuaTransform.create('return output', { modelType: 'embedding', wasmPath: '/nonexistent/glue.wasm' }));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe('transform: the Lua runtime (wasmoon .wasm file) was not found at /nonexistent/glue.wasm');
  });

  it('rejects an unknown model type and a bad timeout', async () => {
    await expect(LuaTransform.create('return output', { modelType: 'sentence' as never })).rejects.toThrow(
      'transform: unknown model type "sentence"',
    );
    await expect(LuaTransform.create('return output', { modelType: 'embedding', timeoutMs: 0 })).rejects.toThrow(ConfigError);
  });
});

describe('LuaTransform.run (per request): failures are InternalErrors', () => {
  it('a runtime error names the line and the transform keeps working', async () => {
    const t = await transform('function Postprocess(arr)\n  if arr:max() > 100 then\n    error("logits too large")\n  end\n  return arr\nend');
    const error = await caught(() => t.run(Tensor.fromNested([[[1000]]])));
    expect(error).toBeInstanceOf(InternalError);
    expect(error.message).toBe('transform line 3: logits too large');
    expect(t.run(Tensor.fromNested([[[1]]])).data[0]).toBe(1);
  });

  it('a result of the wrong shape or type', async () => {
    const t = await transform('function Postprocess(arr) return arr:sum_axis(3) end');
    const error = await caught(() => t.run(sample([2, 3, 4])));
    expect(error).toBeInstanceOf(InternalError);
    expect(error.message).toBe('transform: a token_classification transform must return [batch, seq, labels] = [2, 3, 4], got [2, 3]');
    const inline = await transform('if output:max() > 0 then return output end');
    expect(inline.run(Tensor.fromNested([[[1]]])).data[0]).toBe(1);
    const second = await caught(() => inline.run(Tensor.fromNested([[[-1]]])));
    expect(second).toBeInstanceOf(InternalError);
    expect(second.message).toMatch(/^transform: the script must return a tensor, got nil/);
  });

  it('a model output or mask of the wrong rank for the model type', async () => {
    const t = await transform('return output', { modelType: 'sequence_classification' });
    await expect(async () => t.run(sample([2, 3, 4]))).rejects.toThrow(InternalError);
    await expect(async () => t.run(sample([2, 3]), sample([3, 3]))).rejects.toThrow(
      'transform: the mask must be [batch, seq] for an output of dims [2, 3], got [3, 3]',
    );
    expect(t.run(sample([2, 3]), sample([2, 7])).dims).toEqual([2, 3]);
  });

  it('a time limit per call', async () => {
    const t = await transform('function Postprocess(arr)\n  if arr:sum() > 0 then while true do end end\n  return arr\nend', {
      timeoutMs: 30,
    });
    const error = await caught(() => t.run(Tensor.fromNested([[[1]]])));
    expect(error).toBeInstanceOf(InternalError);
    expect(error.message).toBe('transform line 2: the transform ran longer than its limit of 30 ms');
    expect(t.run(Tensor.fromNested([[[-1]]])).data[0]).toBe(-1);
  });

  it('a time limit that a script cannot catch with pcall', async () => {
    const t = await transform(
      'function Postprocess(arr)\n  if arr:sum() > 0 then\n    while true do pcall(function() while true do end end) end\n  end\n  return arr\nend',
      { timeoutMs: 30 },
    );
    const error = await caught(() => t.run(Tensor.fromNested([[[1]]])));
    expect(error).toBeInstanceOf(InternalError);
    expect(error.message).toBe('transform: the transform ran longer than its limit of 30 ms and caught the error that stopped it');
    // The state is replaced; the transform keeps working.
    expect(t.run(Tensor.fromNested([[[-1]]])).data[0]).toBe(-1);
  });

  it('replaces a Lua state broken by a fault of the wasm runtime', async () => {
    const t = await transform('calls = (calls or 0) + 1\nreturn output + calls');
    const zero = Tensor.fromNested([[[0]]]);
    expect([t.run(zero).data[0], t.run(zero).data[0]]).toEqual([1, 2]);
    const module = await loadLuaModule();
    vi.spyOn(module.lua, 'lua_pcallk').mockImplementationOnce(() => {
      throw new Error('wasm fault');
    });
    const error = await caught(() => t.run(zero));
    expect(error).toBeInstanceOf(InternalError);
    expect(error.message).toBe('transform: the Lua runtime failed: wasm fault');
    // A fresh state: the script's globals start over.
    expect(t.run(zero).data[0]).toBe(1);
  });

  it('refuses to run after close, and close is idempotent', async () => {
    const t = await transform('return output');
    t.close();
    t.close();
    await expect(async () => t.run(sample([1, 1, 1]))).rejects.toThrow('transform: the transform is closed');
  });

  it('returns the model output object itself when the script returns it (bulk hand-over)', async () => {
    const t = await transform('function Postprocess(arr) return arr end', { modelType: 'embedding' });
    const output = sample([2, 16, 384]);
    expect(t.run(output)).toBe(output);
  });
});

describe('Lua memory: a limit per state, and a state that fails or keeps growing is replaced', () => {
  const MiB = 2 ** 20;
  const zero = () => Tensor.fromNested([[[0]]]);
  const heapBytes = async () => (await loadLuaModule()).lua.module.HEAPU8.buffer.byteLength;

  it('a call that needs more than the limit fails with an InternalError saying so; the next one runs in a new state', async () => {
    const t = await transform(
      'calls = (calls or 0) + 1\nif output:sum() > 0 then\n  local t = {}\n  for i = 1, 1e7 do t[i] = i end\nend\nreturn output + calls',
      { memoryLimitBytes: 8 * MiB },
    );
    expect(t.run(zero()).data[0]).toBe(1);
    const error = await caught(() => t.run(Tensor.fromNested([[[1]]])));
    expect(error).toBeInstanceOf(InternalError);
    expect(error.message).toBe('transform: the transform needed more Lua memory than its limit of 8 MiB');
    // a new state: the global counter starts over instead of reading 3
    expect(t.run(zero()).data[0]).toBe(1);
    expect(t.memoryUsed).toBeLessThan(MiB);
  });

  it('a script that catches the memory error and fails otherwise is still reported as out of memory', async () => {
    const t = await transform(
      'function Postprocess(arr)\n  local ok, e = pcall(function() local t = {} for i = 1, 1e7 do t[i] = i end end)\n  error("gave up: " .. tostring(e))\nend',
      { memoryLimitBytes: 4 * MiB },
    );
    const error = await caught(() => t.run(zero()));
    expect(error.message).toBe('transform: the transform needed more Lua memory than its limit of 4 MiB');
  });

  it('any failed call starts a new state (globals start over)', async () => {
    const t = await transform('calls = (calls or 0) + 1\nif output:sum() > 0 then error("positive") end\nreturn output + calls');
    expect([t.run(zero()).data[0], t.run(zero()).data[0]]).toEqual([1, 2]);
    await expect(async () => t.run(Tensor.fromNested([[[1]]]))).rejects.toThrow('transform line 2: positive');
    expect(t.run(zero()).data[0]).toBe(1);
  });

  it('keeps the memory of a script that keeps what it builds bounded over 10,000 calls', async () => {
    // every call adds 100 small tables to a global: ~1.5 GB after 10,000 calls if nothing stops it
    const t = await transform('cache = cache or {}\nfor i = 1, 100 do cache[#cache + 1] = { i, tostring(i) } end\nreturn output + #cache', {
      memoryLimitBytes: 8 * MiB,
    });
    const heapBefore = await heapBytes();
    let peak = 0;
    let resets = 0;
    let previous = 0;
    for (let call = 0; call < 10_000; call++) {
      const size = t.run(zero()).data[0];
      if (size < previous) resets++;
      previous = size;
      peak = Math.max(peak, t.memoryUsed);
    }
    // the wasm memory (which never shrinks) grew by at most about one limit
    expect((await heapBytes()) - heapBefore).toBeLessThanOrEqual(16 * MiB);
    expect(peak).toBeLessThanOrEqual(8 * MiB);
    expect(resets).toBeGreaterThan(10);
  }, 60_000);

  it('leaves a state that builds tables and drops them alone over 10,000 calls, with flat memory', async () => {
    const t = await transform('calls = (calls or 0) + 1\nlocal t = {}\nfor i = 1, 500 do t[i] = { i } end\nreturn output + calls', {
      memoryLimitBytes: 8 * MiB,
    });
    const heapBefore = await heapBytes();
    let result = 0;
    for (let call = 0; call < 10_000; call++) result = t.run(zero()).data[0];
    // never replaced: the global counter saw every call
    expect(result).toBe(10_000);
    expect(t.memoryUsed).toBeLessThan(4 * MiB);
    expect((await heapBytes()) - heapBefore).toBeLessThanOrEqual(8 * MiB);
  }, 60_000);

  it('checkTransform reports a sample run over the limit as a ConfigError', async () => {
    const error = await checkError('local t = {}\nfor i = 1, 1e7 do t[i] = i end\nreturn output', { memoryLimitBytes: 4 * MiB });
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe('transform: the transform needed more Lua memory than its limit of 4 MiB');
  });

  it('rejects a limit too small to set up a state, or not an integer', async () => {
    for (const memoryLimitBytes of [1000, 1.5 * MiB + 0.5, Number.NaN, 2 ** 32]) {
      const error = await caught(() => LuaTransform.create('return output', { modelType: 'embedding', memoryLimitBytes }));
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.message).toMatch(/^transform: memoryLimitBytes must be an integer from 1048576 to 2147483648, got /);
    }
  });
});

describe('one wasm instance', () => {
  let first: Awaited<ReturnType<typeof loadLuaModule>>;
  beforeAll(async () => {
    first = await loadLuaModule();
  });

  it('is shared by all transforms of a wasm path', async () => {
    expect(await loadLuaModule()).toBe(first);
  });
});
