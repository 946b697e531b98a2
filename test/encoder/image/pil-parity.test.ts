/**
 * Parity with what HuggingFace's PIL-based ViTImageProcessor and CLIPImageProcessor compute, the reference computed in
 * this run by pil_reference.py with Debian's python3-pil and python3-numpy (installed by .ci/run):
 * - PIL's Image.resize, byte for byte, for all six filters, up and down, odd sizes;
 * - decoding (PIL: open, exif_transpose, convert("RGB")) of PNG (RGB, RGBA, grey, 16-bit grey, palette), JPEG (baseline,
 *   progressive, grey, all eight EXIF orientations), WebP (lossless, lossy, alpha, EXIF) and GIF (first frame,
 *   interlaced, transparent, animated). JPEG decoders may differ from libjpeg in IDCT and upsampling, so JPEG pixels
 *   are compared on their own and the maximum difference printed;
 * - pixel_values from the same RGB bytes for ViT-, CLIP- and odd configurations: max abs error ≤ 1e-5.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedWasmCodecs } from '../../../src/encoder/image/installed-codecs.ts';
import { decodeImage } from '../../../src/encoder/image/decode-image.ts';
import type { RgbImage } from '../../../src/encoder/image/exif.ts';
import { pilResize, type PilResample } from '../../../src/encoder/image/pil-resample.ts';
import { parseImageProcessorConfig } from '../../../src/encoder/image/preprocessor-config.ts';
import { pixelValues } from '../../../src/encoder/image/preprocess.ts';

const REFERENCE_SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'pil_reference.py');

/** A python3 that has PIL and numpy: Debian's, which may not be the first python3 on the PATH. */
function findPython(): string | null {
  for (const python of ['python3', '/usr/bin/python3']) {
    try {
      execFileSync(python, ['-c', 'import PIL, numpy'], { stdio: 'ignore', timeout: 20_000 });
      return python;
    } catch {
      // next
    }
  }
  return null;
}

const python = findPython();
if (!python) console.warn('PIL parity: skipped, no python3 with PIL and numpy (apt-get install python3-pil python3-numpy; .ci/run does)');

interface ImageSpec {
  name: string;
  format: 'png' | 'jpeg' | 'webp' | 'gif';
  width: number;
  height: number;
  mode?: 'RGB' | 'RGBA' | 'L' | 'LA' | 'P' | 'I;16';
  orientation?: number;
  frames?: number;
  options?: Record<string, unknown>;
}

const IMAGES: ImageSpec[] = [
  { name: 'rgb.png', format: 'png', width: 37, height: 91 },
  { name: 'rgba.png', format: 'png', width: 300, height: 17, mode: 'RGBA' },
  { name: 'grey.png', format: 'png', width: 64, height: 48, mode: 'L' },
  { name: 'grey-alpha.png', format: 'png', width: 33, height: 21, mode: 'LA' },
  { name: 'palette.png', format: 'png', width: 50, height: 41, mode: 'P' },
  { name: 'grey16.png', format: 'png', width: 29, height: 31, mode: 'I;16' },
  { name: 'exif6.png', format: 'png', width: 37, height: 91, orientation: 6 },
  { name: 'baseline.jpg', format: 'jpeg', width: 37, height: 91, options: { quality: 90 } },
  { name: 'progressive.jpg', format: 'jpeg', width: 300, height: 17, options: { quality: 85, progressive: true } },
  { name: 'grey.jpg', format: 'jpeg', width: 45, height: 29, mode: 'L' },
  { name: 'large.jpg', format: 'jpeg', width: 641, height: 479, options: { quality: 80 } },
  ...[2, 3, 4, 5, 6, 7, 8].map((orientation): ImageSpec => ({ name: `exif${orientation}.jpg`, format: 'jpeg', width: 37, height: 91, orientation })),
  { name: 'lossless.webp', format: 'webp', width: 37, height: 91, options: { lossless: true } },
  { name: 'lossy.webp', format: 'webp', width: 300, height: 17, options: { quality: 80 } },
  { name: 'alpha.webp', format: 'webp', width: 40, height: 30, mode: 'RGBA', options: { quality: 75 } },
  { name: 'exif8.webp', format: 'webp', width: 91, height: 37, orientation: 8, options: { lossless: true } },
  { name: 'interlaced.gif', format: 'gif', width: 37, height: 91, mode: 'P', options: { interlace: true } },
  { name: 'animated.gif', format: 'gif', width: 30, height: 20, mode: 'P', frames: 2, options: { transparency: 3, loop: 0 } },
];

