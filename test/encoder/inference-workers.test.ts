import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sourceInferenceWorker } from '../../src/cli/installed-files.ts';
import { attentionMaskOf, createPostprocessSteps, needsAttentionMask, postprocessBatch, type PostprocessSettings } from '../../src/encoder/batch-postprocess.ts';
import { parseBuildConfig, type ModelType } from '../../src/encoder/config.ts';
import { ConfigError, InternalError } from '../../src/encoder/errors.ts';
import { defaultWorkerCount, InferenceWorkers, soloSessionThreads, threadsPerWorker } from '../../src/encoder/inference-workers.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { OnnxModel } from '../../src/encoder/onnx-model.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { Tensor } from '../../src/encoder/tensor.ts';
import { EncoderTokenizer } from '../../src/encoder/tokenizer/index.ts';
import type { LuaTransformOptions } from '../../src/encoder/transform/index.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';

let dir: string;
let weights: Uint8Array;
let tokenizer: EncoderTokenizer;

beforeAll(async () => {
  dir = await generateTinyModel({ modelType: 'embedding' });
  weights = readFileSync(path.join(dir, 'model.onnx'));
  tokenizer = EncoderTokenizer.fromJson(readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
});

const batchOf = (texts: string[]) => tokenizer.pad(texts.map((text) => tokenizer.encode(text)));

describe('InferenceWorkers', () => {
  const open: { close(): Promise<void> }[] = [];
  afterAll(async () => {
    await Promise.all(open.map((model) => model.close()));
  });

  it('gives the outputs of a session on this thread, bit for bit, from 1 and 2 workers', async () => {
    const local = await OnnxModel.load(weights, 'embedding');
    open.push(local);
    const texts = ['hello world', 'a somewhat longer sentence to pad the other row'];
    const expected = await local.run(batchOf(texts));
    for (const workers of [1, 2]) {
      const pool = await InferenceWorkers.load(weights, 'embedding', { workers, worker: sourceInferenceWorker() });
      open.push(pool);
      expect(pool.size).toBe(workers);
      expect(pool.signature).toEqual(local.signature);
      const outputs = await Promise.all([pool.run(batchOf(texts)), pool.run(batchOf(texts)), pool.run(batchOf(texts))]);
      for (const output of outputs) {
        expect(output.dims).toEqual(expected.dims);
        expect(output.data).toEqual(expected.data);
      }
    }
  });

  it('adopts a prestarted thread (warming onnxruntime up before its model arrives) as its first worker', async () => {
    const local = await OnnxModel.load(weights, 'embedding');
    open.push(local);
    const expected = await local.run(batchOf(['hello world']));
    const script = sourceInferenceWorker();
    const early = new Worker(script.script, { workerData: { warmUp: true } });
    let taken = 0;
    const pool = await InferenceWorkers.load(weights, 'embedding', {
      workers: 2,
      worker: { ...script, prestarted: () => (taken++, early) },
    });
    open.push(pool);
    expect(taken).toBe(1); // the first worker only; the second is a new thread
    const output = await pool.run(batchOf(['hello world']));
    expect(output.data).toEqual(expected.data);
    // it is the pool's own now: closing the pool ends it
    const ended = new Promise((resolve) => early.once('exit', resolve));
    await pool.close();
    open.pop();
    await expect(ended).resolves.toBeDefined();
  });

  it('serves once its first worker has loaded; a later worker that cannot start is left out with a warning', async () => {
    const script = sourceInferenceWorker();
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      const pool = await InferenceWorkers.load(weights, 'embedding', {
        workers: 2,
        // the first worker is a good thread; the second is started from a script that does not exist
        worker: { script: '/nonexistent/onnx-worker.ts', prestarted: () => new Worker(script.script) },
      });
      open.push(pool);
      expect(pool.size).toBe(2);
      await pool.joined;
      await new Promise((resolve) => setImmediate(resolve)); // process warnings are emitted on the next tick
      expect(warnings.some((message) => /inference worker 2 of 2 did not start/.test(message))).toBe(true);
      const outputs = await Promise.all([pool.run(batchOf(['one'])), pool.run(batchOf(['two']))]);
      expect(outputs.map((output) => output.dims[0])).toEqual([1, 1]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('closes a worker that finishes loading after the pool was closed', async () => {
    const pool = await InferenceWorkers.load(weights, 'embedding', { workers: 2, worker: sourceInferenceWorker() });
    await pool.close(); // the second worker may still be loading: close waits for it and ends it
    await expect(pool.joined).resolves.toBeUndefined();
  });

  it('starts a new thread when the prestarted one is gone', async () => {
    const pool = await InferenceWorkers.load(weights, 'embedding', { workers: 1, worker: { ...sourceInferenceWorker(), prestarted: () => undefined } });
    open.push(pool);
    expect((await pool.run(batchOf(['hello']))).dims[0]).toBe(1);
  });

  it('takes the batch buffers (transferred, not copied)', async () => {
    const pool = await InferenceWorkers.load(weights, 'embedding', { workers: 1, worker: sourceInferenceWorker() });
    open.push(pool);
    const batch = batchOf(['hello world']);
    await pool.run(batch);
    expect(batch.inputIds.length).toBe(0); // detached by the transfer
  });

  it('fails a run that onnxruntime refuses with an InternalError, and keeps serving', async () => {
    const pool = await InferenceWorkers.load(weights, 'embedding', { workers: 1, worker: sourceInferenceWorker() });
    open.push(pool);
    const bad = () => {
      const batch = batchOf(['hello world']);
      batch.inputIds[1] = 10_000_000n; // far outside the embedding table
      return batch;
    };
    await expect(pool.run(bad())).rejects.toThrow(InternalError);
    await expect(pool.run(bad())).rejects.toThrow(/onnxruntime failed: .*indices element out of data bounds/);
    expect((await pool.run(batchOf(['hello world']))).dims[0]).toBe(1);
    // a batch whose buffers are gone (already handed over) fails alone, as an InternalError
    const used = batchOf(['hello world']);
    await pool.run(used);
    await expect(pool.run(used)).rejects.toThrow(/cannot hand the batch to the inference worker/);
  });

  it('refuses weights that do not load, and a bad worker count, with a ConfigError', async () => {
    await expect(InferenceWorkers.load(new Uint8Array([1, 2, 3]), 'embedding', { workers: 1, worker: sourceInferenceWorker() })).rejects.toThrow(
      ConfigError,
    );
    await expect(InferenceWorkers.load(weights, 'sequence_classification', { workers: 1, worker: sourceInferenceWorker() })).rejects.toThrow(
      /a sequence_classification model needs output "logits"/,
    );
    await expect(InferenceWorkers.load(weights, 'embedding', { workers: 0, worker: sourceInferenceWorker() })).rejects.toThrow(/workers must be a positive integer/);
    await expect(InferenceWorkers.load(weights, 'embedding', { workers: 1, worker: { script: '/nonexistent/worker.ts' } })).rejects.toThrow(
      /the inference worker failed to start/,
    );
  });

  it('serves with two workers by default where there are two cores or more', () => {
    expect(defaultWorkerCount(1)).toBe(1);
    expect(defaultWorkerCount(2)).toBe(2);
    expect(defaultWorkerCount(64)).toBe(2);
  });

  it('divides the cores between workers unless threads are given', () => {
    expect(threadsPerWorker(1, undefined, 8)).toBeUndefined();
    expect(threadsPerWorker(2, undefined, 8)).toBe(4);
    expect(threadsPerWorker(3, undefined, 2)).toBe(1);
    expect(threadsPerWorker(2, 3, 8)).toBe(3);
  });

  it('gives several workers a solo session with onnxruntime\'s default threads, unless threads or soloThreads say otherwise', () => {
    expect(soloSessionThreads(2, undefined, undefined)).toBeUndefined(); // onnxruntime's default: one per physical core
    expect(soloSessionThreads(4, undefined, undefined)).toBeUndefined();
    expect(soloSessionThreads(1, undefined, undefined)).toBeNull(); // its one session has the default threads already
    expect(soloSessionThreads(2, 1, undefined)).toBeNull(); // the user chose the threads
    expect(soloSessionThreads(2, undefined, 0)).toBeNull();
    expect(soloSessionThreads(2, 1, 3)).toBe(3);
    expect(soloSessionThreads(1, undefined, 2)).toBe(2);
  });

  it('runs a batch that runs alone on the solo session and concurrent ones on the workers\' own, with the same outputs', async () => {
    const local = await OnnxModel.load(weights, 'embedding');
    open.push(local);
    const texts = ['hello world', 'a somewhat longer sentence to pad the other row'];
    const expected = await local.run(batchOf(texts));
    const pool = await InferenceWorkers.load(weights, 'embedding', { workers: 2, worker: sourceInferenceWorker() });
    open.push(pool);
    await expect(pool.soloLoaded).resolves.toBe(true);
    const alone = await pool.run(batchOf(texts));
    expect(pool.soloRuns).toBe(1);
    expect(alone.data).toEqual(expected.data);
    // three at once: the first finds nothing running and takes the solo session, the others the workers' own
    const together = await Promise.all([pool.run(batchOf(texts)), pool.run(batchOf(texts)), pool.run(batchOf(texts))]);
    expect(pool.soloRuns).toBe(2);
    for (const output of together) expect(output.data).toEqual(expected.data);
    await pool.run(batchOf(texts));
    expect(pool.soloRuns).toBe(3);
  });

  it('has no solo session with soloThreads 0, nor with one worker, and refuses a bad soloThreads with a ConfigError', async () => {
    for (const options of [{ workers: 2, soloThreads: 0 }, { workers: 1 }]) {
      const pool = await InferenceWorkers.load(weights, 'embedding', { ...options, worker: sourceInferenceWorker() });
      open.push(pool);
      await expect(pool.soloLoaded).resolves.toBe(false);
      await pool.run(batchOf(['hello']));
      expect(pool.soloRuns).toBe(0);
    }
    await expect(InferenceWorkers.load(weights, 'embedding', { workers: 2, soloThreads: 1.5, worker: sourceInferenceWorker() })).rejects.toThrow(
      /soloThreads must be an integer >= 0/,
    );
  });

  it('closes while the solo session loads', async () => {
    const pool = await InferenceWorkers.load(weights, 'embedding', { workers: 2, worker: sourceInferenceWorker() });
    await pool.joined; // the solo session's load starts now
    await pool.close(); // settles whether the solo session had loaded or not
    await expect(pool.soloLoaded).resolves.toBeTypeOf('boolean');
  });
});

describe('InferenceWorkers with postprocess: the transform and the pooling run in each worker', () => {
  const open: { close(): Promise<void> }[] = [];
  afterAll(async () => {
    await Promise.all(open.map((model) => model.close()));
  });
  const transformOf = (script: string, modelType: ModelType, options: Partial<LuaTransformOptions> = {}): PostprocessSettings['transform'] => ({
    script,
    options: { modelType, timeoutMs: 10_000, ...options },
  });
  async function poolWith(modelType: ModelType, postprocess: PostprocessSettings, workers = 1): Promise<InferenceWorkers> {
    const pool = await InferenceWorkers.load(weights, modelType, { workers, worker: sourceInferenceWorker(), postprocess });
    open.push(pool);
    return pool;
  }
  /** What the same steps give on this thread: the session here, the transform in a Lua state of this thread. */
  async function onThisThread(modelType: ModelType, postprocess: PostprocessSettings, texts: string[]): Promise<Tensor> {
    const local = await OnnxModel.load(weights, modelType);
    const steps = await createPostprocessSteps(modelType, postprocess);
    try {
      const batch = batchOf(texts);
      const mask = needsAttentionMask(steps) ? attentionMaskOf(batch) : null;
      return postprocessBatch(await local.run(batch), mask, steps);
    } finally {
      steps.transform?.close();
      await local.close();
    }
  }
  const texts = ['hello world', 'a somewhat longer sentence to pad the other row'];
  const seq = () => batchOf(texts).sequenceLength;

  it('answers the final output, as the same steps on this thread give it, bit for bit', async () => {
    const cases: [ModelType, PostprocessSettings, number[]][] = [
      ['embedding', { pooling: 'mean', transform: transformOf('function Postprocess(arr, mask)\n  return arr:lp_normalize(2, 3) * mask:sum()\nend', 'embedding') }, [2, seq(), 32]],
      // pooled after the transform, with the batch's attention mask (the first row is padded)
      ['sentence_embedding', { pooling: 'mean', transform: transformOf('return output * 2', 'sentence_embedding') }, [2, 32]],
      ['sentence_embedding', { pooling: 'max', transform: null }, [2, 32]],
      ['sentence_embedding', { pooling: 'cls', transform: transformOf('return output:mean_pool(mask)', 'sentence_embedding') }, [2, 32]],
    ];
    for (const [modelType, postprocess, dims] of cases) {
      const expected = await onThisThread(modelType, postprocess, texts);
      const pool = await poolWith(modelType, postprocess);
      const output = await pool.run(batchOf(texts));
      expect(output.dims).toEqual(dims);
      expect(output.dims).toEqual(expected.dims);
      expect(output.data).toEqual(expected.data);
    }
    // without postprocess, the raw output of onnxruntime, as before
    const raw = await InferenceWorkers.load(weights, 'sentence_embedding', { workers: 1, worker: sourceInferenceWorker() });
    open.push(raw);
    expect((await raw.run(batchOf(texts))).dims).toEqual([2, seq(), 32]);
  });

  it('fails the load with a ConfigError when the script does not compile or the Lua runtime is missing', async () => {
    const syntax = InferenceWorkers.load(weights, 'embedding', {
      workers: 1,
      worker: sourceInferenceWorker(),
      postprocess: { pooling: 'mean', transform: transformOf('function Postprocess(arr)\n  return arr:\nend', 'embedding') },
    });
    await expect(syntax).rejects.toThrow(ConfigError);
    await expect(syntax).rejects.toThrow(/^transform line 3: /);
    const missing = InferenceWorkers.load(weights, 'embedding', {
      workers: 1,
      worker: sourceInferenceWorker(),
      postprocess: { pooling: 'mean', transform: transformOf('return output', 'embedding', { wasmPath: '/nonexistent/glue.wasm' }) },
    });
    await expect(missing).rejects.toThrow(new ConfigError('transform: the Lua runtime (wasmoon .wasm file) was not found at /nonexistent/glue.wasm'));
  });

  it('fails a run whose transform fails with the InternalError naming the line, and the worker keeps serving', async () => {
    const script = 'function Postprocess(arr)\n  if arr:shape()[1] == 1 then error("one row is not enough") end\n  return arr\nend';
    const pool = await poolWith('embedding', { pooling: 'mean', transform: transformOf(script, 'embedding') });
    const error = await pool.run(batchOf(['alone'])).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InternalError);
    expect((error as Error).message).toBe('transform line 2: one row is not enough');
    expect((await pool.run(batchOf(texts))).dims[0]).toBe(2);
  });

  it('a transform looping in one worker holds that worker only: the other answers meanwhile', async () => {
    const script = 'function Postprocess(arr)\n  if arr:shape()[2] > 20 then while true do end end\n  return arr\nend';
    const pool = await poolWith('embedding', { pooling: 'mean', transform: transformOf(script, 'embedding', { timeoutMs: 1000 }) }, 2);
    await pool.joined;
    const settled: string[] = [];
    const looping = pool.run(batchOf([Array.from({ length: 30 }, () => 'word').join(' ')])).then(
      () => settled.push('looping answered'),
      (error: Error) => settled.push(`looping failed: ${error.constructor.name}: ${error.message}`),
    );
    const normal = pool.run(batchOf(texts)).then((output) => settled.push(`normal answered ${output.dims.join('x')}`));
    await Promise.all([looping, normal]);
    expect(settled).toEqual([`normal answered 2x${seq()}x32`, 'looping failed: InternalError: transform line 2: the transform ran longer than its limit of 1000 ms']);
    // the worker that looped serves again
    const outputs = await Promise.all([pool.run(batchOf(texts)), pool.run(batchOf(texts))]);
    expect(outputs.map((output) => output.dims[0])).toEqual([2, 2]);
  });
});

describe('a pipeline with inference workers', () => {
  it('answers as the in-process pipeline does, runs one batch per worker at once, and drains on close', async () => {
    const pkg = readModelPackage(parseBuildConfig(`encoder:\n  name: m\n  path: ${dir}\n  model_type: sentence_embedding\n`, { baseDir: dir }));
    const local = await PredictPipeline.load(pkg);
    const pooled = await PredictPipeline.load(pkg, { workers: 2, inferenceWorker: sourceInferenceWorker() });
    expect(pooled.batchingSettings.maxRunsInFlight).toBe(2);
    const bodies = Array.from({ length: 12 }, (_, i) => ({ inputs: [`text number ${i}`, 'and another one'] }));
    const expected = await Promise.all(bodies.map((body) => local.predict(body)));
    const answered = Promise.all(bodies.map((body) => pooled.predict(body)));
    await pooled.close(); // accepted requests are still answered
    expect(await answered).toEqual(expected);
    await expect(pooled.predict(bodies[0])).rejects.toThrow(/shutting down/);
    await local.close();
  });

  it('needs to know how to start a worker', async () => {
    const pkg = readModelPackage(parseBuildConfig(`encoder:\n  name: m\n  path: ${dir}\n  model_type: embedding\n`, { baseDir: dir }));
    await expect(PredictPipeline.load(pkg, { workers: 1 })).rejects.toThrow(/workers > 0 needs inferenceWorker/);
  });
});
