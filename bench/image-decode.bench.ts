/**
 * npm run bench:image-decode [-- --candidates <node_modules folder>] — image decoders considered for issue 36, on the
 * same PNG, JPEG and WebP files at 224², 640×480 and 2000×1500 (a photo-like picture made here: smooth gradients,
 * edges and noise, so the codecs work as on photos). Each decoder's output is 8-bit RGB(A) pixels in memory.
 *
 * - sharp (libvips: libjpeg-turbo, libspng, libwebp; native, per-platform npm packages), limited to one libvips
 *   thread so that it is compared per core (a devDependency: the tests encode their sample images with it);
 * - @jsquash/jpeg, /png, /webp (MozJPEG, the Rust png crate and libwebp compiled to WebAssembly), the chosen ones,
 *   through src/encoder/image/wasm-codecs.ts;
 * - jpeg-js + pngjs (pure JavaScript; no WebP decoder exists in pure JS, so WebP has no row).
 *
 * jpeg-js and pngjs are not dependencies: they are read from --candidates, a scratch folder where they were installed
 * (`npm install jpeg-js@0.4.4 pngjs@7.0.0`); without it their column is left out with a note. The decoders take
 * turns on each input, round by round; medians. A second table times the ViT and CLIP preprocessing of the decoded
 * pictures (PIL's resampling in TypeScript, then rescale and normalise).
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { Command } from 'commander';
import sharp from 'sharp';
import { installedWasmCodecs } from '../src/encoder/image/installed-codecs.ts';
import { parseImageProcessorConfig } from '../src/encoder/image/preprocessor-config.ts';
import { pixelValues } from '../src/encoder/image/preprocess.ts';
import { wasmDecoders } from '../src/encoder/image/wasm-codecs.ts';
import { encodedPicture, interleaved, picture, type ImageFormat } from './images.ts';
import { ms, printTable } from './measure.ts';

const options = new Command('image-decode-bench')
  .option('--candidates <dir>', 'a node_modules folder holding the candidates that are not dependencies')
  .parse()
  .opts<{ candidates?: string }>();

const FORMATS: ImageFormat[] = ['png', 'jpeg', 'webp'];
const SIZES: [number, number][] = [
  [224, 224],
  [640, 480],
  [2000, 1500],
];

type Decoder = (bytes: Buffer) => Promise<unknown> | unknown;
interface Candidate {
  name: string;
  decoders: Partial<Record<ImageFormat, Decoder>>;
}

sharp.concurrency(1);
const sharpCandidate: Candidate = {
  name: 'sharp 0.35.5 (1 thread)',
  decoders: Object.fromEntries(FORMATS.map((format) => [format, (bytes: Buffer) => sharp(bytes).rotate().removeAlpha().raw().toBuffer()])),
};

/** The chosen decoders as src/encoder/image uses them (WebAssembly compiled from node_modules). */
const wasm = await wasmDecoders(installedWasmCodecs);
const jsquashCandidate: Candidate = {
  name: '@jsquash jpeg 1.6 / png 3.1 / webp 1.5 (wasm)',
  decoders: { png: (bytes) => wasm.png(bytes), jpeg: (bytes) => wasm.jpeg(bytes), webp: (bytes) => wasm.webp(bytes) },
};

/** The pure-JavaScript candidates, from the scratch folder, or a note saying why there are none. */
function scratchCandidates(dir: string | undefined): Candidate[] | string {
  if (!dir) return 'no --candidates folder: jpeg-js + pngjs are not measured';
  const requireFrom = createRequire(path.join(path.resolve(dir), 'bench.cjs'));
  const jpegJs = requireFrom('jpeg-js') as { decode: (bytes: Buffer, options: object) => unknown };
  const { PNG } = requireFrom('pngjs') as { PNG: { sync: { read: (bytes: Buffer) => unknown } } };
  return [{ name: 'jpeg-js 0.4.4 + pngjs 7.0.0', decoders: { png: (bytes) => PNG.sync.read(bytes), jpeg: (bytes) => jpegJs.decode(bytes, { useTArray: true, formatAsRGBA: false }) } }];
}

const scratch = scratchCandidates(options.candidates);
if (typeof scratch === 'string') console.log(scratch);
const candidates = [sharpCandidate, jsquashCandidate, ...(typeof scratch === 'string' ? [] : scratch)];

const rows: string[][] = [];
for (const [width, height] of SIZES) {
  const rounds = width * height > 1e6 ? 10 : 40;
  for (const format of FORMATS) {
    const bytes = await encodedPicture(format, width, height);
    const present = candidates.filter((candidate) => candidate.decoders[format]);
    const medians = await interleaved(present.map((candidate) => candidate.decoders[format]!), bytes, rounds);
    rows.push([
      `${format} ${width}×${height} (${(bytes.length / 1024).toFixed(0)} KiB)`,
      ...candidates.map((candidate) => {
        const measured = medians[present.indexOf(candidate)];
        return measured ? `${ms(measured.wall)} / ${ms(measured.cpu)}` : '—';
      }),
    ]);
  }
}
printTable(`Decode to RGB(A) pixels, median wall / CPU ms (Node ${process.version})`, ['input', ...candidates.map((c) => c.name)], rows);

// What follows decoding for a model: the ViT and CLIP processors' steps on the decoded picture (src/encoder/image)
const PROCESSORS = {
  'ViT (224×224 bilinear)': parseImageProcessorConfig({ image_processor_type: 'ViTImageProcessor' }),
  'CLIP (shortest edge 224 bicubic, crop 224)': parseImageProcessorConfig({ image_processor_type: 'CLIPImageProcessor' }),
};
const preprocessRows: string[][] = [];
for (const [width, height] of SIZES) {
  const image = { width, height, pixels: new Uint8Array(picture(width, height)) };
  const steps = Object.values(PROCESSORS).map((config) => () => pixelValues([image], config));
  const medians = await interleaved(steps, Buffer.alloc(0), width * height > 1e6 ? 10 : 40);
  preprocessRows.push([`${width}×${height}`, ...medians.map((measured) => `${ms(measured.wall)} / ${ms(measured.cpu)}`)]);
}
printTable('Preprocess decoded RGB to pixel_values, median wall / CPU ms', ['picture', ...Object.keys(PROCESSORS)], preprocessRows);
