/**
 * The image decoder as the single executable will carry it: bundled by esbuild to CommonJS with the options of
 * scripts/build-runtime.ts (no warning, which would stop that build), then run by the pinned Node in a child process
 * with the .wasm bytes handed over as SEA assets are (no file next to the script, no fetch, no import.meta).
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import * as esbuild from 'esbuild';
import sharp from 'sharp';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { installedWasmCodecs } from '../../../src/encoder/image/installed-codecs.ts';
import { WASM_CODEC_FILES, type WasmCodec } from '../../../src/encoder/image/wasm-codecs.ts';

const REPO_ROOT = resolve(import.meta.dirname, '../../..');
const NODE = join(REPO_ROOT, 'node_modules/.bin/node');

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'bundled-decoder-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

it('bundles without warnings and decodes PNG, JPEG, WebP and GIF from wasm bytes it is handed', async () => {
  const entry = join(dir, 'entry.ts');
  await writeFile(entry, `export { decodeImage } from ${JSON.stringify(join(REPO_ROOT, 'src/encoder/image/decode-image.ts'))};\n`);
  const bundle = join(dir, 'image.cjs');
  const result = await esbuild.build({
    entryPoints: [entry],
    outfile: bundle,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node26',
    minify: true,
    keepNames: true,
    supported: { 'dynamic-import': false },
    logLevel: 'silent',
  });
  expect(result.warnings.map((warning) => warning.text)).toEqual([]);

  // the .wasm files and sample images in a folder of their own, as the executable's assets would be
  const codecs = Object.keys(WASM_CODEC_FILES) as WasmCodec[];
  for (const codec of codecs) await writeFile(join(dir, `${codec}.wasm`), await installedWasmCodecs(codec));
  const source = sharp(Buffer.alloc(9 * 5 * 3, 128), { raw: { width: 9, height: 5, channels: 3 } });
  const samples = { png: await source.clone().png().toBuffer(), jpeg: await source.clone().jpeg().toBuffer(), webp: await source.clone().webp().toBuffer(), gif: await source.clone().gif().toBuffer() };
  for (const [name, bytes] of Object.entries(samples)) await writeFile(join(dir, name), bytes);

  const script = `
    const { readFileSync } = require('node:fs');
    const { decodeImage } = require(${JSON.stringify(bundle)});
    const wasm = (codec) => new Uint8Array(readFileSync(${JSON.stringify(dir)} + '/' + codec + '.wasm'));
    (async () => {
      const out = {};
      for (const name of ${JSON.stringify(Object.keys(samples))}) {
        const image = await decodeImage(readFileSync(${JSON.stringify(dir)} + '/' + name), { index: 0, wasm });
        out[name] = [image.width, image.height, image.pixels.length];
      }
      const refused = await decodeImage(Buffer.from('not an image'), { index: 2, wasm }).catch((error) => error.constructor.name + ': ' + error.message);
      console.log(JSON.stringify({ out, refused }));
    })();
  `;
  const printed = execFileSync(NODE, ['-e', script], { cwd: dir, encoding: 'utf8', timeout: 30_000 });
  expect(JSON.parse(printed)).toEqual({
    out: { png: [9, 5, 135], jpeg: [9, 5, 135], webp: [9, 5, 135], gif: [9, 5, 135] },
    refused: 'InputError: Invalid input: inputs[2]: not a PNG, JPEG, WebP or GIF image',
  });
  expect((await readFile(bundle, 'utf8')).includes('import.meta')).toBe(false);
});
