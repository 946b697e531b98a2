import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { compileBuiltInSchema } from '../shared/built-in-schema.ts';
import { parseDocument } from 'yaml';
import { ConfigError } from './errors.ts';
import { keyPathOf } from './schema-path.ts';
import { cacheDirFromEnvironment } from './cache/cache-dir.ts';
import { BUILD_MODEL_TYPES, DEFAULT_LUA_LIBRARIES, isImageModelType, LUA_LIBRARIES, type BuildModelType, type LuaLibraryName } from './config-names.ts';
import { ENCODERFILE_MODEL_TYPES, fromEncoderfileSection } from './encoderfile-config.ts';
import { sessionChoicesOf, SessionOptionError, type RawSessionBlock, type SessionChoices } from './session-options.ts';
import type { TruncationDirection, TruncationStrategy } from './tokenizer/truncation.ts';

export { BUILD_MODEL_TYPES, DEFAULT_LUA_LIBRARIES, IMAGE_MODEL_TYPES, isImageModelType, LUA_LIBRARIES, MODEL_TYPES } from './config-names.ts';
export type { BuildModelType, ImageModelType, LuaLibraryName, ModelType } from './config-names.ts';

/** How token vectors become one vector per text (sentence-transformers' pooling modes of the same names). */
export const POOLING_MODES = ['mean', 'cls', 'max', 'last'] as const;
export type Pooling = (typeof POOLING_MODES)[number];

/** Weight quantization applied at build: none, or int8 MatMul weights (DynamicQuantizeMatMul) behind an accuracy gate. */
export const QUANTIZATIONS = ['none', 'int8'] as const;
export type Quantization = (typeof QUANTIZATIONS)[number];

/** The accuracy gate of `quantize: int8`, with its defaults. */
export interface QuantizeGate {
  /** Texts both models run on; null: the built-in sample texts. */
  checkTexts: string[] | null;
  /** Embeddings: the smallest cosine between an fp32 and an int8 vector that passes. */
  minCosine: number;
  /** Classification: the smallest share of inputs (tokens) whose predicted label is unchanged. */
  minLabelAgreement: number;
}

export const DEFAULT_QUANTIZE_GATE: Readonly<QuantizeGate> = Object.freeze({ checkTexts: null, minCosine: 0.99, minLabelAgreement: 0.98 });

/** Text model types that serve pooled vectors (`/v1/embeddings`), and so take `pooling` and `normalize`. */
export const POOLED_MODEL_TYPES: readonly BuildModelType[] = ['embedding', 'sentence_embedding'];
/** Every model type that takes `pooling` and `normalize`: the pooled text types and image_embedding. */
const POOLING_MODEL_TYPES: readonly BuildModelType[] = [...POOLED_MODEL_TYPES, 'image_embedding'];

export const DEFAULT_MODEL_VERSION = '0.1.0';

/**
 * The `tokenizer:` block (mozilla-ai/encoderfile's TokenizerBuildConfig, same keys and meaning); null: not set, the
 * model's own (tokenizer_config.json for an encoderfile configuration, else right, longest_first, stride 0).
 */
export interface TokenizerBlock {
  padStrategy: 'batch_longest' | { fixed: number } | null;
  truncationSide: TruncationDirection | null;
  truncationStrategy: TruncationStrategy | null;
  /** Tokens of one input, special tokens included; never above what the model runs (max-length.ts). */
  maxLength: number | null;
  stride: number | null;
}

export const NO_TOKENIZER_BLOCK: Readonly<TokenizerBlock> = Object.freeze({ padStrategy: null, truncationSide: null, truncationStrategy: null, maxLength: null, stride: null });

/** Where the model's files are; every path absolute. */
export interface ModelPaths {
  modelConfigPath: string;
  modelWeightsPath: string;
  tokenizerPath: string;
  /** Optional companion of the tokenizer; looked for beside it. */
  tokenizerConfigPath: string;
  /** Image models' preprocessing (HuggingFace's preprocessor_config.json); looked for beside config.json. */
  preprocessorConfigPath: string;
}

