/**
 * One instance of wasmoon's Lua 5.4 wasm build, and the small slice of the Lua C API the transform
 * layer needs, driven directly from TypeScript. wasmoon's high-level engine (proxies, JS tables,
 * async threads) is not used: tensors cross as 4-byte userdata that name a JS Tensor, and every
 * tensor method is a lua_CFunction written in TS that calls the bulk operations of tensor.ts.
 *
 * All states of a transform (and of later pool members) share one instance: C functions are
 * registered once per instance and find their tensors through the shared TensorHandles.
 * Lua code runs synchronously, so at most one call is active in the process at any time.
 */
import { existsSync } from 'node:fs';
import type { LuaWasm } from 'wasmoon';
import { ConfigError } from '../errors.ts';
import type { Tensor } from '../tensor.ts';

export type LuaState = number;
/** A lua_CFunction body: reads its arguments from the stack, pushes results, returns their count. */
export type CFunctionBody = (L: LuaState) => number;

export const LUA_OK = 0;
export const LUA_ERRMEM = 4;
export const LUA_TNONE = -1;
export const LUA_TNIL = 0;
export const LUA_TNUMBER = 3;
export const LUA_TSTRING = 4;
export const LUA_TTABLE = 5;
export const LUA_TFUNCTION = 6;
export const LUA_REGISTRYINDEX = -1_000_000 - 1000;
export const LUA_MASKCOUNT = 8;

/** Registry name of the tensor metatable; Lua's own messages call tensors by it ("got Tensor"). */
export const TENSOR_METATABLE = 'Tensor';

/** Libraries a state may open, with the module name luaL_requiref registers them under. */
export const LIBRARY_OPENERS = {
  base: '_G',
  coroutine: 'coroutine',
  table: 'table',
  io: 'io',
  os: 'os',
  string: 'string',
  utf8: 'utf8',
  math: 'math',
  package: 'package',
} as const;
export type OpenableLibrary = keyof typeof LIBRARY_OPENERS;

/**
 * JS tensors referenced by Lua userdata, by small integer id (0 means released). The userdata's
 * __gc releases its id, so a tensor lives as long as Lua can still reach it.
 */
export class TensorHandles {
  readonly #tensors: (Tensor | undefined)[] = [undefined];
  readonly #free: number[] = [];

  add(tensor: Tensor): number {
    const id = this.#free.pop() ?? this.#tensors.length;
    this.#tensors[id] = tensor;
    return id;
  }

  get(id: number): Tensor | undefined {
    return this.#tensors[id];
  }

  release(id: number): void {
    if (id > 0 && this.#tensors[id] !== undefined) {
      this.#tensors[id] = undefined;
      this.#free.push(id);
    }
  }

  /** How many tensors Lua still references (for leak checks). */
  get live(): number {
    return this.#tensors.length - 1 - this.#free.length;
  }
}

/** A script that caught the error of its time limit and kept running: it is stopped from outside Lua. */
export class TransformDeadlineEscaped extends Error {
  constructor(limitMs: number) {
    super(`transform: the transform ran longer than its limit of ${limitMs} ms and caught the error that stopped it`);
    this.name = 'TransformDeadlineEscaped';
  }
}

/** The Lua memory of one state, as its allocator counts it. */
export interface StateMemory {
  /** Bytes the state has allocated and not freed (live objects and garbage not yet collected). */
  used: number;
  /** The allocator refuses what would take `used` past this; Lua then raises "not enough memory". */
  readonly limit: number;
  /** Whether the allocator refused something since this was last set to false. */
  refused: boolean;
}

export class LuaModule {
  readonly lua: LuaWasm;
  /**
   * lua_Alloc of every state, on the wasm runtime's malloc: counts each state's bytes in its StateMemory (the
   * allocator's `ud` is the state's memory id) and refuses allocations past its limit. Without it a script that keeps
   * what it builds grows the one wasm memory of the process up to its 2 GB maximum, and a wasm memory never shrinks.
   */
  readonly allocator: number;
  readonly #memories = new Map<number, StateMemory>();
  #nextMemoryId = 1;
  readonly handles = new TensorHandles();
  /** Date.now() after which the running call is stopped by the count hook; undefined = no limit. */
  deadline: number | undefined;
  deadlineMs = 0;
  /** Whether the running call was already stopped once by the deadline (and the script caught it). */
  deadlineRaised = false;

  /** Converts any error value to a string (its __tostring when it has one); used as pcall's handler. */
  readonly messageHandler: number;
  /** print() that writes to stderr, so that it never mixes with results on stdout. */
  readonly print: number;
  /** Count hook that enforces `deadline`. */
  readonly timeoutHook: number;
  readonly #openers = new Map<OpenableLibrary, number>();
  readonly #trampoline: number;
  #pending: ((L: LuaState) => void) | undefined;

