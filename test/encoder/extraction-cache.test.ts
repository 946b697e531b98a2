/**
 * The extraction cache under the faults that replicas on a shared volume, non-root users and crashes meet (issue 34):
 * damaged files repaired at the next start, one extractor for many simultaneous starts, nothing left by a killed
 * extraction, no home directory, nowhere to write. The single executable's own runs are in
 * test/e2e/model-executable.test.ts; here the same code runs from source, on files made by the test.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { extractNativeFiles, type NativeManifest } from '../../runtime/native-assets.ts';
import { cacheDirFromEnvironment, defaultCacheDir, fallbackCacheRoot } from '../../src/encoder/cache/cache-dir.ts';
import { entryState, UNUSED_ENTRY_MS } from '../../src/encoder/cache/cache-entry.ts';
import { extractedEntry } from '../../src/encoder/cache/extracted-entry.ts';
import { ConfigError } from '../../src/encoder/errors.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

const work = mkdtempSync(path.join(os.tmpdir(), 'extraction-cache-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

const sha256 = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex');

/** Native assets as the runtime's build records them: a library, a binding, a wasm; the manifest hash over all. */
function nativeAssets(): { manifest: NativeManifest; assets: Record<string, Uint8Array> } {
  const assets: Record<string, Uint8Array> = {
    'native/libonnxruntime.so': Buffer.alloc(3 * 2 ** 20 + 11, 'library'),
    'native/binding.node': Buffer.alloc(200_003, 'binding'),
    'native/glue.wasm': Buffer.alloc(70_001, 'wasm'),
  };
  const all = createHash('sha256');
  for (const bytes of Object.values(assets)) all.update(bytes);
  const files = { 'native/libonnxruntime.so': 'libonnxruntime.so', 'native/binding.node': 'binding.node', 'native/glue.wasm': 'glue.wasm' };
  return { manifest: { hash: all.digest('hex').slice(0, 16), files, onnxruntimeBinding: 'binding.node', luaWasm: 'glue.wasm' }, assets };
}

function extractCounting(cache: string) {
  const { manifest, assets } = nativeAssets();
  let reads = 0;
  const extract = () =>
    extractNativeFiles(manifest, [cache], (key) => {
      reads++;
      return assets[key];
    });
  return { manifest, assets, extract, reads: () => reads };
}

function flipByte(file: string, at: number): void {
  const bytes = readFileSync(file);
  bytes[at] ^= 0x10;
  writeFileSync(file, bytes);
}

describe('a damaged entry', () => {
  it('is extracted again at the next start: a flipped byte, a file cut in half, a missing file', () => {
    const cache = mkdtempSync(path.join(work, 'damaged-'));
    const { assets, extract, reads } = extractCounting(cache);
    const dir = extract();
    expect(reads()).toBe(3);
    const library = path.join(dir, 'libonnxruntime.so');
    const original = assets['native/libonnxruntime.so'];

    flipByte(library, 1_000_000);
    expect(extract()).toBe(dir);
    expect(reads()).toBe(6);
    expect(sha256(readFileSync(library))).toBe(sha256(original));

    truncateSync(library, Math.floor(original.length / 2));
    extract();
    expect(reads()).toBe(9);
    expect(statSync(library).size).toBe(original.length);

    rmSync(path.join(dir, 'glue.wasm'));
    extract();
    expect(reads()).toBe(12);
    expect(readFileSync(path.join(dir, 'glue.wasm')).equals(assets['native/glue.wasm'])).toBe(true);
    expect(readdirSync(path.dirname(dir)).sort()).toEqual([path.basename(dir)]); // no staging, no old copy, no lock
  });

  it('is used as it is when a file was only touched (its hash is checked, then its stamp renewed); a sound one is not read', () => {
    const cache = mkdtempSync(path.join(work, 'touched-'));
    const { extract, reads } = extractCounting(cache);
    const dir = extract();
    extract();
    expect(reads()).toBe(3); // sound: one stat per file
    const later = new Date(Date.now() + 5000);
    utimesSync(path.join(dir, 'binding.node'), later, later);
    expect(entryState(dir)).toBe('changed');
    expect(extract()).toBe(dir);
    expect(reads()).toBe(3);
    expect(entryState(dir)).toBe('sound');
  });

  it('an entry from before records (an empty .complete) is extracted again', () => {
    const cache = mkdtempSync(path.join(work, 'old-format-'));
    const { manifest, extract, reads } = extractCounting(cache);
    const dir = path.join(cache, 'native', manifest.hash);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'libonnxruntime.so'), 'half');
    writeFileSync(path.join(dir, '.complete'), '');
    expect(extract()).toBe(dir);
    expect(reads()).toBe(3);
    expect(JSON.parse(readFileSync(path.join(dir, '.complete'), 'utf8')).files['libonnxruntime.so'].size).toBe(3 * 2 ** 20 + 11);
  });

  it('made of assets that do not match their manifest is a ConfigError and leaves nothing', () => {
    const cache = mkdtempSync(path.join(work, 'mismatch-'));
    const { manifest, assets } = nativeAssets();
    const wrong: Record<string, Uint8Array> = { ...assets, 'native/glue.wasm': Buffer.from('other') };
    expect(() => extractNativeFiles(manifest, [cache], (key) => wrong[key])).toThrow(ConfigError);
    expect(readdirSync(path.join(cache, 'native'))).toEqual([]);
  });

  it('is readable by other users of a shared cache (not mkdtemp\'s 0700)', () => {
    const cache = mkdtempSync(path.join(work, 'shared-'));
    const dir = extractCounting(cache).extract();
    expect(statSync(dir).mode & 0o777).toBe(0o755);
    expect(statSync(path.join(dir, 'libonnxruntime.so')).mode & 0o755).toBe(0o755);
  });
});

