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
import { LUA_MASKCOUNT, LUA_OK, LUA_REGISTRYINDEX } from './lua-module.ts';
import { transformMessage } from './messages.ts';
import { tensorApiFor } from './tensor-api.ts';

/** A failure of the user script (syntax, runtime, result); `message` is ready for the user. */
export class TransformScriptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TransformScriptError';
  }
}

/**
 * Runs once per state after the libraries are opened. Its arguments say whether io and os were
 * listed; it returns the driver that performs one transform call.
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
end
`;

export class TransformState {
  readonly #module: LuaModule;
  readonly #L: LuaState;
  readonly #driver: number;
  readonly #chunk: number;
  readonly #timeoutMs: number | undefined;
  #closed = false;

  private constructor(module: LuaModule, L: LuaState, driver: number, chunk: number, timeoutMs: number | undefined) {
    this.#module = module;
    this.#L = L;
    this.#driver = driver;
    this.#chunk = chunk;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * A new state with the base library plus `libraries`, the tensor API and the compiled script.
   * A script that does not compile throws TransformScriptError.
   */
  static open(
    module: LuaModule,
    script: string,
    libraries: readonly OpenableLibrary[],
    timeoutMs: number | undefined,
  ): TransformState {
    const lua = module.lua;
    const L = lua.luaL_newstate();
    if (!L) throw new Error('transform: cannot create a Lua state (out of memory)');
    let driver = 0;
    const setupError = module.protect(L, () => {
      module.openLibrary(L, 'base');
      for (const library of libraries) module.openLibrary(L, library);
      lua.lua_pushcclosure(L, module.print, 0);
      lua.lua_setglobal(L, 'print');
      tensorApiFor(module).install(L);
      if (module.loadChunk(L, PRELUDE, '=prelude') !== LUA_OK) lua.lua_error(L);
      lua.lua_pushboolean(L, libraries.includes('io') ? 1 : 0);
      lua.lua_pushboolean(L, libraries.includes('os') ? 1 : 0);
      lua.lua_callk(L, 2, 1, 0, null);
      driver = lua.luaL_ref(L, LUA_REGISTRYINDEX);
    });
    if (setupError !== undefined) {
      lua.lua_close(L);
      throw new Error(`transform: cannot set up the Lua state: ${setupError}`);
    }
    if (module.loadChunk(L, script, '=transform') !== LUA_OK) {
      const message = transformMessage(lua.lua_tolstring(L, -1, null));
      lua.lua_close(L);
      throw new TransformScriptError(message);
    }
    const chunk = lua.luaL_ref(L, LUA_REGISTRYINDEX);
    if (timeoutMs !== undefined) lua.lua_sethook(L, module.timeoutHook, LUA_MASKCOUNT, 10_000);
    return new TransformState(module, L, driver, chunk, timeoutMs);
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
      const status = lua.lua_pcallk(L, 3, 2, base + 1, 0, null);
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

  /** Frees the state; its tensors are released by their finalizers. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#module.lua.lua_close(this.#L);
  }
}
