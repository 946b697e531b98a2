/**
 * The build's check of an image classification model (step 4): its files read and checked (preprocessor_config.json
 * parsed, id2label numbered), its graph loaded in onnxruntime and held to what the server feeds and reads
 * (image-model.ts), then run once on a batch of two blank images at the preprocessor's size, whose logits must have
 * one column per label.
 */
import type { BuildConfig } from '../encoder/config.ts';
import { ConfigError } from '../encoder/errors.ts';
import { ImageOnnxModel } from '../encoder/image-model.ts';
import { preprocessedSize, readImageModelPackage, type ImageModelPackage } from '../encoder/image-model-package.ts';
import type { OnnxModelOptions } from '../encoder/onnx-model.ts';

export interface CheckedImageModel {
  pkg: ImageModelPackage;
  /** For the build's step line. */
  detail: string;
}

/** A shortest-edge resize without a crop has no one size: the check runs at the edge, square. */
const SQUARE_FOR_VARYING_SIZE = (edge: number) => ({ height: edge, width: edge });

export async function checkImageModel(config: BuildConfig, options: OnnxModelOptions = {}): Promise<CheckedImageModel> {
  const pkg = readImageModelPackage(config);
  const fixed = preprocessedSize(pkg.preprocessor);
  const model = await ImageOnnxModel.load(pkg.weights, { labels: pkg.labels.length, size: fixed }, options);
  try {
    const target = pkg.preprocessor.resize?.target;
    const size = fixed ?? (target && 'shortestEdge' in target ? SQUARE_FOR_VARYING_SIZE(target.shortestEdge) : null);
    if (size === null) throw new ConfigError('preprocessor_config.json neither resizes nor crops images to a size; the model could not be checked at one');
    const batch = 2;
    const logits = await model.run({ dims: [batch, 3, size.height, size.width], data: new Float32Array(batch * 3 * size.height * size.width) }).catch((error: unknown) => {
      throw new ConfigError(`the model does not run on pixel_values [${batch}, 3, ${size.height}, ${size.width}]: ${(error as Error).message}`, { cause: error });
    });
    if (logits.dims.length !== 2 || logits.dims[0] !== batch || logits.dims[1] !== pkg.labels.length) {
      throw new ConfigError(`the model's logits are [${logits.dims.join(', ')}] for ${batch} images; they must be [${batch}, ${pkg.labels.length}] (one per label of config.json id2label)`);
    }
    const { input } = model.signature;
    return {
      pkg,
      detail: `input "${input.name}" [${input.shape.join(', ')}], output "logits" [batch, ${pkg.labels.length}] (${pkg.labels.length} labels), ` +
        `run once at ${size.width}×${size.height}; ${pkg.preprocessor.processorType}`,
    };
  } finally {
    await model.close();
  }
}