/** The `encoder:` section of a build configuration, validated, with defaults applied and paths resolved. */
export interface BuildConfig {
  name: string;
  version: string;
  modelType: BuildModelType;
  paths: ModelPaths;
  /** Absolute; null when the file does not set it (the builder then uses `defaultOutputPath` for its target). */
  outputPath: string | null;
  cacheDir: string;
  /** The Lua source of the transform (read from `transform.path` when given as a file), or null. */
  transform: string | null;
  luaLibs: LuaLibraryName[];
  /** Pooling of token vectors into one vector per text; null: read from a sentence-transformers layout, else mean. */
  pooling: Pooling | null;
  /** L2 normalisation of pooled vectors by default; null: a sentence-transformers Normalize module says, else true. */
  normalize: boolean | null;
  /** Sequence classification: the label whose probability is the rerank score; null: the last label. */
  rerankLabel: string | null;
  quantize: Quantization;
  quantizeGate: QuantizeGate;
  tokenizer: TokenizerBlock;
  /** onnxruntime session options of the `session:` block, validated; serve's and infer's flags win over each. */
  session: SessionChoices;
  /** Which format the file was written in: this project's `encoder:` or mozilla-ai/encoderfile's `encoderfile:`. */
  format: 'encoder' | 'encoderfile';
  /** encoderfile's `target`: the target triple to build for when `build --platform` does not say; null: this machine's. */
  target: string | null;
  /** encoderfile's `base_binary_path` (absolute): the base runtime to use when `build --base-binary-path` does not say. */
  baseBinaryPath: string | null;
  /** Keys accepted without effect here, each with why: `build` prints them on its configuration line. */
  notes: string[];
}

const stringField = { type: 'string', minLength: 1 } as const;

/** The `tokenizer:` block, in both formats (encoderfile's keys; its pad_strategy is null or `{fixed: n}`). */
const TOKENIZER_BLOCK_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    pad_strategy: {
      oneOf: [
        { type: 'null' },
        { type: 'string', enum: ['batch_longest'] },
        { type: 'object', required: ['fixed'], additionalProperties: false, properties: { fixed: { type: 'integer', minimum: 0 } } },
      ],
    },
    truncation_side: { type: 'string', enum: ['right', 'left'] },
    truncation_strategy: { type: 'string', enum: ['longest_first', 'only_first', 'only_second'] },
    max_length: { type: 'integer', minimum: 1 },
    stride: { type: 'integer', minimum: 0 },
  },
} as const;

/**
 * The `session:` block (serve's session flags, by encoderfile's names); the values of the level and the provider
 * are checked by session-options.ts, which the flags share.
 */
const SESSION_BLOCK_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    intra_op_threads: { type: 'integer', minimum: 1 },
    inter_op_threads: { type: 'integer', minimum: 1 },
    graph_optimization_level: { anyOf: [{ type: 'string' }, { type: 'integer' }] },
    execution_provider: stringField,
  },
} as const;

/**
 * `path`: a model directory, or its files one by one (encoderfile's keys). `tokenizer_path` is required of text models,
 * `preprocessor_config_path` read by image models only (fromEncoderSection checks which).
 */
const MODEL_PATH_SCHEMA = {
  oneOf: [
    stringField,
    {
      type: 'object',
      required: ['model_config_path', 'model_weights_path'],
      additionalProperties: false,
      properties: {
        model_config_path: stringField,
        model_weights_path: stringField,
        tokenizer_path: stringField,
        tokenizer_config_path: stringField,
        preprocessor_config_path: stringField,
      },
    },
  ],
} as const;

/** JSON schema of the YAML file; messages are rewritten by `describeSchemaError`. */
export const CONFIG_SCHEMA = {
  type: 'object',
  required: ['encoder'],
  additionalProperties: false,
  properties: {
    encoder: {
      type: 'object',
      required: ['name', 'path', 'model_type'],
      additionalProperties: false,
      properties: {
        // Not "." or "..": the name is the default output file, which would then be a directory.
        name: { type: 'string', minLength: 1, pattern: '^(?!\\.{1,2}$)[A-Za-z0-9._-]+$' },
        version: stringField,
        path: MODEL_PATH_SCHEMA,
        model_type: { type: 'string', enum: BUILD_MODEL_TYPES },
        output_path: stringField,
        cache_dir: stringField,
        transform: {
          oneOf: [
            { type: 'string' },
            { type: 'object', required: ['path'], additionalProperties: false, properties: { path: stringField } },
          ],
        },
        lua_libs: { type: 'array', items: { type: 'string', enum: LUA_LIBRARIES }, uniqueItems: true },
        pooling: { type: 'string', enum: POOLING_MODES },
        normalize: { type: 'boolean' },
        rerank_label: stringField,
        quantize: { type: 'string', enum: QUANTIZATIONS },
        quantize_check_texts: { type: 'array', minItems: 1, items: stringField },
        quantize_min_cosine: { type: 'number', minimum: -1, maximum: 1 },
        quantize_min_label_agreement: { type: 'number', minimum: 0, maximum: 1 },
        tokenizer: TOKENIZER_BLOCK_SCHEMA,
        session: SESSION_BLOCK_SCHEMA,
      },
    },
  },
} as const;

