/**
 * onnxruntime off the event loop (design decision 10): `workers` worker threads, each with its own session of the
 * same model, run the batches the scheduler forms. The binding's `session.run` is synchronous, so on the main thread
 * one run held every other request — a liveness probe waited for the whole batch. Here the main thread keeps parsing,
 * tokenizing, answering /health and writing responses while a batch runs. Tensors cross as transferred buffers.
 *
 * A batch goes to an idle worker (the scheduler starts at most `workers` runs at once). A worker that dies fails its
 * run with an InternalError and is replaced by a fresh one for the next run.
 *
 * With `postprocess`, each worker also runs the steps after onnxruntime (the Lua transform in a Lua state of its own,
 * the pooling; batch-postprocess.ts) and a run answers the final batch output: a script looping up to its time limit
 * holds its worker, never the event loop, and the other workers keep serving.
 */
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import type { ThreadScript } from '../shared/thread-script.ts';
import type { ModelType } from './config.ts';
import type { PostprocessSettings } from './batch-postprocess.ts';
import { ConfigError, errorFromMessage, InternalError } from './errors.ts';
import { sessionOptionsFor, settingsOf, type ModelSignature, type OnnxModelOptions, type SessionSettings } from './onnx-model.ts';
import { epochMs, setRunTiming } from './request-phases.ts';
import { disableOnnxruntimeTelemetry } from './onnxruntime-environment.ts';
import type { WorkerReply, WorkerRequest } from './onnx-worker.ts';
import { loadSoloOrWarn, SoloSessionState } from './solo-session.ts';
import { Tensor } from './tensor.ts';
import type { PaddedBatch } from './tokenizer/index.ts';

/**
 * How to start a worker: from source, the file onnx-worker.ts (src/cli/main.ts passes it); in the single executable,
 * its bundled text. The caller says, because only it knows which it is (import.meta is empty in the CommonJS bundle).
 */
export interface InferenceWorkerScript extends ThreadScript {
  /** Handed to the worker as `workerData` (the single executable passes where its onnxruntime binding is). */
  workerData?: unknown;
  /**
   * A thread already running this script, started by the entry point before the program loaded so that it warms
   * onnxruntime up meanwhile (runtime/onnxruntime-warm-up.ts), or undefined: the first worker is that thread.
   */
  prestarted?: () => Worker | undefined;
}

export interface InferenceWorkersOptions extends OnnxModelOptions {
  /** Worker threads, each with its own session; default 1. */
  workers?: number;
  worker: InferenceWorkerScript;
  /**
   * Intra-op threads of the solo session (soloSessionThreads): a second session of the model in the first worker, which
   * runs a batch when no other batch is running. 0: none. Default: onnxruntime's own (one per physical core) when
   * there are several workers and `threads` was not given, else none.
   */
  soloThreads?: number;
  /**
   * The steps after onnxruntime each worker runs on its batches (its own Lua state of the transform, made after its
   * session; the pooling). A transform that does not compile fails the load with a ConfigError. Absent: runs answer
   * onnxruntime's raw output.
   */
  postprocess?: PostprocessSettings;
}

/**
 * `serve`'s default number of workers: two where there are two cores or more. On the 2-core development machine two
 * single-threaded sessions served 1.7-1.8x the sequences/s of one two-threaded session at concurrency 32, and cut
 * the p50 at concurrency 1 by a third (docs/benchmarks.md): onnxruntime's intra-op threads gained nothing there
 * (`--threads 1` served as much as two threads). Each worker holds its own copy of the weights, so a model that
 * barely fits in memory wants `--workers 1`.
 */
export function defaultWorkerCount(cores = os.availableParallelism()): number {
  return cores >= 2 ? 2 : 1;
}

/**
 * Intra-op threads per worker when the user did not say: with one worker, onnxruntime's own default (one per physical
 * core); with several, the cores divided between them, so that n sessions running at once do not oversubscribe the
 * machine (measured in docs/benchmarks.md).
 */
export function threadsPerWorker(workers: number, threads: number | undefined, cores = os.availableParallelism()): number | undefined {
  if (threads !== undefined) return threads;
  return workers === 1 ? undefined : Math.max(1, Math.floor(cores / workers));
}

/**
 * The solo session's intra-op threads, or null for none. Several single-threaded workers serve the most under load
 * (each session uses one core fully, none waits for another's threads), but leave a batch that runs alone, a lone
 * query, on one core: 1.5-2x the latency of a session with onnxruntime's default threads on this project's 2-core
 * machine. So the first worker also holds a session with onnxruntime's default threads (undefined: one per physical
 * core, its helper threads spinning between operators as a raw session's do), used only while no other batch runs;
 * under load every batch runs on the single-threaded sessions as before. Its threads spin between the steps of a run
 * but stop when it ends (spinAfterRun false): spinning on for ~25 ms, as onnxruntime's do by default, took a core from
 * the runs that came next on the other workers (concurrency 2, one input each: 213 sequences/s spinning on, 234
 * stopping, 251 without a solo session), for 2-4% of a lone query's latency. Its cost is a second copy of the weights
 * onnxruntime prepacks, ~60-110 MiB resident for the MiniLM shape (docs/decisions.md, "A lone query on every core").
 * Given `threads` (or one worker, whose session has the default threads already), there is none unless `soloThreads`
 * asks for it.
 */
