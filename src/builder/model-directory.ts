import type { BuildConfig } from '../encoder/config.ts';
import type { ModelMaxLength } from '../encoder/max-length.ts';
import { maxLengthOf, readModelPackage, type ModelPackage } from '../encoder/model-package.ts';
import { readGraphLimits } from './graph-limits.ts';

/**
 * A model folder as `build` packs it and `serve --config` / `infer --config` run it: readModelPackage, with the maximum
 * length reconciled against what the ONNX graph shows (its position table, a fixed sequence dimension), so that no
 * input longer than the graph runs reaches onnxruntime. Imported on demand (it loads the ONNX reader, protobufjs),
 * never by a model executable, which finds the length in its manifest.
 */
export function readModelDirectory(config: BuildConfig): ModelPackage & { maxLength: ModelMaxLength } {
  const pkg = readModelPackage(config);
  return { ...pkg, maxLength: maxLengthOf(config, pkg.modelConfig, pkg.tokenizerConfig, readGraphLimits(pkg.weights)) };
}
