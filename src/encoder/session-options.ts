import type * as ort from 'onnxruntime-node';

/**
 * onnxruntime's session options as a user sets them: the `session:` block of a build configuration (config.ts), the
 * manifest of a built model (packaged-model.ts) and serve/infer's flags (src/cli/serve-session.ts) read their values
 * here, so the three accept and refuse the same ones with the same reasons.
 */

export type GraphOptimizationLevel = NonNullable<ort.InferenceSession.SessionOptions['graphOptimizationLevel']>;

/**
 * encoderfile's values (disable, 1, 2, 3) and onnxruntime's own names. encoderfile's 3 is onnxruntime's "all"
 * (ORT_ENABLE_ALL, its default), as the `ort` crate maps its Level3.
 */
const GRAPH_OPTIMIZATION_LEVELS: Record<string, GraphOptimizationLevel> = {
  disable: 'disabled',
  disabled: 'disabled',
  '0': 'disabled',
  '1': 'basic',
  basic: 'basic',
  '2': 'extended',
  extended: 'extended',
  layout: 'layout',
  '3': 'all',
  all: 'all',
};

/** The one execution provider this executable carries; the others onnxruntime (or encoderfile) knows, and why not here. */
const AVAILABLE_PROVIDERS = ['cpu'];
const KNOWN_PROVIDERS = ['cuda', 'tensorrt', 'coreml', 'directml', 'dml', 'webgpu', 'rocm', 'migraphx', 'openvino', 'qnn', 'xnnpack', 'nnapi'];

/** A value that is not one of the session options' own; each reader turns it into its kind of error. */
export class SessionOptionError extends Error {
  override name = 'SessionOptionError';
  /** The key of a `session:` block at fault (e.g. `encoder.session.execution_provider`); absent for a flag's value. */
  readonly key: string | undefined;
  constructor(message: string, key?: string) {
    super(message);
    this.key = key;
  }
}

/** onnxruntime's level of a user's value (a YAML integer such as 3 too); throws SessionOptionError. */
export function parseGraphOptimizationLevel(value: string | number): GraphOptimizationLevel {
  const level = GRAPH_OPTIMIZATION_LEVELS[String(value).trim().toLowerCase()];
  if (!level) throw new SessionOptionError(`"${value}" is not a graph optimization level; use disable, 1, 2 or 3 (or basic, extended, layout, all)`);
  return level;
}

/** The provider's name as onnxruntime takes it; throws SessionOptionError, saying why a known one is not here. */
export function parseExecutionProvider(value: string): string {
  const name = value.trim().toLowerCase();
  if (AVAILABLE_PROVIDERS.includes(name)) return name;
  if (KNOWN_PROVIDERS.includes(name)) {
    throw new SessionOptionError(
      `"${value}" is not available: this executable carries onnxruntime's CPU execution provider only (no GPU or accelerator libraries); use cpu`,
    );
  }
  throw new SessionOptionError(`"${value}" is not an execution provider; available: ${AVAILABLE_PROVIDERS.join(', ')}`);
}

/** The session options a user set, each validated; an absent one keeps the measured default (onnx-model.ts). */
export interface SessionChoices {
  intraOpThreads?: number;
  interOpThreads?: number;
  graphOptimizationLevel?: GraphOptimizationLevel;
  executionProvider?: string;
}

/** The onnxruntime options of `choices` other than the intra-op threads (which the workers divide: `threads`). */
export function sessionOptionsOf(choices: SessionChoices): ort.InferenceSession.SessionOptions {
  const sessionOptions: ort.InferenceSession.SessionOptions = {};
  if (choices.graphOptimizationLevel) sessionOptions.graphOptimizationLevel = choices.graphOptimizationLevel;
  if (choices.executionProvider) sessionOptions.executionProviders = [choices.executionProvider];
  if (choices.interOpThreads !== undefined) {
    sessionOptions.interOpNumThreads = choices.interOpThreads;
    sessionOptions.executionMode = choices.interOpThreads > 1 ? 'parallel' : 'sequential';
  }
  return sessionOptions;
}

/** The keys of the configuration's `session:` block and of the manifest's `model.session`. */
export interface RawSessionBlock {
  intra_op_threads?: number;
  inter_op_threads?: number;
  graph_optimization_level?: string | number;
  execution_provider?: string;
}

/**
 * The choices of a `session:` block (configuration or manifest); throws SessionOptionError with the key at fault
 * under `prefix` (e.g. `encoder.session`).
 */
export function sessionChoicesOf(raw: RawSessionBlock, prefix: string): SessionChoices {
  let key = prefix;
  try {
    return readSessionBlock(raw, (name) => (key = `${prefix}.${name}`));
  } catch (error) {
    if (error instanceof SessionOptionError) throw new SessionOptionError(error.message, key);
    throw error;
  }
}

/** `reading` is told each key before its value is checked. */
function readSessionBlock(raw: RawSessionBlock, reading: (key: keyof RawSessionBlock) => void): SessionChoices {
  const choices: SessionChoices = {};
  for (const [key, field] of [
    ['intra_op_threads', 'intraOpThreads'],
    ['inter_op_threads', 'interOpThreads'],
  ] as const) {
    const value = raw[key];
    if (value === undefined) continue;
    reading(key);
    if (!(typeof value === 'number' && Number.isSafeInteger(value) && value >= 1)) throw new SessionOptionError(`must be a positive integer, got ${JSON.stringify(value)}`);
    choices[field] = value;
  }
  if (raw.graph_optimization_level !== undefined) {
    reading('graph_optimization_level');
    choices.graphOptimizationLevel = parseGraphOptimizationLevel(checkedText(raw.graph_optimization_level));
  }
  if (raw.execution_provider !== undefined) {
    reading('execution_provider');
    choices.executionProvider = parseExecutionProvider(checkedText(raw.execution_provider));
  }
  return choices;
}

/** A YAML scalar as text (`graph_optimization_level: 3` is a number there). */
function checkedText(value: unknown): string {
  if (typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))) return String(value);
  throw new SessionOptionError(`must be a string, got ${JSON.stringify(value)}`);
}

/** What a built model's manifest holds (`model.session`): only the keys that were set; undefined when none was. */
export function rawSessionBlockOf(choices: SessionChoices): RawSessionBlock | undefined {
  const raw: RawSessionBlock = {};
  if (choices.intraOpThreads !== undefined) raw.intra_op_threads = choices.intraOpThreads;
  if (choices.interOpThreads !== undefined) raw.inter_op_threads = choices.interOpThreads;
  if (choices.graphOptimizationLevel !== undefined) raw.graph_optimization_level = choices.graphOptimizationLevel;
  if (choices.executionProvider !== undefined) raw.execution_provider = choices.executionProvider;
  return Object.keys(raw).length > 0 ? raw : undefined;
}
