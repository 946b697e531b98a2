/**
 * Lua transforms: the user's last step on the model output (spec 2, "Lua transforms"; design
 * decision 5). A script either defines `Postprocess(arr, mask)` or is an inline chunk that reads
 * the globals `output` and `mask` and returns the result (`return lp_normalize(output)`).
 * The tensor API available to scripts is described in tensor-api.ts.
 *
 * Each LuaTransform owns one Lua state, created once and reused by every call; run() is
 * synchronous, so calls on one transform never overlap. A pool can create several transforms;
 * they share one wasm instance per wasm path.
 */
import { DEFAULT_LUA_LIBRARIES as DEFAULT_LUA_LIBS, LUA_LIBRARIES, type LuaLibraryName as LuaLibrary } from '../config-names.ts';
import { ConfigError, InternalError } from '../errors.ts';
import { Tensor } from '../tensor.ts';
import { loadLuaModule, TransformDeadlineEscaped } from './lua-module.ts';
import type { LuaModule } from './lua-module.ts';
import { outputRankOf, outputShapeProblem, TRANSFORM_MODEL_TYPES } from './output-shape.ts';
import type { TransformModelType } from './output-shape.ts';
import { type StateLimits, TransformScriptError, TransformState } from './transform-state.ts';

export type { TransformModelType } from './output-shape.ts';

// The library names and the default set belong to the build configuration (config-names.ts, apart from its YAML
// parsing: the inference worker's bundle has this module); the base library (print, pairs, pcall...) is always open
// besides them.
export { LUA_LIBRARIES, DEFAULT_LUA_LIBRARIES as DEFAULT_LUA_LIBS } from '../config-names.ts';
export type { LuaLibraryName as LuaLibrary } from '../config-names.ts';

/** How long checkTransform lets the script run before it reports a runaway loop. */
export const DEFAULT_CHECK_TIMEOUT_MS = 10_000;

/**
 * Lua memory of one transform state: the script's own tables and strings (tensors live in JS and do not count). A
 * post-processing step that needs more than this is a bug; without a bound one that keeps what it builds grew the
 * process's one wasm memory to its 2 GB maximum, which never shrinks, and then every call failed.
 */
export const DEFAULT_MEMORY_LIMIT_BYTES = 256 * 2 ** 20;
/** Below this the Lua runtime and the tensor API cannot even be set up. */
const MIN_MEMORY_LIMIT_BYTES = 2 ** 20;

export interface LuaTransformOptions {
  /** Libraries to open besides the base library; default DEFAULT_LUA_LIBS. */
  libs?: readonly LuaLibrary[];
  modelType: TransformModelType;
  /** wasmoon's glue.wasm, when it is not next to wasmoon's script (inside the single executable). */
  wasmPath?: string;
  /** Stop a call that runs Lua code longer than this (checked every 10,000 Lua instructions). */
  timeoutMs?: number;
  /**
   * Most bytes the Lua state may hold, default DEFAULT_MEMORY_LIMIT_BYTES. A call that needs more fails; a state still
   * holding more than half of it after a call (and a full collection) is replaced.
   */
  memoryLimitBytes?: number;
}

export interface CheckTransformOptions extends LuaTransformOptions {
  /** Dims of the model output, e.g. [2, 3, hidden] (token level) or [2, labels] (sequence classification). */
  outputDims: readonly number[];
}

export class LuaTransform {
  readonly modelType: TransformModelType;
  readonly libs: readonly LuaLibrary[];
  readonly #module: LuaModule;
  readonly #script: string;
  readonly #limits: StateLimits;
  #state: TransformState | undefined;
  #closed = false;

  private constructor(
    module: LuaModule,
    script: string,
    settings: { libs: readonly LuaLibrary[]; modelType: TransformModelType; limits: StateLimits },
    state: TransformState,
  ) {
    this.#module = module;
    this.#script = script;
    this.modelType = settings.modelType;
    this.libs = settings.libs;
    this.#limits = settings.limits;
    this.#state = state;
  }

  /** Compiles the script in a new Lua state. A syntax error or a bad option is a ConfigError. */
  static async create(script: string, options: LuaTransformOptions): Promise<LuaTransform> {
    const libs = validateOptions(options);
    const module = await loadLuaModule(options.wasmPath);
    const limits = limitsOf(options, options.timeoutMs);
    const state = openState(module, script, libs, limits);
    return new LuaTransform(module, script, { libs, modelType: options.modelType, limits }, state);
  }

  /** Bytes the current Lua state holds (0 between a failure and the next call). */
  get memoryUsed(): number {
    return this.#state?.memoryUsed ?? 0;
  }

