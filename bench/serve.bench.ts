/**
 * npm run bench:serve [-- --only sentence|token] — the server against what a Node user would otherwise run, on the
 * MiniLM-shaped model, for requests of 1 and 8 inputs of 8–64 words at concurrency 1, 8 and 32:
 *   (a) raw onnxruntime session.run in one process on the same batches (the server's BatchScheduler), pre-tokenized
 *       (plus mean pooling and normalisation for sentence embeddings): the limit;
 *   (b) @huggingface/transformers' feature-extraction pipeline in one process, loaded from a local directory;
 *   (c) this server's model executable over HTTP (/predict per token; /v1/embeddings for sentence embeddings);
 *   (d) the same over gRPC.
 * Sequences per second, p50 and p99 request latency, the ratios c/a and c/b, and the p99 of /health probes taken
 * while (c) and (d) run at concurrency 32.
 * Needs the host's base runtime (npm run build:runtime -- --target host).
 */
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { hostTarget } from '../src/builder/targets.ts';
import { parseBuildConfig } from '../src/encoder/config.ts';
import { readModelPackage } from '../src/encoder/model-package.ts';
import { BatchScheduler } from '../src/encoder/batch-scheduler.ts';
import { EncoderTokenizer, type Encoding } from '../src/encoder/tokenizer/index.ts';
import { normalizeInPlace, poolTokens } from '../src/encoder/pooling.ts';
import { Tensor } from '../src/encoder/tensor.ts';
import { grpcClient, serveModel, type ServedModel } from '../test/helpers/served-model.ts';
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

type Session = ort.InferenceSession;

/**
 * The HTTP client of (c): node:http with a keep-alive agent, one connection per concurrent caller. fetch (undici)
 * costs the client ~2 ms more per request here, CPU that the server on the same two cores then lacks.
 */
const keepAlive = new http.Agent({ keepAlive: true });
function postPredict(baseUrl: string, body: string, route = '/predict'): Promise<void> {
  const url = new URL(route, baseUrl);
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      { method: 'POST', agent: keepAlive, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => (response.statusCode === 200 ? resolve() : reject(new Error(Buffer.concat(chunks).toString()))));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

/**
 * One pre-tokenized session.run of padded rows, plus (for sentence embeddings) mean pooling and normalisation of its
 * output; returns the time of those alone in ms.
 */
async function timedRun(tokenizer: EncoderTokenizer, session: Session, rows: readonly Encoding[], pooled = false): Promise<number> {
  const batch = tokenizer.pad(rows as Encoding[]);
  const dims = [batch.batchSize, batch.sequenceLength];
  const feeds = {
    input_ids: new ort.Tensor('int64', batch.inputIds, dims),
    attention_mask: new ort.Tensor('int64', batch.attentionMask, dims),
    token_type_ids: new ort.Tensor('int64', batch.tokenTypeIds, dims),
  };
  const mask = pooled ? new Tensor(Float32Array.from(batch.attentionMask, Number), dims) : null;
  const t = performance.now();
  const outputs = await session.run(feeds);
  if (mask) {
    const hidden = outputs.last_hidden_state;
    const vectors = poolTokens(new Tensor(hidden.data as Float32Array, hidden.dims.map(Number)), mask, 'mean');
    for (let row = 0; row < dims[0]; row++) normalizeInPlace(vectors.data.subarray(row * vectors.dims[1], (row + 1) * vectors.dims[1]));
  }
  return performance.now() - t;
}

/** /health probes every 10 ms while `work` runs; their latencies in ms. */
async function probeHealth<T>(baseUrl: string, work: Promise<T>): Promise<{ result: T; probes: number[] }> {
  let done = false;
  const finished = work.finally(() => {
    done = true;
  });
  const probes: number[] = [];
  while (!done) {
    const t = performance.now();
    await get(baseUrl, '/health');
    probes.push(performance.now() - t);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return { result: await finished, probes };
}

function get(baseUrl: string, route: string): Promise<void> {
  return new Promise((resolve, reject) => {
    http.get(new URL(route, baseUrl), { agent: keepAlive }, (response) => {
      response.resume();
      response.on('end', () => (response.statusCode === 200 ? resolve() : reject(new Error(`${route}: ${response.statusCode}`))));
    }).on('error', reject);
  });
}

function p99(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))];
}

