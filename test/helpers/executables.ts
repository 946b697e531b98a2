import { execFile, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { hostTarget, type Target } from '../../src/builder/targets.ts';
import { repoRoot } from './shared-fixtures.ts';

/** The base runtime `npm run build:runtime` made for a target (npm test builds the host's first). */
export function baseRuntimePath(target: Target = hostTarget()): string {
  return path.join(repoRoot, 'dist', 'runtime', target, 'encoder');
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
  options: { cacheDir: string; env?: NodeJS.ProcessEnv; cwd?: string; prefix?: string[] },
): SpawnSyncReturns<string> {
  const command = options.prefix ? options.prefix[0] : file;
  const commandArgs = options.prefix ? [...options.prefix.slice(1), file, ...args] : args;
  return spawnSync(command, commandArgs, {
    encoding: 'utf8',
    cwd: options.cwd,
    env: executableEnv(options),
    maxBuffer: 256 * 2 ** 20,
    timeout: 120_000,
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