const ENCODER_PROPERTIES = CONFIG_SCHEMA.properties.encoder.properties;

/**
 * mozilla-ai/encoderfile's configuration (0.7.0 `EncoderfileConfig` under `encoderfile:`): its keys with its types, this
 * project's own keys beside them, and, as there, other keys ignored (encoderfile-config.ts says which in a note).
 */
export const ENCODERFILE_SCHEMA = {
  type: 'object',
  required: ['encoderfile'],
  properties: {
    encoderfile: {
      type: 'object',
      required: ['name', 'path', 'model_type'],
      properties: {
        ...ENCODER_PROPERTIES,
        // encoderfile takes any name (a Hugging Face id such as org/model too); the default output file is then
        // ./org/model.encoderfile, as encoderfile writes it
        name: { type: 'string', minLength: 1, pattern: '^[^\\u0000-\\u001f]+$' },
        model_type: { type: 'string', enum: ENCODERFILE_MODEL_TYPES },
        lua_libs: { type: 'array', items: { type: 'string', enum: [...LUA_LIBRARIES, 'debug'] } },
        base_binary_path: stringField,
        validate_transform: { type: 'boolean' },
        target: stringField,
      },
    },
  },
} as const;

/** Compiled on first use: a model executable never reads a configuration file, and start-up should not pay for it. */
let validateConfigDocument: ValidateFunction | undefined;
let validateEncoderfileDocument: ValidateFunction | undefined;

/** Reads and validates a build configuration file; relative paths are relative to the file's folder. */
export function loadBuildConfig(file: string, options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): BuildConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`configuration file not found: ${file}`, { cause: error });
  }
  return parseBuildConfig(text, { ...options, baseDir: path.dirname(path.resolve(file)), source: file });
}

/**
 * Validates YAML text of a build configuration. `baseDir` anchors relative paths of an `encoder:` file; those of an
 * `encoderfile:` file are relative to the working directory, as encoderfile reads them.
 */
export function parseBuildConfig(
  text: string,
  options: { baseDir: string; cwd?: string; env?: NodeJS.ProcessEnv; source?: string },
): BuildConfig {
  const source = options.source ?? 'configuration';
  const document = parseDocument(text, { prettyErrors: false, uniqueKeys: true });
  if (document.errors.length > 0) {
    const first = document.errors[0];
    const line = first.linePos?.[0].line;
    throw new ConfigError(`${source}: invalid YAML${line ? ` at line ${line}` : ''}: ${first.message.split('\n')[0]}`);
  }
  const raw: unknown = document.toJS();
  const cwd = options.cwd ?? process.cwd();
  if (isEncoderfileDocument(raw)) {
    validateEncoderfileDocument ??= compileBuiltInSchema(ENCODERFILE_SCHEMA, { allErrors: false, verbose: true });
    if (!validateEncoderfileDocument(raw)) {
      throw new ConfigError(`${source}: ${describeSchemaError(validateEncoderfileDocument.errors ?? [], raw)}`);
    }
    const translated = fromEncoderfileSection(raw as Record<string, unknown>);
    const config = fromEncoderSection(translated.encoder, source, cwd, cwd, options.env, 'encoderfile');
    const { baseBinaryPath, notes } = translated.extras;
    return {
      ...config,
      ...translated.extras,
      baseBinaryPath: baseBinaryPath === null ? null : path.resolve(cwd, expandHome(baseBinaryPath)),
      notes: [...notes, ...config.notes],
    };
  }
  if (raw !== null && typeof raw === 'object' && !Array.isArray(raw) && !('encoder' in raw)) {
    throw new ConfigError(`${source}: missing required key "encoder" (this program's format) or "encoderfile" (mozilla-ai/encoderfile's)`);
  }
  validateConfigDocument ??= compileBuiltInSchema(CONFIG_SCHEMA, { allErrors: false, verbose: true });
  if (!validateConfigDocument(raw)) {
    throw new ConfigError(`${source}: ${describeSchemaError(validateConfigDocument.errors ?? [], raw)}`);
  }
  return fromEncoderSection((raw as { encoder: RawEncoderSection }).encoder, source, options.baseDir, cwd, options.env);
}

