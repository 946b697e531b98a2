/**
 * Batching across requests (design decision 6): every predict call submits its tokenized sequences here; the
 * scheduler merges the sequences of all waiting requests into onnxruntime runs and hands each request back, in its
 * own input order, the run output and the row its sequence occupied. Tokenizing before `submit` and shaping after it
 * stay outside: the scheduler only decides which sequences run together, and when.
 *
 * When a run starts: whenever fewer than `maxRunsInFlight` runs are going and the queue holds work, and
 *   - the oldest queued sequence has waited `maxWaitMs` (0: at the end of the current event-loop turn, so that the
 *     sequences submitted in the same turn, and the I/O that arrived during a run, join it), or
 *   - the queue holds a full batch's worth of work (`maxBatchTokens` tokens or `maxBatchSequences` sequences), or
 *   - the scheduler is closing (drain).
 * While the allowed runs are going, sequences accumulate.
 *
 * Which sequences run together: the oldest queued sequence is always in the next batch (nothing starves), and the
 * batch's padded size (rows × its longest row) stays within `maxBatchTokens` — a single sequence longer than that
 * runs alone. With `groupByLength`, the other rows are the oldest's neighbours in token length: among the runs of
 * the length-sorted queue that contain the oldest sequence and fit the budget, the one with the lowest estimated
 * cost per real token, where a run costs `runOverheadTokens + rows × longest` (the fixed cost of a run expressed in
 * tokens, plus every padded position). That both fills batches when lengths are alike and refuses to pad a short
 * sequence up to a long one when a separate run is cheaper. Without it (FIFO), batches are taken in arrival order.
 */
import { ConfigError, InternalError } from './errors.ts';

/** What the scheduler needs of a sequence: its token count (`ids.length`, special tokens included). */
export interface Sequence {
  readonly ids: { readonly length: number };
}

/** What the scheduler knows of a run as it starts it. */
export interface RunContext {
  /**
   * No other run is going, and none will start beside it unless new work arrives: the batch is a lone query, or
   * requests that arrived together (when their rows make several runs, the rest waits for this one if the runner has
   * a solo session: `soloAvailable`). A runner with a session that uses every core for one batch runs it there
   * (inference-workers.ts, the solo session); otherwise other runs would share the cores with it.
   */
  readonly alone: boolean;
}

/** Runs one batch; the rows are in the order the batch is to be run (rows of several requests, grouped by length). */
export type BatchRunner<S extends Sequence, Output> = (rows: readonly S[], context: RunContext) => Promise<Output>;

/** Where one submitted sequence ended up: the output of its batch, and its row in that batch. */
export interface ScheduledRow<Output> {
  readonly output: Output;
  readonly row: number;
}

