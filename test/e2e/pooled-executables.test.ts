/**
 * The new model types in the single executable (issue 12) and onnxruntime in worker threads (issue 13): a
 * sentence_embedding executable built from a sentence-transformers layout serves /predict, /v1/embeddings, gRPC and
 * `infer`; while it is saturated with long inputs, every /health probe is answered.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostTarget } from '../../src/builder/targets.ts';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { SentenceEmbeddingResponse } from '../../src/encoder/schemas.ts';
import { baseRuntimePath, hasBaseRuntime, runExecutable, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { grpcClient, serveModel, type ServedModel } from '../helpers/served-model.ts';

warnIfNoBaseRuntime('pooled model executables');

let work: string;
let cacheDir: string;
let served: ServedModel | undefined;

function build(name: string, yaml: string): string {
  const config = path.join(work, `${name}.yaml`);
  writeFileSync(config, yaml);
  const output = path.join(work, name);
  const built = runExecutable(baseRuntimePath(), ['build', '-f', config, '--base-binary-path', baseRuntimePath(), '-o', output], { cacheDir });
  expect(built.status, built.stderr).toBe(0);
  return output;
}

function post(url: string, route: string, body: unknown): Promise<Response> {
  return fetch(`${url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), 'pooled-e2e-'));
  cacheDir = path.join(work, 'cache');
});

afterAll(async () => {
  await served?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe.skipIf(!hasBaseRuntime())('a sentence_embedding executable', () => {
  let executable: string;

  beforeAll(async () => {
    // the example preset: long enough (512 positions, hidden 64) that a batch of long inputs takes a while to run
    const dir = await generateTinyModel({ modelType: 'embedding', hidden: 64, maxPositions: 512, intermediate: 256 });
    executable = build('sentences', `encoder:\n  name: sentences\n  path: ${dir}\n  model_type: sentence_embedding\n  pooling: cls\n  normalize: false\n`);
    // large batches: each run takes long enough that a probe waiting for one would show it
    served = await serveModel(executable, { cacheDir, args: ['--max-batch-tokens', '8192'] });
  });

  it('says what it serves: --version, inspect and /model', async () => {
    const version = runExecutable(executable, ['--version'], { cacheDir });
    expect(version.stdout).toContain('sentences 0.1.0 (sentence_embedding)');
    const manifest = JSON.parse(runExecutable(executable, ['inspect'], { cacheDir }).stdout) as { model: Record<string, unknown> };
    expect(manifest.model).toMatchObject({ model_type: 'sentence_embedding', pooling: 'cls', normalize: false });
    expect(await (await fetch(`${served!.httpUrl}/model`)).json()).toEqual({
      model_id: 'sentences',
      model_type: 'sentence_embedding',
      pooling: 'cls',
      normalize: false,
    });
    expect(served!.stderr()).toContain('/v1/embeddings');
  });

  it('answers /predict, /v1/embeddings and infer with the same vectors', async () => {
    const texts = ['hello world', 'good morning'];
    const predicted = (await (await post(served!.httpUrl, '/predict', { inputs: texts })).json()) as { results: { embedding: number[] }[] };
    const openai = (await (await post(served!.httpUrl, '/v1/embeddings', { input: texts, model: 'sentences' })).json()) as {
      data: { embedding: number[] }[];
    };
    expect(predicted.results).toHaveLength(2);
    expect(predicted.results[0].embedding).toHaveLength(64);
    // normalize: false in the configuration applies to both routes
    expect(Math.hypot(...predicted.results[0].embedding)).not.toBeCloseTo(1, 2);
    // both print the shortest decimal of each float32: the same texts
    expect(openai.data.map((item) => item.embedding)).toEqual(predicted.results.map((result) => result.embedding));
    const inferred = runExecutable(executable, ['infer', ...texts], { cacheDir });
    expect(inferred.status, inferred.stderr).toBe(0);
    expect((JSON.parse(inferred.stdout) as typeof predicted).results).toEqual(predicted.results);
  });

  it('answers every /health probe while its worker is saturated with long inputs', async () => {
    const long = Array.from({ length: 300 }, (_, i) => ['alpha', 'beta', 'gamma', 'delta'][i % 4]).join(' ');
    const load = Array.from({ length: 12 }, () => post(served!.httpUrl, '/predict', { inputs: Array.from({ length: 16 }, () => long) }));
    let loadDone = false;
    const settled = Promise.all(load).finally(() => {
      loadDone = true;
    });
    const probes: number[] = [];
    while (!loadDone) {
      const started = performance.now();
      const response = await fetch(`${served!.httpUrl}/health`);
      expect(response.status).toBe(200);
      expect(await response.json()).toBe('OK!');
      probes.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const responses = await settled;
    for (const response of responses) expect(response.status).toBe(200);
    // Many probes fell while batches ran. With onnxruntime on the event loop (measured: a pipeline without workers,
    // same load) only ~5 got through, with a median of ~120 ms and up to ~560 ms, each waiting for a whole batch.
    expect(probes.length).toBeGreaterThan(20);
    probes.sort((a, b) => a - b);
    expect(probes[Math.floor(probes.length / 2)]).toBeLessThan(50);
  });
});

describe.skipIf(!hasBaseRuntime())('a model with a Lua transform, run in the inference workers (issue 30)', () => {
  const transform = 'function Postprocess(arr, mask)\n  if arr:shape()[2] > 40 then error("batch too long for this test") end\n  return arr:lp_normalize(2, 3) * 3\nend';
  const texts = ['hello world', 'a longer second input, so that the first row of the batch is padded'];
  let config: string;
  let executable: string;
  let server: ServedModel | undefined;

  beforeAll(async () => {
    const dir = await generateTinyModel({ modelType: 'embedding' });
    const yaml = `encoder:\n  name: transformed\n  path: ${dir}\n  model_type: sentence_embedding\n  pooling: mean\n  normalize: false\n  transform: |\n${transform.replace(/^/gm, '    ')}\n`;
    executable = build('transformed', yaml);
    config = path.join(work, 'transformed.yaml');
    // the phases of start-up on stderr: which thread loaded the transform
    server = await serveModel(executable, { cacheDir, env: { ENCODER_TRACE_STARTUP: '1' } });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('loads the transform in each worker, from the wasm the executable carries, and serves its outputs pooled', async () => {
    // each worker thread made its own Lua state after its session (the wasm path reached the bundled worker)
    await expect.poll(() => server!.stderr().match(/\(thread \d+\) transform ready/g)?.length ?? 0).toBe(2);
    const response = await post(server!.httpUrl, '/predict', { inputs: texts });
    expect(response.status).toBe(200);
    const served = ((await response.json()) as { results: { embedding: number[] }[] }).results.map((result) => result.embedding);
    // what the pipeline gives from source with the transform on the calling thread: the same float32 values (JSON
    // carries each as its shortest decimal)
    const inProcess = async (yaml: string) => {
      const pipeline = await PredictPipeline.load(readModelPackage(parseBuildConfig(yaml, { baseDir: work })));
      try {
        return ((await pipeline.predict({ inputs: texts })) as SentenceEmbeddingResponse).results.map((result) => Array.from(result.embedding));
      } finally {
        await pipeline.close();
      }
    };
    const asFloat32 = served.map((vector) => vector.map(Math.fround));
    expect(asFloat32).toEqual(await inProcess(readFileSync(config, 'utf8')));
    // and not the untransformed model's: the mean of unit token vectors × 3 is far from the mean of the raw ones
    const raw = await inProcess(readFileSync(config, 'utf8').replace(/ {2}transform: [^]*$/, ''));
    expect(raw[0]).toHaveLength(asFloat32[0].length);
    expect(asFloat32[0]).not.toEqual(raw[0]);
    // `infer` runs the transform on its own thread: the same vectors
    const inferred = runExecutable(executable, ['infer', ...texts], { cacheDir });
    expect(inferred.status, inferred.stderr).toBe(0);
    expect((JSON.parse(inferred.stdout) as { results: { embedding: number[] }[] }).results.map((result) => result.embedding)).toEqual(served);
  });

  it('answers a batch the transform fails on with its 500, and the next request normally', async () => {
    const long = Array.from({ length: 50 }, () => 'word').join(' ');
    const failed = await post(server!.httpUrl, '/predict', { inputs: [long] });
    expect(failed.status).toBe(500);
    expect(failed.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(await failed.text()).toBe('transform line 2: batch too long for this test');
    const next = await post(server!.httpUrl, '/predict', { inputs: texts });
    expect(next.status).toBe(200);
    expect(((await next.json()) as { results: unknown[] }).results).toHaveLength(2);
  });
});

describe.skipIf(!hasBaseRuntime())('the base runtime is its own base (`./encoder build -f config.yaml`, offline)', () => {
  const canUnshare = spawnSync('unshare', ['-n', 'true']).status === 0;
  if (!canUnshare) console.warn('self-as-base offline build: running without `unshare -n` (not permitted here); the cache is still empty');

  it('builds with no flag, no cache and no network, and the model runs', async () => {
    const dir = await generateTinyModel({ modelType: 'embedding' });
    const config = path.join(work, 'offline.yaml');
    writeFileSync(config, `encoder:\n  name: offline\n  path: ${dir}\n  model_type: sentence_embedding\n`);
    const emptyCache = mkdtempSync(path.join(work, 'empty-cache-'));
    const output = path.join(work, 'offline');
    const built = runExecutable(baseRuntimePath(), ['build', '-f', config, '-o', output], {
      cacheDir: emptyCache,
      prefix: canUnshare ? ['unshare', '-n'] : undefined,
    });
    expect(built.status, built.stderr).toBe(0);
    expect(built.stderr).toContain(`[1/6] detect platform and fetch the base runtime: ${hostTarget()}, base runtime: this executable`);
    const inferred = runExecutable(output, ['infer', 'hello world'], { cacheDir: emptyCache });
    expect(inferred.status, inferred.stderr).toBe(0);
    expect((JSON.parse(inferred.stdout) as { results: { embedding: number[] }[] }).results[0].embedding).toHaveLength(32);
  });
});

describe.skipIf(!hasBaseRuntime())('quantize: int8', () => {
  it('builds an executable that carries only the int8 graph and says so everywhere', async () => {
    const dir = await generateTinyModel({ modelType: 'embedding', hidden: 64, intermediate: 256 });
    const executable = build('quantized', `encoder:\n  name: quantized\n  path: ${dir}\n  model_type: sentence_embedding\n  quantize: int8\n`);
    const manifest = JSON.parse(runExecutable(executable, ['inspect'], { cacheDir }).stdout) as { model: Record<string, unknown>; assets: { name: string; length: number }[] };
    expect(manifest.model.quantization).toBe('int8');
    const fp32Bytes = readFileSync(path.join(dir, 'model.onnx')).byteLength;
    expect(manifest.assets.find((asset) => asset.name === 'model_weights')!.length).toBeLessThan(fp32Bytes * 0.85);
    expect(runExecutable(executable, ['--version'], { cacheDir }).stdout).toContain('quantized 0.1.0 (sentence_embedding, int8)');
    const quantizedServer = await serveModel(executable, { cacheDir });
    try {
      expect(await (await fetch(`${quantizedServer.httpUrl}/model`)).json()).toMatchObject({ model_type: 'sentence_embedding', quantization: 'int8' });
      const metadata = await grpcClient(quantizedServer.grpcAddress, 'sentence_embedding').metadata({});
      expect(metadata).toMatchObject({ model_type: 'SENTENCE_EMBEDDING', quantization: 'int8' });
      const response = (await (await post(quantizedServer.httpUrl, '/v1/embeddings', { input: ['hello world'] })).json()) as { data: { embedding: number[] }[] };
      expect(Math.hypot(...response.data[0].embedding)).toBeCloseTo(1, 5);
    } finally {
      await quantizedServer.stop();
    }
  });

  it('the gate fails the build when its floor is 1.0, and nothing is written; --quantize none overrides the configuration', async () => {
    const dir = await generateTinyModel({ modelType: 'embedding' });
    const config = path.join(work, 'strict.yaml');
    writeFileSync(config, `encoder:\n  name: strict\n  path: ${dir}\n  model_type: embedding\n  quantize: int8\n  quantize_min_cosine: 1.0\n`);
    const output = path.join(work, 'strict');
    const refused = runExecutable(baseRuntimePath(), ['build', '-f', config, '-o', output], { cacheDir });
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(/int8 quantization fails the accuracy gate: the smallest cosine to fp32 is 0\.9\d+, below quantize_min_cosine 1; nothing was written/);
    expect(existsSync(output)).toBe(false);
    const plain = runExecutable(baseRuntimePath(), ['build', '-f', config, '-o', output, '--quantize', 'none'], { cacheDir });
    expect(plain.status, plain.stderr).toBe(0);
    expect((JSON.parse(runExecutable(output, ['inspect'], { cacheDir }).stdout) as { model: object }).model).not.toHaveProperty('quantization');
  });
});
