/**
 * An image model on the built runtime (issue 36): `encoder build` of the tiny ViT's folder writes an executable that
 * carries no tokenizer; its `infer a.png b.jpg` and its `serve` (POST /predict with base64, POST /predict/multipart)
 * answer the same labels and scores, the codecs coming from the runtime's extracted assets (no node_modules), and a
 * truncated image is a 422 naming it.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ImageClassificationResponse } from '../../src/encoder/image-pipeline.ts';
import { TINY_VIT, writeVitModelDirectory } from '../../scripts/model-generator/index.ts';
import { baseRuntimePath, hasBaseRuntime, runExecutable, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { serveModel } from '../helpers/served-model.ts';

let work: string;
let cacheDir: string;

warnIfNoBaseRuntime('image models on the built runtime');
describe.skipIf(!hasBaseRuntime())('image models on the built runtime', () => {
  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), 'e2e-image-'));
    cacheDir = path.join(work, 'cache');
    await writeVitModelDirectory(path.join(work, 'vit'));
  }, 60_000);
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('builds, then infer and serve (JSON and multipart) give the same labels', async () => {
    writeFileSync(path.join(work, 'vit.yml'), `encoder:\n  name: tiny-vit\n  path: vit\n  model_type: image_classification\n  output_path: ${path.join(work, 'tiny-vit')}\n`);
    const built = runExecutable(baseRuntimePath(), ['build', '-f', path.join(work, 'vit.yml')], { cacheDir, cwd: work });
    expect(built.status, built.stderr).toBe(0);
    expect(built.stderr).toContain('[4/6] validate the ONNX model structure: input "pixel_values"');
    const executable = path.join(work, 'tiny-vit');

    const pixels = Buffer.from(Array.from({ length: 50 * 30 * 3 }, (_, i) => (i * 11 + (i % 5) * 51) % 256));
    const png = await sharp(pixels, { raw: { width: 50, height: 30, channels: 3 } }).png().toBuffer();
    const jpeg = await sharp(pixels, { raw: { width: 30, height: 50, channels: 3 } }).jpeg().toBuffer();
    const files = [path.join(work, 'a.png'), path.join(work, 'b.jpg'), path.join(work, 'c.jpg')];
    writeFileSync(files[0], png);
    writeFileSync(files[1], jpeg);
    writeFileSync(files[2], jpeg.subarray(0, jpeg.length - 300));

    const inferred = runExecutable(executable, ['infer', files[0], files[1]], { cacheDir });
    expect(inferred.status, inferred.stderr).toBe(0);
    const fromInfer = JSON.parse(inferred.stdout) as ImageClassificationResponse;
    expect(fromInfer.results.map((r) => r.labels.map((l) => l.label).sort())).toEqual([[...TINY_VIT.labels].sort(), [...TINY_VIT.labels].sort()]);
    const broken = runExecutable(executable, ['infer', files[2]], { cacheDir });
    expect(broken.status).toBe(2);
    expect(broken.stderr).toContain(`paths[0]: the JPEG data is corrupt or truncated`);

    const served = await serveModel(executable, { cacheDir, args: ['--workers', '1'] });
    try {
      expect(served.grpcAddress).not.toBe('');
      expect(served.stderr()).toContain('encoderfile.image_classification.ImageClassificationInference');
      const json = (await fetch(`${served.httpUrl}/predict`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: [png.toString('base64'), `data:image/jpeg;base64,${jpeg.toString('base64')}`] }),
      }).then((r) => r.json())) as ImageClassificationResponse;
      const form = new FormData();
      form.append('payload', '{}');
      for (const file of files.slice(0, 2)) form.append('files', new Blob([Uint8Array.from(readFileSync(file))]), path.basename(file));
      const multipart = (await fetch(`${served.httpUrl}/predict/multipart`, { method: 'POST', body: form }).then((r) => r.json())) as ImageClassificationResponse;
      expect(multipart.results).toEqual(json.results);
      json.results.forEach((result, i) => {
        expect(result.labels.map((l) => l.label)).toEqual(fromInfer.results[i].labels.map((l) => l.label));
        result.labels.forEach((l, k) => expect(l.score).toBeCloseTo(fromInfer.results[i].labels[k].score, 6));
      });
      const bad = new FormData();
      bad.append('payload', '{}');
      bad.append('files', new Blob([Uint8Array.from(readFileSync(files[2]))]), 'c.jpg');
      const refused = await fetch(`${served.httpUrl}/predict/multipart`, { method: 'POST', body: bad });
      expect(refused.status).toBe(422);
      expect(await refused.text()).toMatch(/^Invalid input: files\[0\]: the JPEG data is corrupt or truncated/);
    } finally {
      expect(await served.stop()).toBe(0);
    }
  }, 120_000);
});