/** The scheduler's view of time; injectable so that tests decide when timers and deferred work fire. */
export interface SchedulerClock {
  now(): number;
  setTimer(callback: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
  /** Runs `callback` after the I/O callbacks of the current event-loop turn (setImmediate). */
  afterIo(callback: () => void): void;
}

export const REAL_CLOCK: SchedulerClock = {
  now: () => performance.now(),
  setTimer: (callback, ms) => setTimeout(callback, ms),
  clearTimer: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
  afterIo: (callback) => void setImmediate(callback),
};

export interface BatchSettings {
  /** Largest padded size of a batch: rows × longest row, in tokens. A longer single sequence runs alone. */
  maxBatchTokens: number;
  /** Longest the oldest queued sequence waits for more work to join it while a run could start. */
  maxWaitMs: number;
  /** Largest number of rows in a batch (Infinity: only the token budget bounds it). */
  maxBatchSequences: number;
  /** Runs that may be going at once. */
  maxRunsInFlight: number;
  /** Group rows of similar length (true) or take them in arrival order (false). */
  groupByLength: boolean;
  /** Fixed cost of one run in units of one token's cost: how much padding a separate run is worth. */
  runOverheadTokens: number;
}

export type BatchSchedulerOptions = Partial<BatchSettings> & {
  clock?: SchedulerClock;
  /**
   * Whether the runner can run a batch on every core now (a solo session that has loaded). Then a run started with
   * nothing else going is `alone` even when more rows of its own requests remain queued, and those wait for it rather
   * than run beside it on a single-threaded session, until new work is submitted: the rows of a lone request that
   * make two runs took 22-25 ms one after the other on two threads, 27-31 ms side by side on one thread each (8 inputs,
   * MiniLM shape, docs/benchmarks.md). Other requests' rows never wait: two one-input requests run side by side.
   * Default: never.
   */
  soloAvailable?: () => boolean;
};

/** Defaults chosen by `node bench/batching.bench.ts` on the MiniLM-shaped model; see docs/decisions.md. */
export const DEFAULT_BATCH_SETTINGS: Readonly<BatchSettings> = Object.freeze({
  maxBatchTokens: 1024,
  maxWaitMs: 0,
  maxBatchSequences: Infinity,
  maxRunsInFlight: 1,
  groupByLength: true,
  runOverheadTokens: 16,
});

/** Counters since the scheduler was created. */
export interface BatchStats {
  /** Calls of submit with at least one sequence. */
  requests: number;
  /** Runs started (including failed ones). */
  runs: number;
  failedRuns: number;
  /** Runs of one request's rows alone, after a run holding several requests failed (counted in runs too). */
  isolatedRuns: number;
  /** Sequences run, and their tokens without and with padding. */
  sequences: number;
  tokens: number;
  paddedTokens: number;
  /** Largest padded size of a run, and the runs of one sequence longer than maxBatchTokens. */
  largestBatchTokens: number;
  oversizeRuns: number;
  /** Now: sequences waiting, runs going. */
  queuedSequences: number;
  runsInFlight: number;
}

/** One onnxruntime run as it ended, for observers (serve's metrics). */
export interface BatchRun {
  /** Rows run, and their tokens without and with padding (rows × longest). */
  readonly rows: number;
  readonly tokens: number;
  readonly paddedTokens: number;
  /**
   * How long each row waited in the queue before the run started, in ms. Empty for the run of one request's rows
   * alone after a shared run failed: those rows' wait was reported with the first run.
   */
  readonly queueWaitsMs: readonly number[];
  /** From the start of the run to its output or failure, in ms. */
  readonly durationMs: number;
  readonly failed: boolean;
}

export type BatchRunListener = (run: BatchRun) => void;

interface PendingRequest<Output> {
  readonly rows: ScheduledRow<Output>[];
  remaining: number;
  settled: boolean;
  resolve(rows: ScheduledRow<Output>[]): void;
  reject(error: unknown): void;
}

interface QueuedSequence<S, Output> {
  readonly sequence: S;
  /** Token count used for budgets (at least 1). */
  readonly tokens: number;
  readonly request: PendingRequest<Output>;
  readonly index: number;
  readonly enqueuedAt: number;
  /** Arrival order, to keep sorting stable and FIFO exact. */
  readonly order: number;
}

export class BatchScheduler<S extends Sequence, Output> {
  readonly settings: Readonly<BatchSettings>;
  readonly #runner: BatchRunner<S, Output>;
  readonly #clock: SchedulerClock;
  /** In arrival order: the first item is the oldest. */
  #queue: QueuedSequence<S, Output>[] = [];
  #queuedTokens = 0;
  #arrivals = 0;
  #running = 0;
  #pumpScheduled = false;
  #timer: unknown = undefined;
  #closing: Promise<void> | undefined;
  /** Runs start without waiting for more work to join them (hurry()). */
  #hurried = false;
  readonly #soloAvailable: () => boolean;
  /** While a run that is alone goes: the submits counted when it started (work submitted since may run beside it). */
  #aloneSince: number | null = null;
  #drained: (() => void) | undefined;
  readonly #listeners = new Set<BatchRunListener>();
  readonly #stats = {
    requests: 0,
    runs: 0,
    failedRuns: 0,
    isolatedRuns: 0,
    sequences: 0,
    tokens: 0,
    paddedTokens: 0,
    largestBatchTokens: 0,
    oversizeRuns: 0,
  };

