/**
 * Image models' front ends on the built runtime (issue 36): executables of the tiny ViT classifier and of the tiny
 * image_embedding ViT answer the same images with the same scores and vectors through our gRPC service
 * (encoder.ImageClassification, encoder.ImageEmbedding; a @grpc/grpc-js client from proto/encoder.proto), HTTP JSON
 * base64, encoderfile's gRPC service (a client from encoderfile's own .proto files) and `infer` (paths, and `-` for
 * one image on standard input). Corrupt, truncated, zero-size, huge-dimension and non-image inputs are
 * INVALID_ARGUMENT naming the input over gRPC and an exit 2 naming it for `infer`; the request limits hold on gRPC.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ImageClassificationResponse, ImageEmbeddingResponse } from '../../src/encoder/image-pipeline.ts';
import { TINY_VIT, TINY_VIT_EMBEDDING, writeVitModelDirectory } from '../../scripts/model-generator/index.ts';
import { baseRuntimePath, hasBaseRuntime, runExecutable, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { encoderfileImageClient, grpcClient, serveModel, type ServedModel } from '../helpers/served-model.ts';

let work: string;
let cacheDir: string;
const executables = { classifier: '', embedder: '' };
/** Three good images (odd sizes, portrait and landscape, PNG, JPEG and WebP) and the bad inputs, by name. */
let good: Buffer[];
let bad: Record<string, { bytes: Buffer; reason: RegExp }>;

/** The offset of a JPEG's start-of-frame segment (after FF C0 … C2): its length, precision, height, width. */
function startOfFrame(jpeg: Buffer): number {
  for (let at = 2; at < jpeg.length; at += 2 + jpeg.readUInt16BE(at + 2)) if (jpeg[at + 1] >= 0xc0 && jpeg[at + 1] <= 0xc2) return at + 2;
  throw new Error('no start of frame');
}

