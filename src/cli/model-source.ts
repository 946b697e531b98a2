import type { Command } from 'commander';
import type { CodecFiles } from '../encoder/image-codecs.ts';
import type { ImageModelPackage } from '../encoder/image-model-package.ts';
import type { ModelPackage } from '../encoder/model-package.ts';
import type { PipelineOptions } from '../encoder/pipeline-options.ts';

/** Where `infer`, `serve` and `mcp` get their model: a build configuration (`--config`) or the executable's own assets. */
export interface ModelSource {
  /** `--config <file>` is required (running from a model directory) rather than absent (a built model). */
  configOption: boolean;
  /** A text model's package, or an image model's (isImageModelPackage tells them apart). */
  load: (options: { config?: string }) => ModelPackage | ImageModelPackage | Promise<ModelPackage | ImageModelPackage>;
  pipelineOptions?: PipelineOptions;
  /** Where image threads find the codecs' .wasm files (the executable's extracted ones); absent: the installed packages. */
  imageCodecFiles?: CodecFiles;
}

/** What `build -f` and `--config` read: either format (src/encoder/config.ts). */
export const CONFIG_FILE_HELP = 'build configuration (YAML, top-level key encoder, or encoderfile: a mozilla-ai/encoderfile configuration as it is)';

/** `-c, --config <file>`, required when the model comes from a build configuration (running from source). */
export function addConfigOption(command: Command, source: ModelSource): void {
  if (source.configOption) command.requiredOption('-c, --config <file>', CONFIG_FILE_HELP);
}
