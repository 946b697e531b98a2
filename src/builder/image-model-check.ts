/**
 * The build's check of an image classification model (step 4): its files read and checked (preprocessor_config.json
 * parsed, id2label numbered), its graph loaded in onnxruntime and held to what the server feeds and reads
 * (image-model.ts), then run once on a batch of two blank images at the preprocessor's size, whose logits must have
 * one column per label.
 */
import type { BuildConfig, QuantizeGate } from '../encoder/config.ts';
import { pixelValues, type RgbImage } from '../encoder/image/index.ts';
import { compareEmbeddings, compareLogits } from './quantize/accuracy.ts';
import { describeGate, enforceGate } from './quantize/accuracy-gate.ts';
import { quantizeInt8 } from './quantize/quantize-int8.ts';
import { ConfigError } from '../encoder/errors.ts';
import { ImageOnnxModel, imageVectors } from '../encoder/image-model.ts';
import { expectationOf, preprocessedSize, readImageModelPackage, type ImageModelPackage } from '../encoder/image-model-package.ts';
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
  const model = await ImageOnnxModel.load(pkg.weights, expectationOf(pkg), options);
  try {
    const target = pkg.preprocessor.resize?.target;
    const size = fixed ?? (target && 'shortestEdge' in target ? SQUARE_FOR_VARYING_SIZE(target.shortestEdge) : null);
    if (size === null) throw new ConfigError('preprocessor_config.json neither resizes nor crops images to a size; the model could not be checked at one');
    const batch = 2;
    const output = await model.run({ dims: [batch, 3, size.height, size.width], data: new Float32Array(batch * 3 * size.height * size.width) }).catch((error: unknown) => {
      throw new ConfigError(`the model does not run on pixel_values [${batch}, 3, ${size.height}, ${size.width}]: ${(error as Error).message}`, { cause: error });
    });
    const { input, output: read } = model.signature;
    const ran = `run once at ${size.width}×${size.height}; ${pkg.preprocessor.processorType}`;
    if (pkg.modelType === 'image_embedding') {
      const vectors = imageVectors(output, pkg.pooling);
      if (output.dims[0] !== batch || !(vectors.dims[1] > 0)) throw new ConfigError(`the model's "${read.name}" is [${output.dims.join(', ')}] for ${batch} images`);
      const how = pkg.pooling === null ? 'as the vectors' : `${pkg.pooling}-pooled`;
      return { pkg, detail: `input "${input.name}" [${input.shape.join(', ')}], output "${read.name}" [${read.shape.join(', ')}] ${how} (${vectors.dims[1]} wide), ${ran}` };
    }
    if (output.dims.length !== 2 || output.dims[0] !== batch || output.dims[1] !== pkg.labels.length) {
      throw new ConfigError(`the model's logits are [${output.dims.join(', ')}] for ${batch} images; they must be [${batch}, ${pkg.labels.length}] (one per label of config.json id2label)`);
    }
    return {
      pkg,
      detail: `input "${input.name}" [${input.shape.join(', ')}], output "logits" [batch, ${pkg.labels.length}] (${pkg.labels.length} labels), ${ran}`,
    };
  } finally {
    await model.close();
  }
}

/** Check images of the int8 gate: how many, and their sizes (odd, portrait and landscape: every resize path runs). */
const CHECK_IMAGE_SIZES: readonly [number, number][] = [
  [64, 48], [48, 64], [97, 61], [33, 33], [120, 80], [80, 120], [41, 73], [224, 224],
  [150, 100], [100, 150], [57, 57], [200, 90], [90, 200], [128, 96], [96, 128], [71, 113],
];

/**
 * The gate's images: pictures with structure (gradients, a disc and stripes, different per image), made here so that
 * the build needs no file; preprocessed as the server does. Random pixels would not do: a classifier's labels on noise
 * say little about its labels on pictures.
 */
export function checkImages(count = CHECK_IMAGE_SIZES.length): RgbImage[] {
  return CHECK_IMAGE_SIZES.slice(0, count).map(([width, height], k) => {
    const pixels = new Uint8Array(width * height * 3);
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const disc = (x - width * (0.3 + 0.05 * k)) ** 2 + (y - height / 2) ** 2 < (Math.min(width, height) / 3) ** 2;
        const stripe = Math.floor((x + y * (k % 3)) / (4 + k)) % 2 === 0;
        const at = (y * width + x) * 3;
        pixels[at] = disc ? 230 - 9 * k : (x * 255) / width;
        pixels[at + 1] = stripe ? 40 + 11 * k : (y * 255) / height;
        pixels[at + 2] = ((x * (k + 1) + y * 3) * 7) % 256;
      }
    }
    return { width, height, pixels };
  });
}

/**
 * `quantize: int8` of an image model: the MatMul/Gemm weights rewritten (quantize-int8.ts), then both models run on
 * the check images, whose labels must agree as `quantize_min_label_agreement` says (the text models' gate).
 */
export async function quantizeImageModel(checked: CheckedImageModel, gate: QuantizeGate, options: OnnxModelOptions = {}): Promise<{ weights: Uint8Array; detail: string }> {
  const { pkg } = checked;
  const { model, report } = quantizeInt8(pkg.weights);
  const expected = expectationOf(pkg);
  const [fp32, int8] = await Promise.all([ImageOnnxModel.load(pkg.weights, expected, options), ImageOnnxModel.load(model, expected, options)]);
  try {
    // one image a run: a shortest-edge resize without a crop makes each image its own size
    const fp32Logits: Float32Array[] = [];
    const int8Logits: Float32Array[] = [];
    for (const image of checkImages()) {
      const pixels = pixelValues([image], pkg.preprocessor);
      const [a, b] = [await fp32.run(pixels), await int8.run(pixels)];
      fp32Logits.push(imageVectors(a, pkg.pooling).data);
      int8Logits.push(imageVectors(b, pkg.pooling).data);
    }
    const stack = (rows: Float32Array[]) => ({ data: Float32Array.from(rows.flatMap((row) => [...row])), dims: [rows.length, rows[0].length] });
    // a classifier's labels must agree (quantize_min_label_agreement), an embedding's vectors point alike (quantize_min_cosine)
    const result = pkg.modelType === 'image_embedding' ? compareEmbeddings(stack(fp32Logits), stack(int8Logits)) : compareLogits(stack(fp32Logits), stack(int8Logits));
    enforceGate(result, gate);
    const rewritten = `${report.rewritten.MatMul + report.rewritten.Gemm} MatMul/Gemm → int8 DynamicQuantizeMatMul`;
    return { weights: model, detail: `${rewritten}; ${describeGate(result)} on ${fp32Logits.length} check images` };
  } finally {
    await Promise.all([fp32.close(), int8.close()]);
  }
}