/** An `encoderfile:` document: that key at the top and no `encoder:` (a file with both is refused as an encoder file). */
function isEncoderfileDocument(raw: unknown): boolean {
  return raw !== null && typeof raw === 'object' && !Array.isArray(raw) && 'encoderfile' in raw && !('encoder' in raw);
}

/** The BuildConfig of a validated `encoder:` section; relative paths from `baseDir`, output_path from `cwd`. */
function fromEncoderSection(
  encoder: RawEncoderSection,
  source: string,
  baseDir: string,
  cwd: string,
  env: NodeJS.ProcessEnv | undefined,
  section: 'encoder' | 'encoderfile' = 'encoder',
): BuildConfig {
  checkFieldsFitModelType(encoder, source);
  const session = sessionBlockOf(encoder.session, `${section}.session`, source);
  const resolve = (p: string) => path.resolve(baseDir, expandHome(p));
  return {
    name: encoder.name,
    version: encoder.version ?? DEFAULT_MODEL_VERSION,
    modelType: encoder.model_type,
    paths: resolveModelPaths(encoder.path, resolve),
    outputPath: encoder.output_path ? path.resolve(cwd, expandHome(encoder.output_path)) : null,
    cacheDir: encoder.cache_dir ? resolve(encoder.cache_dir) : cacheDirFromEnvironment(env ?? process.env),
    transform: readTransform(encoder.transform, resolve),
    luaLibs: encoder.lua_libs ? [...encoder.lua_libs] : [...DEFAULT_LUA_LIBRARIES],
    pooling: encoder.pooling ?? null,
    normalize: encoder.normalize ?? null,
    rerankLabel: encoder.rerank_label ?? null,
    quantize: encoder.quantize ?? 'none',
    quantizeGate: {
      checkTexts: encoder.quantize_check_texts ?? DEFAULT_QUANTIZE_GATE.checkTexts,
      minCosine: encoder.quantize_min_cosine ?? DEFAULT_QUANTIZE_GATE.minCosine,
      minLabelAgreement: encoder.quantize_min_label_agreement ?? DEFAULT_QUANTIZE_GATE.minLabelAgreement,
    },
    tokenizer: tokenizerBlockOf(encoder.tokenizer),
    session,
    format: 'encoder',
    target: null,
    baseBinaryPath: null,
    notes: tokenizerNotes(encoder.tokenizer),
  };
}

/** The `session:` block's choices; a value the flag would refuse is refused naming the key, for the same reason. */
function sessionBlockOf(raw: RawSessionBlock | undefined, key: string, source: string): SessionChoices {
  if (raw === undefined) return {};
  try {
    return sessionChoicesOf(raw, key);
  } catch (error) {
    if (error instanceof SessionOptionError) throw new ConfigError(`${source}: "${error.key ?? key}": ${error.message}`, { cause: error });
    throw error;
  }
}

/** The keys of the tokenizer block that cannot act here, with why. */
function tokenizerNotes(raw: RawTokenizerBlock | undefined): string[] {
  const pad = raw?.pad_strategy;
  if (pad === undefined || pad === null || pad === 'batch_longest') return [];
  return [`tokenizer.pad_strategy fixed ${pad.fixed}: no effect on results, batches are padded to their longest input (padding is masked, so every output is the same)`];
}

function tokenizerBlockOf(raw: RawTokenizerBlock | undefined): TokenizerBlock {
  if (raw === undefined) return { ...NO_TOKENIZER_BLOCK };
  const pad = raw.pad_strategy;
  return {
    padStrategy: pad === undefined || pad === null ? null : pad === 'batch_longest' ? 'batch_longest' : { fixed: pad.fixed },
    truncationSide: raw.truncation_side ?? null,
    truncationStrategy: raw.truncation_strategy ?? null,
    maxLength: raw.max_length ?? null,
    stride: raw.stride ?? null,
  };
}

