import { readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';

/*
 * One extractor per cache entry. Processes starting together on an empty cache (replicas on a shared volume, a
 * burst of `infer`) each wrote a whole copy before: ten of them peaked at five times the entry's size, and on a small
 * volume most failed with ENOSPC. The first takes `<entry>.lock` (created exclusively); the others wait for the
 * entry to be complete and use it. The lock is an economy, not what keeps the cache right: every entry is still
 * written apart and renamed into place, so two extractors (a lock broken by mistake) only cost a second copy.
 *
 * A holder that died leaves its lock behind. On the same host, a lock whose process is gone (or whose pid now
 * belongs to a process that started later) is broken at once; from another host sharing the volume it cannot be
 * asked, so a lock not refreshed for STALE_MS is broken. Holders refresh it between the pieces they write.
 */

export const STALE_MS = 30_000;
const POLL_MS = 50;

interface LockOwner {
  pid: number;
  host: string;
  /** The process's start time in clock ticks since boot (/proc/<pid>/stat), 0 where unknown. */
  started: number;
}

/** A lock this process holds: `refresh` keeps it from looking stale, `release` removes it. */
export interface HeldLock {
  refresh(): void;
  release(): void;
}

function processStartTicks(pid: number): number {
  try {
    // the fields after the command's closing parenthesis; starttime is the 22nd field of the whole line
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[19]) || 0;
  } catch {
    return 0;
  }
}

function ownerAlive(owner: LockOwner): boolean | 'unknown' {
  if (owner.host !== os.hostname()) return 'unknown';
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    // EPERM: another user's live process
  }
  if (owner.started === 0) return true;
  const started = processStartTicks(owner.pid);
  return started === 0 || started === owner.started;
}

function readOwner(lockPath: string): LockOwner | null {
  try {
    const owner = JSON.parse(readFileSync(lockPath, 'utf8')) as Partial<LockOwner>;
    return typeof owner.pid === 'number' && typeof owner.host === 'string' ? { pid: owner.pid, host: owner.host, started: Number(owner.started) || 0 } : null;
  } catch {
    return null; // gone, or its holder died between creating and writing it
  }
}

/** Whether the lock at `lockPath` was left by a holder that is gone (a missing lock is not stale: it is free). */
export function lockIsStale(lockPath: string, now = Date.now()): boolean {
  const modified = statSync(lockPath, { throwIfNoEntry: false })?.mtimeMs;
  if (modified === undefined) return false;
  const owner = readOwner(lockPath);
  const alive = owner ? ownerAlive(owner) : 'unknown';
  if (alive !== 'unknown') return !alive;
  return now - modified > STALE_MS;
}

/** Takes the lock if it is free (or stale); null when a live holder has it. */
export function tryLock(lockPath: string): HeldLock | null {
  const owner: LockOwner = { pid: process.pid, host: os.hostname(), started: processStartTicks(process.pid) };
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(lockPath, JSON.stringify(owner), { flag: 'wx' });
      let released = false;
      return {
        refresh: () => {
          if (released) return;
          const now = new Date();
          try {
            utimesSync(lockPath, now, now);
          } catch {
            // removed by someone who judged it stale: the rename of the entry still keeps the cache right
          }
        },
        release: () => {
          if (released) return;
          released = true;
          rmSync(lockPath, { force: true });
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if (!lockIsStale(lockPath)) return null;
    // moved aside before removal: of two processes breaking it, only one succeeds, and neither removes a new lock
    const aside = `${lockPath}.stale-${process.pid}`;
    try {
      renameSync(lockPath, aside);
      rmSync(aside, { force: true });
    } catch {
      // another process broke it first
    }
  }
  return null;
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** Sleeps this thread (start-up code that must stay synchronous). */
export function sleepSync(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}

/**
 * Waits until the entry is ready or the lock is ours: `ready()` is asked first and after every wait; the lock is
 * returned when it could be taken (the caller re-checks `ready` before extracting, and releases it), null when the
 * entry became ready meanwhile.
 */
export function lockOrReadySync(lockPath: string, ready: () => boolean): HeldLock | null {
  for (;;) {
    if (ready()) return null;
    const lock = tryLock(lockPath);
    if (lock) return lock;
    sleepSync(POLL_MS);
  }
}