/**
 * (a): the requests that would be in flight together, pre-tokenized, go through the server's own BatchScheduler
 * (default settings), whose batches run as bare session.run calls; only onnxruntime's time counts. The same
 * batches the server would run when those requests arrive together, without HTTP, JSON, tokenization or shaping.
 */
async function rawOnnxruntime(tokenizer: EncoderTokenizer, session: Session, concurrency: number, inputs: number, pooled = false): Promise<Result> {
  const count = requestCount(concurrency, inputs);
  const latencies: number[] = [];
  let runMs = 0;
  const scheduler = new BatchScheduler<Encoding, number>(async (rows) => {
    runMs += await timedRun(tokenizer, session, rows, pooled);
    return runMs; // the onnxruntime time spent so far in this wave when this batch finished
  });
  for (let first = 0; first < count; first += concurrency) {
    const requests = Math.min(concurrency, count - first);
    const waveStart = runMs;
    const finished = await Promise.all(
      Array.from({ length: requests }, (_, r) => {
        const texts = Array.from({ length: inputs }, (_, i) => textOf((first + r) * inputs + i + 1));
        return scheduler.submit(tokenizer.encodeBatch(texts));
      }),
    );
    for (const rows of finished) latencies.push(Math.max(...rows.map((row) => row.output)) - waveStart);
  }
  await scheduler.close();
  latencies.sort((a, b) => a - b);
  return { sequencesPerSecond: (count * inputs) / (runMs / 1000), p50: median(latencies), p99: latencies[Math.floor(latencies.length * 0.99)] };
}

/**
 * What batching can gain at most on this machine for this workload: the same texts run one per session.run (what
 * (b) does), and length-sorted into batches of 8, 16 and 32 rows (no padding to speak of). If the best ratio is
 * below 1.5, no scheduler can make (c) 1.5 times (b) here.
 */
async function batchingCeiling(tokenizer: EncoderTokenizer, session: Session): Promise<(string | number)[][]> {
  const encodings = tokenizer.encodeBatch(Array.from({ length: 256 }, (_, i) => textOf(i + 1)));
  const sorted = [...encodings].sort((x, y) => x.ids.length - y.ids.length);
  const rows: (string | number)[][] = [];
  let single = 0;
  for (const rowsPerRun of [1, 8, 16, 32]) {
    const samples: number[] = [];
    for (let repeat = 0; repeat < 3; repeat++) {
      let ms = 0;
      for (let i = 0; i < sorted.length; i += rowsPerRun) ms += await timedRun(tokenizer, session, sorted.slice(i, i + rowsPerRun));
      samples.push((sorted.length / ms) * 1000);
    }
    const perSecond = median(samples);
    if (rowsPerRun === 1) single = perSecond;
    rows.push([rowsPerRun, Math.round(perSecond), (perSecond / single).toFixed(2)]);
  }
  return rows;
}