/** Fields that only mean something for some model types are refused elsewhere, rather than silently ignored. */
function checkFieldsFitModelType(encoder: RawEncoderSection, source: string): void {
  const spec = encoder.path;
  const image = isImageModelType(encoder.model_type);
  if (typeof spec !== 'string' && spec.tokenizer_path === undefined && !image) {
    throw new ConfigError(`${source}: "path.tokenizer_path" is required for a ${encoder.model_type} model (only image models have no tokenizer)`);
  }
  if (image) {
    // what acts on tokens or needs a text pipeline has no meaning (yet) for an image model: refused, not ignored
    for (const key of ['transform', 'tokenizer', 'quantize_check_texts'] as const) {
      if (encoder[key] !== undefined) {
        throw new ConfigError(`${source}: "${key}" is not supported for ${encoder.model_type} models (docs/image-models.md)`);
      }
    }
  }
  const pooled = POOLING_MODEL_TYPES.includes(encoder.model_type);
  for (const key of ['pooling', 'normalize'] as const) {
    if (encoder[key] !== undefined && !pooled) {
      throw new ConfigError(`${source}: "encoder.${key}" applies to ${POOLING_MODEL_TYPES.join(', ')} models, not ${encoder.model_type}`);
    }
  }
  if (encoder.rerank_label !== undefined && encoder.model_type !== 'sequence_classification') {
    throw new ConfigError(`${source}: "encoder.rerank_label" applies to sequence_classification models (rerank), not ${encoder.model_type}`);
  }
}

/** The `tokenizer:` block as written. */
export interface RawTokenizerBlock {
  pad_strategy?: null | 'batch_longest' | { fixed: number };
  truncation_side?: TruncationDirection;
  truncation_strategy?: TruncationStrategy;
  max_length?: number;
  stride?: number;
}

/** The `encoder:` section as written (after validation). */
export interface RawEncoderSection {
  name: string;
  version?: string;
  path:
    | string
    | { model_config_path: string; model_weights_path: string; tokenizer_path?: string; tokenizer_config_path?: string; preprocessor_config_path?: string };
  model_type: BuildModelType;
  output_path?: string;
  cache_dir?: string;
  transform?: string | { path: string };
  lua_libs?: LuaLibraryName[];
  pooling?: Pooling;
  normalize?: boolean;
  rerank_label?: string;
  quantize?: Quantization;
  quantize_check_texts?: string[];
  quantize_min_cosine?: number;
  quantize_min_label_agreement?: number;
  tokenizer?: RawTokenizerBlock;
  session?: RawSessionBlock;
}

function resolveModelPaths(spec: RawEncoderSection['path'], resolve: (p: string) => string): ModelPaths {
  if (typeof spec === 'string') {
    const dir = resolve(spec);
    return {
      modelConfigPath: path.join(dir, 'config.json'),
      modelWeightsPath: path.join(dir, 'model.onnx'),
      tokenizerPath: path.join(dir, 'tokenizer.json'),
      tokenizerConfigPath: path.join(dir, 'tokenizer_config.json'),
      preprocessorConfigPath: path.join(dir, 'preprocessor_config.json'),
    };
  }
  const modelConfigPath = resolve(spec.model_config_path);
  // an image model names no tokenizer (checkFieldsFitModelType): its place beside config.json, never read
  const tokenizerPath = spec.tokenizer_path ? resolve(spec.tokenizer_path) : path.join(path.dirname(modelConfigPath), 'tokenizer.json');
  return {
    modelConfigPath,
    modelWeightsPath: resolve(spec.model_weights_path),
    tokenizerPath,
    tokenizerConfigPath: spec.tokenizer_config_path ? resolve(spec.tokenizer_config_path) : path.join(path.dirname(tokenizerPath), 'tokenizer_config.json'),
    preprocessorConfigPath: spec.preprocessor_config_path
      ? resolve(spec.preprocessor_config_path)
      : path.join(path.dirname(modelConfigPath), 'preprocessor_config.json'),
  };
}

function readTransform(spec: RawEncoderSection['transform'], resolve: (p: string) => string): string | null {
  if (spec === undefined) return null;
  if (typeof spec === 'string') return spec;
  const file = resolve(spec.path);
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`transform not found: ${file}`, { cause: error });
  }
}

