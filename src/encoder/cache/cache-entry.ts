import { closeSync, fsyncSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, statSync, utimesSync, writeSync } from 'node:fs';
import path from 'node:path';
import { lockIsStale, STALE_MS, tryLock } from './cache-lock.ts';

/*
 * An entry of the extraction cache is a folder of files named by the hash of what they hold (`native/<hash>`,
 * `models/<sha256>`). Its `.complete` record, written last and made durable, lists each file's size, SHA-256 and
 * stamp (inode, modification and change times). Every start compares the stamps (a stat per file): anything written
 * to a file since (a flipped bit, a truncation, a copy over it) changes them, and the file is then hashed; a hash
 * that differs from the record means the entry is extracted again. Before this, a cached `model.data` with one
 * flipped bit gave wrong vectors on every later start, and a truncated native library a bus error, never repaired.
 */

export const COMPLETE_RECORD = '.complete';

interface FileRecord {
  size: number;
  sha256: string;
  ino: number;
  mtimeMs: number;
  ctimeMs: number;
}

interface EntryRecord {
  version: 1;
  files: Record<string, FileRecord>;
}

/** `sound`: every file as recorded; `changed`: a file's stamp differs (verify it); `absent`: no complete entry. */
export type EntryState = 'sound' | 'changed' | 'absent';

function readRecord(dir: string): EntryRecord | null {
  try {
    const record = JSON.parse(readFileSync(path.join(dir, COMPLETE_RECORD), 'utf8')) as EntryRecord;
    return record?.version === 1 && record.files && typeof record.files === 'object' ? record : null;
  } catch {
    return null; // none, or one from before records (an empty file): extracted again
  }
}

function stampOf(file: string): Omit<FileRecord, 'sha256'> | null {
  const stat = statSync(file, { throwIfNoEntry: false });
  return stat ? { size: stat.size, ino: stat.ino, mtimeMs: stat.mtimeMs, ctimeMs: stat.ctimeMs } : null;
}

/** Compares each file's size and stamp with the entry's record: one stat per file, no reading. */
export function entryState(dir: string): EntryState {
  const record = readRecord(dir);
  if (!record) return 'absent';
  for (const [name, recorded] of Object.entries(record.files)) {
    const stamp = stampOf(path.join(dir, name));
    if (!stamp || stamp.size !== recorded.size) return 'absent';
    if (stamp.ino !== recorded.ino || stamp.mtimeMs !== recorded.mtimeMs || stamp.ctimeMs !== recorded.ctimeMs) return 'changed';
  }
  return 'sound';
}