export function soloSessionThreads(workers: number, threads: number | undefined, soloThreads: number | undefined): number | undefined | null {
  if (soloThreads !== undefined) {
    if (!(Number.isInteger(soloThreads) && soloThreads >= 0)) throw new ConfigError(`soloThreads must be an integer >= 0, got ${String(soloThreads)}`);
    return soloThreads === 0 ? null : soloThreads;
  }
  return workers >= 2 && threads === undefined ? undefined : null;
}

/**
 * The solo session's options: the workers' own (graph optimisation, provider, where the weights' data is) with its
 * threads (soloSessionThreads; undefined: onnxruntime's default), which stop spinning when a run ends.
 */
export function soloSessionOptions(workerOptions: OnnxModelOptions, soloThreads: number | undefined): OnnxModelOptions {
  return { ...workerOptions, threads: soloThreads, spinAfterRun: false };
}

interface PendingRun {
  resolve(output: Tensor): void;
  reject(error: unknown): void;
  /** When the batch was handed to the worker (epochMs), and its shape, for the run's timing. */
  dispatchedMs: number;
  rows: number;
  sequenceLength: number;
}

/** One worker thread and its session. */
class InferenceWorker {
  readonly #worker: Worker;
  readonly #pending = new Map<number, PendingRun>();
  #nextId = 0;
  #dead: Error | null = null;
  #closed: (() => void) | null = null;
  readonly #solo = new SoloSessionState();

  private constructor(worker: Worker) {
    this.#worker = worker;
  }

  /**
   * Starts the thread (or, with `adopt`, takes the script's prestarted one) and loads the model into it; a model that
   * does not load is the ConfigError the worker gave.
   */
  static async start(
    script: InferenceWorkerScript,
    load: Extract<WorkerRequest, { kind: 'load' }>,
    adopt = false,
  ): Promise<{ worker: InferenceWorker; signature: ModelSignature; settings: SessionSettings }> {
    const prestarted = adopt ? script.prestarted?.() : undefined;
    prestarted?.ref(); // it keeps the process alive no longer than its warm-up when nobody takes it
    const thread = prestarted ?? new Worker(script.script, { eval: script.eval ?? false, workerData: script.workerData });
    const worker = new InferenceWorker(thread);
    const loaded = await new Promise<{ signature: ModelSignature; settings: SessionSettings }>((resolve, reject) => {
      const onError = (error: Error) => reject(new ConfigError(`the inference worker failed to start: ${error.message}`, { cause: error }));
      const onExit = (code: number) => reject(new ConfigError(`the inference worker exited with code ${code} while loading the model`));
      thread.once('error', onError);
      thread.once('exit', onExit);
      const onReply = (reply: WorkerReply) => {
        if (reply.kind === 'warm') return; // a prestarted worker's warm-up ended
        thread.off('message', onReply);
        thread.off('error', onError);
        thread.off('exit', onExit);
        if (reply.kind === 'loaded') resolve({ signature: reply.signature, settings: reply.settings });
        else if (reply.kind === 'failed') reject(errorFromMessage(reply.error));
        else reject(new ConfigError(`the inference worker answered ${reply.kind} to load`));
      };
      thread.on('message', onReply);
      // The weights are copied into the worker (a model is loaded once per worker); runs transfer their tensors.
      thread.postMessage(load);
    }).catch(async (error: unknown) => {
      await thread.terminate();
      throw error;
    });
    worker.#listen();
    return { worker, ...loaded };
  }

  get busy(): boolean {
    return this.#pending.size > 0;
  }

  get alive(): boolean {
    return this.#dead === null;
  }

  get hasSolo(): boolean {
    return this.#solo.loaded;
  }

