/**
 * PIL's `Image.resize` of an 8-bit RGB image, to the byte: what HuggingFace's image processors call (they hand PIL a
 * uint8 array and read a uint8 array back). Pillow's libImaging/Resample.c resizes in two separable passes (horizontal,
 * then vertical; a pass is skipped when its size does not change), each rounding to 8 bits: coefficients are made in
 * double precision, normalised to sum 1, then turned into 22-bit fixed point; the support of the filter widens with the
 * downscale factor (antialiasing). NEAREST is an affine transform that samples pixel centres (libImaging/Geometry.c).
 */
import type { RgbImage } from './exif.ts';

/** PIL's filter ids, as `resample` in preprocessor_config.json holds them. */
export const PIL_RESAMPLE = { nearest: 0, lanczos: 1, bilinear: 2, bicubic: 3, box: 4, hamming: 5 } as const;
export type PilResample = (typeof PIL_RESAMPLE)[keyof typeof PIL_RESAMPLE];

interface Filter {
  support: number;
  weight: (x: number) => number;
}

const sinc = (x: number) => (x === 0 ? 1 : Math.sin(x * Math.PI) / (x * Math.PI));
// hamming's constants are C float literals in Pillow (0.54f, 0.46f)
const HAMMING_A = Math.fround(0.54);
const HAMMING_B = Math.fround(0.46);

const FILTERS: Record<Exclude<PilResample, 0>, Filter> = {
  4: { support: 0.5, weight: (x) => (x > -0.5 && x <= 0.5 ? 1 : 0) },
  2: { support: 1, weight: (x) => (Math.abs(x) < 1 ? 1 - Math.abs(x) : 0) },
  5: {
    support: 1,
    weight: (x) => {
      x = Math.abs(x);
      if (x === 0) return 1;
      if (x >= 1) return 0;
      x *= Math.PI;
      return (Math.sin(x) / x) * (HAMMING_A + HAMMING_B * Math.cos(x));
    },
  },
  3: {
    support: 2,
    weight: (x) => {
      const a = -0.5;
      x = Math.abs(x);
      if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
      if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
      return 0;
    },
  },
  1: { support: 3, weight: (x) => (x >= -3 && x < 3 ? sinc(x) * sinc(x / 3) : 0) },
};

const PRECISION_BITS = 32 - 8 - 2;

interface Coefficients {
  /** Per output pixel: first input pixel, count of input pixels. */
  bounds: Int32Array;
  /** Per output pixel, `size` fixed-point weights. */
  weights: Int32Array;
  size: number;
}

/** precompute_coeffs and normalize_coeffs_8bpc of Resample.c, for the box (0, inSize). */
function coefficients(inSize: number, outSize: number, filter: Filter): Coefficients {
  const scale = inSize / outSize;
  const filterScale = Math.max(scale, 1);
  const support = filter.support * filterScale;
  const size = Math.ceil(support) * 2 + 1;
  const bounds = new Int32Array(outSize * 2);
  const weights = new Int32Array(outSize * size);
  const row = new Float64Array(size);
  for (let out = 0; out < outSize; out++) {
    const center = (out + 0.5) * scale;
    const invScale = 1 / filterScale;
    const min = Math.max(0, Math.trunc(center - support + 0.5));
    const count = Math.min(inSize, Math.trunc(center + support + 0.5)) - min;
    let total = 0;
    for (let x = 0; x < count; x++) {
      row[x] = filter.weight((x + min - center + 0.5) * invScale);
      total += row[x];
    }
    for (let x = 0; x < count; x++) {
      const weight = total !== 0 ? row[x] / total : row[x];
      weights[out * size + x] = Math.trunc(weight < 0 ? -0.5 + weight * (1 << PRECISION_BITS) : 0.5 + weight * (1 << PRECISION_BITS));
    }
    bounds[out * 2] = min;
    bounds[out * 2 + 1] = count;
  }
  return { bounds, weights, size };
}

/** clip8: the fixed-point sum back to a byte. */
function clip8(sum: number): number {
  const value = sum >> PRECISION_BITS;
  return value < 0 ? 0 : value > 255 ? 255 : value;
}

function horizontalPass(image: RgbImage, width: number, c: Coefficients): RgbImage {
  const { height, pixels: input } = image;
  const output = new Uint8Array(width * height * 3);
  const half = 1 << (PRECISION_BITS - 1);
  for (let y = 0; y < height; y++) {
    const rowStart = y * image.width * 3;
    for (let x = 0; x < width; x++) {
      const min = c.bounds[x * 2];
      const count = c.bounds[x * 2 + 1];
      const k = x * c.size;
      let r = half;
      let g = half;
      let b = half;
      for (let i = 0; i < count; i++) {
        const weight = c.weights[k + i];
        const at = rowStart + (min + i) * 3;
        r += input[at] * weight;
        g += input[at + 1] * weight;
        b += input[at + 2] * weight;
      }
      const out = (y * width + x) * 3;
      output[out] = clip8(r);
      output[out + 1] = clip8(g);
      output[out + 2] = clip8(b);
    }
  }
  return { width, height, pixels: output };
}

function verticalPass(image: RgbImage, height: number, c: Coefficients): RgbImage {
  const { width, pixels: input } = image;
  const output = new Uint8Array(width * height * 3);
  const half = 1 << (PRECISION_BITS - 1);
  const stride = width * 3;
  for (let y = 0; y < height; y++) {
    const min = c.bounds[y * 2];
    const count = c.bounds[y * 2 + 1];
    const k = y * c.size;
    for (let x = 0; x < stride; x++) {
      let sum = half;
      for (let i = 0; i < count; i++) sum += input[(min + i) * stride + x] * c.weights[k + i];
      output[y * stride + x] = clip8(sum);
    }
  }
  return { width, height, pixels: output };
}

/** NEAREST: ImagingScaleAffine, which steps through pixel centres in double precision. */
function nearest(image: RgbImage, width: number, height: number): RgbImage {
  const xStep = image.width / width;
  const yStep = image.height / height;
  const columns = new Int32Array(width);
  for (let x = 0, position = xStep * 0.5; x < width; x++, position += xStep) columns[x] = Math.min(image.width - 1, Math.trunc(position));
  const output = new Uint8Array(width * height * 3);
  for (let y = 0, position = yStep * 0.5; y < height; y++, position += yStep) {
    const row = Math.min(image.height - 1, Math.trunc(position)) * image.width;
    for (let x = 0, out = y * width * 3; x < width; x++, out += 3) {
      const from = (row + columns[x]) * 3;
      output[out] = image.pixels[from];
      output[out + 1] = image.pixels[from + 1];
      output[out + 2] = image.pixels[from + 2];
    }
  }
  return { width, height, pixels: output };
}

export function pilResize(image: RgbImage, width: number, height: number, resample: PilResample): RgbImage {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) throw new RangeError(`cannot resize to ${width}×${height}`);
  if (width === image.width && height === image.height) return image;
  if (resample === PIL_RESAMPLE.nearest) return nearest(image, width, height);
  const filter = FILTERS[resample];
  let result = image;
  if (width !== image.width) result = horizontalPass(result, width, coefficients(image.width, width, filter));
  if (height !== image.height) result = verticalPass(result, height, coefficients(image.height, height, filter));
  return result;
}
