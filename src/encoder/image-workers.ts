/**
 * Threads of an image model (image-worker.ts): each decodes and preprocesses images and holds a session of the model
 * that runs merged batches, so that the event loop only parses requests and shapes results. A job goes to the thread
 * with the fewest jobs waiting. A thread that fails or exits fails its jobs with an InternalError and is not used
 * again; when none is left, every job fails (the server's health then says so through its errors).
 *
 * As text workers (inference-workers.ts, soloSessionThreads), the first thread may also hold a solo session with more
 * intra-op threads, which runs a batch that is all the work there is (the scheduler's `alone`, nothing running here,
 * nothing waiting on that thread); every other batch runs on the threads' own sessions.
 */
import type { Worker } from 'node:worker_threads';
import { errorFromMessage, InternalError } from './errors.ts';
import type { PixelValues } from './image/index.ts';
import type { InferenceWorkerScript } from './inference-workers.ts';
import type { ImageJob, ImageModelLoad, ImageWorkerReply, ImageWorkerRequest } from './image-worker.ts';
import type { OnnxModelOptions } from './onnx-model.ts';
import { loadSoloOrWarn, SoloSessionState } from './solo-session.ts';
import { Tensor } from './tensor.ts';
import { startRoleThread } from './role-thread.ts';

interface JobReply {
  data: Float32Array;
  dims: number[];
  decodedPixels?: number;
}

interface Pending {
  resolve(reply: JobReply): void;
  reject(error: unknown): void;
}

/**
 * A thread that decoded an image of more pixels than this is replaced (docs/image-models.md, "Memory"): a WebAssembly
 * instance keeps the memory of its largest image until its thread ends (a 24 MP photo: ~200 MiB per codec).
 */
export const DEFAULT_RECYCLE_AFTER_PIXELS = 16_000_000;

class ImageThread {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #nextId = 0;
  #dead: Error | null = null;
  #closed: (() => void) | null = null;
  /** Called when the last pending job is answered (drainAndClose). */
  #idle: (() => void) | null = null;
  readonly #solo = new SoloSessionState();
  /** A replacement is being started: this thread takes no new jobs once it has joined. */
  replacing = false;

  private constructor(worker: Worker) {
    this.#worker = worker;
  }

  static async start(script: InferenceWorkerScript, load: ImageModelLoad): Promise<ImageThread> {
    const worker = await startRoleThread(script, 'image', { kind: 'load', load } satisfies ImageWorkerRequest, { thread: 'an image thread', loading: 'the model' });
    const thread = new ImageThread(worker);
    thread.#listen();
    return thread;
  }

  get waiting(): number {
    return this.#dead ? Infinity : this.#pending.size;
  }

  /** The thread runs and holds a solo session. */
  get soloReady(): boolean {
    return this.#solo.loaded && this.#dead === null;
  }

  /** Loads the solo session beside the thread's own; rejects (and the thread goes on without it) when it does not load. */
  async loadSolo(options: OnnxModelOptions): Promise<void> {
    if (this.#dead) throw this.#dead;
    await this.#solo.load(() => this.#worker.postMessage({ kind: 'load-solo', options } satisfies ImageWorkerRequest));
  }

  #listen(): void {
    this.#worker.on('message', (reply: ImageWorkerReply) => {
      if (reply.kind === 'closed') {
        this.#closed?.();
        return;
      }
      if (reply.kind === 'solo-loaded') {
        this.#solo.answered(reply.error);
        return;
      }
      if (reply.kind === 'loaded' || reply.id === null) return;
      const pending = this.#pending.get(reply.id);
      this.#pending.delete(reply.id);
      if (reply.kind === 'done') pending?.resolve(reply);
      else pending?.reject(errorFromMessage(reply.error));
      if (this.#pending.size === 0) this.#idle?.();
    });
    const die = (error: Error) => {
      this.#dead ??= error;
      for (const pending of this.#pending.values()) pending.reject(new InternalError(`an image thread stopped: ${error.message}`, { cause: error }));
      this.#pending.clear();
      this.#closed?.();
      this.#solo.failed(error);
    };
    this.#worker.on('error', die);
    this.#worker.on('exit', (code) => die(new Error(`it exited with code ${code}`)));
  }

