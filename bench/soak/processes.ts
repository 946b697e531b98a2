/**
 * The soak's children: the model server, the gateway and the tool server, each its own process, started from the
 * sources (`node src/cli/main.ts …`) or from the built base runtime (`--built`), and their resident memory.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { baseRuntimePath, hasBaseRuntime, startListening, type ListeningExecutable } from '../../test/helpers/executables.ts';
import { repoRoot } from '../../test/helpers/shared-fixtures.ts';

/** The pinned Node (the one running this script), which also runs the MCP servers. */
export const NODE = process.execPath;

export interface Launcher {
  /** What runs `encoder <args>`: the pinned Node on src/cli/main.ts, or the built base runtime. */
  command(args: string[]): { file: string; args: string[] };
  describe: string;
}

export function launcher(built: boolean): Launcher {
  if (!built) {
    const main = path.join(repoRoot, 'src', 'cli', 'main.ts');
    return { command: (args) => ({ file: NODE, args: [main, ...args] }), describe: `sources (node ${process.versions.node} src/cli/main.ts)` };
  }
  if (!hasBaseRuntime()) throw new Error(`--built: ${baseRuntimePath()} is absent (npm run build:runtime -- --target host makes it)`);
  return { command: (args) => ({ file: baseRuntimePath(), args }), describe: `built base runtime ${path.relative(repoRoot, baseRuntimePath())}` };
}

export interface SoakProcess extends ListeningExecutable {
  name: string;
  /** Set when the process exited before the soak stopped or killed it (a crash). */
  crashed: string | null;
  /** SIGKILL (an injected crash, not counted as one); resolves once the process is gone. */
  kill(): Promise<void>;
}

/** Starts `encoder <args>` and resolves once stderr matches `listening` (whose first group is the address). */
export async function startProcess(
  name: string,
  run: Launcher,
  args: string[],
  options: { cacheDir: string; env?: NodeJS.ProcessEnv },
  listening: RegExp,
): Promise<SoakProcess> {
  const { file, args: fullArgs } = run.command(args);
  const started = await startListening(file, fullArgs, options, listening);
  let stopping = false;
  const exited = new Promise<void>((resolve) => started.child.once('exit', () => resolve()));
  const kill = async () => {
    stopping = true;
    if (started.child.exitCode === null && started.child.signalCode === null) started.child.kill('SIGKILL');
    await exited;
  };
  const soakProcess: SoakProcess = { ...started, name, crashed: null, kill };
  const stop = started.stop;
  soakProcess.stop = () => {
    stopping = true;
    return stop();
  };
  started.child.once('exit', (code, signal) => {
    if (!stopping) soakProcess.crashed = `exited with ${code ?? signal}; stderr ends:\n${started.stderr().slice(-2000)}`;
  });
  return soakProcess;
}

/** Resident memory of a process in MiB (VmRSS of /proc/<pid>/status); NaN once it is gone. */
export function residentMiB(pid: number): number {
  try {
    const kib = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kib === undefined ? Number.NaN : Number(kib) / 1024;
  } catch {
    return Number.NaN;
  }
}

/** The direct children of a process (Linux: every thread's `children` list). */
export function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      children.push(...readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ').filter(Boolean).map(Number));
    } catch {
      // the thread ended meanwhile
    }
  }
  return children;
}

/** A process's command line, '' once it is gone. */
export function commandLineOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}