const RESCALE = 0.00392156862745098; // 1/255 as HuggingFace writes it
/** The steps after the resize that most configurations share. */
const RESCALED_AND_NORMALISED = { do_resize: true, do_rescale: true, rescale_factor: RESCALE, do_normalize: true };
const CONFIGS = {
  vit: {
    ...RESCALED_AND_NORMALISED,
    image_processor_type: 'ViTImageProcessor',
    size: { height: 224, width: 224 },
    resample: 2,
    image_mean: [0.5, 0.5, 0.5],
    image_std: [0.5, 0.5, 0.5],
  },
  clip: {
    ...RESCALED_AND_NORMALISED,
    image_processor_type: 'CLIPImageProcessor',
    size: { shortest_edge: 224 },
    resample: 3,
    do_center_crop: true,
    crop_size: { height: 224, width: 224 },
    image_mean: [0.48145466, 0.4578275, 0.40821073],
    image_std: [0.26862954, 0.26130258, 0.27577711],
    do_convert_rgb: true,
  },
  // a crop larger than the resized image (zero padding), lanczos
  clipPadded: {
    ...RESCALED_AND_NORMALISED,
    image_processor_type: 'CLIPImageProcessor',
    size: { shortest_edge: 30 },
    resample: 1,
    do_center_crop: true,
    crop_size: { height: 40, width: 36 },
    image_mean: [0.485, 0.456, 0.406],
    image_std: [0.229, 0.224, 0.225],
  },
  // no rescale before normalising: normalize works on the uint8 values as float32
  hammingNoRescale: {
    ...RESCALED_AND_NORMALISED,
    image_processor_type: 'ViTImageProcessor',
    size: { height: 19, width: 53 },
    resample: 5,
    do_rescale: false,
    image_mean: [127.5, 120.25, 99],
    image_std: [64, 57.3, 70.1],
  },
};

const RESIZES = ([0, 1, 2, 3, 4, 5] as PilResample[]).flatMap((resample) =>
  [
    [300, 200, 37, 91],
    [91, 37, 300, 17],
    [640, 480, 224, 224],
    [13, 7, 200, 150],
    [224, 224, 224, 100],
  ].map(([fromWidth, fromHeight, width, height]) => ({ name: `resize-${resample}-${fromWidth}x${fromHeight}-${width}x${height}`, resample, from_width: fromWidth, from_height: fromHeight, width, height })),
);

interface Manifest {
  images: Record<string, { width: number; height: number; pixel_values: Record<string, number[]> }>;
}

let folder = '';
let manifest: Manifest;

beforeAll(() => {
  if (!python) return;
  folder = mkdtempSync(path.join(tmpdir(), 'pil-parity-'));
  writeFileSync(path.join(folder, 'job.json'), JSON.stringify({ images: IMAGES, configs: CONFIGS, resizes: RESIZES }));
  manifest = JSON.parse(execFileSync(python, [REFERENCE_SCRIPT, folder], { encoding: 'utf8', timeout: 90_000 })) as Manifest;
}, 120_000);

afterAll(() => {
  if (folder) rmSync(folder, { recursive: true, force: true });
});

const file = (name: string) => new Uint8Array(readFileSync(path.join(folder, name)));
const pilRgb = (name: string): RgbImage => ({ ...manifest.images[name], pixels: file(`${name}.rgb`) });

function maxByteDifference(a: Uint8Array, b: Uint8Array): number {
  expect(a.length).toBe(b.length);
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i] - b[i]));
  return max;
}

function maxAbsError(actual: Float32Array, expected: Float32Array): number {
  expect(actual.length).toBe(expected.length);
  let max = 0;
  for (let i = 0; i < actual.length; i++) max = Math.max(max, Math.abs(actual[i] - expected[i]));
  return max;
}

const reference = (name: string, config: string) => new Float32Array(file(`${name}.${config}.f32`).buffer);

