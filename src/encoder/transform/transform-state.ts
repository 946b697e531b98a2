/**
 * One Lua state running one transform script. It is created once and reused for every call:
 * globals a script sets persist between calls.
 *
 * The script is compiled at open time. It runs on the first call, with the globals `output` and
 * `mask` set: if it defined a global function Postprocess, from then on only
 * Postprocess(output, mask) is called; otherwise the script is an inline chunk that runs on every
 * call and whose returned value is the result.
 */
import type { Tensor } from '../tensor.ts';
import type { LuaModule, LuaState, OpenableLibrary } from './lua-module.ts';
import type { StateMemory } from './lua-module.ts';
import { LUA_ERRMEM, LUA_MASKCOUNT, LUA_OK, LUA_REGISTRYINDEX } from './lua-module.ts';
import { transformMessage } from './messages.ts';
import { tensorApiFor } from './tensor-api.ts';

/** A failure of the user script (syntax, runtime, result, memory); `message` is ready for the user. */
export class TransformScriptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TransformScriptError';
  }
}

/** After a call, a state holding more than this share of its memory limit gets a full collection. */
const MEMORY_THRESHOLD = 0.5;

function mebibytes(bytes: number): string {
  return `${Math.round((bytes / 2 ** 20) * 10) / 10} MiB`;
}

/**
 * Runs once per state after the libraries are opened. Its arguments say whether io and os were
 * listed; it returns the driver that performs one transform call, and a function that runs a full collection.
 */
const PRELUDE = `
local has_io, has_os = ...
local G, type, error, pcall, select, gc = _G, type, error, pcall, select, collectgarbage

-- Tensors are tiny userdata holding large JS arrays, so Lua feels no memory pressure from them:
-- collect after every call. A minor generational step frees what the call left behind whatever
-- the size of the script's own data; a full cycle now and then frees tensors that aged.
gc('generational')
local calls = 0
local function collect()
  calls = calls + 1
  if calls % 256 == 0 then gc('collect') else gc('step', 0) end
end

-- dofile and loadfile read files: only with the io library.
if not has_io then dofile, loadfile = nil, nil end

-- Binary chunks are not verified by Lua and can break out of the sandbox: text only.
do
  local raw_load = load
  load = function(chunk, name, _, ...)
    if select('#', ...) > 0 then return raw_load(chunk, name, 't', ...) end
    return raw_load(chunk, name, 't')
  end
end

-- os.exit would end the whole server process.
if has_os then
  os.exit = function() error('os.exit is not available in a transform', 2) end
end

local form -- 'postprocess' or 'inline', known after the first call that gets that far
local function full_collect() gc('collect') end
return function(chunk, output, mask)
  if form ~= 'postprocess' then
    G.output, G.mask = output, mask
    local ok, returned = pcall(chunk)
    G.output, G.mask = nil, nil
    if not ok then error(returned, 0) end
    if form == 'inline' then collect() return returned, form end
    if G.Postprocess == nil then
      if returned == nil then error('Postprocess is not defined and the script returns no value', 0) end
      form = 'inline'
      collect()
      return returned, form
    end
    form = 'postprocess'
  end
  local postprocess = G.Postprocess
  if type(postprocess) ~= 'function' then
    error('Postprocess must be a function, got ' .. type(postprocess), 0)
  end
  local result = postprocess(output, mask)
  collect()
  return result, form
end, full_collect
`;

export interface StateLimits {
  /** Stop a call that runs Lua code longer than this; undefined = no limit. */
  timeoutMs: number | undefined;
  /** Most bytes the state's Lua objects may take (tensors are JS objects and do not count). */
  memoryLimitBytes: number;
}

export class TransformState {
  readonly #module: LuaModule;
  readonly #L: LuaState;
  readonly #driver: number;
  readonly #fullCollect: number;
  readonly #chunk: number;
  readonly #timeoutMs: number | undefined;
  readonly #memoryId: number;
  readonly #memory: StateMemory;
  #closed = false;

  private constructor(
    module: LuaModule,
    L: LuaState,
    refs: { driver: number; fullCollect: number; chunk: number },
    timeoutMs: number | undefined,
    memory: { id: number; memory: StateMemory },
  ) {
    this.#module = module;
    this.#L = L;
    this.#driver = refs.driver;
    this.#fullCollect = refs.fullCollect;
    this.#chunk = refs.chunk;
    this.#timeoutMs = timeoutMs;
    this.#memoryId = memory.id;
    this.#memory = memory.memory;
  }

