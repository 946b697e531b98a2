/**
 * node bench/batching.bench.ts — batching across requests (design decision 6) on the model shaped like
 * all-MiniLM-L6-v2, to choose the batch scheduler's defaults and the onnxruntime session options by numbers.
 *
 * Prints:
 * 1. onnxruntime run time by batch shape with the chosen session options, and the fit `run = overhead + per-token
 *    × rows × longest` that sets the scheduler's token budget and its run overhead in tokens;
 * 2. the predict pipeline under concurrent load (closed loop: `c` clients, each sending its next request as soon as
 *    the previous one is answered, one event-loop turn later) for several (maxBatchTokens, maxWaitMs) settings,
 *    FIFO against grouping by length, one against two runs in flight, and a baseline without batching across
 *    requests; plus an open-loop row (requests arriving at random at a fixed rate);
 * 3. the session-option variants under the chosen scheduler settings.
 * Requests hold 1 or 8 inputs of 8–64 words. Throughput is sequences per second; latency is per request.
 * Takes about 2.5 minutes. The model is generated once into .cache/bench/minilm.
 */
import { availableParallelism, loadavg } from 'node:os';
import path from 'node:path';
import type * as ort from 'onnxruntime-node';
import { DEFAULT_BATCH_SETTINGS } from '../src/encoder/batch-scheduler.ts';
import { parseBuildConfig } from '../src/encoder/config.ts';
import { readModelPackage, type ModelPackage } from '../src/encoder/model-package.ts';
import { OnnxModel } from '../src/encoder/onnx-model.ts';
import { PredictPipeline } from '../src/encoder/predict-pipeline.ts';
import type { PipelineOptions } from '../src/encoder/pipeline-options.ts';
import { benchModelDir as modelDir, ensureBenchModel, repoRoot as root, sentence } from './workload.ts';
import { median, ms, printTable } from './measure.ts';

/** `count` request bodies of `inputs` texts of 8–64 words each. */
function requestBodies(inputs: number, count: number, seed: number): { inputs: string[]; normalize: boolean }[] {
  let state = seed;
  const next = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0);
  return Array.from({ length: count }, () => ({
    inputs: Array.from({ length: inputs }, () => sentence(8 + (next() % 57), next())),
    normalize: true,
  }));
}

const yieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

type Body = { inputs: string[]; normalize: boolean };
type Predict = (body: Body) => Promise<unknown>;

/**
 * One measurement: requests are sent during a window; every one of them counts, answered in the window or after
 * it. Throughput is their sequences over the time from the first send to the last answer (the pipeline is busy
 * all that time), so a window shorter than a request's latency does not distort it.
 */
interface Window {
  sequences: number;
  ms: number;
  latencies: number[];
  /** CPU time of the whole process (all threads) during the measurement. */
  cpuMs: number;
}

/** Runs `measure` and adds the process's CPU time (user + system, every thread) it took. */
async function withCpu(measure: () => Promise<Omit<Window, 'cpuMs'>>): Promise<Window> {
  const start = process.cpuUsage();
  const window = await measure();
  const used = process.cpuUsage(start);
  return { ...window, cpuMs: (used.user + used.system) / 1000 };
}

/** `concurrency` clients in a closed loop, sending until `windowMs` has passed. */
async function closedLoop(predict: Predict, bodies: readonly Body[], concurrency: number, windowMs: number): Promise<Omit<Window, 'cpuMs'>> {
  const latencies: number[] = [];
  let sequences = 0;
  let taken = Math.floor(Math.random() * bodies.length);
  const start = performance.now();
  const deadline = start + windowMs;
  const client = async () => {
    while (performance.now() < deadline) {
      const body = bodies[taken++ % bodies.length];
      const sent = performance.now();
      await predict(body);
      latencies.push(performance.now() - sent);
      sequences += body.inputs.length;
      await yieldTurn();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
  return { sequences, ms: performance.now() - start, latencies };
}

/** Requests of one input arriving at random (Poisson) at `rate` per second for `windowMs`; all of them count. */
async function openLoop(predict: Predict, bodies: readonly Body[], rate: number, windowMs: number): Promise<Omit<Window, 'cpuMs'>> {
  const latencies: number[] = [];
  const pending: Promise<void>[] = [];
  let state = Math.floor(Math.random() * 1e9);
  const uniform = () => ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) + 1) / 4294967297;
  const start = performance.now();
  let due = start;
  let k = state;
  while (due < start + windowMs) {
    due += (-Math.log(uniform()) / rate) * 1000;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    const sent = performance.now();
    pending.push(predict(bodies[k++ % bodies.length]).then(() => void latencies.push(performance.now() - sent)));
  }
  await Promise.all(pending);
  return { sequences: latencies.length, ms: performance.now() - start, latencies };
}

