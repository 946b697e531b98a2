/**
 * When the phases of one request ran, for whoever traces requests (serve --enable-otel): the pipeline reports them
 * to the recorder that the front end put in the request's async context, and does nothing when there is none. Times
 * are milliseconds since the epoch (epochMs), comparable across threads: onnxruntime runs in worker threads, whose
 * own clock readings come back with the batch (runTimingOf).
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** `decode and preprocess`: an image model's images to pixel values (image-pipeline.ts). */
export type RequestPhase = 'tokenize' | 'decode and preprocess' | 'queue wait' | 'onnxruntime run';

export interface PhaseRecorder {
  /** One phase of the request, between two epochMs readings; attributes in OpenTelemetry's sense. */
  phase(name: RequestPhase, startMs: number, endMs: number, attributes?: Record<string, number | string>): void;
}

export const requestPhases = new AsyncLocalStorage<PhaseRecorder>();

/** Now, in milliseconds since the epoch, at sub-millisecond precision; the same clock on every thread. */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

/** When a batch was handed to the runner, when onnxruntime ran it (on whichever thread that was), and its padded shape. */
export interface RunTiming {
  dispatchedMs: number;
  ranFromMs: number;
  ranToMs: number;
  rows: number;
  sequenceLength: number;
}

// keyed by the batch's output: it is what each request's rows get back from the scheduler
const runTimings = new WeakMap<object, RunTiming>();

export function setRunTiming(output: object, timing: RunTiming): void {
  runTimings.set(output, timing);
}

export function runTimingOf(output: object): RunTiming | undefined {
  return runTimings.get(output);
}