/** Builds the MiniLM-shaped model as `modelType` and serves it (HTTP and gRPC on loopback). */
async function serveBenchModel(work: string, modelType: 'embedding' | 'sentence_embedding', args: string[] = [], quantize: 'none' | 'int8' = 'none'): Promise<ServedModel> {
  const config = path.join(work, `${modelType}-${quantize}.yaml`);
  writeFileSync(config, `encoder:\n  name: minilm\n  path: ${modelDir}\n  model_type: ${modelType}\n  quantize: ${quantize}\n`);
  const executable = path.join(work, `minilm-${modelType}-${quantize}`);
  const built = spawnSync(base, ['build', '-f', config, '--base-binary-path', base, '-o', executable], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(built.stderr);
  return serveModel(executable, { cacheDir: path.join(work, 'cache'), args });
}

const cell = (r: Result) => `${Math.round(r.sequencesPerSecond)} / ${r.p50.toFixed(0)} / ${r.p99.toFixed(0)}`;

/**
 * Sentence embeddings (issue 12): (a) raw onnxruntime + mean pooling + normalisation on the server's batches, (b)
 * transformers.js feature-extraction with {pooling: 'mean', normalize: true}, (c) /v1/embeddings, (d) gRPC
 * encoder.SentenceEmbedding. /health is probed while (c) and (d) run at concurrency 32.
 */
async function sentenceRows(work: string, tokenizer: EncoderTokenizer, session: Session, extractor: FeatureExtractor): Promise<void> {
  const served = await serveBenchModel(work, 'sentence_embedding');
  const grpc = grpcClient(served.grpcAddress, 'sentence_embedding');
  const rows: (string | number)[][] = [];
  for (const [inputs, concurrency] of [[1, 1], [8, 1], [8, 8], [8, 32]]) {
    const count = requestCount(concurrency, inputs);
    const a = await rawOnnxruntime(tokenizer, session, concurrency, inputs, true);
    const b = await drive(count, concurrency, inputs, (texts) => extractor(texts, { pooling: 'mean', normalize: true }));
    const send = (texts: string[]) => postPredict(served.httpUrl, JSON.stringify({ input: texts, model: 'minilm', encoding_format: 'float' }), '/v1/embeddings');
    const c = await probeHealth(served.httpUrl, drive(count, concurrency, inputs, send));
    const d = await probeHealth(served.httpUrl, drive(count, concurrency, inputs, (texts) => grpc.predict({ inputs: texts })));
    rows.push([
      inputs,
      concurrency,
      cell(a),
      cell(b),
      cell(c.result),
      cell(d.result),
      (c.result.sequencesPerSecond / a.sequencesPerSecond).toFixed(2),
      (c.result.sequencesPerSecond / b.sequencesPerSecond).toFixed(2),
      (c.result.p50 / a.p50).toFixed(2),
      concurrency === 32 ? `${p99([...c.probes, ...d.probes]).toFixed(1)} (${c.probes.length + d.probes.length})` : '',
    ]);
  }
  printTable(
    'Sentence embeddings, MiniLM-shaped model: sequences/s / p50 ms / p99 ms (inputs of 8–64 words; aims at 8 inputs: c ≥ 0.9·a and c ≥ 1.2·b at concurrency 32, c p50 ≤ 1.25·a at concurrency 1)',
    ['inputs per request', 'concurrency', '(a) raw onnxruntime + pooling', '(b) transformers.js, mean + normalize', '(c) /v1/embeddings', '(d) gRPC SentenceEmbedding', 'c/a throughput', 'c/b throughput', 'c/a p50', '/health p99 ms (probes)'],
    rows,
  );
  grpc.close();
  await served.stop();
  await workerRows(work);
  await int8Rows(work);
}

/**
 * quantize: int8 against fp32 (issue 13): the same MiniLM-shaped model built both ways, /v1/embeddings, 8 inputs per
 * request, each executable measured in turn (aims: int8 ≥ 2.0× fp32 throughput at concurrency 32, p50 ≤ 0.6× at 1).
 */
async function int8Rows(work: string): Promise<void> {
  const results: Record<string, Result> = {};
  for (const quantize of ['none', 'int8'] as const) {
    const served = await serveBenchModel(work, 'sentence_embedding', [], quantize);
    const send = (texts: string[]) => postPredict(served.httpUrl, JSON.stringify({ input: texts, encoding_format: 'float' }), '/v1/embeddings');
    for (const concurrency of [1, 32]) results[`${quantize} ${concurrency}`] = await drive(requestCount(concurrency, 8), concurrency, 8, send);
    await served.stop();
  }
  const rows = [1, 32].map((concurrency) => {
    const [fp32, int8] = [results[`none ${concurrency}`], results[`int8 ${concurrency}`]];
    return [concurrency, cell(fp32), cell(int8), (int8.sequencesPerSecond / fp32.sequencesPerSecond).toFixed(2), (int8.p50 / fp32.p50).toFixed(2)];
  });
  printTable(
    'quantize: int8 against fp32, /v1/embeddings, 8 inputs per request: sequences/s / p50 ms / p99 ms',
    ['concurrency', 'fp32', 'int8', 'int8/fp32 throughput', 'int8/fp32 p50'],
    rows,
  );
}

/**
 * --workers: one session per worker thread, the cores divided between them (threadsPerWorker), against one worker
 * with onnxruntime's default threads; /v1/embeddings, 8 inputs per request.
 */
async function workerRows(work: string): Promise<void> {
  const rows: (string | number)[][] = [];
  for (const args of [['--workers', '1'], ['--workers', '2'], ['--workers', '1', '--threads', '1']]) {
    const served = await serveBenchModel(work, 'sentence_embedding', args);
    const send = (texts: string[]) => postPredict(served.httpUrl, JSON.stringify({ input: texts, model: 'minilm', encoding_format: 'float' }), '/v1/embeddings');
    for (const concurrency of [1, 32]) rows.push([args.join(' '), concurrency, cell(await drive(requestCount(concurrency, 8), concurrency, 8, send))]);
    await served.stop();
  }
  printTable('Inference workers: /v1/embeddings, 8 inputs per request, sequences/s / p50 ms / p99 ms', ['serve options', 'concurrency', 'result'], rows);
}

type FeatureExtractor = (texts: string[], options: { pooling: 'none' | 'mean'; normalize: boolean }) => Promise<unknown>;

async function main(): Promise<void> {
  if (!existsSync(base)) throw new Error(`${base} is absent: run npm run build:runtime -- --target host`);
  const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : 'all';
  await ensureBenchModel();
  const work = mkdtempSync(path.join(os.tmpdir(), 'bench-serve-'));
  try {
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
    const extractor = (await pipeline('feature-extraction', 'minilm', { dtype: 'fp32', device: 'cpu' })) as unknown as FeatureExtractor;

    if (only === 'all' || only === 'sentence') await sentenceRows(work, tokenizer, session, extractor);
    if (only === 'all' || only === 'token') await tokenRows(work, tokenizer, session, extractor);
    await session.release();
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Per-token embeddings on spec 2's /predict, and the ceiling of batching. */
async function tokenRows(work: string, tokenizer: EncoderTokenizer, session: Session, extractor: FeatureExtractor): Promise<void> {
  const served = await serveBenchModel(work, 'embedding');
  const grpc = grpcClient(served.grpcAddress, 'embedding');
  const rows: (string | number)[][] = [];
  for (const inputs of INPUTS_PER_REQUEST) {
    for (const concurrency of CONCURRENCY) {
      const count = requestCount(concurrency, inputs);
      const a = await rawOnnxruntime(tokenizer, session, concurrency, inputs);
      const b = await drive(count, concurrency, inputs, (texts) => extractor(texts, { pooling: 'none', normalize: false }));
      const c = await drive(count, concurrency, inputs, (texts) => postPredict(served.httpUrl, JSON.stringify({ inputs: texts, normalize: true })));
      const d = await drive(count, concurrency, inputs, (texts) => grpc.predict({ inputs: texts, normalize: true }));
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
  printTable(
    'The most batching can give here: the same 256 texts, raw onnxruntime, length-sorted rows per run',
    ['rows per run', 'sequences/s', 'against one row per run'],
    await batchingCeiling(tokenizer, session),
  );
  grpc.close();
  await served.stop();
}

await main();