  constructor(runner: BatchRunner<S, Output>, options: BatchSchedulerOptions = {}) {
    this.settings = resolveBatchSettings(options);
    this.#runner = runner;
    this.#clock = options.clock ?? REAL_CLOCK;
    this.#soloAvailable = options.soloAvailable ?? (() => false);
  }

  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /**
   * Queues the sequences of one request. Resolves with one entry per sequence, in the order given, once all have
   * run; rejects with the runner's error if a run of them fails (its other sequences are dropped). A failed run that
   * held several requests is run again per request, so that only the request whose rows fail is rejected.
   */
  submit(sequences: readonly S[]): Promise<ScheduledRow<Output>[]> {
    if (this.#closing) return Promise.reject(new InternalError('the model is shutting down; the request was not run'));
    if (sequences.length === 0) return Promise.resolve([]);
    const { promise, resolve, reject } = Promise.withResolvers<ScheduledRow<Output>[]>();
    const request: PendingRequest<Output> = {
      rows: new Array<ScheduledRow<Output>>(sequences.length),
      remaining: sequences.length,
      settled: false,
      resolve,
      reject,
    };
    const now = this.#clock.now();
    sequences.forEach((sequence, index) => {
      const tokens = Math.max(1, sequence.ids.length);
      this.#queue.push({ sequence, tokens, request, index, enqueuedAt: now, order: this.#arrivals++ });
      this.#queuedTokens += tokens;
    });
    this.#stats.requests++;
    this.#wake();
    return promise;
  }

  stats(): BatchStats {
    return { ...this.#stats, queuedSequences: this.#queue.length, runsInFlight: this.#running };
  }

  /** Calls `listener` as each run ends, failed ones included; returns the function that stops it. */
  observe(listener: BatchRunListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * From now on, queued work runs without waiting `maxWaitMs` for more to join it, while submits are still taken: a
   * pipeline that is shutting down finishes the pieces of the requests it accepted, then closes.
   */
  hurry(): void {
    this.#hurried = true;
    this.#pump();
  }

  /**
   * Stops taking work and drains: what is queued runs at once (no waiting for more), and the returned promise
   * resolves when every run has finished. Later submits reject. Idempotent.
   */
  close(): Promise<void> {
    if (!this.#closing) {
      const { promise, resolve } = Promise.withResolvers<void>();
      this.#drained = resolve;
      this.#closing = promise;
      this.#clearTimer();
      this.#pump();
      this.#checkDrained();
    }
    return this.#closing;
  }

  /** Decide at the end of this event-loop turn, so that everything submitted in this turn can join. */
  #wake(): void {
    if (this.#pumpScheduled) return;
    this.#pumpScheduled = true;
    this.#clock.afterIo(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    this.#clearTimer();
    const { maxWaitMs, maxBatchTokens, maxBatchSequences, maxRunsInFlight } = this.settings;
    while (this.#queue.length > 0 && this.#running < maxRunsInFlight) {
      // the rest of a lone run's work waits for it, unless more arrived since it started (then it is load)
      if (this.#aloneSince === this.#stats.requests && !this.#closing) return;
      const waited = this.#clock.now() - this.#queue[0].enqueuedAt;
      const full = this.#queuedTokens >= maxBatchTokens || this.#queue.length >= maxBatchSequences;
      if (!(this.#closing || this.#hurried || full || waited >= maxWaitMs)) {
        this.#timer = this.#clock.setTimer(() => {
          this.#timer = undefined;
          this.#pump();
        }, maxWaitMs - waited);
        return;
      }
      this.#start(this.settings.groupByLength ? this.#takeGrouped() : this.#takeInOrder());
    }
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
  }

  /** FIFO: the longest prefix of the queue that fits the budget (at least the oldest sequence). */
  #takeInOrder(): QueuedSequence<S, Output>[] {
    const { maxBatchTokens, maxBatchSequences } = this.settings;
    let longest = this.#queue[0].tokens;
    let count = 1;
    while (count < this.#queue.length && count < maxBatchSequences) {
      const next = Math.max(longest, this.#queue[count].tokens);
      if ((count + 1) * next > maxBatchTokens) break;
      longest = next;
      count++;
    }
    return this.#remove(new Set(this.#queue.slice(0, count)));
  }

  /**
   * Grouped by length: the contiguous run [i..j] of the length-sorted queue that holds the oldest sequence, fits the
   * budget, and has the lowest (runOverheadTokens + rows × longest) / real tokens. For a fixed longest row j, the
   * ratio first falls then rises as shorter rows are added (each added row is no longer than the one before), so the
   * scan down from the oldest stops at the first rise.
   */
  #takeGrouped(): QueuedSequence<S, Output>[] {
    const { maxBatchTokens, maxBatchSequences, runOverheadTokens } = this.settings;
    const oldest = this.#queue[0];
    const sorted = [...this.#queue].sort((a, b) => a.tokens - b.tokens || a.order - b.order);
    const p = sorted.indexOf(oldest);
    const prefix = new Float64Array(sorted.length + 1);
    for (let k = 0; k < sorted.length; k++) prefix[k + 1] = prefix[k] + sorted[k].tokens;

    let best = { from: p, to: p, rows: 1, ratio: (runOverheadTokens + oldest.tokens) / oldest.tokens };
    for (let j = p; j < sorted.length; j++) {
      const longest = sorted[j].tokens;
      const rowsCap = Math.min(maxBatchSequences, Math.floor(maxBatchTokens / longest));
      // Rows are sorted, so a longer last row only lowers the cap while the window to the oldest only grows.
      if (j - p + 1 > rowsCap) break;
      let previous = Infinity;
      for (let i = p; i >= 0 && j - i + 1 <= rowsCap; i--) {
        const rows = j - i + 1;
        const ratio = (runOverheadTokens + rows * longest) / (prefix[j + 1] - prefix[i]);
        if (ratio < best.ratio - 1e-12 || (Math.abs(ratio - best.ratio) <= 1e-12 && rows > best.rows)) {
          best = { from: i, to: j, rows, ratio };
        }
        if (ratio > previous) break;
        previous = ratio;
      }
    }
    return this.#remove(new Set(sorted.slice(best.from, best.to + 1)), sorted.slice(best.from, best.to + 1));
  }

  /** Takes `items` out of the queue; returns them in `order` (default: queue order). */
  #remove(items: ReadonlySet<QueuedSequence<S, Output>>, order?: QueuedSequence<S, Output>[]): QueuedSequence<S, Output>[] {
    const taken: QueuedSequence<S, Output>[] = [];
    this.#queue = this.#queue.filter((item) => {
      if (!items.has(item)) return true;
      taken.push(item);
      this.#queuedTokens -= item.tokens;
      return false;
    });
    return order ?? taken;
  }

