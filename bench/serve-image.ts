/**
 * bench:serve's `image` group (issue 36): an image_classification model, the ViT-S/16-shaped generated one
 * (workload.ts, BENCH_VIT), served by this project against what a Node user would otherwise run, one image per
 * request, on two sets of photo-like pictures (images.ts): 224×224 (JPEG and PNG) and camera-sized (JPEG 4032×3024 and
 * 1920×1080, PNG 1280×960); request n sends image n of its set, round robin.
 *   (a) raw onnxruntime session.run (one session, its default threads) on pixel_values decoded and preprocessed
 *       beforehand by src/encoder/image, in the batches the server's scheduler forms (up to 16 images): inference alone;
 *   (b) @huggingface/transformers' image-classification pipeline in this process, on the same model.onnx read from a
 *       local folder (no network), given each image's bytes as a Blob: sharp decodes, its ViTImageProcessor prepares;
 *   (c) the model executable's POST /predict/multipart (encoderfile's form: a `payload` part and a `files` part);
 *   (d) its POST /predict, JSON with the image in base64.
 * All ask for the 5 best labels (transformers.js's default). Measured side by side as the text groups are: turns of
 * blocks at concurrency 1, alternating rounds at concurrency 8; images/s, p50 and p99 request latency, and the
 * server's images/s over (a)'s and (b)'s. Then, per image, decoding and preprocessing apart from inference: ours and
 * transformers.js's, against one onnxruntime run of one image, and how far transformers.js's pixel_values are from
 * ours (which equal PIL's). Last, the server's image threads by default (single-threaded sessions and a solo session
 * for a lone batch) against `--threads 1`, `--threads <cores>` (the default before the solo session) and `--workers 1`.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { DEFAULT_MAX_BATCH_IMAGES, type ImageClassificationResponse } from '../src/encoder/image-pipeline.ts';
import { decodeImage, parseImageProcessorConfig, pixelValues, type PixelValues } from '../src/encoder/image/index.ts';
import { installedWasmCodecs } from '../src/encoder/image/installed-codecs.ts';
import { softmax, Tensor } from '../src/encoder/tensor.ts';
import { encodedPicture, interleaved, type ImageFormat } from './images.ts';
import { ms, printTable } from './measure.ts';
import { cell, driveRequests, localTransformersPipeline, mergeRounds, post, rawWaves, serveBuilt, sleep, takeTurnsAtOne, timed, type Result } from './serve-drive.ts';
import type { ServedModel } from '../test/helpers/served-model.ts';
import { BENCH_VIT, ensureBenchVit } from './workload.ts';

const IMAGE_SETS: { name: string; pictures: [ImageFormat, number, number][] }[] = [
  {
    name: '224×224',
    pictures: [
      ['jpeg', 224, 224],
      ['png', 224, 224],
    ],
  },
  {
    name: 'camera',
    pictures: [
      ['jpeg', 4032, 3024],
      ['jpeg', 1920, 1080],
      ['png', 1280, 960],
    ],
  },
];
const CONCURRENCY = [1, 8];
/** Alternating rounds at concurrency 8. */
const ROUNDS = 4;
/**
 * Turns at concurrency 1: requests per turn, and requests before them that are not counted (one suffices: an image's
 * run is long enough to wake every onnxruntime thread, and fewer uncounted camera photos keep the group short).
 */
const TURN_BLOCK = { small: 4, camera: 2 };
const TURN_WARM_UP = 1;
const TOP_K = 5;
/** Requests per system and measurement: a few seconds of work each on 2 quiet cores, ~3 minutes for the group. */
const requestCount = (concurrency: number, camera: boolean) => (concurrency === 1 ? (camera ? 10 : 20) : camera ? 16 : 24);

interface BenchImage {
  name: string;
  bytes: Buffer;
  /** Decoded and preprocessed by src/encoder/image, as the server does: what (a) runs on. */
  pixels: PixelValues;
  blob: Blob;
  multipart: { body: Uint8Array; contentType: string };
  json: string;
}

