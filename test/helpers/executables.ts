import { execFile, spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { executableExtension, hostTarget, type Target } from '../../src/builder/targets.ts';
import { repoRoot } from './shared-fixtures.ts';

/** The base runtime `npm run build:runtime` made for a target (npm test builds the host's first). */
export function baseRuntimePath(target: Target = hostTarget()): string {
  return path.join(repoRoot, 'dist', 'runtime', target, `encoder${executableExtension(target)}`);
}

export function hasBaseRuntime(target: Target = hostTarget()): boolean {
  return existsSync(baseRuntimePath(target));
}

export function warnIfNoBaseRuntime(suite: string, target: Target = hostTarget()): void {
  if (!hasBaseRuntime(target)) {
    console.warn(`${suite}: skipped, ${baseRuntimePath(target)} is absent (npm test builds it; or run npm run build:runtime)`);
  }
}

/** A minimal environment: no node on PATH, the given cache directory, plus `env`. */
export function executableEnv(options: { cacheDir: string; env?: NodeJS.ProcessEnv }): NodeJS.ProcessEnv {
  return { PATH: '/usr/bin:/bin', ENCODER_CACHE_DIR: options.cacheDir, ...options.env };
}

/** Runs an executable with a minimal environment: no node on PATH, the given cache directory. */
export function runExecutable(
  file: string,
  args: string[],
  options: { cacheDir: string; env?: NodeJS.ProcessEnv; cwd?: string; prefix?: string[]; input?: Uint8Array },
): SpawnSyncReturns<string> {
  const command = options.prefix ? options.prefix[0] : file;
  const commandArgs = options.prefix ? [...options.prefix.slice(1), file, ...args] : args;
  return spawnSync(command, commandArgs, {
    encoding: 'utf8',
    cwd: options.cwd,
    env: executableEnv(options),
    maxBuffer: 256 * 2 ** 20,
    timeout: 120_000,
    input: options.input,
  });
}

/** `runExecutable` without blocking the event loop: for tests whose own process serves the executable (HTTP). */
export function runExecutableAsync(
  file: string,
  args: string[],
  options: { cacheDir: string; env?: NodeJS.ProcessEnv },
): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { encoding: 'utf8', env: executableEnv(options), timeout: 120_000, maxBuffer: 2 ** 28 },
      (error, stdout, stderr) => resolve({ status: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** A long-running executable (a server) and what it printed on stderr. */
export interface ListeningExecutable {
  child: ChildProcess;
  /** The first group of the pattern that told it is listening, e.g. its address ('' when the pattern has none). */
  address: string;
  stderr(): string;
  /** SIGTERM, then SIGKILL after 20 s; resolves with the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Starts `file args` with the minimal environment and resolves once its stderr matches `listening` (whose first
 * group is the address); rejects if it exits first or prints nothing matching within 60 s.
 */
export function startListening(
  file: string,
  args: string[],
  options: { cacheDir: string; env?: NodeJS.ProcessEnv },
  listening: RegExp,
): Promise<ListeningExecutable> {
  const child = spawn(file, args, { env: executableEnv(options), stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const stop = () => {
    if (child.exitCode !== null || child.signalCode !== null) return exited;
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.kill('SIGTERM');
    return exited.finally(() => clearTimeout(timer));
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${path.basename(file)} ${args.join(' ')}: not listening within 60 s; stderr:\n${stderr}`));
    }, 60_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = listening.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve({ child, address: match[1] ?? '', stderr: () => stderr, stop });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${path.basename(file)} ${args.join(' ')}: exited with ${code} before listening; stderr:\n${stderr}`));
    });
  });
}