  #start(batch: QueuedSequence<S, Output>[]): void {
    const { tokens, paddedTokens: padded } = sizeOf(batch);
    const stats = this.#stats;
    stats.runs++;
    stats.sequences += batch.length;
    stats.tokens += tokens;
    stats.paddedTokens += padded;
    if (padded > this.settings.maxBatchTokens) stats.oversizeRuns++;
    else stats.largestBatchTokens = Math.max(stats.largestBatchTokens, padded);
    const context: RunContext = { alone: this.#running === 0 && (this.#queue.length === 0 || (this.#soloAvailable() && this.#onlyRowsOf(batch))) };
    const lone = context.alone && this.#queue.length > 0; // the rest of its requests' rows waits for it (#pump)
    if (lone) this.#aloneSince = this.#stats.requests;
    this.#running++;

    const startedAt = this.#clock.now();
    let run: Promise<Output>;
    try {
      run = this.#runner(batch.map((item) => item.sequence), context);
    } catch (error) {
      run = Promise.reject(error);
    }
    run.then(
      (output) => {
        this.#report(batch, startedAt, false, true);
        this.#deliver(batch, output);
      },
      (error: unknown) => {
        this.#report(batch, startedAt, true, true);
        stats.failedRuns++;
        const requests = [...new Set(batch.map((item) => item.request))].filter((request) => !request.settled);
        if (requests.length <= 1) return this.#fail(requests, error);
        // One request's inputs can make a whole run fail (a transform that errors or loops on them, a value the
        // model rejects): its neighbours in the batch should not fail with it, so each request's rows run alone.
        return this.#runEachAlone(batch, requests);
      },
    ).finally(() => {
      if (lone) this.#aloneSince = null;
      this.#running--;
      if (this.#closing) this.#pump();
      else this.#wake();
      this.#checkDrained();
    });
  }

  /** Whether everything queued belongs to the requests of `batch` (the rows of a lone request that make more runs). */
  #onlyRowsOf(batch: readonly QueuedSequence<S, Output>[]): boolean {
    const requests = new Set(batch.map((item) => item.request));
    return this.#queue.every((item) => requests.has(item.request));
  }