interface Workload {
  label: string;
  /** Total measured time, split over the rounds. */
  ms: number;
  bodies: Body[];
  run(predict: Predict, bodies: readonly Body[], ms: number): Promise<Omit<Window, 'cpuMs'>>;
}

function closedWorkload(concurrency: number, inputs: number, ms: number): Workload {
  return {
    label: `c=${concurrency}, ${inputs} input${inputs > 1 ? 's' : ''}`,
    ms,
    bodies: requestBodies(inputs, 256, concurrency * 31 + inputs),
    run: (predict, bodies, windowMs) => closedLoop(predict, bodies, concurrency, windowMs),
  };
}

const OPEN_LOOP_RATE = 120;
const WORKLOADS: Workload[] = [
  closedWorkload(1, 1, 900),
  closedWorkload(8, 1, 900),
  closedWorkload(32, 1, 1200),
  closedWorkload(1, 8, 900),
  closedWorkload(8, 8, 1200),
  closedWorkload(32, 8, 2100),
  {
    label: `open loop, ${OPEN_LOOP_RATE}/s, 1 input`,
    ms: 1500,
    bodies: requestBodies(1, 512, 977),
    run: (predict, bodies, windowMs) => openLoop(predict, bodies, OPEN_LOOP_RATE, windowMs),
  },
];
/** Each workload is measured in rounds; in each round every variant gets one window, in a rotated order, so that
 * noise from other work on the machine spreads over the variants instead of hitting one. */
const ROUNDS = 3;

async function main(): Promise<void> {
  const began = performance.now();
  await ensureBenchModel();
  const config = parseBuildConfig(`encoder:\n  name: minilm\n  path: ${modelDir}\n  model_type: embedding\n`, { baseDir: root });
  const pkg = readModelPackage(config);
  console.log(
    `node ${process.version}, ${process.platform}-${process.arch}, ${availableParallelism()} CPUs, load average ${loadavg().map((l) => l.toFixed(2)).join(' ')};` +
      ` model: ${path.relative(root, modelDir)} (6 layers, hidden 384)`,
  );

  await runShapes(pkg);
  await schedulerSettings(pkg);
  await sessionVariants(pkg);
  console.log(`\n(${((performance.now() - began) / 1000).toFixed(0)} s; load average at the end: ${loadavg().map((l) => l.toFixed(2)).join(' ')})`);
}

