import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGLISH_WORDS } from '../../scripts/model-generator/english-words.ts';
import {
  BatchScheduler,
  DEFAULT_BATCH_SETTINGS,
  type BatchRun,
  type BatchSchedulerOptions,
  type RunContext,
  type SchedulerClock,
  type ScheduledRow,
} from '../../src/encoder/batch-scheduler.ts';
import { parseBuildConfig, type ModelType } from '../../src/encoder/config.ts';
import { ConfigError, InputError, InternalError } from '../../src/encoder/errors.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { PipelineOptions } from '../../src/encoder/pipeline-options.ts';
import type {
  EmbeddingResponse,
  PredictResponse,
  SequenceClassificationResponse,
  TokenClassificationResponse,
} from '../../src/encoder/schemas.ts';
import { generateTinyModelsOfEachType } from '../helpers/generated-models.ts';

// ---------------------------------------------------------------------------------------------------------------
// Unit tests: a fake clock and a fake runner, so every decision point is deterministic.

/** Time moves only when told; deferred (setImmediate) work runs on flush. */
class FakeClock implements SchedulerClock {
  time = 0;
  #timers: { at: number; callback: () => void; id: number }[] = [];
  #deferred: (() => void)[] = [];
  #ids = 0;

  now(): number {
    return this.time;
  }
  setTimer(callback: () => void, ms: number): unknown {
    const id = ++this.#ids;
    this.#timers.push({ at: this.time + ms, callback, id });
    return id;
  }
  clearTimer(handle: unknown): void {
    this.#timers = this.#timers.filter((timer) => timer.id !== handle);
  }
  afterIo(callback: () => void): void {
    this.#deferred.push(callback);
  }

  /** Settles promise chains and runs deferred work until there is none: the end of "this event-loop turn". */
  async flush(): Promise<void> {
    for (;;) {
      await new Promise((resolve) => setImmediate(resolve));
      const deferred = this.#deferred.splice(0);
      if (deferred.length === 0) return;
      for (const callback of deferred) callback();
    }
  }

  /** Moves time forward, firing due timers in order. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    await this.flush();
    for (;;) {
      const due = this.#timers.filter((timer) => timer.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.time = due.at;
      this.clearTimer(due.id);
      due.callback();
      await this.flush();
    }
    this.time = end;
    await this.flush();
  }
}

/** A sequence of `tokens` tokens; `name` identifies it in assertions. */
interface FakeSequence {
  ids: { length: number };
  name: string;
}
const seq = (name: string, tokens: number): FakeSequence => ({ ids: { length: tokens }, name });

interface FakeRun {
  rows: readonly FakeSequence[];
  context: RunContext;
  resolve(output: string): void;
  reject(error: unknown): void;
}

/** A runner whose runs finish only when the test says so; the output of run k is `run<k>`. */
function manualRunner() {
  const runs: FakeRun[] = [];
  const runner = (rows: readonly FakeSequence[], context: RunContext) => {
    const { promise, resolve, reject } = Promise.withResolvers<string>();
    runs.push({ rows, context, resolve, reject });
    return promise;
  };
  return { runs, runner };
}

function fakeScheduler(options: BatchSchedulerOptions = {}) {
  const clock = new FakeClock();
  const { runs, runner } = manualRunner();
  const scheduler = new BatchScheduler<FakeSequence, string>(runner, { maxWaitMs: 0, ...options, clock });
  return { clock, runs, scheduler };
}

/** Records how a promise ended, without an unhandled rejection. */
function track<T>(promise: Promise<T>) {
  const state: { value?: T; error?: unknown; done: boolean } = { done: false };
  promise.then(
    (value) => Object.assign(state, { value, done: true }),
    (error: unknown) => Object.assign(state, { error, done: true }),
  );
  return state;
}

/** The sequences a request got back, read from the rows of the runs they were in. */
function sequencesOf(placed: readonly ScheduledRow<string>[], runs: readonly FakeRun[]): string[] {
  return placed.map(({ output, row }) => runs[Number(output.slice(3))].rows[row].name);
}

/** Deterministic pseudo-random integers. */
function random(seed: number): (below: number) => number {
  let state = seed >>> 0 || 1;
  return (below) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return (state >>> 8) % below;
  };
}

