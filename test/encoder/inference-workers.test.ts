import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sourceInferenceWorker } from '../../src/cli/installed-files.ts';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { ConfigError, InternalError } from '../../src/encoder/errors.ts';
import { defaultWorkerCount, InferenceWorkers, threadsPerWorker } from '../../src/encoder/inference-workers.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { OnnxModel } from '../../src/encoder/onnx-model.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import { EncoderTokenizer } from '../../src/encoder/tokenizer/index.ts';
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