/** onnxruntime alone: run time by rows × sequence length, and the linear fit the scheduler's cost model uses. */
async function runShapes(pkg: ModelPackage): Promise<void> {
  const model = await OnnxModel.load(pkg.weights, 'embedding');
  const pipeline = await PredictPipeline.load(pkg);
  const samples: { tokens: number; ms: number }[] = [];
  const rows: (string | number)[][] = [];
  for (const rowsCount of [1, 4, 16, 64]) {
    const cells: (string | number)[] = [rowsCount];
    for (const length of [16, 64]) {
      const encoding = pipeline.tokenizer.encode(sentence(200, length));
      const cut = { ...encoding, ids: encoding.ids.slice(0, length), typeIds: encoding.typeIds.slice(0, length), attentionMask: encoding.attentionMask.slice(0, length) };
      const batch = pipeline.tokenizer.pad(Array.from({ length: rowsCount }, () => cut));
      const runs = Math.max(3, Math.min(15, Math.round(4000 / (rowsCount * length))));
      await model.run(batch);
      const times: number[] = [];
      for (let i = 0; i < runs; i++) {
        const start = performance.now();
        await model.run(batch);
        times.push(performance.now() - start);
      }
      const runMs = Math.min(...times); // the least disturbed run: other work on the machine only adds time
      samples.push({ tokens: rowsCount * length, ms: runMs });
      cells.push(ms(runMs), Math.round((runMs * 1000) / (rowsCount * length)));
    }
    rows.push(cells);
  }
  // Two runs started together: the binding runs a session on the JavaScript thread, so they take turns.
  const batch = pipeline.tokenizer.pad(pipeline.tokenizer.encodeBatch(requestBodies(8, 1, 5)[0].inputs));
  const one: number[] = [];
  const two: number[] = [];
  for (let i = 0; i < 7; i++) {
    let start = performance.now();
    await model.run(batch);
    one.push(performance.now() - start);
    start = performance.now();
    await Promise.all([model.run(batch), model.run(batch)]);
    two.push(performance.now() - start);
  }
  printTable(
    'onnxruntime run time by batch shape, chosen session options (ms and µs per padded token, fastest of 3–15 runs)',
    ['rows', '16 tokens: ms', 'µs/token', '64 tokens: ms', 'µs/token'],
    rows,
  );
  const fit = linearFit(samples.filter((s) => s.tokens <= 2048));
  console.log(
    `\nfit over shapes of ≤2048 tokens: run ≈ ${ms(fit.intercept)} ms + ${(fit.slope * 1000).toFixed(1)} µs × padded tokens` +
      ` → a run's fixed cost ≈ ${Math.round(fit.intercept / fit.slope)} tokens (runOverheadTokens: ${DEFAULT_BATCH_SETTINGS.runOverheadTokens})`,
  );
  console.log(
    `two runs of 8 × ${batch.sequenceLength} started together: ${ms(Math.min(...two))} ms, one alone: ${ms(Math.min(...one))} ms` +
      ` (ratio ${(Math.min(...two) / Math.min(...one)).toFixed(2)}; 2 would mean the runs take turns)`,
  );
  await model.close();
  await pipeline.close();
}

function linearFit(points: readonly { tokens: number; ms: number }[]): { intercept: number; slope: number } {
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.tokens, 0) / n;
  const my = points.reduce((s, p) => s + p.ms, 0) / n;
  const sxy = points.reduce((s, p) => s + (p.tokens - mx) * (p.ms - my), 0);
  const sxx = points.reduce((s, p) => s + (p.tokens - mx) ** 2, 0);
  const slope = sxy / sxx;
  return { intercept: my - slope * mx, slope };
}

interface Variant {
  name: string;
  options: PipelineOptions;
  /** Serialise requests in the client: no batching across requests. */
  oneAtATime?: boolean;
}

interface Loaded {
  variant: Variant;
  pipeline: PredictPipeline;
  predict: Predict;
}

async function load(pkg: ModelPackage, variant: Variant): Promise<Loaded> {
  const pipeline = await PredictPipeline.load(pkg, variant.options);
  let chain: Promise<unknown> = Promise.resolve();
  const predict: Predict = variant.oneAtATime
    ? (body) => {
        const result = chain.then(() => pipeline.predict(body));
        chain = result.catch(() => undefined);
        return result;
      }
    : (body) => pipeline.predict(body);
  for (const body of requestBodies(8, 3, 1)) await predict(body); // warm-up
  return { variant, pipeline, predict };
}

