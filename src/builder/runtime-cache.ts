/**
 * The cached base runtimes (`encoder runtime list|add|remove`, as mozilla-ai/encoderfile's `runtime` commands manage
 * its own): what is in `<cacheDir>/runtimes/<version>/<triple>/`, and removing one. Adding one is resolveBaseRuntime
 * without a host base, which downloads it when it is not cached (base-runtime.ts).
 */
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../encoder/errors.ts';
import { baseRuntimeCacheDir, baseRuntimeCachePath, checkCacheEntry, type CacheState } from './base-runtime.ts';
import { TARGETS, type Target } from './targets.ts';

export interface CachedRuntime {
  version: string;
  target: Target;
  path: string;
  /** valid: complete and matching its marker; else why it would be downloaded again. */
  state: CacheState;
}

/** Every version/target folder of the cache that holds a base runtime (or the remains of one), sorted. */
export async function listCachedRuntimes(cacheDir: string): Promise<CachedRuntime[]> {
  const found: CachedRuntime[] = [];
  for (const version of await entriesOf(path.join(cacheDir, 'runtimes'))) {
    for (const target of await entriesOf(path.join(cacheDir, 'runtimes', version))) {
      if (!(TARGETS as readonly string[]).includes(target)) continue;
      const binary = baseRuntimeCachePath(cacheDir, version, target as Target);
      found.push({ version, target: target as Target, path: binary, state: await checkCacheEntry(binary) });
    }
  }
  return found.sort((a, b) => a.version.localeCompare(b.version, 'en', { numeric: true }) || a.target.localeCompare(b.target));
}

/** Removes the cached base runtime of `version` and `target`; a ConfigError when there is none. */
export async function removeCachedRuntime(cacheDir: string, version: string, target: Target): Promise<string> {
  const dir = baseRuntimeCacheDir(cacheDir, version, target);
  if ((await entriesOf(dir)).length === 0) throw new ConfigError(`no base runtime ${version} for ${target} in the cache (${dir})`);
  await rm(dir, { recursive: true, force: true });
  return dir;
}

async function entriesOf(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir, { withFileTypes: true })).filter((entry) => entry.isDirectory() || entry.isFile()).map((entry) => entry.name);
  } catch {
    return [];
  }
}