describe('BatchScheduler with a fake runner and clock', () => {
  it('merges the sequences of concurrent requests into one run and gives each request its rows in its own order', async () => {
    // A high run overhead makes one run of all six the cheapest, whatever the padding.
    const { clock, runs, scheduler } = fakeScheduler({ runOverheadTokens: 100 });
    const a = track(scheduler.submit([seq('a0', 9), seq('a1', 3), seq('a2', 6)]));
    const b = track(scheduler.submit([seq('b0', 4)]));
    const c = track(scheduler.submit([seq('c0', 8), seq('c1', 2)]));
    expect(runs).toHaveLength(0); // decided at the end of the turn, so that all three join
    await clock.flush();
    expect(runs).toHaveLength(1);
    expect(runs[0].rows.map((r) => r.ids.length)).toEqual([2, 3, 4, 6, 8, 9]); // grouped by length
    runs[0].resolve('run0');
    await clock.flush();
    expect(sequencesOf(a.value!, runs)).toEqual(['a0', 'a1', 'a2']);
    expect(sequencesOf(b.value!, runs)).toEqual(['b0']);
    expect(sequencesOf(c.value!, runs)).toEqual(['c0', 'c1']);
    expect(scheduler.stats()).toMatchObject({ requests: 3, runs: 1, sequences: 6, tokens: 32, paddedTokens: 54, queuedSequences: 0 });
    expect(await scheduler.submit([])).toEqual([]);
  });

  it('accumulates while a run is in flight and runs the backlog together when it ends', async () => {
    const { clock, runs, scheduler } = fakeScheduler();
    const first = track(scheduler.submit([seq('x', 5)]));
    await clock.flush();
    expect(runs).toHaveLength(1);
    const later = [1, 2, 3, 4].map((i) => track(scheduler.submit([seq(`y${i}`, 5)])));
    await clock.advance(100);
    expect(runs).toHaveLength(1); // one run at a time
    expect(scheduler.stats()).toMatchObject({ queuedSequences: 4, runsInFlight: 1 });
    runs[0].resolve('run0');
    await clock.flush();
    expect(first.done).toBe(true);
    expect(runs).toHaveLength(2);
    expect(runs[1].rows.map((r) => r.name).sort()).toEqual(['y1', 'y2', 'y3', 'y4']);
    runs[1].resolve('run1');
    await clock.flush();
    expect(later.every((t) => t.done && t.error === undefined)).toBe(true);
  });

  it('waits at most maxWaitMs for more work while idle, and not at all once a batch is full', async () => {
    const { clock, runs, scheduler } = fakeScheduler({ maxWaitMs: 5, maxBatchTokens: 40 });
    track(scheduler.submit([seq('lone', 10)]));
    await clock.advance(4.9);
    expect(runs).toHaveLength(0);
    track(scheduler.submit([seq('joins', 10)]));
    await clock.advance(0.1); // the oldest has waited 5 ms: both go
    expect(runs).toHaveLength(1);
    expect(runs[0].rows.map((r) => r.name)).toEqual(['lone', 'joins']);
    runs[0].resolve('run0');
    await clock.flush();

    // 40 queued tokens fill the budget: no waiting
    track(scheduler.submit([seq('f1', 20), seq('f2', 20)]));
    await clock.flush();
    expect(runs).toHaveLength(2);
    expect(clock.time).toBe(5);
  });

  it('with maxWaitMs 0 runs a lone request at the end of the turn, without a timer', async () => {
    const { clock, runs, scheduler } = fakeScheduler({ maxWaitMs: 0 });
    track(scheduler.submit([seq('lone', 10)]));
    await clock.flush();
    expect(runs).toHaveLength(1);
    expect(clock.time).toBe(0);
  });

  it('never exceeds the token budget; a sequence longer than the budget runs alone', async () => {
    for (const groupByLength of [true, false]) {
      const clock = new FakeClock();
      const batches: FakeSequence[][] = [];
      const scheduler = new BatchScheduler<FakeSequence, number>(
        async (rows) => {
          batches.push([...rows]);
          return batches.length;
        },
        { maxBatchTokens: 64, maxWaitMs: 0, groupByLength, clock },
      );
      const next = random(7);
      const requests = Array.from({ length: 60 }, (_, r) =>
        scheduler.submit(Array.from({ length: 1 + next(8) }, (_, i) => seq(`${r}.${i}`, 2 + next(r % 10 === 0 ? 120 : 30)))),
      );
      await clock.flush();
      await Promise.all(requests);
      let oversize = 0;
      for (const rows of batches) {
        const longest = Math.max(...rows.map((r) => r.ids.length));
        if (longest > 64) {
          expect(rows).toHaveLength(1);
          oversize++;
        } else {
          expect(rows.length * longest).toBeLessThanOrEqual(64);
        }
      }
      expect(oversize).toBeGreaterThan(0);
      const stats = scheduler.stats();
      expect(stats.oversizeRuns).toBe(oversize);
      expect(stats.largestBatchTokens).toBeLessThanOrEqual(64);
      expect(stats.sequences).toBe(batches.flat().length);
    }
  });

  it('grouping by length pads less than taking sequences in arrival order', async () => {
    const padded: Record<string, number> = {};
    for (const groupByLength of [true, false]) {
      const clock = new FakeClock();
      const scheduler = new BatchScheduler<FakeSequence, null>(async () => null, { maxBatchTokens: 256, maxWaitMs: 0, groupByLength, clock });
      const next = random(11);
      const requests = Array.from({ length: 50 }, (_, r) =>
        scheduler.submit(Array.from({ length: 1 + next(8) }, (_, i) => seq(`${r}.${i}`, 3 + next(60)))),
      );
      await clock.flush();
      await Promise.all(requests);
      const stats = scheduler.stats();
      padded[String(groupByLength)] = stats.paddedTokens - stats.tokens;
    }
    expect(padded.true).toBeLessThan(padded.false / 3);
  });

  it('does not pad a short sequence up to a long one when a separate run is cheaper', async () => {
    const { clock, runs, scheduler } = fakeScheduler({ maxBatchTokens: 1000, runOverheadTokens: 16 });
    track(scheduler.submit([seq('long', 100), ...Array.from({ length: 9 }, (_, i) => seq(`short${i}`, 10))]));
    await clock.flush();
    expect(runs[0].rows.map((r) => r.name)).toEqual(['long']); // the oldest, alone: 9 x 90 padded tokens cost more than a run
    runs[0].resolve('run0');
    await clock.flush();
    expect(runs[1].rows).toHaveLength(9);
  });

  it('is fair: the oldest waiting sequence is in every batch, so a long one among a stream of short ones completes', async () => {
    const clock = new FakeClock();
    const arrival = new Map<string, number>();
    const queued = new Set<string>();
    let violations = 0;
    let runCount = 0;
    let count = 0;
    let longRun = 0;
    const scheduler = new BatchScheduler<FakeSequence, number>(
      async (rows) => {
        const oldest = [...queued].sort((a, b) => arrival.get(a)! - arrival.get(b)!)[0];
        if (!rows.some((r) => r.name === oldest)) violations++;
        for (const r of rows) queued.delete(r.name);
        runCount++;
        if (rows.some((r) => r.name === 'long')) longRun = runCount;
        // A steady stream of short sequences arrives during every run; alone they would always make a cheaper
        // batch than the long one.
        if (runCount < 40) for (let i = 0; i < 8; i++) void submit(`s${count}`, 4);
        return runCount;
      },
      { maxBatchTokens: 64, maxWaitMs: 0, clock },
    );
    const submit = (name: string, tokens: number) => {
      arrival.set(name, count++);
      queued.add(name);
      return scheduler.submit([seq(name, tokens)]);
    };
    for (let i = 0; i < 20; i++) void submit(`s${count}`, 4);
    const long = track(submit('long', 60));
    await clock.flush();
    expect(long.done && long.error === undefined).toBe(true);
    expect(violations).toBe(0);
    expect(queued.size).toBe(0); // everything ran
    expect(scheduler.stats().sequences).toBe(count);
    // The 20 short sequences ahead of it fill one 64-token batch and part of a second; then it is the oldest.
    expect(longRun).toBe(3);
  });

  it('a failing run rejects exactly the requests it held, drops their queued sequences, and later runs work', async () => {
    const { clock, runs, scheduler } = fakeScheduler({ maxBatchTokens: 20 });
    const a = track(scheduler.submit([seq('a0', 10), seq('a1', 10)])); // one full batch
    const b = track(scheduler.submit([seq('b0', 10), seq('b1', 10)])); // the next
    const c = track(scheduler.submit([seq('c0', 10), seq('c1', 10), seq('c2', 10)])); // spans two batches
    await clock.flush();
    expect(runs).toHaveLength(1);
    expect(runs[0].rows.map((r) => r.name)).toEqual(['a0', 'a1']);
    runs[0].reject(new InternalError('onnxruntime failed: out of memory'));
    await clock.flush();
    expect(a.error).toEqual(new InternalError('onnxruntime failed: out of memory'));
    expect(b.done).toBe(false);
    expect(runs).toHaveLength(2);
    runs[1].resolve('run1');
    await clock.flush();
    expect(sequencesOf(b.value!, runs)).toEqual(['b0', 'b1']);
    expect(runs[2].rows.map((r) => r.name)).toEqual(['c0', 'c1']);
    runs[2].reject(new InternalError('transform line 2: boom'));
    await clock.flush();
    expect((c.error as Error).message).toBe('transform line 2: boom');
    expect(runs).toHaveLength(3); // c2 was dropped, never run
    expect(scheduler.stats()).toMatchObject({ runs: 3, failedRuns: 2, queuedSequences: 0, runsInFlight: 0 });

    const after = track(scheduler.submit([seq('d0', 5)]));
    await clock.flush();
    runs[3].resolve('run3');
    await clock.flush();
    expect(sequencesOf(after.value!, runs)).toEqual(['d0']);
  });

  it('a failing run of several requests runs each request alone, so only the request at fault fails', async () => {
    const { clock, runs, scheduler } = fakeScheduler({ maxBatchTokens: 100 });
    const a = track(scheduler.submit([seq('a0', 10), seq('a1', 10)]));
    const b = track(scheduler.submit([seq('b0', 10)]));
    const c = track(scheduler.submit([seq('c0', 10)]));
    await clock.flush();
    expect(runs.map((run) => run.rows.map((r) => r.name).sort())).toEqual([['a0', 'a1', 'b0', 'c0']]);
    runs[0].reject(new InternalError('transform: b0 makes it fail'));
    await clock.flush();
    expect(runs).toHaveLength(2); // one request at a time
    expect(runs[1].rows.map((r) => r.name)).toEqual(['a0', 'a1']);
    runs[1].resolve('run1');
    await clock.flush();
    expect(runs[2].rows.map((r) => r.name)).toEqual(['b0']);
    runs[2].reject(new InternalError('transform: b0 makes it fail'));
    await clock.flush();
    expect(runs[3].rows.map((r) => r.name)).toEqual(['c0']);
    const waiting = track(scheduler.submit([seq('d0', 10)])); // queued meanwhile: runs after the isolation
    await clock.flush();
    expect(runs).toHaveLength(4);
    runs[3].resolve('run3');
    await clock.flush();
    expect(sequencesOf(a.value!, runs)).toEqual(['a0', 'a1']);
    expect((b.error as Error).message).toBe('transform: b0 makes it fail');
    expect(sequencesOf(c.value!, runs)).toEqual(['c0']);
    expect(scheduler.stats()).toMatchObject({ runs: 5, failedRuns: 2, isolatedRuns: 3, runsInFlight: 1 }); // d0's run has started
    runs[4].resolve('run4');
    await clock.flush();
    expect(sequencesOf(waiting.value!, runs)).toEqual(['d0']);
  });

  it('tells observers of each run as it ends: rows, tokens, padding, waits and time, failed and isolated runs too', async () => {
    const { clock, runs, scheduler } = fakeScheduler({ maxBatchTokens: 100, maxWaitMs: 4 });
    const seen: BatchRun[] = [];
    scheduler.observe(() => {
      throw new Error('an observer that fails');
    });
    const stop = scheduler.observe((run) => seen.push(run));
    const a = track(scheduler.submit([seq('a0', 10), seq('a1', 6)]));
    await clock.advance(1);
    const b = track(scheduler.submit([seq('b0', 8)]));
    await clock.advance(3); // a has waited 4 ms, b 3 ms: the run starts
    expect(runs).toHaveLength(1);
    await clock.advance(7);
    runs[0].reject(new InternalError('fails with b0'));
    await clock.flush();
    expect(seen).toEqual([{ rows: 3, tokens: 24, paddedTokens: 30, queueWaitsMs: expect.arrayContaining([4, 4, 3]), durationMs: 7, failed: true }]);
    expect([...seen[0].queueWaitsMs].sort()).toEqual([3, 4, 4]);

    // each request's rows alone: their waits were told with the first run
    await clock.advance(2);
    runs[1].resolve('run1');
    await clock.flush();
    runs[2].reject(new InternalError('fails with b0'));
    await clock.flush();
    expect(seen.slice(1)).toEqual([
      { rows: 2, tokens: 16, paddedTokens: 20, queueWaitsMs: [], durationMs: 2, failed: false },
      { rows: 1, tokens: 8, paddedTokens: 8, queueWaitsMs: [], durationMs: 0, failed: true },
    ]);
    expect(sequencesOf(a.value!, runs)).toEqual(['a0', 'a1']); // the observer that throws changed nothing
    expect((b.error as Error).message).toBe('fails with b0');

    stop();
    track(scheduler.submit([seq('c0', 5)]));
    await clock.advance(4);
    runs[3].resolve('run3');
    await clock.flush();
    expect(seen).toHaveLength(3);
  });

  it('tells the runner whether a run is all the work there is (nothing else running or queued)', async () => {
    const { clock, runs, scheduler } = fakeScheduler({ maxBatchTokens: 16, maxRunsInFlight: 2 });
    track(scheduler.submit([seq('lone', 5)]));
    await clock.flush();
    expect(runs[0].context).toEqual({ alone: true });
    track(scheduler.submit([seq('beside', 5)])); // starts while the lone one runs
    await clock.flush();
    expect(runs[1].context).toEqual({ alone: false });
    runs[0].resolve('run0');
    runs[1].resolve('run1');
    await clock.flush();
    // one request whose rows make two runs: neither is alone, the other is queued or running beside it
    track(scheduler.submit([seq('a', 10), seq('b', 10)]));
    await clock.flush();
    expect(runs.slice(2).map((run) => run.context.alone)).toEqual([false, false]);
  });

  it('with a solo session, runs a lone request\'s runs one after another, until new work arrives', async () => {
    const { clock, runs, scheduler } = fakeScheduler({ maxBatchTokens: 16, maxRunsInFlight: 2, soloAvailable: () => true });
    const lone = track(scheduler.submit([seq('a', 10), seq('b', 10)])); // two runs: 20 tokens do not fit 16
    await clock.flush();
    expect(runs).toHaveLength(1); // the second waits for the first, on every core
    expect(runs[0].context).toEqual({ alone: true });
    runs[0].resolve('run0');
    await clock.flush();
    expect(runs).toHaveLength(2);
    expect(runs[1].context).toEqual({ alone: true });
    runs[1].resolve('run1');
    await clock.flush();
    expect(lone.done).toBe(true);

    // two requests that make two runs: neither waits for the other
    track(scheduler.submit([seq('x', 10)]));
    track(scheduler.submit([seq('y', 10)]));
    await clock.flush();
    expect(runs.slice(2).map((run) => run.context.alone)).toEqual([false, false]);
    runs[2].resolve('run2');
    runs[3].resolve('run3');
    await clock.flush();

    // work submitted while a lone run goes is load: what waits runs beside it, on the other sessions
    track(scheduler.submit([seq('c', 10), seq('d', 10)]));
    await clock.flush();
    expect(runs).toHaveLength(5);
    expect(runs[4].context).toEqual({ alone: true });
    track(scheduler.submit([seq('e', 4)]));
    await clock.flush();
    expect(runs).toHaveLength(6);
    expect(runs[5].context).toEqual({ alone: false });
    expect(scheduler.stats().runsInFlight).toBe(2);
  });

  it('a runner that throws instead of rejecting fails its batch the same way', async () => {
    const clock = new FakeClock();
    let calls = 0;
    const scheduler = new BatchScheduler<FakeSequence, string>(
      (rows) => {
        if (calls++ === 0) throw new InternalError('synchronous failure');
        return Promise.resolve(rows.map((r) => r.name).join());
      },
      { maxBatchTokens: 10, maxWaitMs: 0, clock },
    );
    const failed = track(scheduler.submit([seq('x', 10)]));
    const next = track(scheduler.submit([seq('y', 10)]));
    await clock.flush();
    expect((failed.error as Error).message).toBe('synchronous failure');
    expect(next.value).toEqual([{ output: 'y', row: 0 }]);
  });

  it('runs two batches at once when maxRunsInFlight is 2', async () => {
    const { clock, runs, scheduler } = fakeScheduler({ maxRunsInFlight: 2, maxBatchTokens: 10 });
    for (const name of ['a', 'b', 'c']) track(scheduler.submit([seq(name, 10)]));
    await clock.flush();
    expect(runs).toHaveLength(2);
    expect(scheduler.stats().runsInFlight).toBe(2);
    runs[0].resolve('run0');
    await clock.flush();
    expect(runs).toHaveLength(3);
  });

  it('close drains: queued work runs at once, close resolves after the last run, later submits reject', async () => {
    // 'a' and 'b' are too different in length to share a run, and together far from filling the budget.
    const { clock, runs, scheduler } = fakeScheduler({ maxWaitMs: 1000, maxBatchTokens: 1000 });
    const a = track(scheduler.submit([seq('a', 100)]));
    const b = track(scheduler.submit([seq('b', 10)]));
    await clock.flush();
    expect(runs).toHaveLength(0); // waiting for more work (maxWaitMs)
    const closed = track(scheduler.close());
    expect(scheduler.closed).toBe(true);
    expect(runs).toHaveLength(1); // draining does not wait
    const late = track(scheduler.submit([seq('late', 1)]));
    runs[0].resolve('run0');
    await clock.flush();
    expect(closed.done).toBe(false);
    expect(runs).toHaveLength(2);
    runs[1].resolve('run1');
    await clock.flush();
    expect(a.done && b.done && a.error === undefined && b.error === undefined).toBe(true);
    expect(closed.done).toBe(true);
    expect(late.error).toBeInstanceOf(InternalError);
    expect((late.error as Error).message).toMatch(/shutting down/);
    expect(scheduler.close()).toBe(scheduler.close());
  });

  it('rejects bad settings with a ConfigError and reports the effective ones', () => {
    const runner = async () => null;
    expect(() => new BatchScheduler(runner, { maxBatchTokens: 0 })).toThrow(ConfigError);
    expect(() => new BatchScheduler(runner, { maxBatchTokens: 1.5 })).toThrow(/maxBatchTokens must be a positive integer/);
    expect(() => new BatchScheduler(runner, { maxWaitMs: -1 })).toThrow(/maxWaitMs/);
    expect(() => new BatchScheduler(runner, { maxRunsInFlight: 0 })).toThrow(/maxRunsInFlight/);
    expect(new BatchScheduler(runner, { maxWaitMs: 3, maxBatchTokens: undefined }).settings).toEqual({ ...DEFAULT_BATCH_SETTINGS, maxWaitMs: 3 });
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Integration: the predict pipeline on generated tiny models, real onnxruntime.

const pipelines: PredictPipeline[] = [];
let embeddingDir: string;
let sequenceDir: string;
let tokenDir: string;

async function pipelineFor(dir: string, modelType: ModelType, options: PipelineOptions = {}, extra = ''): Promise<PredictPipeline> {
  const config = parseBuildConfig(`encoder:\n  name: batching-${modelType}\n  path: ${dir}\n  model_type: ${modelType}\n${extra}`, { baseDir: dir });
  const pipeline = await PredictPipeline.load(readModelPackage(config), options);
  pipelines.push(pipeline);
  return pipeline;
}

function text(words: number, seed: number): string {
  const next = random(seed);
  return Array.from({ length: words }, () => ENGLISH_WORDS[next(400)]).join(' ');
}

/** 50 requests of 1–8 inputs of 1–40 words. */
function mixedRequests(seed: number): string[][] {
  const next = random(seed);
  return Array.from({ length: 50 }, (_, r) => Array.from({ length: 1 + next(8) }, (_, i) => text(1 + next(40), r * 100 + i + 1)));
}

/** The largest absolute difference between the numbers of two responses of the same shape. */
function maxDifference(a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') return Math.abs(a - b);
  if (Array.isArray(a) && Array.isArray(b)) {
    expect(b).toHaveLength(a.length);
    return Math.max(0, ...a.map((value, i) => maxDifference(value, b[i])));
  }
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null) {
    expect(Object.keys(b).sort()).toEqual(Object.keys(a).sort());
    return Math.max(0, ...Object.keys(a).map((key) => maxDifference((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])));
  }
  expect(b).toEqual(a);
  return 0;
}

async function oneAtATime(pipeline: PredictPipeline, bodies: unknown[]): Promise<PredictResponse[]> {
  const responses: PredictResponse[] = [];
  for (const body of bodies) responses.push(await pipeline.predict(body));
  return responses;
}

beforeAll(async () => {
  ({ embedding: embeddingDir, sequence: sequenceDir, token: tokenDir } = await generateTinyModelsOfEachType());
});

afterAll(async () => {
  await Promise.all(pipelines.map((p) => p.close()));
});

describe('predict pipeline batching across requests', () => {
  it('50 concurrent requests give the results of the same requests run one at a time, in fewer runs, within the budget', async () => {
    const transform = '  transform: |\n    function Postprocess(arr, mask)\n      return arr:lp_normalize(2, 3) * 3\n    end\n';
    const cases: [string, ModelType, (inputs: string[], i: number) => unknown, string][] = [
      [embeddingDir, 'embedding', (inputs, i) => ({ inputs, normalize: i % 2 === 0, metadata: { i: String(i) } }), transform],
      [sequenceDir, 'sequence_classification', (inputs) => ({ inputs }), ''],
      [tokenDir, 'token_classification', (inputs) => ({ inputs }), ''],
    ];
    for (const [dir, modelType, bodyOf, extra] of cases) {
      const bodies = mixedRequests(modelType.length).map(bodyOf);
      const pipeline = await pipelineFor(dir, modelType, { maxBatchTokens: 512 }, extra);
      const alone = await oneAtATime(pipeline, bodies);
      const before = pipeline.batchingStats();
      const together = await Promise.all(bodies.map((body) => pipeline.predict(body)));
      const stats = pipeline.batchingStats();

      together.forEach((response, i) => {
        expect(response.results).toHaveLength((bodies[i] as { inputs: string[] }).inputs.length);
        expect(maxDifference(alone[i], response)).toBeLessThan(1e-5);
      });
      if (modelType === 'embedding') {
        const first = together[0] as EmbeddingResponse;
        expect(first.metadata).toEqual({ i: '0' });
        expect(first.results[0].embeddings[0].token_info!.start).toBe(0);
      }
      if (modelType === 'token_classification') {
        const tokens = (together[3] as TokenClassificationResponse).results[0].tokens.map((t) => t.token_info.token).join(' ');
        expect(tokens).toBe((bodies[3] as { inputs: string[] }).inputs[0]);
      }
      const runs = stats.runs - before.runs;
      expect(runs).toBeLessThan(bodies.length);
      expect(runs).toBeGreaterThan(0);
      expect(stats.sequences - before.sequences).toBe(bodies.reduce<number>((n, b) => n + (b as { inputs: string[] }).inputs.length, 0));
      expect(stats.largestBatchTokens).toBeLessThanOrEqual(512);
      expect(stats.oversizeRuns).toBe(0);
      expect(stats).toMatchObject({ queuedSequences: 0, runsInFlight: 0, failedRuns: 0 });
    }
  });

  it('runs a sequence longer than maxBatchTokens alone and still answers it', async () => {
    const pipeline = await pipelineFor(sequenceDir, 'sequence_classification', { maxBatchTokens: 16 });
    const bodies = [{ inputs: [text(30, 1), 'short'] }, { inputs: ['tiny text', text(25, 2)] }];
    const alone = await oneAtATime(pipeline, bodies);
    const together = await Promise.all(bodies.map((b) => pipeline.predict(b)));
    together.forEach((response, i) => expect(maxDifference(alone[i], response)).toBeLessThan(1e-5));
    const stats = pipeline.batchingStats();
    expect(stats.oversizeRuns).toBeGreaterThanOrEqual(4);
    expect(stats.largestBatchTokens).toBeLessThanOrEqual(16);
  });

  it('reports its batching settings; the old per-request cap is one more bound of the same scheduler', async () => {
    const pipeline = await pipelineFor(embeddingDir, 'embedding', { maxBatchTokens: 300, maxWaitMs: 2, maxBatchSequences: 2 });
    expect(pipeline.batchingSettings).toMatchObject({ maxBatchTokens: 300, maxWaitMs: 2, maxBatchSequences: 2 });
    const response = (await pipeline.predict({ inputs: ['a', 'b', 'c', 'd', 'e'], normalize: false })) as EmbeddingResponse;
    expect(response.results).toHaveLength(5);
    expect(pipeline.batchingStats().runs).toBe(3);
    await expect(pipelineFor(embeddingDir, 'embedding', { maxBatchTokens: -5 })).rejects.toThrow(ConfigError);
  });

  it('an input error fails only its own request; a failing transform fails only the requests of its batch', async () => {
    // The transform fails on any batch with a sequence longer than 40 tokens; with a 64-token budget a long
    // sequence never shares a run with short ones.
    const pipeline = await pipelineFor(
      sequenceDir,
      'sequence_classification',
      { maxBatchTokens: 64 },
      '  transform: |\n    function Postprocess(arr, mask)\n      if mask and mask:shape()[2] > 40 then error("too long for this transform") end\n      return arr\n    end\n',
    );
    const shorts = Array.from({ length: 6 }, (_, i) => ({ inputs: [text(2 + i, i + 1), text(3, i + 50)] }));
    const outcomes = await Promise.allSettled([
      ...shorts.map((body) => pipeline.predict(body)),
      pipeline.predict({ inputs: ['fine', text(60, 9)] }),
      pipeline.predict({ inputs: [] }),
      pipeline.predict({ inputs: ['x'], normalize: true }),
    ]);
    outcomes.slice(0, 6).forEach((outcome) => expect(outcome.status).toBe('fulfilled'));
    const [long, empty, unknownField] = outcomes.slice(6).map((o) => (o as PromiseRejectedResult).reason);
    expect(long).toBeInstanceOf(InternalError);
    expect(long.message).toContain('too long for this transform');
    expect(empty).toBeInstanceOf(InputError);
    expect(unknownField).toBeInstanceOf(InputError);
    expect(pipeline.batchingStats().failedRuns).toBe(1);
    const after = (await pipeline.predict({ inputs: ['still works'] })) as SequenceClassificationResponse;
    expect(after.results[0].scores).toHaveLength(3);
  });

  it('a lone request is delayed by at most maxWaitMs', async () => {
    const pipeline = await pipelineFor(embeddingDir, 'embedding', { maxWaitMs: 40 });
    await pipeline.predict({ inputs: ['warm up'], normalize: true });
    const start = performance.now();
    await pipeline.predict({ inputs: ['one request alone'], normalize: true });
    const elapsed = performance.now() - start;
    expect(elapsed).toBeGreaterThanOrEqual(38); // it waited for company…
    expect(elapsed).toBeLessThan(40 + 1000); // …and no longer than the bound plus a (very generous) run time
  });

  it('close answers the requests already accepted, then refuses new ones', async () => {
    const pipeline = await pipelineFor(sequenceDir, 'sequence_classification', { maxWaitMs: 10_000, maxBatchTokens: 64 });
    const start = performance.now();
    const accepted = mixedRequests(5).slice(0, 10).map((inputs) => pipeline.predict({ inputs }));
    const closing = pipeline.close();
    expect(pipeline.close()).toBe(closing);
    const results = await Promise.all(accepted);
    expect(results.every((r) => r.results.length > 0)).toBe(true);
    await closing;
    expect(performance.now() - start).toBeLessThan(5000); // drained at once, not after maxWaitMs
    await expect(pipeline.predict({ inputs: ['too late'] })).rejects.toThrow(InternalError);
  });
});
