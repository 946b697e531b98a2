/**
 * `ENCODER_TRACE_STARTUP=1`: one line per start-up phase on stderr, with the time since the process started
 * (performance.now()'s origin) and since the previous phase. Measures where a command's first result waits
 * (docs/benchmarks.md, bench:startup); off, it costs one comparison per phase.
 */
const enabled = process.env.ENCODER_TRACE_STARTUP === '1';
// Kept on the global object: the single executable's entry and its program are two bundles, each with this module.
const state = ((globalThis as { [key: symbol]: { previous: number } })[Symbol.for('encoder.startupTrace')] ??= { previous: 0 });

export function traceStartup(phase: string): void {
  if (!enabled) return;
  const now = performance.now();
  process.stderr.write(`startup ${now.toFixed(1).padStart(7)} ms  +${(now - state.previous).toFixed(1).padStart(6)} ms  ${phase}\n`);
  state.previous = now;
}
