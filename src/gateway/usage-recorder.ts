import type { CallRow, GatewayStore } from './storage/index.ts';

interface Queued<T> {
  item: T;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit: items that arrive while a write is in progress (or in the same turn of the event loop) go to the
 * database together in one write, and each caller's promise resolves when its item is committed. If the database
 * refuses a batch, its items are written again one by one, so one bad item cannot take the others with it.
 */
class GroupCommit<T> {
  readonly #write: (items: T[]) => Promise<void>;
  readonly #maxBatch: number;
  #queue: Queued<T>[] = [];
  #flushing: Promise<void> | null = null;
  #scheduled = false;
  onBatch: ((items: number) => void) | null = null;

  constructor(write: (items: T[]) => Promise<void>, maxBatch: number) {
    this.#write = write;
    this.#maxBatch = maxBatch;
  }

  add(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#flushing) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#flushing = this.#flush().finally(() => {
        this.#flushing = null;
        if (this.#queue.length > 0) this.#schedule();
      });
    });
  }

  async #flush(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.#maxBatch);
      try {
        await this.#write(batch.map((q) => q.item));
        this.onBatch?.(batch.length);
        for (const q of batch) q.resolve();
      } catch (error) {
        if (batch.length === 1) batch[0].reject(error);
        else for (const q of batch) await this.#write([q.item]).then(q.resolve, q.reject);
      }
    }
  }

  async drain(): Promise<void> {
    while (this.#queue.length > 0 || this.#flushing || this.#scheduled) {
      await (this.#flushing ?? new Promise((resolve) => setImmediate(resolve)));
    }
  }
}

/**
 * The usage rows of model calls, written in group commits: the pending row of each call (pending_calls) before its provider is
 * called (`open`), and its outcome with the settlement of its budget holds when it finishes (`complete`; refusals
 * too, as rows that were never opened). The HTTP layer calls the provider only once the pending row is committed and
 * answers only once the outcome is, so a call the provider served always has its row, even if the process is killed
 * the next instant, while the write cost is shared by all concurrent requests.
 */
export class UsageRecorder {
  readonly #opened: GroupCommit<CallRow>;
  readonly #completed: GroupCommit<CallRow>;

  constructor(store: GatewayStore, options: { maxBatch?: number } = {}) {
    // One INSERT statement holds at most 500 rows (UsageLog.open).
    const maxBatch = Math.min(500, options.maxBatch ?? 500);
    this.#opened = new GroupCommit((rows) => store.usage.open(rows), maxBatch);
    this.#completed = new GroupCommit((rows) => store.usage.complete(rows), maxBatch);
  }

  /** Rows per committed batch of outcomes, for metrics. */
  set onBatch(observe: ((rows: number) => void) | null) {
    this.#completed.onBatch = observe;
  }

  /** Writes a call's pending row; resolves once it is committed. */
  open(row: CallRow): Promise<void> {
    return this.#opened.add(row);
  }

  /** Writes a call's outcome (or a refusal) and settles its holds; resolves once both are committed. */
  complete(row: CallRow): Promise<void> {
    return this.#completed.add(row);
  }

  /** Waits until every row handed in so far is written. */
  async drain(): Promise<void> {
    await this.#opened.drain();
    await this.#completed.drain();
  }
}
