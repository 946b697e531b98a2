/**
 * Tokenization off the event loop: threads that hold the model's tokenizer and tokenize the texts of large requests.
 * A text's cost grows with its length (and, for byte-level BPE on a text without spaces, faster than its length), so
 * one request of a few MiB used to keep /health waiting for seconds. Small requests, a query of a few sentences, are
 * still tokenized on the calling thread: a round trip to a thread would cost them more than it saves
 * (PredictPipeline decides, by the request's length in UTF-16 units).
 *
 * Jobs go to the thread with the fewest jobs waiting. A thread that dies fails its jobs with an InternalError and is
 * started again for the next job.
 */
import type { Worker } from 'node:worker_threads';
import { errorFromMessage, InternalError } from './errors.ts';
import type { InferenceWorkerScript } from './inference-workers.ts';
import { adoptHeldTexts, heldText, type HeldText } from './large-texts.ts';
import { startRoleThread } from './role-thread.ts';
import type { TextSource, TokenizerReply, TokenizerRequest, TokenizerSource } from './tokenizer-worker.ts';
import type { PackedEncodings } from './tokenizer/packed-encodings.ts';

/** What to tokenize: `texts[i]` alone, or as the pair (texts[i], pairs[i]) where that is a text. */
export interface TokenizeJob {
  texts: string[];
  pairs: (string | null)[] | null;
  /** Whether the results need token strings (one result per token). */
  tokens: boolean;
}

interface PendingJob {
  resolve(result: unknown): void;
  reject(error: unknown): void;
}

/** A stand-in goes to the thread as its held bytes (shared memory: no copy on this thread). */
const sourceOf = (text: string): TextSource => heldText(text)?.bytes ?? text;

class TokenizerThread {
  readonly #worker: Worker;
  readonly #pending = new Map<number, PendingJob>();
  #nextId = 0;
  #dead: Error | null = null;
  #closed: (() => void) | null = null;

  private constructor(worker: Worker) {
    this.#worker = worker;
  }

  static async start(script: InferenceWorkerScript, source: TokenizerSource): Promise<TokenizerThread> {
    const load = { kind: 'load', source } satisfies TokenizerRequest;
    const worker = await startRoleThread(script, 'tokenizer', load, { thread: 'the tokenizer thread', loading: 'the tokenizer' });
    const thread = new TokenizerThread(worker);
    thread.#listen();
    // An idle tokenizer thread does not keep a process alive that has nothing else to do.
    worker.unref();
    return thread;
  }

  get alive(): boolean {
    return this.#dead === null;
  }

  get waiting(): number {
    return this.#pending.size;
  }

  encode(job: TokenizeJob): Promise<PackedEncodings> {
    const texts = job.texts.map(sourceOf);
    const pairs = job.pairs?.map((pair) => (pair === null ? null : sourceOf(pair))) ?? null;
    return this.#send<PackedEncodings>((id) => ({ kind: 'encode', id, texts, pairs, tokens: job.tokens }));
  }

  /**
   * JSON.parse of `bytes` (UTF-8), whose buffer is handed over; a SyntaxError as JSON.parse gives it. Its large
   * strings arrive as stand-ins, their texts held by the value (large-texts.ts).
   */
  async parseJson(bytes: Uint8Array): Promise<unknown> {
    const { value, held } = await this.#send<{ value: unknown; held: HeldText[] }>((id) => ({ kind: 'parse', id, bytes }), [bytes.buffer as ArrayBuffer]);
    if (held.length > 0) adoptHeldTexts(value as object, held);
    return value;
  }

  #send<T>(request: (id: number) => TokenizerRequest, transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.#dead) return Promise.reject(this.#dead);
    const id = this.#nextId++;
    const { promise, resolve, reject } = Promise.withResolvers<T>();
    this.#pending.set(id, { resolve: resolve as (result: unknown) => void, reject });
    if (this.#pending.size === 1) this.#worker.ref(); // jobs in flight keep the process alive, as any pending work does
    this.#worker.postMessage(request(id), transfer);
    return promise;
  }

