/**
 * Decoded RGB images → `pixel_values` [batch, 3, H, W] float32, step by step as HuggingFace's (PIL-based, "slow")
 * ViTImageProcessor and CLIPImageProcessor compute it: resize in 8 bits with PIL's filters, center crop (zero padding
 * where the crop is larger), rescale in float64 then float32, normalise in float32, channels first. Given the same
 * RGB bytes the result is bit-identical to theirs.
 */
import { InputError } from '../errors.ts';
import type { RgbImage } from './exif.ts';
import { pilResize } from './pil-resample.ts';
import type { ImageProcessorConfig, ResizeTarget } from './preprocessor-config.ts';

export interface PixelValues {
  /** [batch, 3, height, width] */
  dims: [number, number, number, number];
  data: Float32Array;
}

/** get_resize_output_image_size: the shorter edge becomes `shortestEdge`, the longer one int(edge × long / short). */
export function resizeOutputSize(image: { width: number; height: number }, target: ResizeTarget): { width: number; height: number } {
  if (!('shortestEdge' in target)) return target;
  const { width, height } = image;
  const [short, long] = width <= height ? [width, height] : [height, width];
  const newLong = Math.trunc((target.shortestEdge * long) / short);
  return width <= height ? { width: target.shortestEdge, height: newLong } : { width: newLong, height: target.shortestEdge };
}

/** image_transforms.center_crop: Python's floor division for the offsets, zero padding when the crop is larger. */
export function centerCrop(image: RgbImage, crop: { width: number; height: number }): RgbImage {
  const { width, height } = crop;
  const paddedWidth = Math.max(width, image.width);
  const paddedHeight = Math.max(height, image.height);
  const padLeft = Math.ceil((paddedWidth - image.width) / 2);
  const padTop = Math.ceil((paddedHeight - image.height) / 2);
  const left = Math.floor((image.width - width) / 2) + padLeft;
  const top = Math.floor((image.height - height) / 2) + padTop;
  const pixels = new Uint8Array(width * height * 3);
  // the columns of the crop that fall on the image (the rest is padding, left 0)
  const firstX = Math.max(0, padLeft - left);
  const endX = Math.min(width, image.width + padLeft - left);
  for (let y = 0; y < height; y++) {
    const sourceY = top + y - padTop;
    if (sourceY < 0 || sourceY >= image.height || endX <= firstX) continue;
    const from = (sourceY * image.width + left + firstX - padLeft) * 3;
    pixels.set(image.pixels.subarray(from, from + (endX - firstX) * 3), (y * width + firstX) * 3);
  }
  return { width, height, pixels };
}

/** One image's resized and cropped RGB bytes: the 8-bit part of the processor. */
export function resizeAndCrop(image: RgbImage, config: ImageProcessorConfig): RgbImage {
  let result = image;
  if (config.resize) {
    const size = resizeOutputSize(result, config.resize.target);
    result = pilResize(result, size.width, size.height, config.resize.resample);
  }
  if (config.centerCrop) result = centerCrop(result, config.centerCrop);
  return result;
}

/** The float part, written into `out` channels first from `offset`: rescale (float64 → float32), then normalise. */
function writeChannelsFirst(image: RgbImage, config: ImageProcessorConfig, out: Float32Array, offset: number): void {
  const plane = image.width * image.height;
  const factor = config.rescaleFactor;
  const mean = config.normalize?.mean.map(Math.fround);
  const std = config.normalize?.std.map(Math.fround);
  for (let channel = 0; channel < 3; channel++) {
    const target = offset + channel * plane;
    for (let i = 0; i < plane; i++) {
      let value = image.pixels[i * 3 + channel];
      if (factor !== null) value = Math.fround(value * factor);
      // float32 subtraction and division: done in double and rounded once, which equals the float32 result
      if (mean && std) value = Math.fround(Math.fround(value - mean[channel]) / std[channel]);
      out[target + i] = value;
    }
  }
}

/**
 * The batch tensor. Every image must come out at the same size (a fixed resize or a center crop makes sure of it);
 * one that does not is refused, named by its index.
 */
export function pixelValues(images: readonly RgbImage[], config: ImageProcessorConfig, field = 'inputs'): PixelValues {
  const prepared = images.map((image) => resizeAndCrop(image, config));
  if (prepared.length === 0) throw new InputError('no images', { field });
  const { width, height } = prepared[0];
  const data = new Float32Array(prepared.length * 3 * width * height);
  prepared.forEach((image, index) => {
    if (image.width !== width || image.height !== height) {
      throw new InputError(
        `${field}[${index}]: the image comes out of preprocessing at ${image.width}×${image.height}, the batch's first at ${width}×${height}; ` +
          `this model's ${config.processorType} keeps the aspect ratio without a center crop, so send such images one per request`,
        { field },
      );
    }
    writeChannelsFirst(image, config, data, index * 3 * width * height);
  });
  return { dims: [prepared.length, 3, height, width], data };
}
