import { isMainThread, threadId } from 'node:worker_threads';

/**
 * `ENCODER_TRACE_STARTUP=1`: one line per start-up phase on stderr, with the time since the process started
 * (performance.now()'s origin) and since the previous phase of the same thread. Measures where a command's first
 * result waits (docs/benchmarks.md, bench:startup); off, it costs one comparison per phase.
 */
const enabled = process.env.ENCODER_TRACE_STARTUP === '1';
/**
 * A worker thread's performance.now() counts from the thread's own start: its phases are placed on the process's
 * timeline through the main thread's origin, handed down in the environment (each worker starts with a copy of it).
 */
const ORIGIN_ENV = 'ENCODER_TRACE_STARTUP_ORIGIN';
// Set, not kept: a value inherited from a traced parent process is that process's origin, not this one's.
if (enabled && isMainThread) process.env[ORIGIN_ENV] = String(performance.timeOrigin);
const offset = enabled ? performance.timeOrigin - Number(process.env[ORIGIN_ENV] ?? performance.timeOrigin) : 0;
const thread = isMainThread ? '' : `(thread ${threadId}) `;
// Kept on the global object: the single executable's entry and its program are two bundles, each with this module.
const state = ((globalThis as { [key: symbol]: { previous: number } })[Symbol.for('encoder.startupTrace')] ??= { previous: 0 });

export function traceStartup(phase: string): void {
  if (!enabled) return;
  const now = offset + performance.now();
  process.stderr.write(`startup ${now.toFixed(1).padStart(7)} ms  +${(now - state.previous).toFixed(1).padStart(6)} ms  ${thread}${phase}\n`);
  state.previous = now;
}
