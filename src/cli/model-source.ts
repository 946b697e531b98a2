import type { ModelPackage } from '../encoder/model-package.ts';
import type { PipelineOptions } from '../encoder/predict-pipeline.ts';

/** Where `infer` and `serve` get their model: a build configuration (`--config`) or the executable's own assets. */
export interface ModelSource {
  /** `--config <file>` is required (running from a model directory) rather than absent (a built model). */
  configOption: boolean;
  load: (options: { config?: string }) => ModelPackage | Promise<ModelPackage>;
  pipelineOptions?: PipelineOptions;
}