  async close(): Promise<void> {
    if (this.#dead) return;
    this.#dead = new InternalError('the tokenizer thread is closed');
    this.#worker.ref();
    await new Promise<void>((resolve) => {
      this.#closed = resolve;
      this.#worker.postMessage({ kind: 'close' } satisfies TokenizerRequest);
    });
    await this.#worker.terminate();
  }

  #settle(id: number): PendingJob | undefined {
    const job = this.#pending.get(id);
    this.#pending.delete(id);
    if (this.#pending.size === 0 && !this.#dead) this.#worker.unref();
    return job;
  }

  #listen(): void {
    this.#worker.on('message', (reply: TokenizerReply) => {
      if (reply.kind === 'closed') return this.#closed?.();
      if (reply.kind === 'encoded') this.#settle(reply.id)?.resolve(reply.packed);
      else if (reply.kind === 'parsed') this.#settle(reply.id)?.resolve({ value: reply.value, held: reply.held });
      else if (reply.kind === 'unparsable') this.#settle(reply.id)?.reject(new SyntaxError(reply.message));
      else if (reply.kind === 'failed' && reply.id !== null) this.#settle(reply.id)?.reject(errorFromMessage(reply.error));
    });
    const die = (error: Error) => {
      if (this.#dead && this.#closed === null) return;
      this.#dead = error;
      for (const job of this.#pending.values()) job.reject(error);
      this.#pending.clear();
      this.#closed?.();
    };
    this.#worker.on('error', (error: Error) => die(new InternalError(`the tokenizer thread failed: ${error.message}`, { cause: error })));
    this.#worker.on('exit', (code) => die(new InternalError(`the tokenizer thread exited (code ${code})`)));
  }
}

export class TokenizerWorkers {
  readonly #script: InferenceWorkerScript;
  readonly #source: TokenizerSource;
  readonly #threads: Promise<TokenizerThread>[];
  #closing = false;

  /** How many threads tokenize. */
  get size(): number {
    return this.#threads.length;
  }

  /** Starts `size` threads; they load the tokenizer in the background (a job waits for its thread to be ready). */
  constructor(script: InferenceWorkerScript, source: TokenizerSource, size = 1) {
    this.#script = script;
    this.#source = source;
    this.#threads = Array.from({ length: size }, () => this.#start());
  }

  /** Resolves when every thread has loaded the tokenizer; rejects with the first ConfigError. */
  async ready(): Promise<void> {
    await Promise.all(this.#threads);
  }

  async encode(job: TokenizeJob): Promise<PackedEncodings> {
    return (await this.#thread()).encode(job);
  }

  /** JSON.parse of a large request body's UTF-8 `bytes` on a thread (their buffer is handed over). */
  async parseJson(bytes: Uint8Array): Promise<unknown> {
    return (await this.#thread()).parseJson(bytes);
  }

  async #thread(): Promise<TokenizerThread> {
    if (this.#closing) throw new InternalError('the tokenizer threads are closed');
    const index = await this.#leastBusy();
    let thread = await this.#threads[index];
    if (!thread.alive) {
      this.#threads[index] = this.#start();
      thread = await this.#threads[index];
    }
    return thread;
  }

  async close(): Promise<void> {
    this.#closing = true;
    await Promise.all(this.#threads.map((starting) => starting.then((thread) => thread.close(), () => {})));
  }

  #start(): Promise<TokenizerThread> {
    const starting = TokenizerThread.start(this.#script, this.#source);
    starting.catch(() => {}); // reported to the job that waits for it
    return starting;
  }

  async #leastBusy(): Promise<number> {
    const settled = await Promise.all(this.#threads.map((starting) => starting.then((thread) => thread, () => null)));
    let best = 0;
    for (let index = 1; index < settled.length; index++) {
      if ((settled[index]?.waiting ?? Infinity) < (settled[best]?.waiting ?? Infinity)) best = index;
    }
    return best;
  }
}