  constructor(lua: LuaWasm) {
    this.lua = lua;
    this.messageHandler = this.cfunction('error handler', (L) => {
      const type = lua.lua_type(L, 1);
      if (type === LUA_TSTRING || type === LUA_TNUMBER) return 1;
      if (lua.luaL_callmeta(L, 1, '__tostring') && lua.lua_type(L, -1) === LUA_TSTRING) return 1;
      lua.lua_pushstring(L, `(error object is a ${this.typeName(L, 1)} value)`);
      return 1;
    });
    this.print = this.cfunction('print', (L) => {
      const parts: string[] = [];
      for (let i = 1, n = lua.lua_gettop(L); i <= n; i++) {
        parts.push(lua.luaL_tolstring(L, i, null));
        lua.lua_settop(L, -2);
      }
      process.stderr.write(`${parts.join('\t')}\n`);
      return 0;
    });
    this.timeoutHook = lua.module.addFunction((L: LuaState) => {
      if (this.deadline !== undefined && Date.now() > this.deadline) {
        // A script can catch the Lua error with pcall and go on looping; the second time, a JS exception unwinds
        // the whole wasm stack past every pcall (the state is then abandoned and replaced).
        if (this.deadlineRaised) throw new TransformDeadlineEscaped(this.deadlineMs);
        this.deadlineRaised = true;
        lua.luaL_where(L, 0);
        lua.lua_pushstring(L, `the transform ran longer than its limit of ${this.deadlineMs} ms`);
        lua.lua_concat(L, 2);
        lua.lua_error(L);
      }
    }, 'vii');
    const heap = lua.module;
    this.allocator = heap.addFunction((id: number, pointer: number, oldSize: number, newSize: number) => {
      const memory = this.#memories.get(id)!;
      // without a pointer, oldSize tells the type of object being created, not a size
      const held = pointer ? oldSize : 0;
      if (newSize === 0) {
        if (pointer) heap._free(pointer);
        memory.used -= held;
        return 0;
      }
      if (newSize > held && memory.used + newSize - held > memory.limit) {
        memory.refused = true;
        return 0;
      }
      const moved = heap._realloc(pointer, newSize);
      if (moved) memory.used += newSize - held;
      return moved;
    }, 'iiiii');
    for (const library of Object.keys(LIBRARY_OPENERS) as OpenableLibrary[]) {
      const open = lua[`luaopen_${library}`].bind(lua);
      this.#openers.set(library, lua.module.addFunction((L: LuaState) => open(L), 'ii'));
    }
    this.#trampoline = this.cfunction('setup', (L) => {
      const action = this.#pending;
      this.#pending = undefined;
      action?.(L);
      return 0;
    });
  }

  /** A memory account for a new state; pass its id as the `ud` of lua_newstate(allocator, id). */
  openMemory(limit: number): { id: number; memory: StateMemory } {
    const id = this.#nextMemoryId++;
    const memory: StateMemory = { used: 0, limit, refused: false };
    this.#memories.set(id, memory);
    return { id, memory };
  }

  /** Forgets an account, after lua_close of its state (which frees through the allocator). */
  closeMemory(id: number): void {
    this.#memories.delete(id);
  }

  /**
   * Registers `body` as a lua_CFunction. An Error thrown by the body becomes a Lua error
   * "<where>name: message", where <where> is the calling script line ("transform:12:").
   */
  cfunction(name: string, body: CFunctionBody): number {
    const lua = this.lua;
    return lua.module.addFunction((L: LuaState) => {
      try {
        return body(L);
      } catch (error) {
        // Lua's own errors unwind as a thrown non-Error (emscripten longjmp) and must pass through; so must the stop of
        // a script that escaped its deadline, when it ran inside a Lua callback of a method (fold_axis, map_axis).
        if (!(error instanceof Error) || error instanceof TransformDeadlineEscaped) throw error;
        const message = error.message.startsWith(`${name}:`) ? error.message : `${name}: ${error.message}`;
        lua.luaL_where(L, 1);
        lua.lua_pushstring(L, message);
        lua.lua_concat(L, 2);
        return lua.lua_error(L);
      }
    }, 'ii');
  }

  /** Runs `action` inside a protected call (so a Lua error cannot panic); returns the error text. */
  protect(L: LuaState, action: (L: LuaState) => void): string | undefined {
    this.#pending = action;
    this.lua.lua_pushcclosure(L, this.#trampoline, 0);
    const status = this.lua.lua_pcallk(L, 0, 0, 0, 0, null);
    this.#pending = undefined;
    if (status === LUA_OK) return undefined;
    const message = this.lua.lua_tolstring(L, -1, null);
    this.lua.lua_settop(L, -2);
    return message;
  }

  /** Opens one standard library as luaL_openlibs would (global + package.loaded entry). */
  openLibrary(L: LuaState, library: OpenableLibrary): void {
    this.lua.luaL_requiref(L, LIBRARY_OPENERS[library], this.#openers.get(library)!, 1);
    this.lua.lua_settop(L, -2);
  }

  typeName(L: LuaState, index: number): string {
    const type = this.lua.lua_type(L, index);
    if (type === LUA_TNONE) return 'no value';
    if (this.lua.luaL_testudata(L, index, TENSOR_METATABLE)) return 'Tensor';
    return this.lua.lua_typename(L, type);
  }

  /** The tensor at `index`, or undefined when the value is not a tensor. */
  toTensor(L: LuaState, index: number): Tensor | undefined {
    const pointer = this.lua.luaL_testudata(L, index, TENSOR_METATABLE);
    if (!pointer) return undefined;
    const tensor = this.handles.get(this.lua.module.getValue(pointer, 'i32') as number);
    if (tensor === undefined) throw new Error('the tensor has already been released');
    return tensor;
  }

  pushTensor(L: LuaState, tensor: Tensor): void {
    const lua = this.lua;
    // Allocate first: if Lua runs out of memory it unwinds here, before an id is taken.
    const pointer = lua.lua_newuserdatauv(L, 4, 0);
    lua.module.setValue(pointer, this.handles.add(tensor), 'i32');
    lua.luaL_getmetatable(L, TENSOR_METATABLE);
    lua.lua_setmetatable(L, -2);
  }

  /** __gc of a tensor userdata. */
  releaseTensor(L: LuaState, index: number): void {
    const pointer = this.lua.lua_touserdata(L, index);
    if (!pointer) return;
    this.handles.release(this.lua.module.getValue(pointer, 'i32') as number);
    this.lua.module.setValue(pointer, 0, 'i32');
  }

  /** Loads Lua source as a function on the stack; returns lua_load's status (message on the stack on error). */
  loadChunk(L: LuaState, source: string, chunkName: string): number {
    const module = this.lua.module;
    const size = module.lengthBytesUTF8(source);
    const buffer = module._malloc(size + 1);
    try {
      module.stringToUTF8(source, buffer, size + 1);
      return this.lua.luaL_loadbufferx(L, buffer, size, chunkName, null);
    } finally {
      module._free(buffer);
    }
  }
}

const modules = new Map<string, Promise<LuaModule>>();

/**
 * The Lua wasm instance for `wasmPath` (wasmoon's glue.wasm; by default the one next to wasmoon's
 * own script), created once per path. A missing file is a ConfigError.
 */
export function loadLuaModule(wasmPath?: string): Promise<LuaModule> {
  const key = wasmPath ?? '';
  let pending = modules.get(key);
  if (pending === undefined) {
    pending = instantiate(wasmPath);
    modules.set(key, pending);
    pending.catch(() => modules.delete(key));
  }
  return pending;
}

async function instantiate(wasmPath: string | undefined): Promise<LuaModule> {
  if (wasmPath !== undefined && !existsSync(wasmPath)) {
    throw new ConfigError(`transform: the Lua runtime (wasmoon .wasm file) was not found at ${wasmPath}`);
  }
  try {
    // loaded here, not at start-up: a model without a transform never pays for the Lua runtime
    const { LuaWasm } = await import('wasmoon');
    const lua = await LuaWasm.initialize(wasmPath);
    sendStdoutToStderr(lua);
    return new LuaModule(lua);
  } catch (error) {
    throw new ConfigError(`transform: cannot start the Lua runtime: ${String(error)}`, { cause: error });
  }
}

/**
 * Points the wasm runtime's file descriptor 1 at its stderr device, so that io.write and io.stdout of a script with
 * the io library write to stderr, as print does: stdout carries only results (`infer` prints JSON there).
 */
function sendStdoutToStderr(lua: LuaWasm): void {
  const fs = lua.module.FS as unknown as { streams: ({ fd: number } | null)[]; close(stream: object): void; open(path: string, flags: string): { fd: number } };
  const stdout = fs.streams[1];
  if (stdout) fs.close(stdout);
  const stream = fs.open('/dev/stderr', 'w'); // takes the lowest free descriptor: 1
  if (stream.fd !== 1) throw new Error(`could not redirect the Lua runtime's stdout (got descriptor ${stream.fd})`);
}
