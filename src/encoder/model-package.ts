import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { isImageModelType, POOLED_MODEL_TYPES, type BuildConfig, type LuaLibraryName, type ModelType, type Pooling, type Quantization } from './config.ts';
import { ConfigError } from './errors.ts';
import { resolveMaxLength, type GraphLimits, type ModelMaxLength } from './max-length.ts';
import { readSentenceTransformersLayout } from './sentence-transformers.ts';
import type { SessionChoices } from './session-options.ts';
import type { TextTruncation } from './tokenizer/index.ts';
import type { TruncationDirection, TruncationStrategy } from './tokenizer/truncation.ts';

/** The `config.json` fields this program reads; the file holds more. */
export interface ModelConfigJson {
  id2label?: Record<string, string>;
  [key: string]: unknown;
}

/**
 * Everything needed to run one model, in memory. A model directory (through a build configuration) and,
 * later, the asset section of a built executable both produce this, so the predict pipeline has one source.
 */
/** The file a built model's large initializers are kept in, beside its graph (ONNX external data). */
export const MODEL_DATA_FILE = 'model.data';

export interface ModelPackage {
  name: string;
  version: string;
  modelType: ModelType;
  /** The ONNX file's bytes. */
  weights: Uint8Array;
  /**
   * The folder of MODEL_DATA_FILE, which the weights' large initializers are kept in (a built executable's model,
   * extracted to the cache once); absent: the weights hold all of their data.
   */
  weightsDataDir?: string;
  tokenizerJson: unknown;
  tokenizerConfig: unknown | null;
  modelConfig: ModelConfigJson;
  transform: string | null;
  luaLibs: LuaLibraryName[];
  /** How token vectors are pooled into one vector per text (embedding and sentence_embedding models). */
  pooling: Pooling;
  /** Whether pooled vectors are L2-normalised when a request does not say. */
  normalize: boolean;
  /** Sequence classification: the label whose probability is the rerank score; null: the last one. */
  rerankLabel: string | null;
  /** How the weights were quantized at build (`none` for a model directory: quantization happens at build). */
  quantization: Quantization;
  /**
   * The longest input, special tokens included, that the tokenizer keeps and token ids may have (max-length.ts);
   * absent in the manifest of an executable built before it was recorded: the tokenizer's own length applies.
   */
  maxLength?: ModelMaxLength;
  /** How texts longer than maxLength are cut (the `tokenizer:` block); absent: right, longest_first, stride 0. */
  truncation?: TextTruncation;
  /** onnxruntime session options of the `session:` block (serve's and infer's flags win over each); absent: none set. */
  session?: SessionChoices;
}

/** Pooling and normalisation as served: the configuration's, else the sentence-transformers layout's, else mean and true. */
export function resolvePooling(config: Pick<BuildConfig, 'modelType' | 'pooling' | 'normalize' | 'paths'>): { pooling: Pooling; normalize: boolean } {
  // The layout is read only for what the configuration leaves open: a layout this server cannot reproduce must not fail
  // a build whose configuration already says how to pool.
  const open = config.pooling === null || config.normalize === null;
  const layout = open && POOLED_MODEL_TYPES.includes(config.modelType) ? readSentenceTransformersLayout(path.dirname(config.paths.modelConfigPath)) : null;
  return { pooling: config.pooling ?? layout?.pooling ?? 'mean', normalize: config.normalize ?? layout?.normalize ?? true };
}

/**
 * Checks that the required files exist (naming the first one missing) and reads them. The maximum length is
 * reconciled from config.json and tokenizer_config.json only: what the graph shows is added by the builder's
 * readModelDirectory (src/builder/model-directory.ts), which `build` and `serve --config` use, so that ONNX parsing
 * stays out of a model executable's start-up.
 */
export function readModelPackage(config: BuildConfig): ModelPackage {
  if (isImageModelType(config.modelType)) throw notATextModel(config.modelType);
  const { paths } = config;
  requireFile(paths.modelWeightsPath, 'model weights');
  requireFile(paths.modelConfigPath, 'model config');
  requireFile(paths.tokenizerPath, 'tokenizer');
  const modelConfig = checkModelConfig(readJsonFile(paths.modelConfigPath, 'model config'), `model config ${paths.modelConfigPath}`);
  const tokenizerConfig = existsSync(paths.tokenizerConfigPath) ? readJsonFile(paths.tokenizerConfigPath, 'tokenizer config') : null;
  return {
    name: config.name,
    version: config.version,
    modelType: config.modelType as ModelType,
    weights: readFileSync(paths.modelWeightsPath),
    tokenizerJson: readJsonFile(paths.tokenizerPath, 'tokenizer'),
    tokenizerConfig,
    modelConfig,
    transform: config.transform,
    luaLibs: config.luaLibs,
    ...resolvePooling(config),
    rerankLabel: config.rerankLabel,
    quantization: 'none',
    maxLength: maxLengthOf(config, modelConfig, tokenizerConfig, null),
    ...truncationField(resolveTruncation(config, tokenizerConfig)),
    session: config.session,
  };
}

