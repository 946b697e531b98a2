/**
 * How bench:serve drives a system and counts what it answered, whatever the model (texts or images): requests sent by
 * `concurrency` callers, systems taking turns at concurrency 1, raw onnxruntime on the batches the server's
 * BatchScheduler would form, the HTTP client, and building and serving a model executable from the host's runtime.
 */
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { hostTarget } from '../src/builder/targets.ts';
import { BatchScheduler, type BatchSchedulerOptions } from '../src/encoder/batch-scheduler.ts';
import { serveModel, type ServedModel } from '../test/helpers/served-model.ts';
import { median } from './measure.ts';
import { repoRoot } from './workload.ts';

/** The host's base runtime (npm run build:runtime -- --target host): it builds and runs the model executables. */
export const baseRuntime = path.join(repoRoot, 'dist', 'runtime', hostTarget(), 'encoder');

export interface Result {
  /** Inputs (sequences, images) answered per second. */
  itemsPerSecond: number;
  p50: number;
  p99: number;
  /** Every request's latency in ms, sorted. */
  latencies: number[];
}

export function resultOf(items: number, seconds: number, latencies: number[]): Result {
  const sorted = [...latencies].sort((a, b) => a - b);
  return { itemsPerSecond: items / seconds, p50: median(sorted), p99: p99(sorted), latencies: sorted };
}

export function p99(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))];
}

/** Rounds of one measurement: the median round's inputs/s, the latency percentiles of all rounds' requests. */
export function mergeRounds(rounds: readonly Result[]): Result {
  const latencies = rounds.flatMap((round) => round.latencies).sort((a, b) => a - b);
  return { ...resultOf(1, 1, latencies), itemsPerSecond: median(rounds.map((round) => round.itemsPerSecond)) };
}

/** `inputs/s / p50 ms / p99 ms`, as the tables print a result. */
export const cell = (r: Result): string => `${Math.round(r.itemsPerSecond)} / ${r.p50.toFixed(r.p50 < 20 ? 1 : 0)} / ${r.p99.toFixed(0)}`;

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** One way of answering a request at concurrency 1: its latency in ms (for raw onnxruntime, its run alone). */
export type Answer<T> = (request: T) => Promise<number>;

export const timed =
  <T>(send: (request: T) => Promise<unknown>): Answer<T> =>
  async (request) => {
    const started = performance.now();
    await send(request);
    return performance.now() - started;
  };

/**
 * onnxruntime's intra-op threads spin for ~25 ms after their last work (1 << 20 pause instructions): long enough for a
 * system's threads to take a core from the next system's first requests. Each turn waits this long, then sends
 * TURN_WARM_UP requests that are not counted, which start its own threads as a system serving back to back has them.
 */
export const TURN_PAUSE_MS = 60;
const TURN_WARM_UP = 3;

/**
 * Concurrency 1, side by side: the systems take turns, `block` requests each, until each has answered `count`; every
 * system answers the same requests (`requestOf(n)`, of `inputs` inputs each), after `warmUp` that are not counted.
 * Inputs/s is the inputs answered over the time spent answering them.
 */
export async function takeTurnsAtOne<T>(systems: readonly Answer<T>[], count: number, requestOf: (n: number) => T, inputs: number, block: number, warmUp = TURN_WARM_UP): Promise<Result[]> {
  const latencies = systems.map((): number[] => []);
  for (let first = 0; first < count; first += block) {
    for (const [s, answer] of systems.entries()) {
      await sleep(TURN_PAUSE_MS);
      for (let k = 0; k < warmUp; k++) await answer(requestOf(first));
      for (let n = first; n < Math.min(count, first + block); n++) latencies[s].push(await answer(requestOf(n)));
    }
  }
  return latencies.map((ms) => resultOf(count * inputs, ms.reduce((sum, value) => sum + value, 0) / 1000, ms));
}

/** Sends requests 0 … count−1 (`requestOf(n)`, of `inputs` inputs each) through `send` with `concurrency` callers. */
export async function driveRequests<T>(count: number, concurrency: number, requestOf: (n: number) => T, inputs: number, send: (request: T) => Promise<unknown>): Promise<Result> {
  const latencies: number[] = [];
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let n = next++; n < count; n = next++) {
        const request = requestOf(n);
        const t = performance.now();
        await send(request);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return resultOf(count * inputs, (performance.now() - start) / 1000, latencies);
}