export function sha256OfFile(file: string): string {
  // loaded here, not at the top: this module is part of the executable's entry, and only a changed entry is hashed
  const hash = process.getBuiltinModule('node:crypto').createHash('sha256');
  const buffer = Buffer.allocUnsafe(4 * 2 ** 20);
  const fd = openSync(file, 'r');
  try {
    for (let read; (read = readSync(fd, buffer, 0, buffer.length, null)) > 0; ) hash.update(buffer.subarray(0, read));
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

/**
 * Hashes the files whose stamp changed: all as recorded (a backup tool restored them, a volume was copied) renews
 * their stamps and the entry is sound; any difference, and the entry must be extracted again.
 */
export function verifyChangedEntry(dir: string): boolean {
  const record = readRecord(dir);
  if (!record) return false;
  for (const [name, recorded] of Object.entries(record.files)) {
    const file = path.join(dir, name);
    const stamp = stampOf(file);
    if (!stamp || stamp.size !== recorded.size) return false;
    if (stamp.ino === recorded.ino && stamp.mtimeMs === recorded.mtimeMs && stamp.ctimeMs === recorded.ctimeMs) continue;
    if (sha256OfFile(file) !== recorded.sha256) return false;
  }
  try {
    writeRecord(dir, Object.fromEntries(Object.entries(record.files).map(([name, { sha256 }]) => [name, sha256])));
  } catch {
    // a read-only cache: verified again at the next start
  }
  return true;
}

/** Writes bytes to a new file and makes them durable before it is closed. */
export function writeDurably(file: string, bytes: Uint8Array, mode = 0o644): void {
  const fd = openSync(file, 'wx', mode);
  try {
    for (let done = 0; done < bytes.byteLength; ) done += writeSync(fd, bytes, done, bytes.byteLength - done);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** fsync of a folder, so that the names created or renamed in it survive a crash (not possible on Windows). */
export function syncFolder(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // Windows cannot open a folder: NTFS journals its names itself
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Records the entry's files (by name → SHA-256 of what was written) with their stamps, durably. */
export function writeRecord(dir: string, sha256Of: Record<string, string>): void {
  const files: Record<string, FileRecord> = {};
  for (const [name, sha256] of Object.entries(sha256Of)) {
    const stamp = stampOf(path.join(dir, name));
    if (!stamp) throw new Error(`${path.join(dir, name)} is missing`);
    files[name] = { ...stamp, sha256 };
  }
  const record = path.join(dir, COMPLETE_RECORD);
  const staging = `${record}.${process.pid}.partial`;
  writeDurably(staging, Buffer.from(JSON.stringify({ version: 1, files } satisfies EntryRecord)));
  renameSync(staging, record);
  syncFolder(dir);
}

/** How long an entry that no start has used stays in the cache. */
export const UNUSED_ENTRY_MS = 30 * 24 * 3600 * 1000;
const USED_MARK_EVERY_MS = 24 * 3600 * 1000;

/** Marks an entry as used (its record's modification time), at most once a day; a read-only cache is left as it is. */
export function markUsed(dir: string, now = Date.now()): void {
  const record = path.join(dir, COMPLETE_RECORD);
  try {
    if (now - statSync(record).mtimeMs < USED_MARK_EVERY_MS) return;
    utimesSync(record, new Date(now), new Date(now));
  } catch {
    // read-only, or removed meanwhile
  }
}

/**
 * Tidies a cache folder (`native/` or `models/`) after a start has its entry: removes what extractions that died
 * left (staging folders and files, `.partial` files, locks) once no live process holds their entry's lock, and
 * entries no start has used for UNUSED_ENTRY_MS (older versions of the program, models no longer run). Best effort:
 * a read-only cache or a race with another process leaves things for a later start.
 */
export function sweepCacheFolder(parent: string, keep: string, now = Date.now()): void {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return;
  }
  const entries = new Set(names.filter((name) => !name.startsWith('.') && !name.endsWith('.lock') && !name.includes('.stale-')));
  for (const name of names) {
    const full = path.join(parent, name);
    try {
      if (entries.has(name)) {
        if (name === keep) continue;
        const used = statSync(path.join(full, COMPLETE_RECORD), { throwIfNoEntry: false })?.mtimeMs ?? statSync(full).mtimeMs;
        if (now - used > UNUSED_ENTRY_MS) removeEntry(full);
        else removeLeftovers(full);
        continue;
      }
      // a staging folder `.<entry>-XXXXXX` or `.<entry>-old-XXXXXX`, a lock, a lock moved aside
      const entry = /^\.([^.-][^-]*)-/.exec(name)?.[1] ?? (name.endsWith('.lock') ? name.slice(0, -'.lock'.length) : null);
      const lockPath = entry ? path.join(parent, `${entry}.lock`) : null;
      const heldByLive = lockPath !== null && statSync(lockPath, { throwIfNoEntry: false }) !== undefined && !lockIsStale(lockPath, now);
      if (heldByLive) continue;
      if (name.endsWith('.lock') || name.includes('.stale-') || now - statSync(full).mtimeMs > STALE_MS) rmSync(full, { recursive: true, force: true });
    } catch {
      // raced with another process, or not ours to remove
    }
  }
}

/** Removes `.partial` files a killed extraction left inside an entry (only when nobody extracts into it now). */
function removeLeftovers(dir: string): void {
  const lockPath = `${dir}.lock`;
  if (statSync(lockPath, { throwIfNoEntry: false }) && !lockIsStale(lockPath)) return;
  for (const name of readdirSync(dir)) if (name.endsWith('.partial')) rmSync(path.join(dir, name), { force: true });
}

function removeEntry(dir: string): void {
  const lock = tryLock(`${dir}.lock`);
  if (!lock) return;
  try {
    rmSync(dir, { recursive: true, force: true });
  } finally {
    lock.release();
  }
}