  send(request: ImageJob, transfer: ArrayBuffer[] = []): Promise<JobReply> {
    if (this.#dead) return Promise.reject(new InternalError(`an image thread stopped: ${this.#dead.message}`));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ ...request, id } satisfies ImageWorkerRequest, transfer);
    });
  }

  /** Closes the thread once the jobs it was given are answered. */
  async drainAndClose(): Promise<void> {
    if (this.#pending.size > 0) await new Promise<void>((resolve) => (this.#idle = resolve));
    await this.close();
  }

  async close(): Promise<void> {
    if (this.#dead) return;
    this.#solo.failed(new InternalError('the image thread is closed'));
    await new Promise<void>((resolve) => {
      this.#closed = resolve;
      this.#worker.postMessage({ kind: 'close' } satisfies ImageWorkerRequest);
    });
    await this.#worker.terminate();
  }
}

export interface ImageWorkersOptions {
  /** A thread that decoded an image of more pixels is replaced (DEFAULT_RECYCLE_AFTER_PIXELS). */
  recycleAfterPixels?: number;
  /** The solo session's options (soloSessionOptions), loaded by the first thread once every thread has loaded; null or absent: none. */
  solo?: OnnxModelOptions | null;
}

export class ImageWorkers {
  readonly #threads: ImageThread[];
  readonly #script: InferenceWorkerScript;
  readonly #load: ImageModelLoad;
  readonly #recycleAfterPixels: number;
  readonly #soloOptions: OnnxModelOptions | null;
  readonly #soloLoaded: Promise<boolean>;
  /** Replacements under way, awaited by close(). */
  readonly #replacing = new Set<Promise<void>>();
  #recycled = 0;
  #closed = false;
  /** Runs handed to threads and not answered. */
  #running = 0;
  #soloRuns = 0;

  private constructor(threads: ImageThread[], script: InferenceWorkerScript, load: ImageModelLoad, options: ImageWorkersOptions) {
    this.#threads = threads;
    this.#script = script;
    this.#load = load;
    this.#recycleAfterPixels = options.recycleAfterPixels ?? DEFAULT_RECYCLE_AFTER_PIXELS;
    this.#soloOptions = options.solo ?? null;
    // after every thread has loaded (load awaited them all), so that start-up never waits for it
    this.#soloLoaded = this.#loadSolo(threads[0]);
  }

  /** Starts `count` threads, each loading the model; the first failure is the load's (a ConfigError as at build). */
  static async load(script: InferenceWorkerScript, count: number, load: ImageModelLoad, options: ImageWorkersOptions = {}): Promise<ImageWorkers> {
    const started = await Promise.allSettled(Array.from({ length: count }, () => ImageThread.start(script, load)));
    const threads = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    const failed = started.find((result) => result.status === 'rejected');
    if (failed) {
      await Promise.all(threads.map((thread) => thread.close()));
      throw failed.reason;
    }
    return new ImageWorkers(threads, script, load, options);
  }

  /** Resolves true once the first thread's solo session has loaded; false without one (none asked, or it failed to load, with a warning). */
  get soloLoaded(): Promise<boolean> {
    return this.#soloLoaded;
  }

  /** The first thread holds a solo session and runs: a batch that is all the work there is can use every core. */
  get soloReady(): boolean {
    return this.#threads[0].soloReady;
  }

  /** Batches (onnxruntime runs) that ran on the solo session so far. */
  get soloRuns(): number {
    return this.#soloRuns;
  }

  #loadSolo(thread: ImageThread): Promise<boolean> {
    return loadSoloOrWarn(this.#soloOptions, (options) => thread.loadSolo(options), () => this.#closed, "an image thread's own session");
  }

  /** Threads replaced so far after a large image. */
  get recycled(): number {
    return this.#recycled;
  }

  get size(): number {
    return this.#threads.length;
  }

  #leastBusy(): ImageThread {
    return this.#threads.reduce((best, thread) => (thread.waiting < best.waiting ? thread : best));
  }

  /** The image's `pixel_values` [1, 3, H, W]; its bytes are handed to the thread (transferred when they own their buffer). */
  async preprocess(bytes: Uint8Array, index: number, field: string): Promise<PixelValues> {
    const thread = this.#leastBusy();
    const { data, dims, decodedPixels = 0 } = await thread.send({ kind: 'preprocess', bytes, index, field });
    if (decodedPixels > this.#recycleAfterPixels) this.#replace(thread);
    return { data, dims: dims as PixelValues['dims'] };
  }

  /**
   * Starts a fresh thread for one that decoded a large image; once it has loaded it takes the old one's place, and the
   * old one ends when its jobs are answered (which gives its memory back). The old one serves meanwhile; if the new
   * one fails to load, the old one stays.
   */
  #replace(thread: ImageThread): void {
    if (thread.replacing || this.#closed) return;
    thread.replacing = true;
    const replacing = ImageThread.start(this.#script, this.#load).then(
      async (fresh) => {
        // the thread that held the solo session hands it on: the fresh one loads its own before taking the place
        if (this.#threads.indexOf(thread) === 0 && !this.#closed) await this.#loadSolo(fresh);
        const at = this.#threads.indexOf(thread);
        if (this.#closed || at < 0) {
          await fresh.close();
          return;
        }
        this.#threads[at] = fresh;
        this.#recycled++;
        await thread.drainAndClose();
      },
      () => {
        thread.replacing = false;
      },
    );
    this.#replacing.add(replacing);
    void replacing.finally(() => this.#replacing.delete(replacing));
  }

  /**
   * Runs a batch of pixels, its buffer handed over: on the first thread's solo session when it is all the work there
   * is (`alone`, as the scheduler knows it, default true), no other run is going here and that thread has no job
   * waiting (a decode would hold the run back); else on the least busy thread's own session.
   */
  async run(pixels: PixelValues, options: { alone?: boolean } = {}): Promise<Tensor> {
    const first = this.#threads[0];
    const solo = (options.alone ?? true) && this.#running === 0 && first.soloReady && first.waiting === 0;
    if (solo) this.#soloRuns++;
    this.#running++;
    try {
      const thread = solo ? first : this.#leastBusy();
      const { data, dims } = await thread.send({ kind: 'run', data: pixels.data, dims: [...pixels.dims], solo }, [pixels.data.buffer as ArrayBuffer]);
      return new Tensor(data, dims);
    } finally {
      this.#running--;
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#replacing]);
    await Promise.all(this.#threads.map((thread) => thread.close()));
    await this.#soloLoaded;
  }
}
