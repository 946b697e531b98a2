/**
 * Threads of an image model (image-worker.ts): each decodes and preprocesses images and holds a session of the model
 * that runs merged batches, so that the event loop only parses requests and shapes results. A job goes to the thread
 * with the fewest jobs waiting. A thread that fails or exits fails its jobs with an InternalError and is not used
 * again; when none is left, every job fails (the server's health then says so through its errors).
 */
import type { Worker } from 'node:worker_threads';
import { errorFromMessage, InternalError } from './errors.ts';
import type { PixelValues } from './image/index.ts';
import type { InferenceWorkerScript } from './inference-workers.ts';
import type { ImageJob, ImageModelLoad, ImageWorkerReply, ImageWorkerRequest } from './image-worker.ts';
import { Tensor } from './tensor.ts';
import { startRoleThread } from './role-thread.ts';

interface Pending {
  resolve(reply: { data: Float32Array; dims: number[] }): void;
  reject(error: unknown): void;
}

class ImageThread {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #nextId = 0;
  #dead: Error | null = null;
  #closed: (() => void) | null = null;

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

  #listen(): void {
    this.#worker.on('message', (reply: ImageWorkerReply) => {
      if (reply.kind === 'closed') {
        this.#closed?.();
        return;
      }
      if (reply.kind === 'loaded' || reply.id === null) return;
      const pending = this.#pending.get(reply.id);
      this.#pending.delete(reply.id);
      if (reply.kind === 'done') pending?.resolve(reply);
      else pending?.reject(errorFromMessage(reply.error));
    });
    const die = (error: Error) => {
      this.#dead ??= error;
      for (const pending of this.#pending.values()) pending.reject(new InternalError(`an image thread stopped: ${error.message}`, { cause: error }));
      this.#pending.clear();
      this.#closed?.();
    };
    this.#worker.on('error', die);
    this.#worker.on('exit', (code) => die(new Error(`it exited with code ${code}`)));
  }

  send(request: ImageJob, transfer: ArrayBuffer[] = []): Promise<{ data: Float32Array; dims: number[] }> {
    if (this.#dead) return Promise.reject(new InternalError(`an image thread stopped: ${this.#dead.message}`));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ ...request, id } satisfies ImageWorkerRequest, transfer);
    });
  }

  async close(): Promise<void> {
    if (this.#dead) return;
    await new Promise<void>((resolve) => {
      this.#closed = resolve;
      this.#worker.postMessage({ kind: 'close' } satisfies ImageWorkerRequest);
    });
    await this.#worker.terminate();
  }
}

export class ImageWorkers {
  readonly #threads: ImageThread[];

  private constructor(threads: ImageThread[]) {
    this.#threads = threads;
  }

  /** Starts `count` threads, each loading the model; the first failure is the load's (a ConfigError as at build). */
  static async load(script: InferenceWorkerScript, count: number, load: ImageModelLoad): Promise<ImageWorkers> {
    const started = await Promise.allSettled(Array.from({ length: count }, () => ImageThread.start(script, load)));
    const threads = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    const failed = started.find((result) => result.status === 'rejected');
    if (failed) {
      await Promise.all(threads.map((thread) => thread.close()));
      throw failed.reason;
    }
    return new ImageWorkers(threads);
  }

  get size(): number {
    return this.#threads.length;
  }

  #leastBusy(): ImageThread {
    return this.#threads.reduce((best, thread) => (thread.waiting < best.waiting ? thread : best));
  }

  /** The image's `pixel_values` [1, 3, H, W]; its bytes are handed to the thread (transferred when they own their buffer). */
  async preprocess(bytes: Uint8Array, index: number, field: string): Promise<PixelValues> {
    const { data, dims } = await this.#leastBusy().send({ kind: 'preprocess', bytes, index, field });
    return { data, dims: dims as PixelValues['dims'] };
  }

  async run(pixels: PixelValues): Promise<Tensor> {
    const { data, dims } = await this.#leastBusy().send({ kind: 'run', data: pixels.data, dims: [...pixels.dims] }, [pixels.data.buffer as ArrayBuffer]);
    return new Tensor(data, dims);
  }

  async close(): Promise<void> {
    await Promise.all(this.#threads.map((thread) => thread.close()));
  }
}
