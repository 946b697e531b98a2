/**
 * An image model's package: what `readModelPackage` is for text models, with preprocessor_config.json in place of a
 * tokenizer. Made from a model directory (build) or a built executable's assets (packaged-model.ts); both check the
 * files the same way, so that a broken preprocessor_config.json or id2label fails the build, not a request.
 */
import { readFileSync } from 'node:fs';
import type { BuildConfig, ImageModelType, Pooling, Quantization } from './config.ts';
import { ConfigError } from './errors.ts';
import { parseImageProcessorConfig, type ImageProcessorConfig } from './image/preprocessor-config.ts';
import { checkModelConfig, readJsonFile, requireFile, type ModelConfigJson } from './model-package.ts';
import type { ImageModelExpectation } from './image-model.ts';
import type { SessionChoices } from './session-options.ts';

export interface ImageModelPackage {
  name: string;
  version: string;
  modelType: ImageModelType;
  weights: Uint8Array;
  /** As ModelPackage.weightsDataDir. */
  weightsDataDir?: string;
  modelConfig: ModelConfigJson;
  /** image_classification: the labels by index, from config.json id2label (every index from 0, none missing); else []. */
  labels: string[];
  /**
   * image_embedding: how the vector is made. null: the graph's pooled output (`image_embeds`, else `pooler_output`);
   * a mode: that pooling over `last_hidden_state`'s tokens (cls: the first).
   */
  pooling: Pooling | null;
  /** image_embedding: vectors scaled to unit length when a request does not say (default true). */
  normalize: boolean;
  /** preprocessor_config.json as parsed and checked. */
  preprocessor: ImageProcessorConfig;
  quantization: Quantization;
  /** As ModelPackage.session: the configuration's `session:` block; serve's and infer's flags win over each. */
  session: SessionChoices;
}

/** An image model's package, told apart from a text model's (ModelPackage), which has a tokenizer instead. */
export function isImageModelPackage(pkg: object): pkg is ImageModelPackage {
  return 'preprocessor' in pkg;
}

/** The model directory's files of an image model's build configuration, read and checked. */
export function readImageModelPackage(config: BuildConfig): ImageModelPackage {
  const { paths } = config;
  requireFile(paths.modelWeightsPath, 'model weights');
  requireFile(paths.modelConfigPath, 'model config');
  requireFile(paths.preprocessorConfigPath, 'preprocessor config (preprocessor_config.json)');
  const modelConfig = checkModelConfig(readJsonFile(paths.modelConfigPath, 'model config'), `model config ${paths.modelConfigPath}`);
  return {
    name: config.name,
    version: config.version,
    modelType: config.modelType as ImageModelType,
    weights: readFileSync(paths.modelWeightsPath),
    modelConfig,
    labels: config.modelType === 'image_classification' ? imageLabelsOf(modelConfig, `model config ${paths.modelConfigPath}`) : [],
    pooling: config.pooling,
    normalize: config.normalize ?? true,
    preprocessor: parseImageProcessorConfig(readJsonFile(paths.preprocessorConfigPath, 'preprocessor config'), paths.preprocessorConfigPath),
    quantization: 'none',
    session: config.session,
  };
}

/** config.json's id2label as a list: required of an image classification model, its indices 0 … n−1. */
export function imageLabelsOf(modelConfig: ModelConfigJson, source: string): string[] {
  const entries = Object.entries(modelConfig.id2label ?? {});
  if (entries.length === 0) throw new ConfigError(`${source}: an image_classification model needs id2label, the name of each label by index`);
  const labels = new Array<string>(entries.length);
  for (const [index, label] of entries) {
    const at = Number(index);
    if (at >= entries.length) throw new ConfigError(`${source}: id2label must number its labels 0 to ${entries.length - 1}, it has "${index}"`);
    labels[at] = label;
  }
  return labels;
}

/** What the graph must show for this package (image-model.ts). */
export function expectationOf(pkg: ImageModelPackage): ImageModelExpectation {
  const size = preprocessedSize(pkg.preprocessor);
  return pkg.modelType === 'image_embedding' ? { size, embedding: { pooling: pkg.pooling } } : { size, labels: pkg.labels.length };
}

/** The height and width every image comes out of preprocessing at; null when a shortest-edge resize without a crop keeps each image's aspect. */
export function preprocessedSize(preprocessor: ImageProcessorConfig): { height: number; width: number } | null {
  if (preprocessor.centerCrop) return preprocessor.centerCrop;
  const target = preprocessor.resize?.target;
  return target && 'height' in target ? target : null;
}
