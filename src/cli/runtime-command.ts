/**
 * `encoder runtime list|add|remove`: the cached base runtimes that `build` appends models to for other targets, as
 * mozilla-ai/encoderfile's `runtime` commands manage its base binaries. `add` fetches from the release address
 * (ENCODER_RELEASE_URL or the default) into the cache; the host's own target needs none (this executable is its base).
 */
import type { Command } from 'commander';
import { cacheDirFromEnvironment } from '../encoder/cache/cache-dir.ts';
import { ConfigError } from '../encoder/errors.ts';
import { parseTarget } from '../builder/targets.ts';
import { checkVersion } from '../builder/release.ts';
import { RUNTIME_VERSION, type CliIo } from './program.ts';

/** The cache's modules, loaded when a runtime command runs: they bring node:zlib, which `infer` and `serve` never need. */
const runtimeCache = () => import('../builder/runtime-cache.ts');

interface RuntimeOptions {
  runtimeVersion?: string;
}

export function registerRuntimeCommand(program: Command, io: CliIo): void {
  const cacheDirOf = (command: Command) => (command.optsWithGlobals() as { cacheDir?: string }).cacheDir ?? cacheDirFromEnvironment();
  const versionOf = (options: RuntimeOptions) => {
    try {
      return checkVersion(options.runtimeVersion ?? RUNTIME_VERSION);
    } catch (error) {
      throw new ConfigError(`--runtime-version: ${(error as Error).message}`);
    }
  };
  const runtime = program.command('runtime').description('Manage the cached base runtimes `build` uses for other targets');
  runtime
    .command('list')
    .description('List the cached base runtimes: version, target, and whether the copy is intact')
    .action(async (_options: object, command: Command) => {
      const cacheDir = cacheDirOf(command);
      const cached = await (await runtimeCache()).listCachedRuntimes(cacheDir);
      for (const entry of cached) io.stdout(`${entry.version} ${entry.target}${entry.state.state === 'valid' ? '' : ` (${entry.state.note}: downloaded again when used)`}\n`);
      if (cached.length === 0) io.stderr(`no base runtimes in ${cacheDir}\n`);
    });
  runtime
    .command('add')
    .description('Download a base runtime into the cache (nothing when an intact copy is there)')
    .argument('<target>', 'target triple')
    .option('--runtime-version <version>', `version (default: ${RUNTIME_VERSION}, this builder's)`)
    .action(async (target: string, options: RuntimeOptions, command: Command) => {
      const { resolveBaseRuntime } = await import('../builder/base-runtime.ts');
      const version = versionOf(options);
      const added = await resolveBaseRuntime({ target: parseTarget(target), version, cacheDir: cacheDirOf(command) });
      io.stdout(`${added.path}\n`);
      io.stderr(`${added.source === 'cache' ? 'already in the cache' : 'downloaded and verified'}: base runtime ${version} for ${target}\n`);
    });
  runtime
    .command('remove')
    .description('Remove a base runtime from the cache')
    .argument('<target>', 'target triple')
    .option('--runtime-version <version>', `version (default: ${RUNTIME_VERSION}, this builder's)`)
    .action(async (target: string, options: RuntimeOptions, command: Command) => {
      const removed = await (await runtimeCache()).removeCachedRuntime(cacheDirOf(command), versionOf(options), parseTarget(target));
      io.stderr(`removed ${removed}\n`);
    });
}