/** `./<name>` in the working directory, plus the target's executable extension (`.exe` on Windows targets). */
export function defaultOutputPath(name: string, cwd: string, extension = ''): string {
  return path.resolve(cwd, `${name}${extension}`);
}

function expandHome(p: string): string {
  return p === '~' || p.startsWith('~/') ? path.join(os.homedir(), p.slice(1)) : p;
}

/** Turns the first schema violation into a sentence that names the key and what it accepts. */
function describeSchemaError(errors: ErrorObject[], raw: unknown): string {
  // oneOf reports its branches first; the most specific branch error explains the problem best.
  const error = pickMostRelevant(errors, raw);
  const key = keyPathOf(error.instancePath);
  switch (error.keyword) {
    case 'additionalProperties': {
      const extra = (error.params as { additionalProperty: string }).additionalProperty;
      const allowed = Object.keys((error.parentSchema as { properties: object }).properties);
      const where = key ? `${key}.${extra}` : extra;
      return `unknown key "${where}"; allowed keys: ${allowed.join(', ')}`;
    }
    case 'required': {
      const missing = (error.params as { missingProperty: string }).missingProperty;
      return `missing required key "${key ? `${key}.${missing}` : missing}"`;
    }
    case 'enum': {
      const allowed = (error.params as { allowedValues: string[] }).allowedValues;
      return `invalid value ${JSON.stringify(error.data)} for "${key}"; allowed values: ${allowed.join(', ')}`;
    }
    case 'type':
      return `"${key}" must be ${describeType(key, error)}, got ${typeName(error.data)}`;
    case 'minLength':
    case 'minItems':
      return `"${key}" must not be empty`;
    case 'minimum':
    case 'maximum':
      return `"${key}" must be ${error.keyword === 'minimum' ? 'at least' : 'at most'} ${(error.params as { limit: number }).limit}, got ${JSON.stringify(error.data)}`;
    case 'pattern':
      if (key === 'encoderfile.name') return `"${key}" must not hold control characters, got ${JSON.stringify(error.data)}`;
      return `"${key}" may only contain letters, digits, ".", "_" and "-", and may not be "." or ".." (it names the output file), got ${JSON.stringify(error.data)}`;
    case 'uniqueItems':
      return `"${key}" lists a value twice`;
    case 'oneOf':
      return `"${key}" must be ${describeType(key, error)}, got ${typeName(error.data)}`;
    default:
      return `"${key}" ${error.message ?? 'is invalid'}`;
  }
}

function pickMostRelevant(errors: ErrorObject[], raw: unknown): ErrorObject {
  const oneOf = errors.find((e) => e.keyword === 'oneOf');
  if (!oneOf) return errors[0];
  const value = valueAt(raw, oneOf.instancePath);
  // For an object given where "string or object" is allowed, the object branch's own error is the useful one.
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const inner = errors.find((e) => e.instancePath.startsWith(oneOf.instancePath) && e.keyword !== 'oneOf' && e.keyword !== 'type');
    if (inner) return inner;
  }
  return oneOf;
}

function valueAt(raw: unknown, pointer: string): unknown {
  let node = raw;
  for (const part of pointer.split('/').slice(1)) node = (node as Record<string, unknown> | undefined)?.[part];
  return node;
}

/** By key within the section (`encoder` or `encoderfile`). */
const TYPE_DESCRIPTIONS: Record<string, string> = {
  path: 'a directory path or an object with model_config_path, model_weights_path and (text models) tokenizer_path',
  transform: 'an inline Lua script or an object with path',
  lua_libs: `a list of ${LUA_LIBRARIES.join(', ')}`,
  'tokenizer.pad_strategy': 'batch_longest, null or an object with fixed (a length)',
  '': 'a mapping',
};

function describeType(key: string, error: ErrorObject): string {
  const inSection = key.replace(/^encoder(file)?\.?/, '');
  if (TYPE_DESCRIPTIONS[inSection]) return TYPE_DESCRIPTIONS[inSection];
  if (/^lua_libs\[\d+\]$/.test(inSection)) return `one of ${LUA_LIBRARIES.join(', ')}`;
  const expected = (error.params as { type?: string }).type;
  return expected === 'object' ? 'a mapping' : `a ${expected ?? 'valid value'}`;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return `${typeof value} ${JSON.stringify(value)}`;
}
