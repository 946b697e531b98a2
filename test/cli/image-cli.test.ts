/**
 * An image classification model on the command line (issue 36): `infer --config vit.yml a.png b.jpg` prints each
 * image's labels, and `serve --config --enable-otel` (run from the sources, as a user runs it; its request spans reach a
 * collector) answers the same images through
 * POST /predict (base64), POST /predict/multipart and gRPC (a @grpc/grpc-js client from .proto files written as
 * encoderfile 0.7 publishes image_classification.proto, image_types.proto and metadata.proto) with the same scores;
 * unreadable and undecodable files are errors naming them.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ImageClassificationResponse } from '../../src/encoder/image-pipeline.ts';
import { TINY_VIT, TINY_VIT_EMBEDDING, writeVitModelDirectory } from '../../scripts/model-generator/index.ts';
import { INFER_IMAGES_PER_REQUEST } from '../../src/cli/infer-command.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { runCliCaptured, serveRefusal } from '../helpers/run-cli.ts';
import { encoderfileImageClient, serveFromSource } from '../helpers/served-model.ts';
import { callerContext, SPAN_KIND_SERVER, startOtlpReceiver } from '../helpers/otlp-receiver.ts';

let work: string;
let config: string;
let files: { png: string; jpeg: string; broken: string };

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'image-cli-'));
  await writeVitModelDirectory(path.join(work, 'vit'));
  config = path.join(work, 'vit.yml');
  writeFileSync(config, 'encoder:\n  name: tiny-vit\n  path: vit\n  model_type: image_classification\n');
  const pixels = Buffer.from(Array.from({ length: 45 * 35 * 3 }, (_, i) => (i * 13 + (i % 7) * 29) % 256));
  files = { png: path.join(work, 'a.png'), jpeg: path.join(work, 'b.jpg'), broken: path.join(work, 'c.jpg') };
  await sharp(pixels, { raw: { width: 45, height: 35, channels: 3 } }).png().toFile(files.png);
  const jpeg = await sharp(pixels, { raw: { width: 35, height: 45, channels: 3 } }).jpeg().toBuffer();
  writeFileSync(files.jpeg, jpeg);
  writeFileSync(files.broken, jpeg.subarray(0, jpeg.length / 2));
}, 60_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

const cli = (args: string[]) => runCliCaptured(args);

describe('image models on the command line', () => {
  it('infer, serve over JSON base64, multipart and gRPC give the same labels and scores', async () => {
    const inferred = await cli(['infer', '--config', config, files.png, files.jpeg]);
    expect(inferred.stderr).toBe('');
    expect(inferred.code).toBe(0);
    const fromInfer = JSON.parse(inferred.stdout) as ImageClassificationResponse;
    expect(fromInfer.model_id).toBe('tiny-vit');
    expect(fromInfer.results).toHaveLength(2);
    for (const result of fromInfer.results) expect(result.labels.map((l) => l.label).sort()).toEqual([...TINY_VIT.labels].sort());

    const receiver = await startOtlpReceiver();
    const served = await serveFromSource(config, {
      cacheDir: path.join(work, 'cache'),
      args: ['--workers', '1', '--enable-otel', '--otel-exporter-url', receiver.url],
      env: { OTEL_BSP_SCHEDULE_DELAY: '50' },
    });
    try {
      expect(served.stderr()).toMatch(/serving tiny-vit \(image_classification\)\n {2}HTTP {2}http:\/\/127\.0\.0\.1:\d+ {2}POST \/predict \/predict\/multipart/);
      expect(served.stderr()).toContain(`gRPC  ${served.grpcAddress}  encoder.ImageClassification, encoderfile.image_classification.ImageClassificationInference, grpc.health.v1.Health`);
      const bytes = [files.png, files.jpeg].map((file) => readFileSync(file));
      const caller = callerContext();
      const json = (await fetch(`${served.httpUrl}/predict`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', traceparent: caller.traceparent },
        body: JSON.stringify({ inputs: bytes.map((b) => b.toString('base64')) }),
      }).then((r) => r.json())) as ImageClassificationResponse;
      const form = new FormData();
      form.append('payload', '{}');
      bytes.forEach((b, i) => form.append('files', new Blob([Uint8Array.from(b)]), `image-${i}`));
      const multipart = (await fetch(`${served.httpUrl}/predict/multipart`, { method: 'POST', body: form }).then((r) => r.json())) as ImageClassificationResponse;
      // one server, the same batch: the same bytes out
      expect(multipart.results).toEqual(json.results);
      json.results.forEach((result, i) => {
        expect(result.labels.map((l) => l.label)).toEqual(fromInfer.results[i].labels.map((l) => l.label));
        result.labels.forEach((l, k) => expect(l.score).toBeCloseTo(fromInfer.results[i].labels[k].score, 6));
      });

      // the request's span, a child of the caller's, exported to the collector
      await expect.poll(() => receiver.spans().filter((span) => span.traceId === caller.traceId).length, { timeout: 15_000, interval: 50 }).toBe(4);
      const spans = receiver.spans().filter((span) => span.traceId === caller.traceId);
      const request = spans.find((span) => span.kind === SPAN_KIND_SERVER)!;
      expect(request.parentSpanId).toBe(caller.spanId);
      // the pipeline's phases, children of the request's span, in order and within it
      const phases = spans.filter((span) => span !== request).sort((a, b) => Number(BigInt(a.startTimeUnixNano) - BigInt(b.startTimeUnixNano)));
      expect(phases.map((span) => span.name)).toEqual(['decode and preprocess', 'queue wait', 'onnxruntime run']);
      for (const phase of phases) {
        expect(phase.parentSpanId).toBe(request.spanId);
        expect(BigInt(phase.startTimeUnixNano) >= BigInt(request.startTimeUnixNano) && BigInt(phase.endTimeUnixNano) <= BigInt(request.endTimeUnixNano)).toBe(true);
      }

      const client = encoderfileImageClient(served.grpcAddress);
      try {
        const reply = (await client.predict({ inputs: bytes.map((image) => ({ image })), metadata: { trace: 't1' } })) as {
          results: { labels: { label: string; score: number }[] }[];
          metadata: Record<string, string>;
        };
        expect(reply.metadata).toEqual({ trace: 't1' });
        // float on the wire: the same scores to float32 precision
        reply.results.forEach((result, i) => {
          expect(result.labels.map((l) => l.label)).toEqual(json.results[i].labels.map((l) => l.label));
          result.labels.forEach((l, k) => expect(l.score).toBeCloseTo(json.results[i].labels[k].score, 6));
        });
        expect(await client.metadata({})).toEqual({ model_id: 'tiny-vit', model_type: 'IMAGE_CLASSIFICATION', id2label: { 0: 'cat', 1: 'dog', 2: 'bird' } });
        const refused = await client.predict({ inputs: [{ image: bytes[0] }, { image: Buffer.from('not an image') }] }).then(
          () => null,
          (error: grpc.ServiceError) => error,
        );
        expect(refused?.code).toBe(grpc.status.INVALID_ARGUMENT);
        expect(refused?.details).toBe('Invalid input: inputs[1]: not a PNG, JPEG, WebP or GIF image');
        const empty = await client.predict({ inputs: [] }).then(() => null, (error: grpc.ServiceError) => error);
        expect(empty?.details).toBe('Invalid input: inputs must not be empty');
      } finally {
        client.close();
      }
    } finally {
      expect(await served.stop()).toBe(0);
      await receiver.close();
    }
  }, 90_000);

  it('names the file that cannot be read or decoded', async () => {
    const broken = await cli(['infer', '--config', config, files.png, files.broken]);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(new RegExp(`paths\\[1\\]: the JPEG data is corrupt or truncated.*\\(${files.broken.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)`));
    const missing = await cli(['infer', '--config', config, path.join(work, 'nope.png')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`cannot read image ${path.join(work, 'nope.png')}`);
  });

  it('infer - reads one image from standard input, its format from its bytes; a bad one is named as standard input', async () => {
    const fromFile = await cli(['infer', '--config', config, files.jpeg]);
    const fromStdin = await runCliCaptured(['infer', '--config', config, '-'], { stdin: readFileSync(files.jpeg) });
    expect(fromStdin.stderr).toBe('');
    expect(fromStdin.code).toBe(0);
    expect(fromStdin.stdout).toBe(fromFile.stdout);
    const broken = await runCliCaptured(['infer', '--config', config, '-'], { stdin: readFileSync(files.broken) });
    expect([broken.code, broken.stderr]).toEqual([2, expect.stringMatching(/^error: Invalid input: paths\[0\]: the JPEG data is corrupt or truncated.* \(standard input\)\n$/)]);
    const empty = await runCliCaptured(['infer', '--config', config, '-'], { stdin: new Uint8Array(0) });
    expect([empty.code, empty.stderr]).toEqual([2, 'error: Invalid input: paths[0]: the image is empty (0 bytes) (standard input)\n']);
    const mixed = await runCliCaptured(['infer', '--config', config, files.png, '-'], { stdin: readFileSync(files.jpeg) });
    expect([mixed.code, mixed.stderr]).toEqual([2, 'error: Invalid input: `-` reads one image from standard input and is then the only argument; give the others as files\n']);
  });

  it('infer reads the images a request at a time: many paths give what each gives alone, a bad one is named by its place among all', async () => {
    const paths = Array.from({ length: INFER_IMAGES_PER_REQUEST + 6 }, (_, i) => (i % 2 === 0 ? files.png : files.jpeg));
    const [alone, many] = await Promise.all([cli(['infer', '--config', config, files.png, files.jpeg]), cli(['infer', '--config', config, ...paths])]);
    expect([many.code, many.stderr]).toEqual([0, '']);
    const pair = (JSON.parse(alone.stdout) as ImageClassificationResponse).results;
    const results = (JSON.parse(many.stdout) as ImageClassificationResponse).results;
    expect(results).toHaveLength(paths.length);
    results.forEach((result, i) => expect(result).toEqual(pair[i % 2]));
    const bad = paths.length - 2; // in the second request
    const broken = await cli(['infer', '--config', config, ...paths.map((file, i) => (i === bad ? files.broken : file))]);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(new RegExp(`^error: Invalid input: paths\\[${bad}\\]: the JPEG data is corrupt or truncated.*\\(${files.broken.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)\n$`));
  }, 60_000);

  it('infer --no-normalize gives an image_embedding model\'s raw vectors; by default they are unit length', async () => {
    await writeVitModelDirectory(path.join(work, 'vit-embedding'), TINY_VIT_EMBEDDING);
    const embeddingConfig = path.join(work, 'vit-embedding.yml');
    writeFileSync(embeddingConfig, 'encoder:\n  name: tiny-vit-embedding\n  path: vit-embedding\n  model_type: image_embedding\n');
    const vectorOf = async (args: string[]) => {
      const run = await cli(['infer', '--config', embeddingConfig, ...args, files.png]);
      expect([run.code, run.stderr]).toEqual([0, '']);
      return (JSON.parse(run.stdout) as { results: { embedding: number[] }[] }).results[0].embedding;
    };
    const [unit, raw] = await Promise.all([vectorOf([]), vectorOf(['--no-normalize'])]);
    const length = (vector: number[]) => Math.hypot(...vector);
    expect(length(unit)).toBeCloseTo(1, 5);
    expect(Math.abs(length(raw) - 1)).toBeGreaterThan(1e-3);
    raw.forEach((value, i) => expect(value / length(raw)).toBeCloseTo(unit[i], 5));
  }, 60_000);

  it('serve with two image threads: single-threaded sessions and a solo session, which --solo-threads 0 removes; the same scores', async () => {
    const body = JSON.stringify({ inputs: [readFileSync(files.png).toString('base64')] });
    const scores = async (args: string[]) => {
      const served = await serveFromSource(config, { cacheDir: path.join(work, 'cache'), args: ['--workers', '2', '--disable-grpc', ...args] });
      try {
        const response = await fetch(`${served.httpUrl}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        expect(response.status).toBe(200);
        return { stderr: served.stderr(), results: ((await response.json()) as ImageClassificationResponse).results };
      } finally {
        await served.stop();
      }
    };
    const [solo, without] = [await scores([]), await scores(['--solo-threads', '0'])];
    expect(solo.stderr).toContain(
      "intra-op threads 1 per worker, inter-op threads 1 (sequential); a batch that runs alone: the first worker's solo session, intra-op threads onnxruntime default\n",
    );
    expect(without.stderr).toContain('intra-op threads 1 per worker, inter-op threads 1 (sequential)\n');
    expect(without.stderr).not.toContain('solo session');
    expect(without.results).toEqual(solo.results);
  }, 120_000);

  it("serve refuses the other model kind's batch flag: runs of text models are set in tokens, of image models in images", async () => {
    expect(await serveRefusal(config, ['--max-batch-tokens', '64'])).toContain(
      "--max-batch-tokens sets the runs of text models; this image_classification model's runs are set in images: --max-batch-images",
    );
    const textModel = await generateTinyModel({ modelType: 'embedding' });
    const textConfig = path.join(work, 'text.yml');
    writeFileSync(textConfig, `encoder:\n  name: tiny-text\n  path: ${textModel}\n  model_type: embedding\n`);
    try {
      expect(await serveRefusal(textConfig, ['--max-batch-images', '4'])).toContain(
        "--max-batch-images sets the runs of image models; this embedding model's runs are set in tokens: --max-batch-tokens",
      );
    } finally {
      rmSync(textModel, { recursive: true, force: true });
    }
  }, 60_000);
});
