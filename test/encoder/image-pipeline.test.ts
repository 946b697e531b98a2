/**
 * The image classification pipeline (issue 36): the tiny ViT's labels for real PNG, JPEG and WebP images equal the
 * softmax of an independent float64 forward pass over the preprocessed pixels, sorted, cut to top_k; the same scores
 * on the calling thread and on image threads; images of several requests merged into one run; every bad input an
 * InputError naming it, and the pipeline still answering after.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sourceInferenceWorker } from '../../src/cli/installed-files.ts';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { InputError } from '../../src/encoder/errors.ts';
import { DEFAULT_IMAGE_LIMITS, preprocessImage } from '../../src/encoder/image/index.ts';
import { installedWasmCodecs } from '../../src/encoder/image/installed-codecs.ts';
import { soloSessionOptions } from '../../src/encoder/inference-workers.ts';
import { ImageOnnxModel } from '../../src/encoder/image-model.ts';
import { expectationOf, readImageModelPackage, type ImageModelPackage } from '../../src/encoder/image-model-package.ts';
import { ImagePipeline, type ImageClassificationResponse } from '../../src/encoder/image-pipeline.ts';
import type { ImageModelLoad } from '../../src/encoder/image-worker.ts';
import { ImageWorkers } from '../../src/encoder/image-workers.ts';
import { generateVitWeights, TINY_VIT, writeVitModelDirectory } from '../../scripts/model-generator/index.ts';
import { vitReferenceForward } from '../helpers/vit-reference.ts';

let work: string;
let pkg: ImageModelPackage;
let inline: ImagePipeline;
let threaded: ImagePipeline;
const images: Record<string, Buffer> = {};

/** A picture with structure (gradients and a disc), so that different images get different logits. */
function picture(width: number, height: number, seed: number): Buffer {
  const data = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const inside = (x - width / 2) ** 2 + (y - height / 3) ** 2 < (Math.min(width, height) / 3) ** 2;
      data[(y * width + x) * 3] = (x * 255) / width;
      data[(y * width + x) * 3 + 1] = inside ? 255 - seed * 40 : (y * 255) / height;
      data[(y * width + x) * 3 + 2] = (seed * 70 + x * y) % 256;
    }
  }
  return data;
}

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'image-pipeline-'));
  await writeVitModelDirectory(path.join(work, 'vit'));
  pkg = readImageModelPackage(parseBuildConfig('encoder:\n  name: tiny-vit\n  path: vit\n  model_type: image_classification\n', { baseDir: work }));
  const raw = (w: number, h: number, seed: number) => sharp(picture(w, h, seed), { raw: { width: w, height: h, channels: 3 } });
  images.png = await raw(50, 41, 0).png().toBuffer();
  images.jpeg = await raw(33, 61, 1).jpeg({ quality: 90 }).toBuffer();
  images.webp = await raw(64, 64, 2).webp({ lossless: true }).toBuffer();
  [inline, threaded] = await Promise.all([
    ImagePipeline.load(pkg),
    ImagePipeline.load(pkg, { workers: 2, inferenceWorker: sourceInferenceWorker(), maxWaitMs: 20 }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([inline?.close(), threaded?.close()]);
  rmSync(work, { recursive: true, force: true });
});

/** The expected labels: preprocessing (PIL-parity tested on its own), then a float64 forward pass and softmax. */
async function expectedLabels(bytes: Uint8Array): Promise<{ label: string; score: number }[]> {
  const pixels = await preprocessImage(bytes, pkg.preprocessor, { index: 0, wasm: installedWasmCodecs });
  const [logits] = vitReferenceForward(generateVitWeights(TINY_VIT), TINY_VIT.heads, pixels.data, 1);
  const max = Math.max(...logits);
  const exps = logits.map((value) => Math.exp(value - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((e, index) => ({ label: TINY_VIT.labels[index], score: e / sum })).sort((a, b) => b.score - a.score);
}

/** /predict of the classifier, typed as its response. */
const classify = async (pipeline: ImagePipeline, body: unknown) => (await pipeline.predict(body)) as ImageClassificationResponse;

function expectClose(actual: ImageClassificationResponse['results'][number], expected: { label: string; score: number }[]) {
  expect(actual.labels.map((l) => l.label)).toEqual(expected.map((l) => l.label));
  actual.labels.forEach((l, i) => expect(l.score).toBeCloseTo(expected[i].score, 5));
}

describe('image classification pipeline', () => {
  it('gives each image its labels, best first, as a reference forward pass does, for PNG, JPEG and WebP', async () => {
    const body = { inputs: [images.png.toString('base64'), `data:image/jpeg;base64,${images.jpeg.toString('base64')}`, images.webp.toString('base64')], metadata: { trace: 'x' } };
    const response = await classify(inline, body);
    expect(response.model_id).toBe('tiny-vit');
    expect(response.metadata).toEqual({ trace: 'x' });
    expect(response.results).toHaveLength(3);
    for (const [i, name] of ['png', 'jpeg', 'webp'].entries()) expectClose(response.results[i], await expectedLabels(images[name]));
    const sums = response.results.map((r) => r.labels.reduce((sum, l) => sum + l.score, 0));
    for (const sum of sums) expect(sum).toBeCloseTo(1, 5);
    // different images, different scores: the model reads the picture
    expect(response.results[0].labels[0].score).not.toBeCloseTo(response.results[1].labels[0].score, 4);
  });

  it('top_k keeps the best k; the threaded pipeline gives the same scores, merging concurrent requests into runs', async () => {
    const top = await classify(inline, { inputs: [images.png.toString('base64')], top_k: 2 });
    expect(top.results[0].labels).toHaveLength(2);
    const full = await classify(inline, { inputs: [images.png.toString('base64')] });
    expect(top.results[0].labels).toEqual(full.results[0].labels.slice(0, 2));

    const before = threaded.batchingStats().runs;
    const bodies = ['png', 'jpeg', 'webp', 'png'].map((name) => ({ inputs: [images[name].toString('base64')] }));
    const [threadedResults, inlineResults] = await Promise.all([Promise.all(bodies.map((b) => classify(threaded, b))), Promise.all(bodies.map((b) => classify(inline, b)))]);
    threadedResults.forEach((response, i) => {
      response.results[0].labels.forEach((l, k) => {
        expect(l.label).toBe(inlineResults[i].results[0].labels[k].label);
        expect(l.score).toBeCloseTo(inlineResults[i].results[0].labels[k].score, 6);
      });
    });
    // four one-image requests arriving together: fewer runs than requests (maxWaitMs lets them join)
    expect(threaded.batchingStats().runs - before).toBeLessThan(4);
  });

  it('replaces an image thread after a large image, and answers the same from the fresh one', async () => {
    // "large" is 1,000 pixels here, so that the 50×41 PNG is one
    const recycling = await ImagePipeline.load(pkg, { workers: 1, inferenceWorker: sourceInferenceWorker(), recycleAfterPixels: 1000 });
    try {
      const body = { inputs: [images.png.toString('base64')] };
      const first = await recycling.predict(body);
      await expect.poll(() => recycling.threadsRecycled, { timeout: 20_000, interval: 20 }).toBe(1);
      const second = await recycling.predict(body);
      expect(second.results).toEqual(first.results);
      // a small image (below the bound) leaves the thread in place
      const small = await ImagePipeline.load(pkg, { workers: 1, inferenceWorker: sourceInferenceWorker(), recycleAfterPixels: 1_000_000 });
      try {
        await small.predict(body);
        expect(small.threadsRecycled).toBe(0);
      } finally {
        await small.close();
      }
    } finally {
      await recycling.close();
    }
  }, 60_000);

  it('refuses each bad input with an InputError naming it, and answers the next request', async () => {
    const refusal = async (pipeline: ImagePipeline, body: unknown) => {
      const error = await pipeline.predict(body).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(InputError);
      return (error as InputError).reason;
    };
    const good = images.png.toString('base64');
    for (const pipeline of [inline, threaded]) {
      expect(await refusal(pipeline, { inputs: [good, ''] })).toBe('inputs[1]: the image is empty (0 bytes)');
      expect(await refusal(pipeline, { inputs: [Buffer.from('hello, not an image').toString('base64')] })).toBe('inputs[0]: not a PNG, JPEG, WebP or GIF image');
      expect(await refusal(pipeline, { inputs: [good, images.jpeg.subarray(0, images.jpeg.length - 200).toString('base64')] })).toMatch(/^inputs\[1\]: the JPEG data is corrupt or truncated/);
      // a PNG header declaring 100000×100000 pixels: refused before any pixel is decoded
      const bomb = Buffer.from(images.png);
      bomb.writeUInt32BE(100_000, 16);
      bomb.writeUInt32BE(100_000, 20);
      expect(await refusal(pipeline, { inputs: [bomb.toString('base64')] })).toMatch(/^inputs\[0\]: the PNG image is 100000×100000 \(10000000000 pixels\), more than the limit of/);
      expect(await refusal(pipeline, { inputs: ['%%%'] })).toBe('inputs[0]: not base64 (an image\'s bytes in base64, or a data URL)');
      expect(await refusal(pipeline, { inputs: [`data:text/plain;base64,${good}`] })).toBe('inputs[0]: a data URL of text/plain, not of an image');
      expect(await refusal(pipeline, { inputs: [] })).toBe('inputs must not be empty');
      expect(await refusal(pipeline, { inputs: [good], top_k: 0 })).toBe('top_k must be an integer of at least 1, got 0');
      expect(await refusal(pipeline, { images: [good] })).toBe('unknown field "images"');
      expect((await pipeline.predict({ inputs: [good] })).results).toHaveLength(1);
    }
  });
});

/**
 * The solo session (src/encoder/image-workers.ts, as text workers have it): with two image threads each session is
 * single-threaded and the first thread also holds a session with onnxruntime's default threads, which runs a batch
 * that is all the work there is; concurrent batches run on the threads' own sessions; the outputs are the same.
 */
describe('image threads: the solo session', () => {
  const load = (): ImageModelLoad => ({
    weights: pkg.weights,
    options: { threads: 1 },
    expected: expectationOf(pkg),
    preprocessor: pkg.preprocessor,
    limits: DEFAULT_IMAGE_LIMITS,
  });
  const pixelsOf = (name: string) => preprocessImage(images[name], pkg.preprocessor, { index: 0, wasm: installedWasmCodecs });

  it('runs a batch that runs alone on the first thread\'s solo session and concurrent ones on the threads\' own, with the same outputs', async () => {
    const local = await ImageOnnxModel.load(pkg.weights, expectationOf(pkg));
    const workers = await ImageWorkers.load(sourceInferenceWorker(), 2, load(), { solo: soloSessionOptions(load().options, undefined) });
    try {
      const expected = await local.run(await pixelsOf('png'));
      await expect(workers.soloLoaded).resolves.toBe(true);
      const alone = await workers.run(await pixelsOf('png'));
      expect(workers.soloRuns).toBe(1);
      expect(alone.data).toEqual(expected.data);
      // three at once: the first finds nothing running and takes the solo session, the others the threads' own
      const pixels = await Promise.all([pixelsOf('png'), pixelsOf('png'), pixelsOf('png')]);
      const together = await Promise.all(pixels.map((p) => workers.run(p)));
      expect(workers.soloRuns).toBe(2);
      for (const output of together) expect(output.data).toEqual(expected.data);
      // not alone as the scheduler knows it (more work queued): the threads' own sessions
      await workers.run(await pixelsOf('png'), { alone: false });
      expect(workers.soloRuns).toBe(2);
    } finally {
      await Promise.all([workers.close(), local.close()]);
    }
  }, 60_000);

  it('goes on without a solo session that does not load, with a warning, running every batch on the threads\' own', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    // the solo session's options name an execution provider onnxruntime does not have: only its load fails
    const workers = await ImageWorkers.load(sourceInferenceWorker(), 2, load(), { solo: { threads: 2, sessionOptions: { executionProviders: ['no-such-provider'] } } });
    try {
      await expect(workers.soloLoaded).resolves.toBe(false);
      expect(warn).toHaveBeenCalledWith(expect.stringMatching(/^the solo session did not load \(.+\); a lone batch runs on an image thread's own session$/));
      const output = await workers.run(await pixelsOf('png'));
      expect(output.dims).toEqual([1, TINY_VIT.labels.length]);
      expect(workers.soloRuns).toBe(0);
    } finally {
      warn.mockRestore();
      await workers.close();
    }
  }, 60_000);

  it('serves a lone request on the solo session by default with two threads; soloThreads 0, threads or one thread: none; the same scores', async () => {
    const body = { inputs: [images.jpeg.toString('base64')] };
    const expected = await inline.predict(body);
    const solo = await ImagePipeline.load(pkg, { workers: 2, inferenceWorker: sourceInferenceWorker() });
    try {
      expect(solo.sessionSettings.intraOpThreads).toBe(1); // the two cores divided between the threads (threadsPerWorker)
      expect(solo.soloSessionSettings?.intraOpThreads).toBeNull(); // onnxruntime's default
      await expect(solo.soloLoaded).resolves.toBe(true);
      expect(await solo.predict(body)).toEqual(expected);
      expect(solo.soloRuns).toBe(1);
    } finally {
      await solo.close();
    }
    for (const options of [{ workers: 2, soloThreads: 0 }, { workers: 2, threads: 1 }, { workers: 1 }]) {
      const without = await ImagePipeline.load(pkg, { ...options, inferenceWorker: sourceInferenceWorker() });
      try {
        expect(without.soloSessionSettings).toBeNull();
        await expect(without.soloLoaded).resolves.toBe(false);
        expect(await without.predict(body)).toEqual(expected);
        expect(without.soloRuns).toBe(0);
      } finally {
        await without.close();
      }
    }
    // asked for with threads given: 2 threads for the solo session
    const asked = await ImagePipeline.load(pkg, { workers: 2, threads: 1, soloThreads: 2, inferenceWorker: sourceInferenceWorker() });
    try {
      expect(asked.soloSessionSettings?.intraOpThreads).toBe(2);
      await expect(asked.soloLoaded).resolves.toBe(true);
      expect(await asked.predict(body)).toEqual(expected);
      expect(asked.soloRuns).toBe(1);
    } finally {
      await asked.close();
    }
    await expect(ImagePipeline.load(pkg, { workers: 2, soloThreads: 1.5, inferenceWorker: sourceInferenceWorker() })).rejects.toThrow(/soloThreads must be an integer >= 0/);
  }, 60_000);

  it('keeps the solo session when the first thread is replaced after a large image', async () => {
    // "large" is 1,000 pixels here: every image's thread (the first, the least busy when idle) is replaced
    const recycling = await ImagePipeline.load(pkg, { workers: 2, inferenceWorker: sourceInferenceWorker(), recycleAfterPixels: 1000 });
    try {
      await expect(recycling.soloLoaded).resolves.toBe(true);
      const body = { inputs: [images.png.toString('base64')] };
      const first = await recycling.predict(body);
      expect(recycling.soloRuns).toBe(1);
      await expect.poll(() => recycling.threadsRecycled, { timeout: 20_000, interval: 20 }).toBe(1);
      // the fresh first thread loaded a solo session before taking the old one's place: a lone request runs on it
      const second = await recycling.predict(body);
      expect(recycling.soloRuns).toBe(2);
      expect(second.results).toEqual(first.results);
    } finally {
      await recycling.close();
    }
  }, 60_000);
});