/**
 * Raw onnxruntime under load: the requests that would be in flight together (waves of `concurrency`, their rows
 * prepared beforehand by `rowsOf(n)`) go through a BatchScheduler with `options` (the server's batching), whose
 * batches `run` executes, returning its own time in ms; only that time counts. The same batches the server would run
 * when those requests arrive together, without HTTP, JSON, tokenization, decoding or shaping.
 */
export async function rawWaves<R extends { readonly ids: { readonly length: number } }>(
  count: number,
  concurrency: number,
  rowsOf: (n: number) => R[],
  run: (rows: readonly R[]) => Promise<number>,
  options?: BatchSchedulerOptions,
): Promise<Result> {
  const latencies: number[] = [];
  let runMs = 0;
  let inputs = 0;
  const scheduler = new BatchScheduler<R, number>(async (rows) => {
    runMs += await run(rows);
    return runMs; // the onnxruntime time spent so far in this wave when this batch finished
  }, options);
  for (let first = 0; first < count; first += concurrency) {
    const requests = Array.from({ length: Math.min(concurrency, count - first) }, (_, r) => rowsOf(first + r));
    const waveStart = runMs;
    const finished = await Promise.all(requests.map((rows) => scheduler.submit(rows)));
    for (const rows of finished) latencies.push(Math.max(...rows.map((row) => row.output)) - waveStart);
    inputs += requests.reduce((sum, rows) => sum + rows.length, 0);
  }
  await scheduler.close();
  return resultOf(inputs, runMs / 1000, latencies);
}

/**
 * The HTTP client of the server's rows: node:http with a keep-alive agent, one connection per concurrent caller.
 * fetch (undici) costs the client ~2 ms more per request here, CPU that the server on the same two cores then lacks.
 */
const keepAlive = new http.Agent({ keepAlive: true });

/** POSTs `body` and resolves once the whole 200 answer is read; any other status rejects with the answer's text. */
export function post(baseUrl: string, body: string | Uint8Array, route = '/predict', contentType = 'application/json'): Promise<void> {
  const url = new URL(route, baseUrl);
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      { method: 'POST', agent: keepAlive, headers: { 'content-type': contentType, 'content-length': Buffer.byteLength(body) } },
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

export function get(baseUrl: string, route: string): Promise<void> {
  return new Promise((resolve, reject) => {
    http.get(new URL(route, baseUrl), { agent: keepAlive }, (response) => {
      response.resume();
      response.on('end', () => (response.statusCode === 200 ? resolve() : reject(new Error(`${route}: ${response.statusCode}`))));
    }).on('error', reject);
  });
}

/**
 * Builds the model that `configYaml` (an `encoder:` file) describes into `<work>/<name>` with the host's runtime,
 * once, and serves it (HTTP and gRPC on loopback) with `args`.
 */
export async function serveBuilt(work: string, name: string, configYaml: string, args: string[] = []): Promise<ServedModel> {
  const executable = path.join(work, name);
  if (!existsSync(executable)) {
    const config = path.join(work, `${name}.yaml`);
    writeFileSync(config, configYaml);
    const built = spawnSync(baseRuntime, ['build', '-f', config, '--base-binary-path', baseRuntime, '-o', executable], { encoding: 'utf8' });
    if (built.status !== 0) throw new Error(built.stderr);
  }
  return serveModel(executable, { cacheDir: path.join(work, 'cache'), args });
}

/** Resident memory of a process in MiB (Linux). */
export function residentMiB(pid: number | undefined): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

/**
 * A @huggingface/transformers pipeline of `task` on the model in `modelDir`, as transformers.js reads a local model
 * (<localModelPath>/<name>/`files` and <name>/onnx/model.onnx, symlinked under `work`), with remote models off: nothing
 * is downloaded. fp32 on the CPU, which is onnxruntime-node, the same version as ours.
 */
export async function localTransformersPipeline(work: string, task: 'feature-extraction' | 'image-classification', modelDir: string, files: readonly string[]): Promise<unknown> {
  const name = path.basename(modelDir);
  const local = path.join(work, 'transformers');
  mkdirSync(path.join(local, name, 'onnx'), { recursive: true });
  for (const file of files) symlinkSync(path.join(modelDir, file), path.join(local, name, file));
  symlinkSync(path.join(modelDir, 'model.onnx'), path.join(local, name, 'onnx', 'model.onnx'));
  const { pipeline, env } = await import('@huggingface/transformers');
  env.allowRemoteModels = false;
  env.localModelPath = `${local}/`;
  return pipeline(task, name, { dtype: 'fp32', device: 'cpu' });
}