  /**
   * Runs the transform on one batch. `output` is the model output ([batch, labels] or
   * [batch, seq, hidden|labels]); `mask` the [batch, seq] attention mask. A script failure, a
   * result of the wrong shape or more memory than the limit is an InternalError naming the script
   * line. A call that fails leaves no state behind: the next one runs in a new Lua state (globals
   * start over), as does the call after one that left the state over its memory threshold.
   */
  run(output: Tensor, mask?: Tensor): Tensor {
    if (this.#closed) throw new InternalError('transform: the transform is closed');
    const inputProblem = inputProblemOf(this.modelType, output, mask);
    if (inputProblem !== undefined) throw new InternalError(`transform: ${inputProblem}`);
    try {
      // A state broken by a fault of the wasm runtime, left by a failed call or grown past its threshold is replaced.
      if (this.#state === undefined || this.#state.closed) {
        this.#state = undefined;
        this.#state = openState(this.#module, this.#script, this.libs, this.#limits);
      }
      const result = execute(this.#state, this.modelType, output, mask);
      if (this.#state.overMemoryThreshold()) this.#dropState();
      return result;
    } catch (error) {
      this.#dropState();
      if (error instanceof TransformFailure || error instanceof TransformScriptError || error instanceof TransformDeadlineEscaped) {
        throw new InternalError(error.message, { cause: error });
      }
      throw new InternalError(`transform: the Lua runtime failed: ${errorText(error)}`, { cause: error });
    }
  }

  close(): void {
    this.#closed = true;
    this.#dropState();
  }

  #dropState(): void {
    this.#state?.close();
    this.#state = undefined;
  }
}

/**
 * Build-time check: compiles the script and runs it once on a sample output of `outputDims`
 * (with a [batch, seq] mask whose last token of the last row is padding, for token-level
 * outputs). Every problem — a missing Postprocess, a syntax or runtime error, a result that is
 * not a tensor or has the wrong shape — is a ConfigError naming the script line.
 */
export async function checkTransform(script: string, options: CheckTransformOptions): Promise<void> {
  const libs = validateOptions(options);
  const dims = [...options.outputDims];
  const rank = outputRankOf(options.modelType);
  if (dims.length !== rank || !dims.every((d) => Number.isInteger(d) && d > 0)) {
    throw new ConfigError(`transform: cannot check against output dims [${dims.join(', ')}] of a ${options.modelType} model`);
  }
  const module = await loadLuaModule(options.wasmPath);
  const state = openState(module, script, libs, limitsOf(options, options.timeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS));
  try {
    execute(state, options.modelType, sampleOutput(dims), rank === 3 ? sampleMask(dims[0], dims[1]) : undefined);
  } catch (error) {
    if (error instanceof TransformFailure || error instanceof TransformScriptError || error instanceof TransformDeadlineEscaped) {
      throw new ConfigError(error.message, { cause: error });
    }
    throw new ConfigError(`transform: the Lua runtime failed: ${errorText(error)}`, { cause: error });
  } finally {
    state.close();
  }
}

// ---------------------------------------------------------------------------------------------

/** A result the model type cannot use. */
class TransformFailure extends Error {}

function execute(state: TransformState, modelType: TransformModelType, output: Tensor, mask: Tensor | undefined): Tensor {
  const result = state.run(output, mask);
  const problem = outputShapeProblem(modelType, output.dims, result.dims);
  if (problem !== undefined) throw new TransformFailure(`transform: ${problem}`);
  return result;
}

function limitsOf(options: LuaTransformOptions, timeoutMs: number | undefined): StateLimits {
  return { timeoutMs, memoryLimitBytes: options.memoryLimitBytes ?? DEFAULT_MEMORY_LIMIT_BYTES };
}

function openState(module: LuaModule, script: string, libs: readonly LuaLibrary[], limits: StateLimits): TransformState {
  try {
    return TransformState.open(module, script, libs, limits);
  } catch (error) {
    if (error instanceof TransformScriptError) throw new ConfigError(error.message, { cause: error });
    throw new ConfigError(errorText(error), { cause: error });
  }
}

function validateOptions(options: LuaTransformOptions): readonly LuaLibrary[] {
  if (!TRANSFORM_MODEL_TYPES.includes(options.modelType)) {
    throw new ConfigError(`transform: unknown model type "${String(options.modelType)}"`);
  }
  const libs = options.libs ?? DEFAULT_LUA_LIBS;
  for (const lib of libs) {
    if (!LUA_LIBRARIES.includes(lib)) {
      throw new ConfigError(`transform: unknown Lua library "${String(lib)}" (valid: ${LUA_LIBRARIES.join(', ')})`);
    }
  }
  if (options.timeoutMs !== undefined && !(options.timeoutMs > 0)) {
    throw new ConfigError(`transform: timeoutMs must be > 0, got ${options.timeoutMs}`);
  }
  const memory = options.memoryLimitBytes;
  if (memory !== undefined && !(Number.isSafeInteger(memory) && memory >= MIN_MEMORY_LIMIT_BYTES && memory <= 2 ** 31)) {
    throw new ConfigError(`transform: memoryLimitBytes must be an integer from ${MIN_MEMORY_LIMIT_BYTES} to ${2 ** 31}, got ${memory}`);
  }
  return [...new Set(libs)];
}

function inputProblemOf(modelType: TransformModelType, output: Tensor, mask: Tensor | undefined): string | undefined {
  if (!(output instanceof Tensor)) return 'the model output is not a Tensor';
  if (output.rank !== outputRankOf(modelType)) {
    return `a ${modelType} model output must have rank ${outputRankOf(modelType)}, got dims [${output.dims.join(', ')}]`;
  }
  if (mask === undefined) return undefined;
  const tokenLevel = output.rank === 3;
  if (!(mask instanceof Tensor) || mask.rank !== 2 || mask.dims[0] !== output.dims[0] || (tokenLevel && mask.dims[1] !== output.dims[1])) {
    const dims = mask instanceof Tensor ? `[${mask.dims.join(', ')}]` : String(mask);
    return `the mask must be [batch, seq] for an output of dims [${output.dims.join(', ')}], got ${dims}`;
  }
  return undefined;
}

/** Deterministic values in (-3, 3), varied enough to exercise softmax, argmax and norms. */
function sampleOutput(dims: readonly number[]): Tensor {
  const size = dims.reduce((a, b) => a * b, 1);
  const data = new Float32Array(size);
  for (let i = 0; i < size; i++) data[i] = 3 * Math.sin(i * 12.9898 + 1.2345);
  return new Tensor(data, dims);
}

function sampleMask(batch: number, seq: number): Tensor {
  const data = new Float32Array(batch * seq).fill(1);
  if (seq > 1) data[batch * seq - 1] = 0;
  return new Tensor(data, [batch, seq]);
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