/** A child process that extracts one entry from source, the way a start does; `hold` makes its fill wait to be killed. */
function childExtraction(cache: string, counter: string, hold: boolean) {
  const module = path.join(repoRoot, 'src', 'encoder', 'cache', 'extracted-entry.ts');
  const script = `
    import { appendFileSync, renameSync, writeFileSync } from 'node:fs';
    import path from 'node:path';
    import { extractedEntry } from ${JSON.stringify(module)};
    const bytes = Buffer.alloc(24 * 2 ** 20, 7);
    const sha = ${JSON.stringify(sha256(Buffer.alloc(24 * 2 ** 20, 7)))};
    const dir = extractedEntry([${JSON.stringify(cache)}], { folder: 'models', name: sha }, (staging, refresh) => {
      appendFileSync(${JSON.stringify(counter)}, process.pid + '\\n');
      writeFileSync(path.join(staging, 'model.data.partial'), bytes.subarray(0, 2 ** 20));
      if (${hold}) { process.stdout.write('holding\\n'); setInterval(() => {}, 1000); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000); }
      writeFileSync(path.join(staging, 'model.data.partial'), bytes);
      renameSync(path.join(staging, 'model.data.partial'), path.join(staging, 'model.data'));
      refresh();
      return { 'model.data': sha };
    });
    process.stdout.write(dir + '\\n');
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

describe('processes sharing a cache', () => {
  it('ten simultaneous first starts on an empty cache write one copy, and all use it', { timeout: 60_000 }, async () => {
    const cache = mkdtempSync(path.join(work, 'ten-'));
    const counter = path.join(work, 'ten-extractions');
    const children = Array.from({ length: 10 }, () => childExtraction(cache, counter, false));
    const codes = await Promise.all(children.map((c) => c.exited));
    expect(codes, children.map((c) => c.stderr()).join('\n')).toEqual(Array(10).fill(0));
    expect(readFileSync(counter, 'utf8').trim().split('\n')).toHaveLength(1);
    const dirs = new Set(children.map((c) => c.stdout().trim()));
    expect(dirs.size).toBe(1);
    const [dir] = dirs;
    expect(readdirSync(dir).sort()).toEqual(['.complete', 'model.data']);
    expect(readdirSync(path.dirname(dir))).toEqual([path.basename(dir)]);
  });

  it('a SIGKILLed extraction leaves nothing behind after the next start, which does not wait for its lock', { timeout: 60_000 }, async () => {
    const cache = mkdtempSync(path.join(work, 'killed-'));
    const counter = path.join(work, 'killed-extractions');
    const victim = childExtraction(cache, counter, true);
    while (!victim.stdout().includes('holding')) {
      if (victim.child.exitCode !== null) throw new Error(victim.stderr());
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const models = path.join(cache, 'models');
    expect(readdirSync(models).some((name) => name.endsWith('.lock'))).toBe(true);
    expect(readdirSync(models).some((name) => name.startsWith('.'))).toBe(true); // its staging folder
    victim.child.kill('SIGKILL');
    await victim.exited;

    const started = Date.now();
    const next = childExtraction(cache, counter, false);
    expect(await next.exited, next.stderr()).toBe(0);
    expect(Date.now() - started).toBeLessThan(20_000); // far from the 30 s after which a lock of another host is stale
    const dir = next.stdout().trim();
    expect(readdirSync(models)).toEqual([path.basename(dir)]);
    expect(readdirSync(dir).sort()).toEqual(['.complete', 'model.data']);
  });

  it('entries no start has used for 30 days are removed when a start extracts; recent ones and live locks are kept', () => {
    const cache = mkdtempSync(path.join(work, 'prune-'));
    const models = path.join(cache, 'models');
    const entry = (name: string, ageMs: number) => {
      const dir = path.join(models, name);
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'model.data'), name);
      writeFileSync(path.join(dir, '.complete'), '{}');
      const when = new Date(Date.now() - ageMs);
      utimesSync(path.join(dir, '.complete'), when, when);
      return dir;
    };
    const old = entry('a'.repeat(64), UNUSED_ENTRY_MS + 60_000);
    const recent = entry('b'.repeat(64), UNUSED_ENTRY_MS - 3600_000);
    const leftover = path.join(recent, 'model.data.123.partial');
    writeFileSync(leftover, 'half');
    const deadStaging = path.join(models, `.${'c'.repeat(64)}-AbCdEf`);
    mkdirSync(deadStaging);
    const longAgo = new Date(Date.now() - 3600_000);
    utimesSync(deadStaging, longAgo, longAgo);
    const liveStaging = path.join(models, `.${'d'.repeat(64)}-GhIjKl`);
    mkdirSync(liveStaging);
    utimesSync(liveStaging, longAgo, longAgo);
    writeFileSync(path.join(models, `${'d'.repeat(64)}.lock`), JSON.stringify({ pid: process.pid, host: os.hostname(), started: 0 }));

    const sha = sha256('x');
    extractedEntry([cache], { folder: 'models', name: sha }, (staging) => {
      writeFileSync(path.join(staging, 'model.data'), 'x');
      return { 'model.data': sha };
    });
    const left = readdirSync(models).sort();
    expect(left).toContain(sha);
    expect(left).not.toContain(path.basename(old));
    expect(left).toContain(path.basename(recent));
    expect(readdirSync(recent)).not.toContain(path.basename(leftover));
    expect(left).not.toContain(path.basename(deadStaging));
    expect(left).toContain(path.basename(liveStaging)); // its extractor (this process) is alive
  });
});

describe('where the cache is', () => {
  const noPasswd = () =>
    vi.spyOn(os, 'homedir').mockImplementation(() => {
      throw new Error('uv_os_homedir returned ENOENT (no such file or directory)');
    });

  it('XDG_CACHE_HOME comes before the home directory, which is then not needed', () => {
    noPasswd();
    expect(defaultCacheDir({ XDG_CACHE_HOME: '/var/cache/app' }, 'linux')).toBe('/var/cache/app/encoder');
    expect(defaultCacheDir({ XDG_CACHE_HOME: 'relative', HOME: '/home/u' }, 'linux')).toBe('/home/u/.cache/encoder');
  });

  it('a user id without a passwd entry and no HOME, or an empty HOME, uses the temporary directory, not the working one', () => {
    noPasswd();
    expect(defaultCacheDir({}, 'linux')).toBeNull();
    expect(defaultCacheDir({ HOME: '' }, 'linux')).toBeNull();
    expect(cacheDirFromEnvironment({ HOME: '' })).toBe(fallbackCacheRoot());
    expect(cacheDirFromEnvironment({})).toBe(fallbackCacheRoot());
    expect(cacheDirFromEnvironment({ HOME: '', ENCODER_CACHE_DIR: '/srv/cache' })).toBe('/srv/cache');
  });

  it('falls back to the next root when the first cannot be written, and says so on stderr; nowhere writable is one ConfigError line', () => {
    const blocked = path.join(work, 'a-file');
    writeFileSync(blocked, 'not a folder');
    const fallback = mkdtempSync(path.join(work, 'fallback-'));
    const written: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => (written.push(String(chunk)), true));
    const { manifest, assets } = nativeAssets();
    const dir = extractNativeFiles(manifest, [blocked, fallback], (key) => assets[key]);
    expect(dir.startsWith(fallback)).toBe(true);
    expect(written).toEqual([`note: the cache directory ${blocked} (ENOTDIR) cannot be written; using ${fallback} (set ENCODER_CACHE_DIR to choose one)\n`]);

    let error: unknown;
    try {
      extractNativeFiles(manifest, [blocked, path.join(blocked, 'under')], (key) => assets[key]);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toBe(`cannot write the cache directory ${blocked} (ENOTDIR) nor ${path.join(blocked, 'under')} (ENOTDIR); set ENCODER_CACHE_DIR to a writable directory`);
    expect((error as Error).message).not.toContain('\n');
  });
});
