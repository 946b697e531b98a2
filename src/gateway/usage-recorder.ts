import type { BudgetSettlement, GatewayStore, UsageRecord } from './storage/index.ts';

interface Pending {
  row: UsageRecord;
  settlements: BudgetSettlement[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for usage rows: rows that arrive while a write is in progress (or in the same turn of the event
 * loop) go to the database together in one transaction, and each caller's promise resolves when its row is
 * committed. The HTTP layer answers only after that, so a response that was sent always has its row on disk
 * even if the process is killed the next instant, while the write cost is shared by all concurrent requests.
 */
export class UsageRecorder {
  readonly #store: GatewayStore;
  readonly #maxBatch: number;
  #queue: Pending[] = [];
  #flushing: Promise<void> | null = null;
  #scheduled = false;
  /** Rows per committed batch, for metrics. */
  onBatch: ((rows: number) => void) | null = null;

  constructor(store: GatewayStore, options: { maxBatch?: number } = {}) {
    this.#store = store;
    this.#maxBatch = options.maxBatch ?? 500;
  }

  record(row: UsageRecord, settlements: BudgetSettlement[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ row, settlements, resolve, reject });
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
        await this.#store.usage.record(
          batch.map((p) => p.row),
          batch.flatMap((p) => p.settlements),
        );
        this.onBatch?.(batch.length);
        for (const p of batch) p.resolve();
      } catch (error) {
        if (batch.length === 1) batch[0].reject(error);
        // One row the database refuses must not lose the others' rows and settlements: write them one by one.
        else for (const p of batch) await this.#store.usage.record([p.row], p.settlements).then(p.resolve, p.reject);
      }
    }
  }

  /** Waits until every row handed in so far is written. */
  async drain(): Promise<void> {
    while (this.#queue.length > 0 || this.#flushing || this.#scheduled) {
      await (this.#flushing ?? new Promise((resolve) => setImmediate(resolve)));
    }
  }
}