export const DEFAULT_TRUNCATION: Readonly<TextTruncation> = Object.freeze({ direction: 'right', strategy: 'longest_first', stride: 0 });

/** `{ truncation }` when it is not the default, else nothing (a package without it cuts as before). */
export function truncationField(truncation: TextTruncation): { truncation?: TextTruncation } {
  const isDefault = truncation.direction === 'right' && truncation.strategy === 'longest_first' && truncation.stride === 0;
  return isDefault ? {} : { truncation };
}

const DIRECTIONS: readonly string[] = ['right', 'left'];
const STRATEGIES: readonly string[] = ['longest_first', 'only_first', 'only_second'];

/**
 * How the server cuts long texts: the `tokenizer:` block's side, strategy and stride; each one it leaves out is, for an
 * encoderfile configuration, tokenizer_config.json's `truncation_side` / `truncation_strategy` / `stride` (encoderfile
 * reads them there), else right, longest_first, 0.
 */
export function resolveTruncation(config: Pick<BuildConfig, 'tokenizer' | 'format'>, tokenizerConfig: unknown): TextTruncation {
  const file = config.format === 'encoderfile' && tokenizerConfig !== null && typeof tokenizerConfig === 'object' ? (tokenizerConfig as Record<string, unknown>) : {};
  const fileSide = DIRECTIONS.includes(file.truncation_side as string) ? (file.truncation_side as TruncationDirection) : null;
  const fileStrategy = STRATEGIES.includes(file.truncation_strategy as string) ? (file.truncation_strategy as TruncationStrategy) : null;
  const fileStride = Number.isSafeInteger(file.stride) && (file.stride as number) >= 0 ? (file.stride as number) : null;
  return {
    direction: config.tokenizer.truncationSide ?? fileSide ?? DEFAULT_TRUNCATION.direction,
    strategy: config.tokenizer.truncationStrategy ?? fileStrategy ?? DEFAULT_TRUNCATION.strategy,
    stride: config.tokenizer.stride ?? fileStride ?? DEFAULT_TRUNCATION.stride,
  };
}

/** The maximum length of a model folder's files and, when read, its graph's limits (max-length.ts). */
export function maxLengthOf(config: Pick<BuildConfig, 'paths' | 'tokenizer'>, modelConfig: ModelConfigJson, tokenizerConfig: unknown, graph: GraphLimits | null): ModelMaxLength {
  const { paths } = config;
  const model = resolveMaxLength({ graph, weightsFile: path.basename(paths.modelWeightsPath), modelConfig, modelConfigFile: path.basename(paths.modelConfigPath), tokenizerConfig });
  const configured = config.tokenizer.maxLength;
  if (configured === null || configured === model.tokens) return model;
  // shorter than the model runs: texts are cut there; longer: it cannot be, the model's length stays (and says so)
  if (configured < model.tokens) return { tokens: configured, reason: `tokenizer.max_length of the configuration; the model runs ${model.tokens}: ${model.reason}` };
  return { tokens: model.tokens, reason: `${model.reason}; the configuration's tokenizer.max_length ${configured} is above what the model runs` };
}

/** The label names of a classification model, by index, from `config.json` `id2label`. */
export function labelsOf(modelConfig: ModelConfigJson): Map<number, string> {
  const labels = new Map<number, string>();
  for (const [index, label] of Object.entries(modelConfig.id2label ?? {})) labels.set(Number(index), label);
  return labels;
}

/** The checks every model source applies to `config.json`; `source` names it in messages. */
export function checkModelConfig(modelConfig: unknown, source: string): ModelConfigJson {
  if (modelConfig === null || typeof modelConfig !== 'object' || Array.isArray(modelConfig)) {
    throw new ConfigError(`${source} is not a JSON object`);
  }
  const { id2label } = modelConfig as ModelConfigJson;
  if (id2label === undefined || id2label === null) return modelConfig as ModelConfigJson;
  const valid =
    typeof id2label === 'object' &&
    !Array.isArray(id2label) &&
    Object.entries(id2label).every(([key, value]) => /^\d+$/.test(key) && typeof value === 'string');
  if (!valid) throw new ConfigError(`${source}: id2label must map label indices ("0", "1", ...) to label names`);
  return modelConfig as ModelConfigJson;
}

/**
 * A text model's reader given an image model: its package has no tokenizer and is read by readImageModelPackage or
 * readPackagedImageModel (image-model-package.ts), which the command line picks by the model type.
 */
export function notATextModel(modelType: string): ConfigError {
  return new ConfigError(`${modelType} is an image model, read without a tokenizer as an image model package (docs/image-models.md)`);
}

export function requireFile(file: string, what: string): void {
  if (!existsSync(file) || !statSync(file).isFile()) throw new ConfigError(`${what} not found: ${file}`);
}

export function readJsonFile(file: string, what: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigError(`${what} is not valid JSON: ${file}: ${(error as Error).message}`, { cause: error });
  }
}
