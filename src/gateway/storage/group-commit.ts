interface Queued<T, R> {
  item: T;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit: items that arrive while a write is in progress (or in the same turn of the event loop) go to the
 * database together in one write, and each caller's promise resolves, with its own item's result, when the batch is
 * committed. If the database refuses a batch, its items are written again one by one, so one bad item cannot take
 * the others with it. One write at a time: under concurrency the database sees one statement per batch, not one per
 * item, and the batch grows with the load.
 */
export class GroupCommit<T, R = void> {
  /** Writes a batch; the result of each item, in order (nothing: every item's result is undefined). */
  readonly #write: (items: T[]) => Promise<R[] | void>;
  readonly #maxBatch: number;
  #queue: Queued<T, R>[] = [];
  #flushing: Promise<void> | null = null;
  #scheduled = false;
  onBatch: ((items: number) => void) | null = null;

  constructor(write: (items: T[]) => Promise<R[] | void>, maxBatch: number) {
    this.#write = write;
    this.#maxBatch = maxBatch;
  }

  add(item: T): Promise<R> {
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
        const results = await this.#write(batch.map((q) => q.item));
        this.onBatch?.(batch.length);
        for (const [i, q] of batch.entries()) q.resolve(results?.[i] as R);
      } catch (error) {
        if (batch.length === 1) batch[0].reject(error);
        else for (const q of batch) await this.#write([q.item]).then((results) => q.resolve(results?.[0] as R), q.reject);
      }
    }
  }

  async drain(): Promise<void> {
    while (this.#queue.length > 0 || this.#flushing || this.#scheduled) {
      await (this.#flushing ?? new Promise((resolve) => setImmediate(resolve)));
    }
  }
}
