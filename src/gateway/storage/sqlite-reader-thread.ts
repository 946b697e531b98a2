import { Worker } from 'node:worker_threads';
import type { ThreadScript } from '../../shared/thread-script.ts';
import { narrowIntegers, type Row, type SqlValue } from './driver.ts';

/** What the reader thread is started with (its workerData). */
export interface ReaderStart {
  file: string;
  busyTimeoutMs: number;
}
export interface ReaderRequest {
  id: number;
  sql: string;
  params: SqlValue[];
}
export type ReaderReply = { id: number; rows: Row[] } | { id: number; error: { message: string; code?: unknown; errcode?: unknown } };

/**
 * A second, read-only connection to a SQLite file, on its own thread (program: sqlite-reader.ts). node:sqlite runs a
 * statement to its end on the calling thread, so a query over a large usage table would hold the event loop, and every
 * model call in flight with it, for as long as it takes; here it holds this thread instead. In WAL mode a reader sees
 * every transaction committed before its statement began, and neither waits for the writer nor holds it up.
 */
export class SqliteReaderThread {
  readonly #worker: Worker;
  readonly #pending = new Map<number, { resolve: (rows: Row[]) => void; reject: (error: unknown) => void }>();
  #nextId = 0;
  #failure: Error | null = null;
  readonly #exited: Promise<void>;

  constructor(program: ThreadScript, start: ReaderStart) {
    this.#worker = new Worker(program.script, { eval: program.eval ?? false, workerData: start });
    this.#worker.unref(); // referenced only while a query is pending
    this.#worker.on('message', (reply: ReaderReply) => {
      const pending = this.#pending.get(reply.id);
      if (!pending) return;
      this.#pending.delete(reply.id);
      if (this.#pending.size === 0) this.#worker.unref();
      if ('error' in reply) pending.reject(Object.assign(new Error(reply.error.message), reply.error));
      else pending.resolve(narrowIntegers(reply.rows));
    });
    this.#worker.on('error', (error) => this.#fail(error instanceof Error ? error : new Error(String(error))));
    this.#exited = new Promise((resolve) =>
      this.#worker.once('exit', (code) => {
        this.#fail(new Error(`the SQLite reader thread exited with code ${code}`));
        resolve();
      }),
    );
  }

  all(sql: string, params: SqlValue[]): Promise<Row[]> {
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#nextId++;
    if (this.#pending.size === 0) this.#worker.ref();
    return new Promise<Row[]>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ id, sql, params } satisfies ReaderRequest);
    });
  }

  async close(): Promise<void> {
    this.#fail(new Error('the SQLite reader thread is closed'));
    await this.#worker.terminate();
    await this.#exited;
  }

  #fail(error: Error): void {
    this.#failure ??= error;
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }
}