  /** Loads the solo session beside the worker's own; rejects (and the worker goes on without it) when it does not load. */
  async loadSolo(request: Extract<WorkerRequest, { kind: 'load-solo' }>): Promise<void> {
    if (this.#dead) throw this.#dead;
    await this.#solo.load(() => this.#worker.postMessage(request));
  }

  /** Runs one padded batch, on the solo session when `solo` and the worker has one. */
  run(batch: PaddedBatch, solo = false): Promise<Tensor> {
    if (this.#dead) return Promise.reject(this.#dead);
    const id = this.#nextId++;
    const { promise, resolve, reject } = Promise.withResolvers<Tensor>();
    this.#pending.set(id, { resolve, reject, dispatchedMs: epochMs(), rows: batch.batchSize, sequenceLength: batch.sequenceLength });
    const message: WorkerRequest = { kind: 'run', id, batch, solo: solo && this.#solo.loaded };
    try {
      // The padded inputs were made for this run alone: handing their buffers over saves copying them.
      this.#worker.postMessage(message, [batch.inputIds.buffer, batch.attentionMask.buffer, batch.tokenTypeIds.buffer] as ArrayBuffer[]);
    } catch (error) {
      this.#pending.delete(id);
      return Promise.reject(new InternalError(`cannot hand the batch to the inference worker: ${(error as Error).message}`, { cause: error }));
    }
    return promise;
  }

  /** Releases the session, then ends the thread. */
  async close(): Promise<void> {
    if (this.#dead) return;
    this.#dead = new InternalError('the inference worker is closed');
    this.#solo.failed(this.#dead);
    await new Promise<void>((resolve) => {
      this.#closed = resolve;
      this.#worker.postMessage({ kind: 'close' } satisfies WorkerRequest);
    });
    await this.#worker.terminate();
  }

  #listen(): void {
    this.#worker.on('message', (reply: WorkerReply) => {
      if (reply.kind === 'closed') {
        this.#closed?.();
        return;
      }
      if (reply.kind === 'solo-loaded') {
        this.#solo.answered(reply.error);
        return;
      }
      if (reply.kind !== 'ran' && reply.kind !== 'failed') return;
      const run = reply.id === null ? undefined : this.#pending.get(reply.id);
      if (!run || reply.id === null) return;
      this.#pending.delete(reply.id);
      if (reply.kind === 'ran') {
        const output = new Tensor(reply.data, reply.dims);
        const { dispatchedMs, rows, sequenceLength } = run;
        setRunTiming(output, { dispatchedMs, ranFromMs: reply.ranMs[0], ranToMs: reply.ranMs[1], rows, sequenceLength });
        run.resolve(output);
      } else run.reject(errorFromMessage(reply.error));
    });
    const die = (error: Error) => {
      if (this.#dead) return;
      this.#dead = error;
      for (const run of this.#pending.values()) run.reject(error);
      this.#pending.clear();
      this.#closed?.();
      this.#solo.failed(error);
    };
    this.#worker.on('error', (error: Error) => die(new InternalError(`the inference worker failed: ${error.message}`, { cause: error })));
    this.#worker.on('exit', (code) => die(new InternalError(`the inference worker exited (code ${code})`)));
  }
}

/**
 * The same interface as OnnxModel (load, signature, run, close), with the sessions in worker threads. The pool is
 * ready when its first worker has loaded the model; the others join as they finish loading theirs (until then runs
 * share the workers that have), so a server answers without waiting for the last worker to start.
 */
export class InferenceWorkers {
  readonly signature: ModelSignature;
  /** The first worker's session settings (every worker's session is made with the same options). */
  readonly settings: SessionSettings;
  /** The workers asked for; `joined` resolves when they all run. */
  readonly size: number;
  readonly #workers: InferenceWorker[];
  readonly #script: InferenceWorkerScript;
  readonly #load: Extract<WorkerRequest, { kind: 'load' }>;
  readonly #joining: Promise<void>;
  /** The solo session's load message (for the first worker), or null when the pool has none. */
  readonly #soloLoad: Extract<WorkerRequest, { kind: 'load-solo' }> | null;
  readonly #soloLoaded: Promise<boolean>;
  /** The solo session's options, or null when the pool has none. */
  readonly soloSettings: SessionSettings | null;
  #closing = false;
  #next = 0;
  /** Runs handed to workers and not finished. */
  #running = 0;
  #soloRuns = 0;

  private constructor(
    first: InferenceWorker,
    later: Promise<PromiseSettledResult<{ worker: InferenceWorker }>>[],
    signature: ModelSignature,
    settings: SessionSettings,
    script: InferenceWorkerScript,
    load: Extract<WorkerRequest, { kind: 'load' }>,
    soloLoad: Extract<WorkerRequest, { kind: 'load-solo' }> | null,
  ) {
    this.#workers = [first];
    this.signature = signature;
    this.settings = settings;
    this.size = 1 + later.length;
    this.#script = script;
    this.#load = load;
    this.#soloLoad = soloLoad;
    this.soloSettings = soloLoad === null ? null : settingsOf(sessionOptionsFor(soloLoad.options));
    this.#joining = Promise.all(later.map((starting, index) => this.#join(starting, index + 2))).then(() => {});
    // Once every worker runs, so that it takes no core from their start-up (nor the server's first answers): until
    // then a lone batch runs on the first worker's own session.
    this.#soloLoaded = this.#joining.then(() => this.#loadSolo(this.#workers[0]));
  }

  /** Resolves when every worker asked for has joined the pool (or failed to and was left out, with a warning). */
  get joined(): Promise<void> {
    return this.#joining;
  }

  /** Resolves after `joined`, true once the solo session has loaded; false without one (none asked, or it failed to load, with a warning). */
  get soloLoaded(): Promise<boolean> {
    return this.#soloLoaded;
  }

  /** The solo session has loaded (and its worker runs): a batch that is all the work there is can use every core. */
  get soloReady(): boolean {
    return this.#workers[0].hasSolo && this.#workers[0].alive;
  }

  /** Batches that ran on the solo session so far. */
  get soloRuns(): number {
    return this.#soloRuns;
  }

  #loadSolo(worker: InferenceWorker): Promise<boolean> {
    return loadSoloOrWarn(this.#soloLoad, (request) => worker.loadSolo(request), () => this.#closing, "one worker's own session");
  }

  async #join(starting: Promise<PromiseSettledResult<{ worker: InferenceWorker }>>, ordinal: number): Promise<void> {
    const started = await starting;
    if (started.status === 'rejected') {
      // The first worker loaded the same model: this one failed for want of something else (memory, threads).
      process.emitWarning(`inference worker ${ordinal} of ${this.size} did not start (${(started.reason as Error).message}); serving with the others`);
    } else if (this.#closing) {
      await started.value.worker.close();
    } else {
      this.#workers.push(started.value.worker);
    }
  }

  static async load(weights: Uint8Array, modelType: ModelType, options: InferenceWorkersOptions): Promise<InferenceWorkers> {
    const count = options.workers ?? 1;
    if (!(Number.isInteger(count) && count >= 1)) throw new ConfigError(`workers must be a positive integer, got ${String(options.workers)}`);
    const script = options.worker;
    const threads = threadsPerWorker(count, options.threads);
    const soloThreads = soloSessionThreads(count, options.threads, options.soloThreads);
    const load: Extract<WorkerRequest, { kind: 'load' }> = {
      kind: 'load',
      weights,
      modelType,
      options: { threads, sessionOptions: options.sessionOptions, weightsDataDir: options.weightsDataDir },
      postprocess: options.postprocess,
    };
    disableOnnxruntimeTelemetry(); // before any worker loads onnxruntime (see there)
    // The others start once the first has loaded: started together, they took the cores the first one's start-up
    // needed (on two cores `serve` answered its first /health ~10% later), and a model that does not load fails them
    // all alike.
    const first = await InferenceWorker.start(script, load, true);
    // settled at once, so that a later worker failing while the pool is not awaiting it is not an unhandled rejection
    const later = Array.from({ length: count - 1 }, () =>
      Promise.allSettled([InferenceWorker.start(script, load)]).then(([settled]) => settled),
    );
    const soloLoad: Extract<WorkerRequest, { kind: 'load-solo' }> | null =
      soloThreads === null ? null : { kind: 'load-solo', weights, modelType, options: soloSessionOptions(load.options, soloThreads) };
    return new InferenceWorkers(first.worker, later, first.signature, first.settings, script, load, soloLoad);
  }

  /**
   * Runs one padded batch, its buffers handed over: on the first worker's solo session when it is all the work there
   * is (`alone`, as the scheduler knows it, default true) and no other batch is running here (soloSessionThreads),
   * else on an idle worker's own session (the least recently used when all are busy).
   */
  async run(batch: PaddedBatch, options: { alone?: boolean } = {}): Promise<Tensor> {
    const solo = (options.alone ?? true) && this.#running === 0 && this.soloReady;
    const index = solo ? 0 : this.#pickWorker();
    if (!this.#workers[index].alive) {
      // A worker that died (its run failed with an InternalError) is replaced before the next run.
      const replacement = (await InferenceWorker.start(this.#script, this.#load)).worker;
      this.#workers[index] = replacement;
      if (index === 0) void this.#loadSolo(replacement);
    }
    if (solo) this.#soloRuns++;
    this.#running++;
    try {
      return await this.#workers[index].run(batch, solo);
    } finally {
      this.#running--;
    }
  }

  async close(): Promise<void> {
    this.#closing = true; // a worker that joins from now on is closed instead
    await Promise.all(this.#workers.map((worker) => worker.close()));
    await this.#joining;
    await this.#soloLoaded;
  }

  #pickWorker(): number {
    for (let k = 0; k < this.#workers.length; k++) {
      const index = (this.#next + k) % this.#workers.length;
      if (!this.#workers[index].busy) {
        this.#next = index + 1;
        return index;
      }
    }
    return this.#next++ % this.#workers.length;
  }
}
