/**
 * npm run bench:serve — the server against what a Node user would otherwise run, on the MiniLM-shaped model, for
 * requests of 1 and 8 inputs of 8–64 words at concurrency 1, 8 and 32:
 *   (a) raw onnxruntime session.run in one process on the same batches, pre-tokenized: the limit;
 *   (b) @huggingface/transformers' feature-extraction pipeline in one process, loaded from a local directory;
 *   (c) this server's model executable over HTTP;  (d) the same over gRPC.
 * Sequences per second, p50 and p99 request latency, and the ratios c/a and c/b.
 * Needs the host's base runtime (npm run build:runtime -- --target host).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { hostTarget } from '../src/builder/targets.ts';
import { parseBuildConfig } from '../src/encoder/config.ts';
import { readModelPackage } from '../src/encoder/model-package.ts';
import { EncoderTokenizer } from '../src/encoder/tokenizer/index.ts';
import { grpcClient, serveModel } from '../test/helpers/served-model.ts';
import { median, printTable } from './measure.ts';
import { benchModelDir as modelDir, ensureBenchModel, repoRoot as root, sentence } from './workload.ts';

const base = path.join(root, 'dist', 'runtime', hostTarget(), 'encoder');
const CONCURRENCY = [1, 8, 32];
const INPUTS_PER_REQUEST = [1, 8];
/** Requests per measurement: enough sequences for a stable median on a shared 2-core machine, bounded in time. */
const requestCount = (concurrency: number, inputs: number) => Math.max(24, Math.min(320, Math.ceil(256 / inputs)), concurrency * 3);

/** A text of 8–64 words. */
const textOf = (seed: number) => sentence(8 + (seed % 57), seed);

interface Result {
  sequencesPerSecond: number;
  p50: number;
  p99: number;
}

/** Runs `count` requests through `send` with `concurrency` callers; latency per request, throughput overall. */
async function drive(count: number, concurrency: number, inputs: number, send: (texts: string[]) => Promise<unknown>): Promise<Result> {
  const latencies: number[] = [];
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let n = next++; n < count; n = next++) {
        const texts = Array.from({ length: inputs }, (_, i) => textOf(n * inputs + i + 1));
        const t = performance.now();
        await send(texts);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    sequencesPerSecond: (count * inputs) / seconds,
    p50: median(latencies),
    p99: latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * 0.99))],
  };
}

/** (a): the requests that would be in flight together are one pre-tokenized session.run. */
async function rawOnnxruntime(tokenizer: EncoderTokenizer, session: ort.InferenceSession, concurrency: number, inputs: number): Promise<Result> {
  const count = requestCount(concurrency, inputs);
  const latencies: number[] = [];
  let runMs = 0;
  for (let first = 0; first < count; first += concurrency) {
    const requests = Math.min(concurrency, count - first);
    const texts = Array.from({ length: requests * inputs }, (_, i) => textOf(first * inputs + i + 1));
    const batch = tokenizer.pad(tokenizer.encodeBatch(texts));
    const dims = [batch.batchSize, batch.sequenceLength];
    const t = performance.now();
    await session.run({
      input_ids: new ort.Tensor('int64', batch.inputIds, dims),
      attention_mask: new ort.Tensor('int64', batch.attentionMask, dims),
      token_type_ids: new ort.Tensor('int64', batch.tokenTypeIds, dims),
    });
    const elapsed = performance.now() - t;
    runMs += elapsed;
    for (let r = 0; r < requests; r++) latencies.push(elapsed);
  }
  latencies.sort((a, b) => a - b);
  // only onnxruntime's time counts: tokenization and everything else are what the limit leaves out
  return { sequencesPerSecond: (count * inputs) / (runMs / 1000), p50: median(latencies), p99: latencies[Math.floor(latencies.length * 0.99)] };
}

async function main(): Promise<void> {
  if (!existsSync(base)) throw new Error(`${base} is absent: run npm run build:runtime -- --target host`);
  await ensureBenchModel();
  const work = mkdtempSync(path.join(os.tmpdir(), 'bench-serve-'));
  try {
    // (c, d): the model executable
    const config = path.join(work, 'minilm.yaml');
    writeFileSync(config, `encoder:\n  name: minilm\n  path: ${modelDir}\n  model_type: embedding\n`);
    const executable = path.join(work, 'minilm');
    const built = spawnSync(base, ['build', '-f', config, '--base-binary-path', base, '-o', executable], { encoding: 'utf8' });
    if (built.status !== 0) throw new Error(built.stderr);
    const served = await serveModel(executable, { cacheDir: path.join(work, 'cache') });
    const grpc = grpcClient(served.grpcAddress, 'embedding');

    // (a): one session with onnxruntime's defaults, our tokenizer
    const pkg = readModelPackage(parseBuildConfig(`encoder:\n  name: m\n  path: ${modelDir}\n  model_type: embedding\n`, { baseDir: root }));
    const tokenizer = EncoderTokenizer.fromJson(pkg.tokenizerJson, pkg.tokenizerConfig);
    const session = await ort.InferenceSession.create(pkg.weights, { graphOptimizationLevel: 'all' });

    // (b): transformers.js reads <dir>/<model>/onnx/model.onnx
    const local = path.join(work, 'transformers');
    mkdirSync(path.join(local, 'minilm', 'onnx'), { recursive: true });
    for (const file of ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'vocab.txt']) {
      symlinkSync(path.join(modelDir, file), path.join(local, 'minilm', file));
    }
    symlinkSync(path.join(modelDir, 'model.onnx'), path.join(local, 'minilm', 'onnx', 'model.onnx'));
    const { pipeline, env } = await import('@huggingface/transformers');
    env.allowRemoteModels = false;
    env.localModelPath = `${local}/`;
    const extractor = await pipeline('feature-extraction', 'minilm', { dtype: 'fp32', device: 'cpu' });

    const rows: (string | number)[][] = [];
    for (const inputs of INPUTS_PER_REQUEST) {
      for (const concurrency of CONCURRENCY) {
        const count = requestCount(concurrency, inputs);
        const a = await rawOnnxruntime(tokenizer, session, concurrency, inputs);
        const b = await drive(count, concurrency, inputs, (texts) => extractor(texts, { pooling: 'none', normalize: false }));
        const c = await drive(count, concurrency, inputs, async (texts) => {
          const response = await fetch(`${served.httpUrl}/predict`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ inputs: texts, normalize: true }),
          });
          if (response.status !== 200) throw new Error(await response.text());
          await response.arrayBuffer();
        });
        const d = await drive(count, concurrency, inputs, (texts) => grpc.predict({ inputs: texts, normalize: true }));
        const cell = (r: Result) => `${Math.round(r.sequencesPerSecond)} / ${r.p50.toFixed(0)} / ${r.p99.toFixed(0)}`;
        rows.push([
          inputs,
          concurrency,
          cell(a),
          cell(b),
          cell(c),
          cell(d),
          (c.sequencesPerSecond / a.sequencesPerSecond).toFixed(2),
          (c.sequencesPerSecond / b.sequencesPerSecond).toFixed(2),
          (c.p50 / a.p50).toFixed(2),
        ]);
      }
    }
    printTable(
      'Serving the MiniLM-shaped model: sequences/s / p50 ms / p99 ms (inputs of 8–64 words)',
      ['inputs per request', 'concurrency', '(a) raw onnxruntime, batched', '(b) transformers.js pipeline', '(c) server, HTTP', '(d) server, gRPC', 'c/a throughput', 'c/b throughput', 'c/a p50'],
      rows,
    );
    grpc.close();
    await served.stop();
    await session.release();
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
