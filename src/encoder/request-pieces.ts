import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { BatchScheduler, ScheduledRow } from './batch-scheduler.ts';
import { InputError } from './errors.ts';
import type { RequestLimits } from './pipeline-options.ts';
import { epochMs, requestPhases, runTimingOf } from './request-phases.ts';
import type { Tensor } from './tensor.ts';
import type { Encoding } from './tokenizer/index.ts';
import { startsOf, unpackEncoding } from './tokenizer/packed-encodings.ts';
import type { TokenizeJob, TokenizerWorkers } from './tokenizer-workers.ts';
import { LARGE_WORK_UNITS } from './work-size.ts';

// One request's way through the pipeline, whatever its kind: its inputs tokenized (on a tokenizer thread when long),
// held to the request limits, then run in pieces of about one batch each, with the event loop free between slices.

/** Longest the tokenizing or the shaping of one request's results holds the event loop at a time (mapInSlices). */
const SLICE_MS = 4;

/** Where a request is tokenized and the limits it is held to. */
export interface Tokenizing {
  limits: RequestLimits;
  /** Where large requests are tokenized; null: on this thread, in slices. */
  threads: TokenizerWorkers | null;
  /** Requests longer than this (UTF-16 units of all their texts) go to a tokenizer thread. */
  inlineUnits: number;
}

/**
 * Tokenizes the inputs, on a tokenizer thread when the request is long and there is one, else here in slices
 * (mapInSlices), and holds the request to its limits. Every input is at least one token, so a request with more
 * inputs than the token limit is refused before tokenizing.
 */
export async function tokenizeRequest(work: TokenizeWork, how: Tokenizing): Promise<Encoding[]> {
  const { field, count, maxTokens } = work;
  if (count > how.limits.inputs) {
    throw new InputError(`the request holds ${count} inputs, more than the limit of ${how.limits.inputs} inputs per request; send fewer inputs per request`, { field });
  }
  if (count > maxTokens) throw tooManyTokens(`${count} inputs`, field, maxTokens);
  const threads = how.threads;
  let encodings: Encoding[];
  if (threads !== null && work.job !== null && work.units > how.inlineUnits) {
    // handing megabytes of text to the thread copies them: in a turn of their own, not after the body's parsing
    if (work.units > LARGE_WORK_UNITS) await yieldToEventLoop();
    const packed = await threads.encode(work.job());
    const starts = startsOf(packed);
    encodings = await mapInSlices(Array.from(starts), (start, index) => unpackEncoding(packed, index, start));
  } else {
    encodings = await mapInSlices(Array.from({ length: count }, (_, index) => index), (index) => work.encodeHere(index));
  }
  const tokens = tokensOf(encodings);
  if (tokens > maxTokens) throw tooManyTokens(`${tokens} tokens`, field, maxTokens);
  return encodings;
}

/**
 * Runs the encodings in pieces of about one batch each, a few pieces queued at a time, and shapes each piece's rows
 * as soon as they return. A large request thus holds the outputs of a few batches, not of all its rows, and a
 * request that arrives meanwhile is queued before the large one's later pieces instead of after all of them.
 */
export async function runInPieces<R>(
  scheduler: BatchScheduler<Encoding, Tensor>,
  encodings: readonly Encoding[],
  shape: (placed: ScheduledRow<Tensor>, index: number) => R,
): Promise<R[]> {
  const { maxBatchTokens, maxRunsInFlight } = scheduler.settings;
  const pieces = piecesOf(encodings, maxBatchTokens);
  const shaped = new Array<R>(encodings.length);
  let next = 0;
  let failed = false;
  const lane = async () => {
    while (next < pieces.length && !failed) {
      const [from, to] = pieces[next++];
      try {
        const submitted = epochMs();
        const placed = await scheduler.submit(encodings.slice(from, to));
        recordRun(placed, submitted);
        const rows = await mapInSlices(placed, (row, k) => shape(row, from + k));
        for (let k = 0; k < rows.length; k++) shaped[from + k] = rows[k];
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(maxRunsInFlight + 1, pieces.length) }, lane));
  return shaped;
}

/**
 * items.map(fn) with a turn of the event loop whenever SLICE_MS have passed. A request at the token limit takes tens
 * of milliseconds to tokenize (thousands of inputs) and to shape (a vector per token), which `/health` and the other
 * requests' small steps should not wait for.
 */
export async function mapInSlices<T, R>(items: readonly T[], fn: (item: T, index: number) => R): Promise<R[]> {
  const mapped: R[] = [];
  let sliceStarted = performance.now();
  for (let index = 0; index < items.length; index++) {
    mapped.push(fn(items[index], index));
    if (index < items.length - 1 && performance.now() - sliceStarted >= SLICE_MS) {
      await yieldToEventLoop();
      sliceStarted = performance.now();
    }
  }
  return mapped;
}

/**
 * Tells the request's phase recorder (request-phases.ts), if it has one, how long its piece waited for a run and when
 * that run was: from the submission to the dispatch of the batch, then onnxruntime's run on the worker.
 */
function recordRun(placed: readonly ScheduledRow<Tensor>[], submittedMs: number): void {
  const recorder = requestPhases.getStore();
  const timing = placed.length > 0 ? runTimingOf(placed[0].output) : undefined;
  if (!recorder || !timing) return;
  recorder.phase('queue wait', submittedMs, Math.max(submittedMs, timing.dispatchedMs), { rows: placed.length });
  recorder.phase('onnxruntime run', timing.ranFromMs, timing.ranToMs, { 'batch.rows': timing.rows, 'batch.sequence_length': timing.sequenceLength });
}

/** The inputs of one request, as #tokenize takes them. */
export interface TokenizeWork {
  /** The request field that holds the inputs, for OpenAI-style errors (`input`, `documents`). */
  field: string;
  count: number;
  /** UTF-16 units of all its texts: a long request is tokenized on a tokenizer thread. */
  units: number;
  /** The job for a tokenizer thread; null: these inputs are tokenized here (token ids). */
  job: (() => TokenizeJob) | null;
  encodeHere(index: number): Encoding;
  /** The request's token limit. */
  maxTokens: number;
}

export function tooManyTokens(what: string, field: string, limit: number): InputError {
  return new InputError(`the request holds ${what}, more than the limit of ${limit} tokens per request; send fewer or shorter inputs`, { field });
}

/** [from, to) ranges of consecutive encodings of about `tokens` tokens each (at least one encoding). */
function piecesOf(encodings: readonly Encoding[], tokens: number): [number, number][] {
  const pieces: [number, number][] = [];
  let from = 0;
  let held = 0;
  encodings.forEach((encoding, index) => {
    if (index > from && held + encoding.ids.length > tokens) {
      pieces.push([from, index]);
      from = index;
      held = 0;
    }
    held += encoding.ids.length;
  });
  if (from < encodings.length) pieces.push([from, encodings.length]);
  return pieces;
}

export function tokensOf(encodings: readonly Encoding[]): number {
  return encodings.reduce((sum, encoding) => sum + encoding.ids.length, 0);
}