describe.skipIf(!python)('PIL parity', () => {
  it("resizes byte for byte as PIL's Image.resize, every filter, up and down", () => {
    const differences: Record<string, number> = {};
    for (const spec of RESIZES) {
      const source: RgbImage = { width: spec.from_width, height: spec.from_height, pixels: file(`${spec.name}.src.rgb`) };
      const resized = pilResize(source, spec.width, spec.height, spec.resample);
      expect([resized.width, resized.height]).toEqual([spec.width, spec.height]);
      differences[spec.name] = maxByteDifference(resized.pixels, file(`${spec.name}.out.rgb`));
    }
    expect(Object.entries(differences).filter(([, difference]) => difference > 0)).toEqual([]);
  });

  it('decodes PNG, WebP and GIF to the RGB bytes PIL gives, EXIF orientation applied', async () => {
    for (const spec of IMAGES.filter((image) => image.format !== 'jpeg')) {
      const decoded = await decodeImage(file(spec.name), { index: 0, wasm: installedWasmCodecs });
      const expected = pilRgb(spec.name);
      expect([spec.name, decoded.width, decoded.height]).toEqual([spec.name, expected.width, expected.height]);
      expect([spec.name, maxByteDifference(decoded.pixels, expected.pixels)]).toEqual([spec.name, 0]);
    }
  });

  it('decodes JPEG (baseline, progressive, grey, every orientation) within 1 of libjpeg, and prints the difference', async () => {
    const differences: Record<string, number> = {};
    for (const spec of IMAGES.filter((image) => image.format === 'jpeg')) {
      const decoded = await decodeImage(file(spec.name), { index: 0, wasm: installedWasmCodecs });
      const expected = pilRgb(spec.name);
      expect([spec.name, decoded.width, decoded.height]).toEqual([spec.name, expected.width, expected.height]);
      differences[spec.name] = maxByteDifference(decoded.pixels, expected.pixels);
    }
    console.log(`JPEG: max pixel difference from PIL's libjpeg per file: ${JSON.stringify(differences)}`);
    for (const difference of Object.values(differences)) expect(difference).toBeLessThanOrEqual(1);
  });

  it('makes the pixel_values of ViT, CLIP and odd configurations from the same RGB bytes (max abs error ≤ 1e-5)', () => {
    const errors: Record<string, number> = {};
    for (const [configName, json] of Object.entries(CONFIGS)) {
      const config = parseImageProcessorConfig(json);
      for (const spec of IMAGES) {
        const tensor = pixelValues([pilRgb(spec.name)], config);
        expect(tensor.dims).toEqual([1, ...manifest.images[spec.name].pixel_values[configName]]);
        errors[`${spec.name} ${configName}`] = maxAbsError(tensor.data, reference(spec.name, configName));
      }
    }
    const worst = Math.max(...Object.values(errors));
    console.log(`pixel_values: max abs error over ${Object.keys(errors).length} image × config pairs: ${worst}`);
    expect(worst).toBeLessThanOrEqual(1e-5);
  });

  it('makes the same pixel_values from the files end to end (PNG, WebP, GIF; JPEG too where the decoders agree)', async () => {
    for (const spec of IMAGES) {
      const decoded = await decodeImage(file(spec.name), { index: 0, wasm: installedWasmCodecs });
      if (maxByteDifference(decoded.pixels, pilRgb(spec.name).pixels) > 0) continue; // JPEG differences are reported above
      for (const [configName, json] of Object.entries(CONFIGS)) {
        const tensor = pixelValues([decoded], parseImageProcessorConfig(json));
        expect([spec.name, configName, maxAbsError(tensor.data, reference(spec.name, configName))]).toEqual([spec.name, configName, 0]);
      }
    }
  });

  it('batches images of different sizes into one [batch, 3, H, W] tensor in order', () => {
    const names = ['rgb.png', 'rgba.png', 'lossy.webp'];
    const tensor = pixelValues(names.map(pilRgb), parseImageProcessorConfig(CONFIGS.clip));
    expect(tensor.dims).toEqual([3, 3, 224, 224]);
    const plane = 3 * 224 * 224;
    names.forEach((name, i) => expect(maxAbsError(tensor.data.subarray(i * plane, (i + 1) * plane), reference(name, 'clip'))).toBe(0));
  });
});