interface ImageClassifier {
  (image: Blob, options: { top_k: number }): Promise<unknown>;
  processor: (image: unknown) => Promise<{ pixel_values: { data: Float32Array } }>;
}

const ONE = { length: 1 } as const;

/** One session.run of the images' pixel values stacked into one batch; its time alone in ms. */
async function runPixels(session: ort.InferenceSession, batch: readonly PixelValues[]): Promise<number> {
  const [, channels, height, width] = batch[0].dims;
  const plane = channels * height * width;
  const data = new Float32Array(batch.length * plane);
  batch.forEach((pixels, k) => data.set(pixels.data, k * plane));
  const feeds = { pixel_values: new ort.Tensor('float32', data, [batch.length, channels, height, width]) };
  const started = performance.now();
  await session.run(feeds);
  return performance.now() - started;
}

async function benchImage(format: ImageFormat, width: number, height: number, preprocess: (bytes: Uint8Array) => Promise<PixelValues>): Promise<BenchImage> {
  const bytes = await encodedPicture(format, width, height);
  const blob = new Blob([Uint8Array.from(bytes)], { type: `image/${format}` });
  const form = new FormData();
  form.append('payload', JSON.stringify({ top_k: TOP_K }));
  form.append('files', blob, `picture.${format === 'jpeg' ? 'jpg' : format}`);
  // serialised once here, so that the client's form encoding is not in the timings
  const request = new Request('http://127.0.0.1/', { method: 'POST', body: form });
  return {
    name: `${format.toUpperCase()} ${width}×${height} (${(bytes.length / 1024).toFixed(0)} KiB)`,
    bytes,
    pixels: await preprocess(bytes),
    blob,
    multipart: { body: new Uint8Array(await request.arrayBuffer()), contentType: request.headers.get('content-type')! },
    json: JSON.stringify({ inputs: [bytes.toString('base64')], top_k: TOP_K }),
  };
}