  /**
   * A new state with the base library plus `libraries`, the tensor API and the compiled script.
   * A script that does not compile throws TransformScriptError.
   */
  static open(module: LuaModule, script: string, libraries: readonly OpenableLibrary[], limits: StateLimits): TransformState {
    const lua = module.lua;
    const account = module.openMemory(limits.memoryLimitBytes);
    const L = lua.lua_newstate(module.allocator, account.id);
    if (!L) {
      module.closeMemory(account.id);
      throw new Error(`transform: cannot create a Lua state within its memory limit of ${mebibytes(limits.memoryLimitBytes)}`);
    }
    const abandon = () => {
      lua.lua_close(L);
      module.closeMemory(account.id);
    };
    let driver = 0;
    let fullCollect = 0;
    const setupError = module.protect(L, () => {
      module.openLibrary(L, 'base');
      for (const library of libraries) module.openLibrary(L, library);
      lua.lua_pushcclosure(L, module.print, 0);
      lua.lua_setglobal(L, 'print');
      tensorApiFor(module).install(L);
      if (module.loadChunk(L, PRELUDE, '=prelude') !== LUA_OK) lua.lua_error(L);
      lua.lua_pushboolean(L, libraries.includes('io') ? 1 : 0);
      lua.lua_pushboolean(L, libraries.includes('os') ? 1 : 0);
      lua.lua_callk(L, 2, 2, 0, null);
      fullCollect = lua.luaL_ref(L, LUA_REGISTRYINDEX);
      driver = lua.luaL_ref(L, LUA_REGISTRYINDEX);
    });
    if (setupError !== undefined) {
      abandon();
      throw new Error(`transform: cannot set up the Lua state: ${setupError}`);
    }
    const loaded = module.loadChunk(L, script, '=transform');
    if (loaded !== LUA_OK) {
      const message = loaded === LUA_ERRMEM ? memoryMessage(limits.memoryLimitBytes) : transformMessage(lua.lua_tolstring(L, -1, null));
      abandon();
      throw new TransformScriptError(message);
    }
    const chunk = lua.luaL_ref(L, LUA_REGISTRYINDEX);
    if (limits.timeoutMs !== undefined) lua.lua_sethook(L, module.timeoutHook, LUA_MASKCOUNT, 10_000);
    return new TransformState(module, L, { driver, fullCollect, chunk }, limits.timeoutMs, account);
  }

  /** Bytes the state's Lua objects take now, garbage not yet collected included. */
  get memoryUsed(): number {
    return this.#memory.used;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * One transform call. Script failures throw TransformScriptError; anything else that escapes
   * (a fault of the wasm runtime) leaves the state unusable and is rethrown as is.
   */
  run(output: Tensor, mask: Tensor | undefined): Tensor {
    if (this.#closed) throw new Error('transform: the Lua state is closed');
    const module = this.#module;
    const lua = module.lua;
    const L = this.#L;
    const base = lua.lua_gettop(L);
    try {
      lua.lua_pushcclosure(L, module.messageHandler, 0);
      lua.lua_rawgeti(L, LUA_REGISTRYINDEX, BigInt(this.#driver));
      lua.lua_rawgeti(L, LUA_REGISTRYINDEX, BigInt(this.#chunk));
      module.pushTensor(L, output);
      if (mask) module.pushTensor(L, mask);
      else lua.lua_pushnil(L);
      if (this.#timeoutMs !== undefined) {
        module.deadline = Date.now() + this.#timeoutMs;
        module.deadlineMs = this.#timeoutMs;
        module.deadlineRaised = false;
      }
      this.#memory.refused = false;
      const status = lua.lua_pcallk(L, 3, 2, base + 1, 0, null);
      // a refused allocation the script caught with pcall may come back as an error of its own
      if (status === LUA_ERRMEM || (status !== LUA_OK && this.#memory.refused)) {
        throw new TransformScriptError(memoryMessage(this.#memory.limit));
      }
      if (status !== LUA_OK) throw new TransformScriptError(transformMessage(lua.lua_tolstring(L, -1, null)));
      const form = lua.lua_tolstring(L, -1, null);
      const result = module.toTensor(L, -2);
      if (result === undefined) {
        const who = form === 'inline' ? 'the script' : 'Postprocess';
        throw new TransformScriptError(
          `transform: ${who} must return a tensor, got ${module.typeName(L, -2)} (Tensor.new(t) builds one from a table)`,
        );
      }
      return result;
    } catch (error) {
      if (!(error instanceof TransformScriptError)) this.#closed = true;
      throw error;
    } finally {
      module.deadline = undefined;
      if (!this.#closed) lua.lua_settop(L, base);
    }
  }

  /**
   * After a call: whether the state holds more than half its memory limit even after a full collection, i.e. keeps
   * what it builds (a growing global table) and should be replaced before it reaches the limit.
   */
  overMemoryThreshold(): boolean {
    if (this.#closed) return false;
    const threshold = this.#memory.limit * MEMORY_THRESHOLD;
    if (this.#memory.used <= threshold) return false;
    const lua = this.#module.lua;
    const base = lua.lua_gettop(this.#L);
    lua.lua_rawgeti(this.#L, LUA_REGISTRYINDEX, BigInt(this.#fullCollect));
    lua.lua_pcallk(this.#L, 0, 0, 0, 0, null);
    lua.lua_settop(this.#L, base);
    return this.#memory.used > threshold;
  }

  /** Frees the state (all its Lua memory); its tensors are released by their finalizers. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#module.lua.lua_close(this.#L);
    this.#module.closeMemory(this.#memoryId);
  }
}

function memoryMessage(limit: number): string {
  return `transform: the transform needed more Lua memory than its limit of ${mebibytes(limit)}`;
}