/** All variants loaded at once, measured interleaved; one table row per (variant, workload). */
async function compare(pkg: ModelPackage, variants: readonly Variant[], workloads: readonly Workload[]): Promise<(string | number)[][]> {
  const loaded: Loaded[] = [];
  for (const variant of variants) loaded.push(await load(pkg, variant));
  const rows = new Map<Loaded, (string | number)[][]>(loaded.map((l) => [l, []]));
  for (const workload of workloads) {
    const windows = new Map<Loaded, Window[]>(loaded.map((l) => [l, []]));
    const before = new Map(loaded.map((l) => [l, l.pipeline.batchingStats()]));
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < loaded.length; k++) {
        const l = loaded[(k + round * Math.ceil(loaded.length / ROUNDS)) % loaded.length];
        windows.get(l)!.push(await withCpu(() => workload.run(l.predict, workload.bodies, workload.ms / ROUNDS)));
      }
    }
    for (const l of loaded) {
      const measured = windows.get(l)!;
      const latencies = measured.flatMap((w) => w.latencies);
      // The median round's rate: a burst of other work on the machine spoils one round, not the result.
      const rate = median(measured.map((w) => (w.sequences / w.ms) * 1000));
      const cpuPerSequence = measured.reduce((n, w) => n + w.cpuMs, 0) / measured.reduce((n, w) => n + w.sequences, 0);
      const [start, end] = [before.get(l)!, l.pipeline.batchingStats()];
      const padding = (end.paddedTokens - start.paddedTokens) / (end.tokens - start.tokens) - 1;
      rows.get(l)!.push([
        l.variant.name,
        workload.label,
        Math.round(rate),
        ms(cpuPerSequence),
        latencies.length ? ms(percentile(latencies, 50)) : '-',
        latencies.length ? ms(percentile(latencies, 99)) : '-',
        latencies.length,
        ((end.sequences - start.sequences) / (end.runs - start.runs)).toFixed(1),
        `${(padding * 100).toFixed(0)}%`,
      ]);
    }
  }
  for (const l of loaded) await l.pipeline.close();
  return loaded.flatMap((l) => rows.get(l)!);
}

const HEADER = ['setting', 'workload', 'sequences/s', 'CPU ms/sequence', 'p50 ms', 'p99 ms', 'requests', 'sequences/run', 'padding'];

async function schedulerSettings(pkg: ModelPackage): Promise<void> {
  const { maxBatchTokens: tokens } = DEFAULT_BATCH_SETTINGS;
  const variants: Variant[] = [
    { name: `no batching across requests (${tokens}, 0 ms)`, options: { maxBatchTokens: tokens, maxWaitMs: 0 }, oneAtATime: true },
    ...[512, 1024, 2048, 4096].map((budget) => ({ name: `${budget} tokens, 0 ms`, options: { maxBatchTokens: budget, maxWaitMs: 0 } })),
    { name: `${tokens} tokens, 2 ms`, options: { maxBatchTokens: tokens, maxWaitMs: 2 } },
    { name: `${tokens} tokens, 8 ms`, options: { maxBatchTokens: tokens, maxWaitMs: 8 } },
    { name: `${tokens} tokens, 0 ms, FIFO`, options: { maxBatchTokens: tokens, maxWaitMs: 0, schedulerTuning: { groupByLength: false } } },
    { name: `${tokens} tokens, 0 ms, 2 runs in flight`, options: { maxBatchTokens: tokens, maxWaitMs: 0, schedulerTuning: { maxRunsInFlight: 2 } } },
  ];
  printTable(
    `Predict pipeline under load by scheduler setting (chosen session options; ${ROUNDS} interleaved rounds)`,
    HEADER,
    await compare(pkg, variants, WORKLOADS),
  );
}

async function sessionVariants(pkg: ModelPackage): Promise<void> {
  const spinningOff = { extra: { session: { intra_op: { allow_spinning: '0' } } } } as ort.InferenceSession.SessionOptions;
  const variants: Variant[] = [
    { name: 'chosen', options: {} },
    {
      name: 'onnxruntime defaults (optimisation level all)',
      options: {
        sessionOptions: { executionMode: undefined, interOpNumThreads: undefined, enableCpuMemArena: undefined, enableMemPattern: undefined, extra: undefined },
      },
    },
    { name: 'intra-op threads 1', options: { threads: 1 } },
    { name: 'intra-op threads 4', options: { threads: 4 } },
    { name: 'parallel executor, inter-op 2', options: { sessionOptions: { executionMode: 'parallel', interOpNumThreads: 2 } } },
    { name: 'CPU memory arena off', options: { sessionOptions: { enableCpuMemArena: false } } },
    { name: 'memory pattern off', options: { sessionOptions: { enableMemPattern: false } } },
    { name: 'intra-op spinning off', options: { sessionOptions: spinningOff } },
  ];
  printTable(
    `Session options, scheduler defaults (${DEFAULT_BATCH_SETTINGS.maxBatchTokens} tokens, ${DEFAULT_BATCH_SETTINGS.maxWaitMs} ms; ${ROUNDS} interleaved rounds)`,
    HEADER,
    await compare(pkg, variants, [WORKLOADS[0], WORKLOADS[4]]),
  );
}

await main();
