import { GroupCommit, type CallRow, type GatewayStore } from './storage/index.ts';

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
