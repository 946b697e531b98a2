import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import type { AssetSection, AssetSource, ManifestModel } from '../../runtime/asset-section.ts';
import { isImageModelType, LUA_LIBRARIES, MODEL_TYPES, POOLED_MODEL_TYPES, POOLING_MODES, QUANTIZATIONS } from './config.ts';
import type { BuildConfig, LuaLibraryName, ModelType, Pooling, Quantization } from './config.ts';
import { cacheRoots, extractedEntry } from './cache/extracted-entry.ts';
import { ConfigError } from './errors.ts';
import type { ModelMaxLength } from './max-length.ts';
import { parseImageProcessorConfig } from './image/preprocessor-config.ts';
import { imageLabelsOf, type ImageModelPackage } from './image-model-package.ts';
import { checkModelConfig, notATextModel, MODEL_DATA_FILE, requireFile, resolvePooling, type ModelPackage } from './model-package.ts';
import { rawSessionBlockOf, sessionChoicesOf, SessionOptionError, type RawSessionBlock, type SessionChoices } from './session-options.ts';
import type { TextTruncation } from './tokenizer/index.ts';

/**
 * The model package of a built executable: the same `ModelPackage` that `readModelPackage` makes from the
 * model directory it was built from. Every asset is checked against its SHA-256 as it is read; `model_data`, the
 * weights' large initializers, when it is first extracted.
 */
export async function readPackagedModel(section: AssetSection): Promise<ModelPackage> {
  if (isImageModelType(section.manifest.model.model_type)) throw notATextModel(section.manifest.model.model_type);
  const { name, version, modelType, luaLibs, pooling, normalize, rerankLabel, quantization, maxLength, truncation, session } = modelOfManifest(section.manifest.model);
  for (const required of ['model_weights', 'tokenizer', 'model_config']) {
    if (!section.has(required)) throw new ConfigError(`packaged model has no ${required} asset`);
  }
  const [weights, tokenizerJson, tokenizerConfig, modelConfig, transform] = await Promise.all([
    section.read('model_weights'),
    readJsonAsset(section, 'tokenizer'),
    section.has('tokenizer_config') ? readJsonAsset(section, 'tokenizer_config') : null,
    readJsonAsset(section, 'model_config'),
    section.has('transform') ? section.readText('transform') : null,
  ]);
  return {
    name,
    version,
    modelType,
    weights,
    ...weightsDataOf(section),
    tokenizerJson,
    tokenizerConfig,
    modelConfig: checkModelConfig(modelConfig, 'asset model_config'),
    transform,
    luaLibs,
    pooling,
    normalize,
    rerankLabel,
    quantization,
    // recorded at build (the graph is not parsed again at start); absent in older executables: the tokenizer's length
    ...(maxLength ? { maxLength } : {}),
    ...(truncation ? { truncation } : {}),
    session,
  };
}

/** The image model package of a built executable (ImageModelPackage), checked as its model directory was at build. */
export async function readPackagedImageModel(section: AssetSection): Promise<ImageModelPackage> {
  const { name, version, model_type: modelType } = section.manifest.model;
  if (!isImageModelType(modelType)) throw new ConfigError(`packaged model: ${modelType} is not an image model type`);
  for (const required of ['model_weights', 'model_config', 'preprocessor_config']) {
    if (!section.has(required)) throw new ConfigError(`packaged model has no ${required} asset`);
  }
  const [weights, modelConfig, preprocessor] = await Promise.all([
    section.read('model_weights'),
    readJsonAsset(section, 'model_config'),
    readJsonAsset(section, 'preprocessor_config'),
  ]);
  const checked = checkModelConfig(modelConfig, 'asset model_config');
  return {
    name,
    version,
    modelType,
    weights,
    ...weightsDataOf(section),
    modelConfig: checked,
    labels: modelType === 'image_classification' ? imageLabelsOf(checked, 'asset model_config') : [],
    ...imagePoolingOfManifest(section.manifest.model),
    preprocessor: parseImageProcessorConfig(preprocessor, 'asset preprocessor_config'),
    // the weights as built: int8 behind the gate (image-model-check.ts), else as given
    quantization: section.manifest.model.quantization === 'int8' ? 'int8' : 'none',
    session: sessionOfManifest(section.manifest.model.session),
  };
}

/** image_embedding's pooling (absent: the graph's pooled output) and normalize (absent: true), checked. */
function imagePoolingOfManifest(model: ManifestModel): Pick<ImageModelPackage, 'pooling' | 'normalize'> {
  const pooling = model.pooling ?? null;
  if (pooling !== null && !(POOLING_MODES as readonly unknown[]).includes(pooling)) {
    throw new ConfigError(`packaged model: unknown pooling ${JSON.stringify(pooling)}; this runtime knows ${POOLING_MODES.join(', ')}`);
  }
  const normalize = model.normalize ?? true;
  if (typeof normalize !== 'boolean') throw new ConfigError('packaged model: normalize must be true or false');
  return { pooling: pooling as Pooling | null, normalize };
}