/** The server must answer what the raw session computes, or the rows would not compare the same model. */
async function checkSameScores(session: ort.InferenceSession, httpUrl: string, image: BenchImage, labels: readonly string[]): Promise<void> {
  const [, channels, height, width] = image.pixels.dims;
  const logits = (await session.run({ pixel_values: new ort.Tensor('float32', image.pixels.data, [1, channels, height, width]) })).logits;
  const probabilities = softmax(new Tensor(logits.data as Float32Array, logits.dims.map(Number)), -1).data;
  const response = (await (await fetch(`${httpUrl}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: image.json })).json()) as ImageClassificationResponse;
  for (const { label, score } of response.results[0].labels) {
    if (Math.abs(probabilities[labels.indexOf(label)] - score) > 1e-5) throw new Error(`the server's score of ${label} is ${score}, raw onnxruntime's ${probabilities[labels.indexOf(label)]}`);
  }
}

const loadAverage = () =>
  os
    .loadavg()
    .map((load) => load.toFixed(2))
    .join(' ');

export async function imageRows(work: string): Promise<void> {
  const modelDir = await ensureBenchVit();
  const loadAtStart = loadAverage();
  const config = parseImageProcessorConfig(JSON.parse(readFileSync(path.join(modelDir, 'preprocessor_config.json'), 'utf8')));
  const decode = (bytes: Uint8Array) => decodeImage(bytes, { index: 0, wasm: installedWasmCodecs });
  const preprocess = async (bytes: Uint8Array) => pixelValues([await decode(bytes)], config);
  const sets = await Promise.all(
    IMAGE_SETS.map(async ({ name, pictures }) => ({ name, images: await Promise.all(pictures.map(([format, width, height]) => benchImage(format, width, height, preprocess))) })),
  );
  const session = await ort.InferenceSession.create(path.join(modelDir, 'model.onnx'), { graphOptimizationLevel: 'all' });
  const classify = (await localTransformersPipeline(work, 'image-classification', modelDir, ['config.json', 'preprocessor_config.json'])) as ImageClassifier;
  const served = await serveBuilt(work, 'vit-small', vitConfig(modelDir));
  const rows: string[][] = [];
  try {
    await checkSameScores(session, served.httpUrl, sets[0].images[0], BENCH_VIT.labels);
    // every image thread has its session once the server answered; then each system runs every image once
    await sleep(1000);
    for (const image of sets.flatMap((set) => set.images)) {
      await Promise.all([runPixels(session, [image.pixels]), classify(image.blob, { top_k: TOP_K }), post(served.httpUrl, image.json)]);
    }
    for (const { name, images } of sets) {
      const camera = name === 'camera';
      const of = (n: number) => images[n % images.length];
      const sendA = (n: number) => runPixels(session, [of(n).pixels]);
      const sendB = (n: number) => classify(of(n).blob, { top_k: TOP_K });
      const sendC = (n: number) => post(served.httpUrl, of(n).multipart.body, '/predict/multipart', of(n).multipart.contentType);
      const sendD = (n: number) => post(served.httpUrl, of(n).json);
      for (const concurrency of CONCURRENCY) {
        const count = requestCount(concurrency, camera);
        let results: Result[];
        if (concurrency === 1) {
          results = await takeTurnsAtOne([sendA, timed(sendB), timed(sendC), timed(sendD)], count, (n) => n, 1, camera ? TURN_BLOCK.camera : TURN_BLOCK.small, TURN_WARM_UP);
        } else {
          const rounds: Result[][] = [[], [], [], []];
          for (let round = 0; round < ROUNDS; round++) {
            const batching = { maxBatchTokens: DEFAULT_MAX_BATCH_IMAGES, groupByLength: false };
            rounds[0].push(await rawWaves(count, concurrency, (n) => [{ ids: ONE, pixels: of(n).pixels }], (batch) => runPixels(session, batch.map((row) => row.pixels)), batching));
            for (const [k, send] of [sendB, sendC, sendD].entries()) rounds[k + 1].push(await driveRequests(count, concurrency, (n) => n, 1, send));
          }
          results = rounds.map(mergeRounds);
        }
        const [a, b, c, d] = results;
        const ratio = (x: Result, y: Result) => (x.itemsPerSecond / y.itemsPerSecond).toFixed(2);
        rows.push([name, String(concurrency), cell(a), cell(b), cell(c), cell(d), ratio(c, a), ratio(c, b), ratio(d, a), ratio(d, b)]);
      }
    }
  } finally {
    await served.stop();
  }
  printTable(
    `Image classification, ViT-S/16-shaped model (224×224, 12 layers, hidden 384, 1000 labels; generated): images/s / p50 ms / p99 ms, one image per request, top ${TOP_K} labels ` +
      `(224×224 set: ${sets[0].images.map((image) => image.name).join(', ')}; camera set: ${sets[1].images.map((image) => image.name).join(', ')}; ` +
      `side by side: turns of blocks at concurrency 1, ${ROUNDS} alternating rounds at 8; load average ${loadAtStart} at the start, ${loadAverage()} at the end)`,
    ['images', 'concurrency', '(a) raw onnxruntime, pre-decoded tensors', '(b) transformers.js pipeline', '(c) /predict/multipart', '(d) /predict, base64 JSON', 'c/a', 'c/b', 'd/a', 'd/b'],
    rows,
  );
  await decodeRows(sets.flatMap((set) => set.images), session, classify, decode, config);
  await threadRows(work, modelDir, sets[0].images, session);
  await session.release();
}

const vitConfig = (modelDir: string) => `encoder:\n  name: vit-small\n  path: ${modelDir}\n  model_type: image_classification\n`;

/**
 * How `serve` runs an image model's onnxruntime, side by side on the 224×224 set (/predict, base64 JSON): the default
 * (two image threads, the cores divided between their sessions, and a solo session with onnxruntime's default threads
 * on the first for a batch that runs alone), `--threads 1` (the same without the solo session), `--threads <cores>`
 * (each thread's session on every core, the default before the solo session) and `--workers 1`; raw onnxruntime takes
 * its turn at concurrency 1.
 */
async function threadRows(work: string, modelDir: string, images: readonly BenchImage[], session: ort.InferenceSession): Promise<void> {
  const cores = String(os.availableParallelism());
  const configurations = [[], ['--threads', '1'], ['--threads', cores], ['--workers', '1']];
  const servers: ServedModel[] = [];
  try {
    for (const args of configurations) servers.push(await serveBuilt(work, 'vit-small', vitConfig(modelDir), args));
    await sleep(1000);
    const sends = servers.map((served) => (n: number) => post(served.httpUrl, images[n % images.length].json));
    for (const send of sends) for (let n = 0; n < 4; n++) await send(n);
    const rawAnswer = (n: number) => runPixels(session, [images[n % images.length].pixels]);
    const [raw, ...one] = await takeTurnsAtOne([rawAnswer, ...sends.map(timed)], requestCount(1, false), (n) => n, 1, TURN_BLOCK.small, TURN_WARM_UP);
    const loaded = sends.map((): Result[] => []);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [k, send] of sends.entries()) loaded[k].push(await driveRequests(requestCount(8, false), 8, (n) => n, 1, send));
    }
    const labelOf = (args: string[]) => (args.length === 0 ? '(default)' : args[1] === cores ? `${args.join(' ')} (each thread on every core)` : args.join(' '));
    const rows = configurations.map((args, k) => [labelOf(args), `${cell(one[k])} (${(one[k].p50 / raw.p50).toFixed(2)})`, cell(mergeRounds(loaded[k]))]);
    rows.push(['raw onnxruntime (its default threads)', cell(raw), '']);
    printTable(
      `Image threads: /predict (base64 JSON), 224×224 set, images/s / p50 ms / p99 ms, (p50 against raw onnxruntime in the same turns); all configurations serving at once, measured in turns (load average ${loadAverage()})`,
      ['serve options', 'concurrency 1', `concurrency 8 (${ROUNDS} rounds)`],
      rows,
    );
  } finally {
    await Promise.all(servers.map((served) => served.stop()));
  }
}

/**
 * Per image, each step alone, in turns (interleaved): our decode (WebAssembly codecs) and preprocess (PIL's
 * resampling, rescale, normalise), transformers.js's decode (RawImage.fromBlob: sharp) and preprocess (its processor,
 * from the decoded RawImage), and one onnxruntime run of the image's pixel values; and the largest difference between
 * transformers.js's pixel_values and ours.
 */
async function decodeRows(
  images: readonly BenchImage[],
  session: ort.InferenceSession,
  classify: ImageClassifier,
  decode: (bytes: Uint8Array) => ReturnType<typeof decodeImage>,
  config: ReturnType<typeof parseImageProcessorConfig>,
): Promise<void> {
  const { RawImage } = await import('@huggingface/transformers');
  const rows: string[][] = [];
  for (const image of images) {
    const [ours, theirs] = [await decode(image.bytes), await RawImage.fromBlob(image.blob)];
    const theirPixels = (await classify.processor(theirs)).pixel_values.data;
    const difference = image.pixels.data.reduce((worst, value, i) => Math.max(worst, Math.abs(value - theirPixels[i])), 0);
    const steps = [() => decode(image.bytes), () => pixelValues([ours], config), () => RawImage.fromBlob(image.blob), () => classify.processor(theirs), () => runPixels(session, [image.pixels])];
    const medians = await interleaved(steps, undefined, image.bytes.length > 200_000 ? 6 : 20);
    const [decodeOurs, preprocessOurs, decodeTheirs, preprocessTheirs, inference] = medians.map(({ wall, cpu }) => `${ms(wall)} / ${ms(cpu)}`);
    rows.push([image.name, decodeOurs, preprocessOurs, decodeTheirs, preprocessTheirs, inference, difference.toFixed(3)]);
  }
  printTable(
    `Per image, decoding and preprocessing apart from inference: median wall / CPU ms (CPU: this process's, sharp's threads included; load average ${loadAverage()})`,
    ['image', 'ours: decode (wasm)', 'ours: preprocess', 'transformers.js: decode (sharp)', 'transformers.js: preprocess', 'inference, 1 image (raw onnxruntime)', 'max |pixel_values ours − transformers.js|'],
    rows,
  );
}