  /** Row `i` of `output` belongs to `items[i]`; a request is resolved once all its rows are placed. */
  #deliver(items: readonly QueuedSequence<S, Output>[], output: Output): void {
    items.forEach((item, row) => {
      const request = item.request;
      if (request.settled) return;
      request.rows[item.index] = { output, row };
      if (--request.remaining === 0) {
        request.settled = true;
        request.resolve(request.rows);
      }
    });
  }

  /** Rejects the requests and drops their sequences still queued, which would never be answered. */
  #fail(requests: readonly PendingRequest<Output>[], error: unknown): void {
    const failed = new Set<PendingRequest<Output>>();
    for (const request of requests) {
      if (request.settled) continue;
      request.settled = true;
      failed.add(request);
      request.reject(error);
    }
    if (this.#queue.some((item) => failed.has(item.request))) {
      this.#remove(new Set(this.#queue.filter((item) => failed.has(item.request))));
    }
  }

  /** After a failed run of several requests: each request's rows of that batch as a run of their own, in turn. */
  async #runEachAlone(batch: readonly QueuedSequence<S, Output>[], requests: readonly PendingRequest<Output>[]): Promise<void> {
    for (const request of requests) {
      if (request.settled) continue;
      const items = batch.filter((item) => item.request === request);
      this.#stats.runs++;
      this.#stats.isolatedRuns++;
      const startedAt = this.#clock.now();
      try {
        const output = await this.#runner(items.map((item) => item.sequence), { alone: false });
        this.#report(items, startedAt, false, false);
        this.#deliver(items, output);
      } catch (error) {
        this.#report(items, startedAt, true, false);
        this.#stats.failedRuns++;
        this.#fail([request], error);
      }
    }
  }

  /**
   * Tells the observers of a run that ended, after the I/O of this turn (afterIo): the requests it answers are shaped
   * and written first, so that observers (serve's metrics) add nothing to their latency. One that throws must not
   * break the runs it observes: its error is dropped.
   */
  #report(items: readonly QueuedSequence<S, Output>[], startedAt: number, failed: boolean, firstRun: boolean): void {
    if (this.#listeners.size === 0) return;
    const run: BatchRun = {
      rows: items.length,
      ...sizeOf(items),
      queueWaitsMs: firstRun ? items.map((item) => startedAt - item.enqueuedAt) : [],
      durationMs: this.#clock.now() - startedAt,
      failed,
    };
    this.#clock.afterIo(() => {
      for (const listener of this.#listeners) {
        try {
          listener(run);
        } catch {
          // the run's requests are answered whatever an observer does
        }
      }
    });
  }

  #checkDrained(): void {
    if (this.#drained && this.#running === 0 && this.#queue.length === 0) {
      this.#drained();
      this.#drained = undefined;
    }
  }
}

/** The tokens of a batch's rows without and with padding (rows × longest row). */
function sizeOf(items: readonly { readonly tokens: number }[]): { tokens: number; paddedTokens: number } {
  let longest = 0;
  let tokens = 0;
  for (const item of items) {
    longest = Math.max(longest, item.tokens);
    tokens += item.tokens;
  }
  return { tokens, paddedTokens: longest * items.length };
}

/** The defaults completed with the options given (undefined ones ignored); a bad value is a ConfigError. */
export function resolveBatchSettings(options: BatchSchedulerOptions = {}): Readonly<BatchSettings> {
  const settings = { ...DEFAULT_BATCH_SETTINGS };
  for (const key of Object.keys(DEFAULT_BATCH_SETTINGS) as (keyof BatchSettings)[]) {
    if (options[key] !== undefined) (settings as Record<string, unknown>)[key] = options[key];
  }
  return Object.freeze(validateSettings(settings));
}

function validateSettings(settings: BatchSettings): BatchSettings {
  const positiveInteger = (name: keyof BatchSettings, allowInfinity = false) => {
    const value = settings[name] as number;
    if (!((Number.isInteger(value) && value >= 1) || (allowInfinity && value === Infinity))) {
      throw new ConfigError(`${name} must be a positive integer, got ${String(value)}`);
    }
  };
  positiveInteger('maxBatchTokens');
  positiveInteger('maxBatchSequences', true);
  positiveInteger('maxRunsInFlight');
  if (!(Number.isFinite(settings.maxWaitMs) && settings.maxWaitMs >= 0)) {
    throw new ConfigError(`maxWaitMs must be a number of milliseconds >= 0, got ${String(settings.maxWaitMs)}`);
  }
  if (!(Number.isFinite(settings.runOverheadTokens) && settings.runOverheadTokens >= 0)) {
    throw new ConfigError(`runOverheadTokens must be >= 0, got ${String(settings.runOverheadTokens)}`);
  }
  return settings;
}