/** `weightsDataDir` when the executable packs its large initializers apart (`model_data`), else nothing. */
function weightsDataOf(section: AssetSection): { weightsDataDir?: string } {
  return section.has('model_data') ? { weightsDataDir: extractedModelData(section) } : {};
}

/**
 * The folder holding the executable's `model_data` asset as MODEL_DATA_FILE, for onnxruntime to map: extracted once
 * into `<cache>/models/<its SHA-256>/` (checked against that hash as it is written), then found there by later starts,
 * which check its size and stamp and hash it again only when it was written to since (src/encoder/cache/).
 */
function extractedModelData(section: AssetSection): string {
  const entry = section.entry('model_data')!;
  return extractedEntry(cacheRoots(), { folder: 'models', name: entry.sha256 }, (staging, refresh) => {
    section.extractSync('model_data', path.join(staging, MODEL_DATA_FILE), refresh);
    return { [MODEL_DATA_FILE]: entry.sha256 };
  });
}

/**
 * The assets of a build configuration, for `writeModelExecutable`: the model's files by path (streamed from
 * disk, never read whole), `tokenizer_config` only when the file exists, the transform's text as data.
 * Names the first missing required file the way `readModelPackage` does.
 */
export function packageAssets(config: BuildConfig): AssetSource[] {
  const { paths } = config;
  requireFile(paths.modelWeightsPath, 'model weights');
  requireFile(paths.modelConfigPath, 'model config');
  if (isImageModelType(config.modelType)) {
    // preprocessor_config.json takes the tokenizer's place: an image model has no tokenizer and no transform
    requireFile(paths.preprocessorConfigPath, 'preprocessor config (preprocessor_config.json)');
    return [
      { name: 'model_weights', path: paths.modelWeightsPath },
      { name: 'model_config', path: paths.modelConfigPath },
      { name: 'preprocessor_config', path: paths.preprocessorConfigPath },
    ];
  }
  requireFile(paths.tokenizerPath, 'tokenizer');
  const assets: AssetSource[] = [
    { name: 'model_weights', path: paths.modelWeightsPath },
    { name: 'tokenizer', path: paths.tokenizerPath },
    { name: 'model_config', path: paths.modelConfigPath },
  ];
  if (existsSync(paths.tokenizerConfigPath) && statSync(paths.tokenizerConfigPath).isFile()) assets.push({ name: 'tokenizer_config', path: paths.tokenizerConfigPath });
  if (config.transform !== null) assets.push({ name: 'transform', data: Buffer.from(config.transform, 'utf8') });
  return assets;
}

/**
 * The manifest's `model` object of a build configuration. Pooling and normalisation are resolved at build (from the
 * configuration or the sentence-transformers layout, which the executable does not carry); `rerank_label` only when set;
 * the maximum length (`max_length`, and `max_length_reason` for `inspect`) as the build reconciled it.
 */
export function manifestModelOf(config: BuildConfig, quantization: Quantization = 'none', maxLength?: ModelMaxLength, truncation?: TextTruncation): ManifestModel {
  const model: ManifestModel = { name: config.name, version: config.version, model_type: config.modelType, lua_libs: [...config.luaLibs] };
  if (quantization !== 'none') model.quantization = quantization;
  if (maxLength) Object.assign(model, { max_length: maxLength.tokens, max_length_reason: maxLength.reason });
  const { pooling, normalize } = resolvePooling(config);
  if (POOLED_MODEL_TYPES.includes(config.modelType)) Object.assign(model, { pooling, normalize });
  // an image embedding model's pooling only when set (absent: the graph's pooled output)
  if (config.modelType === 'image_embedding') Object.assign(model, { normalize: config.normalize ?? true, ...(config.pooling ? { pooling: config.pooling } : {}) });
  if (config.rerankLabel !== null) model.rerank_label = config.rerankLabel;
  // only when not the default: an executable without it cuts texts on the right, as every one did before
  if (truncation) model.truncation = { side: truncation.direction, strategy: truncation.strategy, stride: truncation.stride };
  // only the options the configuration sets: the executable's serve and infer start with them (their flags win)
  const session = rawSessionBlockOf(config.session);
  if (session) model.session = session;
  return model;
}

