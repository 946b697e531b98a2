/**
 * image_embedding (issue 36): a vision tower's vectors, from its pooled output (`image_embeds`) or a pooling of
 * `last_hidden_state`, normalised as configured or asked; built into an executable; served on POST /predict (JSON and
 * multipart), on /v1/embeddings to the OpenAI SDK with images as data URLs (and `dimensions`), and as the MCP tool; bad
 * images refused naming them.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetSection } from '../../runtime/asset-section.ts';
import { buildModel, BUILD_STEPS } from '../../src/builder/build-model.ts';
import { sourceInferenceWorker } from '../../src/cli/installed-files.ts';
import { CACHE_DIR_ENV } from '../../src/encoder/cache/cache-dir.ts';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { preprocessImage } from '../../src/encoder/image/index.ts';
import { installedWasmCodecs } from '../../src/encoder/image/installed-codecs.ts';
import { ImageOnnxModel } from '../../src/encoder/image-model.ts';
import { readImageModelPackage } from '../../src/encoder/image-model-package.ts';
import { ImagePipeline, type ImageEmbeddingResponse } from '../../src/encoder/image-pipeline.ts';
import { readPackagedImageModel } from '../../src/encoder/packaged-model.ts';
import { createImageHttpApp } from '../../src/serve/http/image-app.ts';
import { serverInfo } from '../../src/serve/server-info.ts';
import { TINY_VIT_EMBEDDING, writeVitModelDirectory } from '../../scripts/model-generator/index.ts';
import { mcpClient } from '../helpers/served-model.ts';
import { writeFakeBaseRuntime } from '../helpers/fake-base-runtime.ts';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv } from 'ajv';

let work: string;
let vit: string;
let pipeline: ImagePipeline;
let app: FastifyInstance;
let url: string;
let png: Buffer;
let jpeg: Buffer;
const cacheBefore = process.env[CACHE_DIR_ENV];

const configOf = (extra = '') => parseBuildConfig(`encoder:\n  name: tiny-vit-embed\n  path: vit\n  model_type: image_embedding\n${extra}`, { baseDir: work });

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'image-embedding-'));
  process.env[CACHE_DIR_ENV] = path.join(work, 'cache');
  vit = path.join(work, 'vit');
  await writeVitModelDirectory(vit, TINY_VIT_EMBEDDING);
  pipeline = await ImagePipeline.load(readImageModelPackage(configOf()), { workers: 1, inferenceWorker: sourceInferenceWorker() });
  app = await createImageHttpApp(pipeline, { bodyLimitBytes: 1_000_000, serverInfo: serverInfo({ target: 't' }), maxRequestInputs: 8, maxImageBytes: 500_000 });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  const pixels = Buffer.from(Array.from({ length: 40 * 30 * 3 }, (_, i) => (i * 29 + (i % 11) * 7) % 256));
  png = await sharp(pixels, { raw: { width: 40, height: 30, channels: 3 } }).png().toBuffer();
  jpeg = await sharp(pixels, { raw: { width: 30, height: 40, channels: 3 } }).jpeg().toBuffer();
}, 60_000);

afterAll(async () => {
  await app?.close();
  await pipeline?.close();
  if (cacheBefore === undefined) delete process.env[CACHE_DIR_ENV];
  else process.env[CACHE_DIR_ENV] = cacheBefore;
  rmSync(work, { recursive: true, force: true });
});

/** The model's own outputs for one image, preprocessed as served: [CLS] embedding and token states. */
async function outputsOf(bytes: Uint8Array) {
  const pixels = await preprocessImage(bytes, readImageModelPackage(configOf()).preprocessor, { index: 0, wasm: installedWasmCodecs });
  const weights = readImageModelPackage(configOf()).weights;
  const [pooled, states] = await Promise.all([
    ImageOnnxModel.load(weights, { size: { height: 32, width: 32 }, embedding: { pooling: null } }),
    ImageOnnxModel.load(weights, { size: { height: 32, width: 32 }, embedding: { pooling: 'mean' } }),
  ]);
  try {
    return { cls: (await pooled.run(pixels)).data, states: await states.run(pixels) };
  } finally {
    await Promise.all([pooled.close(), states.close()]);
  }
}

const unit = (v: ArrayLike<number>) => {
  const norm = Math.hypot(...Array.from(v));
  return Array.from(v, (x) => x / norm);
};

function expectVector(actual: ArrayLike<number>, expected: ArrayLike<number>) {
  expect(actual.length).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) expect(actual[i]).toBeCloseTo(expected[i], 5);
}

