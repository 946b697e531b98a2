/**
 * glibc's malloc serves a block above its mmap threshold with mmap and gives it back when freed, but it raises that
 * threshold to the size of each such block freed (up to 32 MiB), after which blocks of megabytes come from its heaps
 * and stay there. A server given hostile requests of 8 MiB (bodies, texts held apart, messages) measured 376 MiB idle
 * and 537–730 MiB a minute after, for good; with the threshold fixed at 1 MiB, 332 MiB (docs/benchmarks.md,
 * "Hostile inputs"). The threshold is read from the environment when the process starts, so `serve` (and `mcp`,
 * serve with HTTP only) re-executes itself once (execve: the same process id, nothing forked) with
 * MALLOC_MMAP_THRESHOLD_ set. A value the user set, in that variable or GLIBC_TUNABLES, is kept; other C libraries
 * (musl) and systems are left as they are.
 */
import * as sea from 'node:sea';

/** Blocks of at least this many bytes are mapped and unmapped: requests' megabytes, never the small allocations. */
export const MMAP_THRESHOLD_BYTES = 2 ** 20;

const VARIABLE = 'MALLOC_MMAP_THRESHOLD_';

/** The commands that run the model server: `serve`, and `mcp` (serve with HTTP only). */
const SERVING_COMMANDS = ['serve', 'mcp'];

/** Re-executes this process with glibc's mmap threshold fixed, when `argv` (the arguments after the program) is a serve. */
export function reexecWithMallocTuning(argv: readonly string[]): void {
  if (!SERVING_COMMANDS.includes(argv[0]) || argv.includes('--help') || argv.includes('-h')) return;
  if (process.platform !== 'linux' || typeof process.execve !== 'function') return;
  const env = process.env;
  if (env[VARIABLE] !== undefined || env.GLIBC_TUNABLES?.includes('malloc.mmap_threshold')) return;
  if (!isGlibc()) return;
  // A CPU profiler's interval timer outlives execve and its signal would end the new image ("Profiling timer
  // expired"); a debugger (or a test) attached to the inspector of the first image would lose it.
  if ([...process.execArgv, ...(env.NODE_OPTIONS ?? '').split(/\s+/)].some((option) => /^--(cpu-prof|prof|inspect)/.test(option))) return;
  // a single executable's own arguments are its argv without the second copy of its path that Node inserts; from
  // source, node's options and the script come first
  const args = sea.isSea() ? [process.execPath, ...process.argv.slice(2)] : [process.execPath, ...process.execArgv, ...process.argv.slice(1)];
  try {
    process.execve(process.execPath, args, { ...env, [VARIABLE]: String(MMAP_THRESHOLD_BYTES) });
  } catch {
    // a sandbox that refuses execve: serve runs with the default threshold
  }
}

/** Whether this process runs on glibc (the C library whose malloc reads MALLOC_MMAP_THRESHOLD_). */
export function isGlibc(): boolean {
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
  return typeof report?.header?.glibcVersionRuntime === 'string';
}
