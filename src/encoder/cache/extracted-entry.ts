import { chmodSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { traceStartup } from '../../shared/startup-trace.ts';
import { ConfigError } from '../errors.ts';
import { CACHE_DIR_ENV, cacheDirFromEnvironment, fallbackCacheRoot } from './cache-dir.ts';
import { entryState, markUsed, sweepCacheFolder, syncFolder, verifyChangedEntry, writeRecord } from './cache-entry.ts';
import { lockOrReadySync, type HeldLock } from './cache-lock.ts';

/**
 * A cache entry found or extracted: `<root>/<folder>/<name>/` (runtime/native-assets.ts: the native files;
 * packaged-model.ts: the model's weights data). The cache directory first, the temporary directory's per-user folder
 * when that is not writable (said on stderr when extracting there). One process extracts an entry while the others
 * wait (cache-lock.ts); it fills a staging folder, records and syncs it, and renames it into place, replacing a
 * damaged entry; then it tidies the folder (cache-entry.ts, sweepCacheFolder).
 */
export interface EntryPlace {
  folder: 'native' | 'models';
  /** The hash that names the entry. */
  name: string;
}

/**
 * Fills the staging folder and answers each file written → the SHA-256 of what it should hold. Synchronous: this
 * runs at start-up, before anything else needs the event loop; `refresh` keeps the lock fresh and is called between
 * pieces of a long extraction.
 */
export type FillEntry = (staging: string, refresh: () => void) => Record<string, string>;

export function cacheRoots(env: NodeJS.ProcessEnv = process.env): string[] {
  return [...new Set([cacheDirFromEnvironment(env), fallbackCacheRoot()])];
}

export function extractedEntry(roots: readonly string[], place: EntryPlace, fill: FillEntry): string {
  const failures: string[] = [];
  for (const root of roots) {
    const dir = path.join(root, place.folder, place.name);
    if (usable(dir)) return dir;
    let lock: HeldLock | null = null;
    try {
      mkdirSync(path.dirname(dir), { recursive: true });
      lock = lockOrReadySync(`${dir}.lock`, () => entryState(dir) === 'sound');
      if (lock === null || usable(dir)) return dir;
      removeDeadStaging(dir);
      const staging = stagingFolder(dir);
      try {
        commit(staging, fill(staging, lock.refresh), dir);
        traceStartup(`extracted ${place.folder}/${place.name}`);
      } finally {
        rmSync(staging, { recursive: true, force: true });
      }
      noteFallback(roots, root, failures);
      return dir;
    } catch (error) {
      if (error instanceof ConfigError) throw error; // a damaged asset: no other folder helps
      failures.push(failureOf(dir, error));
    } finally {
      lock?.release();
      if (lock) sweepCacheFolder(path.dirname(dir), place.name);
    }
  }
  throw unwritable(failures);
}

/** Sound as recorded, or changed and found right by its hashes: marked used and taken. */
function usable(dir: string): boolean {
  const state = entryState(dir);
  if (state === 'absent' || (state === 'changed' && !verifyChangedEntry(dir))) return false;
  markUsed(dir);
  return true;
}

/** With the entry's lock held, any staging folder of it is what an extraction that died left. */
function removeDeadStaging(dir: string): void {
  const prefix = `.${path.basename(dir)}-`;
  for (const name of readdirSync(path.dirname(dir))) if (name.startsWith(prefix)) rmSync(path.join(path.dirname(dir), name), { recursive: true, force: true });
}

function stagingFolder(dir: string): string {
  const staging = mkdtempSync(path.join(path.dirname(dir), `.${path.basename(dir)}-`));
  chmodSync(staging, 0o755); // mkdtemp's 0700 would make every other user of a shared cache extract a copy of their own
  return staging;
}

/** Records the staged files, makes them durable and puts the folder in place of a damaged or missing entry. */
function commit(staging: string, sha256Of: Record<string, string>, dir: string): void {
  writeRecord(staging, sha256Of);
  const parent = path.dirname(dir);
  const old = `${staging.replace(/-[^-]*$/, '')}-old-${path.basename(staging).split('-').at(-1)}`;
  let replaced = false;
  try {
    renameSync(dir, old);
    replaced = true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  renameSync(staging, dir);
  syncFolder(parent);
  if (replaced) rmSync(old, { recursive: true, force: true });
}

function failureOf(dir: string, error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return `${path.dirname(path.dirname(dir))} (${code ?? (error as Error).message})`;
}

/**
 * Says on stderr why an extraction went to a fallback: once per process (the native files and the model's data are
 * two entries, extracted by the executable's two bundles, hence the global), and only when extracting, as later
 * starts find their entries there.
 */
function noteFallback(roots: readonly string[], used: string, failures: readonly string[]): void {
  const slot = globalThis as { [key: symbol]: boolean };
  const said = Symbol.for('encoder.cacheFallbackNoted');
  if (slot[said] || (used === roots[0] && used !== fallbackCacheRoot())) return;
  slot[said] = true;
  if (used !== roots[0]) process.stderr.write(`note: the cache directory ${failures[0]} cannot be written; using ${used} (set ${CACHE_DIR_ENV} to choose one)\n`);
  else if (used === fallbackCacheRoot() && !process.env[CACHE_DIR_ENV]) process.stderr.write(`note: no home directory and no XDG_CACHE_HOME; using ${used} (set ${CACHE_DIR_ENV} to choose one)\n`);
}

function unwritable(failures: readonly string[]): ConfigError {
  return new ConfigError(`cannot write the cache directory ${failures.join(' nor ')}; set ${CACHE_DIR_ENV} to a writable directory`);
}