async function post(pathname: string, body: unknown) {
  const response = await fetch(`${url}${pathname}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, text: await response.text() };
}

describe('image_embedding models', () => {
  it("answers /predict with each image's vector: the pooled output, unit length by default, raw with normalize false", async () => {
    const { cls } = await outputsOf(png);
    const normalized = JSON.parse((await post('/predict', { inputs: [png.toString('base64'), jpeg.toString('base64')] })).text) as ImageEmbeddingResponse;
    expect(normalized.results).toHaveLength(2);
    expectVector(normalized.results[0].embedding, unit(cls));
    const raw = JSON.parse((await post('/predict', { inputs: [`data:image/png;base64,${png.toString('base64')}`], normalize: false })).text) as ImageEmbeddingResponse;
    expectVector(raw.results[0].embedding, cls);
    // top_k is a classifier's option
    const refused = await post('/predict', { inputs: [png.toString('base64')], top_k: 1 });
    expect(refused.status).toBe(422);
    expect(refused.text).toBe('Invalid input: unknown field "top_k" (not taken by image_embedding models)');

    // multipart: the payload's normalize, the same vectors
    const form = new FormData();
    form.append('payload', JSON.stringify({ normalize: false }));
    form.append('files', new Blob([Uint8Array.from(png)]), 'a.png');
    const viaForm = (await fetch(`${url}/predict/multipart`, { method: 'POST', body: form }).then((r) => r.json())) as { results: { embedding: number[] }[] };
    expectVector(viaForm.results[0].embedding, cls);
  });

  it('pools last_hidden_state when the configuration sets pooling', async () => {
    const { states } = await outputsOf(png);
    const [, tokens, width] = states.dims;
    const mean = Array.from({ length: width }, (_, d) => {
      let sum = 0;
      for (let t = 0; t < tokens; t++) sum += states.data[t * width + d];
      return sum / tokens;
    });
    const meanPipeline = await ImagePipeline.load(readImageModelPackage(configOf('  pooling: mean\n  normalize: false\n')));
    try {
      const response = (await meanPipeline.predict({ inputs: [png.toString('base64')] })) as ImageEmbeddingResponse;
      expectVector(response.results[0].embedding, mean);
    } finally {
      await meanPipeline.close();
    }
  });

  it('serves /v1/embeddings to the OpenAI SDK with data URLs, dimensions, and OpenAI errors', async () => {
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const inputs = [`data:image/png;base64,${png.toString('base64')}`, `data:image/jpeg;base64,${jpeg.toString('base64')}`];
    const response = await client.embeddings.create({ model: 'any', input: inputs });
    const viaPredict = JSON.parse((await post('/predict', { inputs })).text) as ImageEmbeddingResponse;
    expect(response.data.map((d) => d.index)).toEqual([0, 1]);
    response.data.forEach((d, i) => expectVector(d.embedding, viaPredict.results[i].embedding));
    expect(response.usage).toEqual({ prompt_tokens: 0, total_tokens: 0 });
    const short = await client.embeddings.create({ model: 'any', input: inputs[0], dimensions: 8, encoding_format: 'float' });
    expectVector(short.data[0].embedding, unit(viaPredict.results[0].embedding.slice(0, 8)));
    const error = await client.embeddings.create({ model: 'any', input: [inputs[0], 'aGVsbG8='] }).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).message).toContain('input[1]: not a PNG, JPEG, WebP or GIF image');
  });

  it('describes /predict and /v1/embeddings in a valid OpenAPI document that its answers meet', async () => {
    const document = (await fetch(`${url}/openapi.json`).then((r) => r.json())) as { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>> };
    const validator = new Validator();
    expect((await validator.validate(structuredClone(document) as unknown as Parameters<Validator['validate']>[0])).errors).toBeUndefined();
    expect(Object.keys(document.paths)).toContain('/v1/embeddings');
    const schema = document.paths['/predict'].post.responses['200'].content!['application/json'].schema;
    const ajv = new Ajv({ strict: false });
    expect(ajv.validate(schema, JSON.parse((await post('/predict', { inputs: [png.toString('base64')] })).text))).toBe(true);
    expect(ajv.validate(schema, { results: [{ labels: [] }], model_id: 'm' })).toBe(false);
  });

  it('serves run_encoder over MCP with image content blocks', async () => {
    const client = await mcpClient(url);
    try {
      const result = (await client.callTool({ name: 'run_encoder', arguments: { images: [{ type: 'image', data: png.toString('base64'), mimeType: 'image/png' }] } })) as CallToolResult;
      const viaPredict = JSON.parse((await post('/predict', { inputs: [png.toString('base64')] })).text) as ImageEmbeddingResponse;
      expectVector((result.structuredContent as { results: { embedding: number[] }[] }).results[0].embedding, viaPredict.results[0].embedding);
    } finally {
      await client.close();
    }
  });

  it('builds into an executable whose package keeps pooling and normalize', async () => {
    const cwd = path.join(work, 'build');
    mkdirSync(cwd, { recursive: true });
    writeFileSync(path.join(cwd, 'c.yml'), `encoder:\n  name: e\n  path: ${vit}\n  model_type: image_embedding\n  pooling: cls\n  normalize: false\n`);
    const lines: string[] = [];
    const result = await buildModel(
      { configFile: path.join(cwd, 'c.yml'), runtimeVersion: '0.1.0', cwd, baseBinaryPath: writeFakeBaseRuntime(path.join(work, 'runtime')) },
      { step: (index, title, detail) => lines.push(`[${index}/${BUILD_STEPS.length}] ${title}: ${detail}`), progress: () => {} },
    );
    expect(result.written).toBe(true);
    expect(lines[3]).toMatch(/output "last_hidden_state" \[batch_size, 17, 32\] cls-pooled \(32 wide\)/);
    const section = (await AssetSection.open(path.join(cwd, 'e')))!;
    try {
      expect(section.manifest.model).toMatchObject({ model_type: 'image_embedding', pooling: 'cls', normalize: false });
      const pkg = await readPackagedImageModel(section);
      expect(pkg).toMatchObject({ modelType: 'image_embedding', pooling: 'cls', normalize: false, labels: [] });
    } finally {
      await section.close();
    }
  });
});