interface ModelOfManifest {
  name: string;
  version: string;
  modelType: ModelType;
  luaLibs: LuaLibraryName[];
  pooling: Pooling;
  normalize: boolean;
  rerankLabel: string | null;
  quantization: Quantization;
  maxLength: ModelMaxLength | null;
  truncation: TextTruncation | null;
  session: SessionChoices;
}

function modelOfManifest(model: ManifestModel): ModelOfManifest {
  if (!(MODEL_TYPES as readonly string[]).includes(model.model_type)) {
    throw new ConfigError(`packaged model: unknown model type "${model.model_type}"; this runtime knows ${MODEL_TYPES.join(', ')}`);
  }
  const unknownLib = model.lua_libs.find((lib) => !(LUA_LIBRARIES as readonly string[]).includes(lib));
  if (unknownLib !== undefined) {
    throw new ConfigError(`packaged model: unknown Lua library "${unknownLib}"; this runtime knows ${LUA_LIBRARIES.join(', ')}`);
  }
  // Absent in executables built before pooled vectors were served: those defaults are what they would have had.
  const pooling = model.pooling ?? 'mean';
  if (!(POOLING_MODES as readonly unknown[]).includes(pooling)) {
    throw new ConfigError(`packaged model: unknown pooling ${JSON.stringify(pooling)}; this runtime knows ${POOLING_MODES.join(', ')}`);
  }
  const normalize = model.normalize ?? true;
  if (typeof normalize !== 'boolean') throw new ConfigError('packaged model: normalize must be true or false');
  const rerankLabel = model.rerank_label ?? null;
  if (rerankLabel !== null && typeof rerankLabel !== 'string') throw new ConfigError('packaged model: rerank_label must be a string');
  const quantization = model.quantization ?? 'none';
  if (!(QUANTIZATIONS as readonly unknown[]).includes(quantization)) {
    throw new ConfigError(`packaged model: unknown quantization ${JSON.stringify(quantization)}; this runtime knows ${QUANTIZATIONS.join(', ')}`);
  }
  return {
    name: model.name,
    version: model.version,
    modelType: model.model_type as ModelType,
    luaLibs: [...model.lua_libs] as LuaLibraryName[],
    pooling: pooling as Pooling,
    normalize,
    rerankLabel,
    quantization: quantization as Quantization,
    maxLength: maxLengthOfManifest(model),
    truncation: truncationOfManifest(model.truncation),
    session: sessionOfManifest(model.session),
  };
}

/** `truncation` of the manifest (side, strategy, stride); null when absent (right, longest_first, 0). */
function truncationOfManifest(value: unknown): TextTruncation | null {
  if (value === undefined) return null;
  const t = value as { side?: unknown; strategy?: unknown; stride?: unknown };
  const valid =
    value !== null &&
    typeof value === 'object' &&
    (t.side === 'right' || t.side === 'left') &&
    (t.strategy === 'longest_first' || t.strategy === 'only_first' || t.strategy === 'only_second') &&
    Number.isSafeInteger(t.stride) &&
    (t.stride as number) >= 0;
  if (!valid) throw new ConfigError(`packaged model: truncation must be {side: right|left, strategy: longest_first|only_first|only_second, stride: integer >= 0}, got ${JSON.stringify(value)}`);
  return { direction: t.side as TextTruncation['direction'], strategy: t.strategy as TextTruncation['strategy'], stride: t.stride as number };
}

/** `session` of the manifest, checked as the configuration's block is; absent (built without one): nothing set. */
function sessionOfManifest(value: unknown): SessionChoices {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new ConfigError(`packaged model: session must be a mapping, got ${JSON.stringify(value)}`);
  try {
    return sessionChoicesOf(value as RawSessionBlock, 'session');
  } catch (error) {
    if (error instanceof SessionOptionError) throw new ConfigError(`packaged model: "${error.key}": ${error.message}`, { cause: error });
    throw error;
  }
}

/** `max_length` (and its reason) of the manifest; null when absent (built before it was recorded). */
function maxLengthOfManifest(model: ManifestModel): ModelMaxLength | null {
  const { max_length: tokens, max_length_reason: reason } = model;
  if (tokens === undefined) return null;
  if (!(typeof tokens === 'number' && Number.isSafeInteger(tokens) && tokens > 0)) {
    throw new ConfigError(`packaged model: max_length must be a positive integer, got ${JSON.stringify(tokens)}`);
  }
  if (reason !== undefined && typeof reason !== 'string') throw new ConfigError('packaged model: max_length_reason must be a string');
  return { tokens, reason: reason ?? 'recorded at build' };
}

async function readJsonAsset(section: AssetSection, name: string): Promise<unknown> {
  const text = await section.readText(name);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`asset ${name} is not valid JSON: ${(error as Error).message}`, { cause: error });
  }
}