warnIfNoBaseRuntime('image gRPC on the built runtime');
describe.skipIf(!hasBaseRuntime())('image models on the built runtime: our gRPC, HTTP, encoderfile gRPC and infer', () => {
  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), 'e2e-image-grpc-'));
    cacheDir = path.join(work, 'cache');
    await writeVitModelDirectory(path.join(work, 'vit'));
    await writeVitModelDirectory(path.join(work, 'vit-embed'), TINY_VIT_EMBEDDING);
    for (const [name, type, dir] of [
      ['classifier', 'image_classification', 'vit'],
      ['embedder', 'image_embedding', 'vit-embed'],
    ] as const) {
      executables[name] = path.join(work, name);
      writeFileSync(path.join(work, `${name}.yml`), `encoder:\n  name: tiny-${name}\n  path: ${dir}\n  model_type: ${type}\n  output_path: ${executables[name]}\n`);
      const built = runExecutable(baseRuntimePath(), ['build', '-f', path.join(work, `${name}.yml`)], { cacheDir, cwd: work });
      expect(built.status, built.stderr).toBe(0);
    }
    const pixels = (width: number, height: number) => Buffer.from(Array.from({ length: width * height * 3 }, (_, i) => (i * 17 + (i % 7) * 37) % 256));
    const raw = (width: number, height: number) => sharp(pixels(width, height), { raw: { width, height, channels: 3 } });
    const jpeg = await raw(37, 53).jpeg().toBuffer();
    good = [await raw(61, 43).png().toBuffer(), jpeg, await raw(45, 45).webp({ lossless: true }).toBuffer()];
    const corrupt = Buffer.from(jpeg);
    const dht = corrupt.indexOf(Buffer.from([0xff, 0xc4]));
    corrupt.fill(0xff, dht + 5, dht + 21); // every Huffman code-length count 255: more codes than a table can hold
    const bomb = Buffer.from(good[0]);
    bomb.writeUInt32BE(100_000, 16); // the PNG header's width and height: 10^10 pixels declared in a small file
    bomb.writeUInt32BE(100_000, 20);
    const sof = startOfFrame(jpeg);
    const jpegBomb = Buffer.from(jpeg);
    jpegBomb.writeUInt16BE(65_000, sof + 3);
    jpegBomb.writeUInt16BE(65_000, sof + 5);
    const badSegment = Buffer.from(jpeg);
    badSegment.writeUInt16BE(9, sof); // the frame header's length: the segments after it cannot be found
    bad = {
      corrupt: { bytes: corrupt, reason: /^the JPEG data is corrupt or truncated \(Bogus Huffman table definition\)$/ },
      truncated: { bytes: jpeg.subarray(0, jpeg.length - 40), reason: /^the JPEG data is corrupt or truncated \(no end-of-image marker\)$/ },
      'zero-size': { bytes: Buffer.alloc(0), reason: /^the image is empty \(0 bytes\)$/ },
      'huge PNG': { bytes: bomb, reason: /^the PNG image is 100000×100000 \(10000000000 pixels\), more than the limit of 40000000 pixels$/ },
      'huge JPEG': { bytes: jpegBomb, reason: /^the JPEG image is 65000×65000 \(4225000000 pixels\), more than the limit of 40000000 pixels$/ },
      'malformed JPEG segment': { bytes: badSegment, reason: /^the JPEG data is corrupt \(no marker where one must be\)$/ },
      'non-image': { bytes: Buffer.from('{"not": "an image"}\n'), reason: /^not a PNG, JPEG, WebP or GIF image$/ },
    };
  }, 180_000);
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  /** `infer` of the files, and of the first image on standard input: one response each. */
  function infer<T>(executable: string, images: Buffer[]): { files: T; stdin: T } {
    const files = images.map((bytes, i) => {
      const file = path.join(work, `input-${i}`); // no extension: the format is read from the bytes
      writeFileSync(file, bytes);
      return file;
    });
    const fromFiles = runExecutable(executable, ['infer', ...files], { cacheDir });
    expect(fromFiles.status, fromFiles.stderr).toBe(0);
    const fromStdin = runExecutable(executable, ['infer', '-'], { cacheDir, input: images[0] });
    expect(fromStdin.status, fromStdin.stderr).toBe(0);
    return { files: JSON.parse(fromFiles.stdout) as T, stdin: JSON.parse(fromStdin.stdout) as T };
  }

  async function postJson<T>(served: ServedModel, body: object): Promise<T> {
    const response = await fetch(`${served.httpUrl}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(response.status, await response.clone().text()).toBe(200);
    return (await response.json()) as T;
  }

  /** JSON's numbers as float32, what gRPC's `float` fields carry (JSON prints the shortest decimal that reads back as the float32). */
  function float32<T>(value: T): T {
    return JSON.parse(JSON.stringify(value), (_key, member: unknown) => (typeof member === 'number' ? Math.fround(member) : member)) as T;
  }

  async function refusal(call: Promise<unknown>): Promise<grpc.ServiceError> {
    return (await call.then(
      () => expect.fail('the call was answered'),
      (error: unknown) => error,
    )) as grpc.ServiceError;
  }

  /** Each bad input, second in a request after a good image: INVALID_ARGUMENT naming inputs[1] and saying why. */
  async function expectRefusals(predict: (request: object) => Promise<unknown>): Promise<void> {
    for (const [name, { bytes, reason }] of Object.entries(bad)) {
      const error = await refusal(predict({ inputs: [{ image: good[0] }, { image: bytes }] }));
      expect([name, grpc.status[error.code]]).toEqual([name, 'INVALID_ARGUMENT']);
      expect(error.details).toMatch(/^Invalid input: inputs\[1\]: /);
      expect([name, error.details.slice('Invalid input: inputs[1]: '.length)]).toEqual([name, expect.stringMatching(reason)]);
    }
  }

  it('image_classification: encoder.ImageClassification, HTTP, encoderfile gRPC and infer give the same labels and scores; bad inputs are named', async () => {
    const inferred = infer<ImageClassificationResponse>(executables.classifier, good);
    expect(inferred.stdin.results).toEqual([inferred.files.results[0]]);
    const served = await serveModel(executables.classifier, { cacheDir, args: ['--workers', '1', '--max-request-inputs', '4', '--body-limit', '200000'] });
    const ours = grpcClient(served.grpcAddress, 'image_classification');
    const theirs = encoderfileImageClient(served.grpcAddress);
    try {
      expect(served.stderr()).toContain(`gRPC  ${served.grpcAddress}  encoder.ImageClassification, encoderfile.image_classification.ImageClassificationInference, grpc.health.v1.Health`);
      const http = await postJson<ImageClassificationResponse>(served, { inputs: good.map((bytes) => bytes.toString('base64')), metadata: { via: 'http' } });
      const grpcReply = (await ours.predict({ inputs: good.map((image) => ({ image })), metadata: { via: 'grpc' } })) as unknown as ImageClassificationResponse;
      const encoderfileReply = (await theirs.predict({ inputs: good.map((image) => ({ image })) })) as unknown as ImageClassificationResponse;
      expect(grpcReply.model_id).toBe('tiny-classifier');
      expect(grpcReply.metadata).toEqual({ via: 'grpc' });
      expect(http.results).toHaveLength(3);
      for (const result of http.results) expect(result.labels.map((l) => l.label).sort()).toEqual([...TINY_VIT.labels].sort());
      // one server, the same images in one request: the same float32 values on every front end
      expect(grpcReply.results).toEqual(float32(http.results));
      expect(encoderfileReply.results).toEqual(grpcReply.results);
      // another process (infer runs on its own thread): the same labels, the same scores to float32 rounding
      inferred.files.results.forEach((result, i) => {
        expect(result.labels.map((l) => l.label)).toEqual(http.results[i].labels.map((l) => l.label));
        result.labels.forEach((l, k) => expect(Math.abs(l.score - http.results[i].labels[k].score)).toBeLessThan(1e-6));
      });

      // top_k as on HTTP; 0 is refused as on HTTP
      const top = (await ours.predict({ inputs: [{ image: good[1] }], top_k: 1 })) as unknown as ImageClassificationResponse;
      expect(top.results).toEqual([{ labels: [grpcReply.results[1].labels[0]] }]);
      const zero = await refusal(ours.predict({ inputs: [{ image: good[1] }], top_k: 0 }));
      expect([zero.code, zero.details]).toEqual([grpc.status.INVALID_ARGUMENT, 'Invalid input: top_k must be an integer of at least 1, got 0']);
      expect(await ours.metadata({})).toEqual({ model_id: 'tiny-classifier', model_type: 'IMAGE_CLASSIFICATION', id2label: { 0: 'cat', 1: 'dog', 2: 'bird' }, quantization: '' });

      await expectRefusals(ours.predict);
      await expectRefusals(theirs.predict);
      // the limits: images per request, and the message size (--body-limit)
      const many = await refusal(ours.predict({ inputs: Array.from({ length: 5 }, () => ({ image: good[0] })) }));
      expect([many.code, many.details]).toEqual([
        grpc.status.INVALID_ARGUMENT,
        'Invalid input: the request holds 5 inputs, more than the limit of 4 inputs per request; send fewer inputs per request',
      ]);
      const large = await refusal(ours.predict({ inputs: [{ image: Buffer.alloc(300_000, 1) }] }));
      expect(large.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      const empty = await refusal(ours.predict({ inputs: [] }));
      expect([empty.code, empty.details]).toEqual([grpc.status.INVALID_ARGUMENT, 'Invalid input: inputs must not be empty']);
      // the other kind's services say which one to call
      const other = await refusal(grpcClient(served.grpcAddress, 'image_embedding').predict({ inputs: [{ image: good[0] }] }));
      expect([other.code, other.details]).toEqual([grpc.status.UNIMPLEMENTED, 'encoder.ImageEmbedding is not served: this server serves a image_classification model; call encoder.ImageClassification']);
      const text = await refusal(grpcClient(served.grpcAddress, 'embedding').predict({ inputs: ['a text'] }));
      expect([text.code, text.details]).toEqual([grpc.status.UNIMPLEMENTED, 'encoder.Embedding is not served: this server serves a image_classification model; call encoder.ImageClassification']);
      // the server is unharmed by what it refused
      expect(((await ours.predict({ inputs: [{ image: good[2] }] })) as unknown as ImageClassificationResponse).results).toEqual([grpcReply.results[2]]);
    } finally {
      ours.close();
      theirs.close();
      expect(await served.stop()).toBe(0);
    }

    writeFileSync(path.join(work, 'good.png'), good[0]);
    for (const [name, { bytes, reason }] of Object.entries(bad)) {
      writeFileSync(path.join(work, 'bad'), bytes);
      const named = runExecutable(executables.classifier, ['infer', path.join(work, 'good.png'), path.join(work, 'bad')], { cacheDir });
      expect([name, named.status]).toEqual([name, 2]);
      const line = /^error: Invalid input: paths\[1\]: (.*) \((.*)\)\n$/.exec(named.stderr);
      expect([name, line?.[1], line?.[2]]).toEqual([name, expect.stringMatching(reason), path.join(work, 'bad')]);
      const piped = runExecutable(executables.classifier, ['infer', '-'], { cacheDir, input: bytes });
      expect([name, piped.status, piped.stdout]).toEqual([name, 2, '']);
      const pipedLine = /^error: Invalid input: paths\[0\]: (.*) \(standard input\)\n$/.exec(piped.stderr);
      expect([name, pipedLine?.[1]]).toEqual([name, expect.stringMatching(reason)]);
    }
  }, 240_000);

  it('image_embedding: encoder.ImageEmbedding, HTTP and infer give the same vectors, normalised as asked; bad inputs are named', async () => {
    const inferred = infer<ImageEmbeddingResponse>(executables.embedder, good);
    expect(inferred.stdin.results).toEqual([inferred.files.results[0]]);
    const served = await serveModel(executables.embedder, { cacheDir, args: ['--workers', '1', '--max-batch-images', '2'] });
    const ours = grpcClient(served.grpcAddress, 'image_embedding');
    try {
      // an image embedding model has gRPC now: ours only (encoderfile has no image embedding service)
      expect(served.stderr()).toContain(`gRPC  ${served.grpcAddress}  encoder.ImageEmbedding, grpc.health.v1.Health`);
      expect(served.stderr()).toContain('batching: up to 2 images per onnxruntime run');
      const inputs = good.map((image) => ({ image }));
      for (const normalize of [undefined, true, false]) {
        const http = await postJson<ImageEmbeddingResponse>(served, { inputs: good.map((bytes) => bytes.toString('base64')), ...(normalize === undefined ? {} : { normalize }) });
        const reply = (await ours.predict({ inputs, ...(normalize === undefined ? {} : { normalize }) })) as unknown as ImageEmbeddingResponse;
        expect(reply.model_id).toBe('tiny-embedder');
        expect(reply.results).toEqual(float32(http.results));
        const norms = reply.results.map(({ embedding }) => Math.hypot(...embedding));
        // the model's setting (normalize: true) when unset
        if (normalize !== false) for (const norm of norms) expect(norm).toBeCloseTo(1, 5);
        else expect(norms.some((norm) => Math.abs(norm - 1) > 1e-3)).toBe(true);
        if (normalize === undefined) {
          inferred.files.results.forEach((result, i) => {
            expect(result.embedding).toHaveLength(TINY_VIT_EMBEDDING.hidden);
            result.embedding.forEach((value, k) => expect(Math.abs(value - reply.results[i].embedding[k])).toBeLessThan(1e-6));
          });
        }
      }
      expect(await ours.metadata({})).toMatchObject({ model_id: 'tiny-embedder', model_type: 'IMAGE_EMBEDDING', quantization: '' });
      await expectRefusals(ours.predict);
      const classifier = await refusal(encoderfileImageClient(served.grpcAddress).predict({ inputs }));
      expect([classifier.code, classifier.details]).toEqual([
        grpc.status.UNIMPLEMENTED,
        'encoderfile.image_classification.ImageClassificationInference is not served: this server serves a image_embedding model; call encoder.ImageEmbedding',
      ]);
    } finally {
      ours.close();
      expect(await served.stop()).toBe(0);
    }
  }, 240_000);
});
