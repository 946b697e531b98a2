/**
 * Images for vision models: bytes → RGB (decode-image.ts) → `pixel_values` as HuggingFace's PIL-based processors make
 * them (preprocess.ts), configured by preprocessor_config.json (preprocessor-config.ts). docs/image-models.md.
 */
import { decodeImage, type DecodeImageOptions } from './decode-image.ts';
import type { ImageProcessorConfig } from './preprocessor-config.ts';
import { pixelValues, type PixelValues } from './preprocess.ts';

export { DEFAULT_IMAGE_LIMITS, decodeImage, type DecodeImageOptions, type ImageLimits } from './decode-image.ts';
export type { RgbImage } from './exif.ts';
export { parseImageProcessorConfig, type ImageProcessorConfig } from './preprocessor-config.ts';
export { pixelValues, type PixelValues } from './preprocess.ts';
export { WASM_CODEC_FILES, type WasmCodec, type WasmSource } from './wasm-codecs.ts';

/**
 * One request's encoded images → its `pixel_values` [batch, 3, H, W]. Decoding is synchronous WebAssembly work
 * (tens of ms for a camera photo): callers on the event loop's thread should run this in a worker.
 */
export async function preprocessImages(inputs: readonly Uint8Array[], config: ImageProcessorConfig, options: Omit<DecodeImageOptions, 'index'>): Promise<PixelValues> {
  const images = [];
  for (const [index, bytes] of inputs.entries()) images.push(await decodeImage(bytes, { ...options, index }));
  return pixelValues(images, config, options.field);
}

/** One encoded image → its `pixel_values` [1, 3, H, W]; errors name it by `options.index` and `options.field`. */
export async function preprocessImage(bytes: Uint8Array, config: ImageProcessorConfig, options: DecodeImageOptions): Promise<PixelValues> {
  return pixelValues([await decodeImage(bytes, options)], config, options.field);
}
