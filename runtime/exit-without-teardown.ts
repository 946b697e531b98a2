import { existsSync } from 'node:fs';
import { traceStartup } from '../src/shared/startup-trace.ts';

const TRUE_BINARIES = ['/usr/bin/true', '/bin/true'];

/**
 * Ends a process whose work is done with exit code 0, skipping the teardown a normal exit runs: V8 frees its heap
 * page by page, and onnxruntime's static destructors free its operator-schema and kernel registries: ~20 ms of a
 * warm `infer` that ran onnxruntime (docs/benchmarks.md). The process image is replaced by `true`, which exits 0
 * at once: execve(2) runs no atexit handler and no destructor, as compilers skip freeing at exit for the same reason.
 * Only for a command whose output is all written or awaited; standard output and error are drained first (pipes are
 * asynchronous on macOS). Where it cannot be done (Windows, no `true`, an 'exit' listener that must run, execve
 * refused) it returns and the process ends as usual.
 */
export async function exitWithoutTeardown(): Promise<void> {
  if (typeof process.execve !== 'function' || process.platform === 'win32') return;
  if (process.listenerCount('exit') > 0 || process.listenerCount('beforeExit') > 0) return; // e.g. writing a code cache
  const trueBinary = TRUE_BINARIES.find((file) => existsSync(file));
  if (trueBinary === undefined) return;
  traceStartup('exit without teardown');
  await Promise.all([process.stdout, process.stderr].map((stream) => new Promise<void>((resolve) => stream.write('', () => resolve()))));
  try {
    process.execve(trueBinary, ['true'], {});
  } catch {
    // refused (a sandbox, a seccomp filter): the usual exit
  }
}
