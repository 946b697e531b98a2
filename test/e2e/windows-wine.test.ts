import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { closeSync, copyFileSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetSection } from '../../runtime/asset-section.ts';
import { executableEnd } from '../../runtime/executable-end.ts';
import type { EmbeddingResponse } from '../../src/encoder/schemas.ts';
import type { JsonOf } from '../../src/shared/float32-json.ts';
import { baseRuntimePath, hasBaseRuntime, runExecutable } from '../helpers/executables.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';

/**
 * The Windows x86_64 target end to end under Wine (Debian's wine64, installed by .ci/run): the Linux builder packs a
 * model onto the Windows base runtime, and the resulting encoder.exe runs `infer` and `serve` under Wine.
 *
 * Two things Wine 8.0 (Debian 12) cannot do, worked around here and documented in docs/building-runtimes.md:
 * - Placeholder reservations (`VirtualAlloc2` with `MEM_RESERVE_PLACEHOLDER`, Windows 10 1803 and later): V8 uses
 *   them for its pointer tables whenever kernelbase exports `VirtualAlloc2`, and Wine 8.0 exports it but rejects
 *   the flag, so Node aborts at start ("SegmentedTable::InitializeTable (subspace allocation)"). If the executable
 *   aborts so, the test runs a copy in which the import name `VirtualAlloc2` (looked up at run time, in Node's
 *   read-only data) is renamed: V8 then takes its own path for Windows without that call. Nothing of the model
 *   executable's own bytes (the bundle, the assets, the trailer) changes.
 * - Pipes as standard output: libuv cannot open Wine's pipe handles (EBADF), so output goes to files.
 */
const WINDOWS = 'x86_64-pc-windows-msvc' as const;
const WINE = ['/usr/lib/wine/wine64', '/usr/bin/wine64'].find((file) => existsSync(file));
const WINESERVER = ['/usr/lib/wine/wineserver64', '/usr/lib/wine/wineserver', '/usr/bin/wineserver'].find((file) => existsSync(file));
const V8_PLACEHOLDER_ABORT = 'SegmentedTable::InitializeTable (subspace allocation)';

function missing(): string | null {
  if (!hasBaseRuntime(WINDOWS)) return `${baseRuntimePath(WINDOWS)} is absent (npm test builds it)`;
  if (!WINE) return 'wine64 is absent (Debian package wine64)';
  return null;
}

const reason = missing();
if (reason) console.warn(`Windows under Wine: skipped, ${reason}`);

describe.skipIf(reason !== null || !hasBaseRuntime())('Windows model executable under Wine', () => {
  const work = mkdtempSync(path.join(os.tmpdir(), 'e2e-wine-'));
  const prefix = path.join(work, 'prefix');
  const cacheDir = path.join(work, 'cache');
  const wineEnv = {
    PATH: '/usr/bin:/bin',
    HOME: work,
    WINEPREFIX: prefix,
    WINEDEBUG: '-all',
    // no Mono or Gecko installer dialogs: nothing here needs .NET or a browser engine
    WINEDLLOVERRIDES: 'mscoree,mshtml=',
  };
  const text = 'hello from a windows machine';
  let exe = '';
  let runnable = '';
  let linuxExe = '';

  /** Runs `file args` under Wine with standard output and error in files (see above). */
  function wine(file: string, args: string[], env: NodeJS.ProcessEnv = {}): SpawnSyncReturns<string> & { stdout: string; stderr: string } {
    const out = path.join(work, 'stdout.txt');
    const err = path.join(work, 'stderr.txt');
    const [outFd, errFd] = [openSync(out, 'w'), openSync(err, 'w')];
    try {
      const result = spawnSync(WINE!, [file, ...args], { stdio: ['ignore', outFd, errFd], env: { ...wineEnv, ...env }, timeout: 180_000, cwd: work, encoding: 'utf8' });
      return { ...result, stdout: readFileSync(out, 'utf8'), stderr: readFileSync(err, 'utf8') };
    } finally {
      closeSync(outFd);
      closeSync(errFd);
    }
  }

  beforeAll(async () => {
    const dir = await generateTinyModel({ modelType: 'embedding' });
    const config = path.join(work, 'win.yaml');
    writeFileSync(config, `encoder:\n  name: win\n  path: ${dir}\n  model_type: embedding\n  transform: |\n    function Postprocess(arr)\n      return arr * 0.5\n    end\n`);
    exe = path.join(work, 'win.exe');
    linuxExe = path.join(work, 'win');
    // no -o: the output is named after the model, with Windows' extension
    const windowsBuild = runExecutable(baseRuntimePath(), ['build', '-f', config, '--platform', WINDOWS, '--base-binary-path', baseRuntimePath(WINDOWS)], { cacheDir, cwd: work });
    expect(windowsBuild.status, windowsBuild.stderr).toBe(0);
    expect(windowsBuild.stderr).toContain(`built ${exe} for ${WINDOWS}`);
    const linuxBuild = runExecutable(baseRuntimePath(), ['build', '-f', config, '-o', linuxExe], { cacheDir });
    expect(linuxBuild.status, linuxBuild.stderr).toBe(0);

    // Making the prefix once failed with status 53 in a CI run with every core busy, and passed alone: wineboot waits a
    // bounded time for Wine's own services. Setting up Wine may take a second try; nothing of ours runs yet.
    const boots = [];
    for (let attempt = 0; attempt < 2 && boots.at(-1)?.status !== 0; attempt++) {
      boots.push(wine('wineboot', ['--init']));
    }
    expect(boots.at(-1)!.status, boots.map((boot) => `wineboot: status ${boot.status}\n${boot.stderr}`).join('\n')).toBe(0);
    // wineboot returns while the services it started still finish setting the prefix up; a CI run with every core busy
    // once saw the next Wine program exit 1 then. Waiting for the server to exit is Wine's own way to know it is done.
    if (WINESERVER) spawnSync(WINESERVER, ['-w'], { env: wineEnv, stdio: 'ignore', timeout: 120_000 });
    // Node 26 requires Windows 10 or later; Debian's Wine 8.0 makes new prefixes Windows 7
    const versions = [];
    for (let attempt = 0; attempt < 2 && versions.at(-1)?.status !== 0; attempt++) {
      versions.push(wine('winecfg', ['-v', 'win10'], { WINEDEBUG: 'err+all' }));
    }
    expect(versions.at(-1)!.status, versions.map((run) => `winecfg: status ${run.status}\n${run.stderr}`).join('\n')).toBe(0);
    expect(wine('winecfg', ['-v']).stdout.trim()).toBe('win10');

    runnable = exe;
    const probe = wine(exe, ['--version']);
    if (probe.status !== 0 || !probe.stdout.includes('win')) {
      const why = probe.stderr.includes(V8_PLACEHOLDER_ABORT) ? `this Wine rejects MEM_RESERVE_PLACEHOLDER (${V8_PLACEHOLDER_ABORT})` : `--version failed (status ${probe.status}): ${probe.stderr.slice(0, 300)}`;
      console.warn(`Windows under Wine: ${why}; running a copy without the VirtualAlloc2 import name`);
      runnable = path.join(work, 'win-for-wine.exe');
      copyFileSync(exe, runnable);
      hideImportName(runnable, 'VirtualAlloc2');
      const again = wine(runnable, ['--version']);
      expect(again.status, again.stderr).toBe(0);
    }
    expect(wine(runnable, ['--version']).stdout).toContain('win');
  }, 600_000);

  afterAll(() => {
    if (WINESERVER) spawnSync(WINESERVER, ['-k'], { env: wineEnv, stdio: 'ignore', timeout: 30_000 });
    rmSync(work, { recursive: true, force: true });
  });

  it('is a PE32+ x86-64 console executable: the Windows base runtime with the asset section appended', async () => {
    expect(spawnSync('file', [exe], { encoding: 'utf8' }).stdout).toMatch(/PE32\+ executable \(console\) x86-64, for MS Windows/);
    const section = await AssetSection.open(exe);
    try {
      expect(section?.manifest.model.name).toBe('win');
      expect(section?.sectionStart).toBe(await executableEnd(baseRuntimePath(WINDOWS)));
      expect(section?.fileSize).toBe(readFileSync(exe).length);
    } finally {
      await section?.close();
    }
    expect(readFileSync(exe).subarray(0, section!.sectionStart).equals(readFileSync(baseRuntimePath(WINDOWS)))).toBe(true);
  });

  it('infer prints the vectors the Linux build of the same model prints (within 1e-5), its files in %LOCALAPPDATA%\\encoder', () => {
    const run = wine(runnable, ['infer', text]);
    expect(run.status, run.stderr).toBe(0);
    const windows = JSON.parse(run.stdout) as JsonOf<EmbeddingResponse>;
    const linux = runExecutable(linuxExe, ['infer', text], { cacheDir });
    expect(linux.status, linux.stderr).toBe(0);
    const expected = JSON.parse(linux.stdout) as JsonOf<EmbeddingResponse>;
    const [got, want] = [windows.results[0].embeddings, expected.results[0].embeddings];
    expect(got.map((token) => token.token_info)).toEqual(want.map((token) => token.token_info));
    expect(got.length).toBeGreaterThan(3);
    got.forEach((token, i) => token.embedding.forEach((value, j) => expect(Math.abs(value - want[i].embedding[j])).toBeLessThan(1e-5)));

    // no ENCODER_CACHE_DIR: the native files went to the per-user cache folder Windows programs use
    const users = path.join(prefix, 'drive_c', 'users');
    const cached = readdirSync(users).map((user) => path.join(users, user, 'AppData', 'Local', 'encoder', 'native'));
    const native = cached.find((folder) => existsSync(folder));
    expect(native, `no encoder\\native folder under ${users}`).toBeDefined();
    const files = readdirSync(native!).flatMap((version) => readdirSync(path.join(native!, version)));
    expect(files).toEqual(expect.arrayContaining(['onnxruntime.dll', 'onnxruntime_binding.node']));
  });

  it('without the Visual C++ runtime, says what to install instead of crashing', () => {
    // Wine's own msvcp140 disabled: onnxruntime.dll cannot load, as on a Windows machine without the redistributable
    const run = wine(runnable, ['infer', text], { WINEDLLOVERRIDES: `${wineEnv.WINEDLLOVERRIDES};msvcp140=` });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/^error: cannot load onnxruntime \(.+\): install the Microsoft Visual C\+\+ Redistributable 2015-2022 for x64 /);
    expect(run.stderr).not.toContain('    at ');
  });

  it('serve answers /health and /predict, and Ctrl+C (SIGINT) stops it gracefully', async () => {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const log = path.join(work, 'serve.txt');
    const logFd = openSync(log, 'w');
    const child = spawn(WINE!, [runnable, 'serve', '--http-port', String(port), '--disable-grpc'], { stdio: ['ignore', logFd, logFd], env: wineEnv, cwd: work });
    closeSync(logFd);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const killer = setTimeout(() => child.kill('SIGKILL'), 150_000);
    try {
      const base = `http://127.0.0.1:${port}`;
      let health: Response | undefined;
      for (const started = Date.now(); Date.now() - started < 120_000 && child.exitCode === null; ) {
        health = await fetch(`${base}/health`).catch(() => undefined);
        if (health) break;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      expect(health?.status, readFileSync(log, 'utf8')).toBe(200);
      expect(await health!.json()).toBe('OK!');

      const predict = await fetch(`${base}/predict`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: [text, 'second'], normalize: true }),
      });
      expect(predict.status).toBe(200);
      const body = (await predict.json()) as JsonOf<EmbeddingResponse>;
      expect(body.results).toHaveLength(2);
      const linux = JSON.parse(runExecutable(linuxExe, ['infer', text], { cacheDir }).stdout) as JsonOf<EmbeddingResponse>;
      body.results[0].embeddings.forEach((token, i) =>
        token.embedding.forEach((value, j) => expect(Math.abs(value - linux.results[0].embeddings[i].embedding[j])).toBeLessThan(1e-5)),
      );

      const bad = await fetch(`${base}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"inputs": 5}' });
      expect(bad.status).toBe(422);

      child.kill('SIGINT');
      expect(await exited).toBe(0);
      const output = readFileSync(log, 'utf8');
      expect(output).toContain('SIGINT: stopping; finishing requests in flight');
      expect(output).toContain('stopped');
    } finally {
      clearTimeout(killer);
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 200_000);
});

/** Renames an ASCII import name in place (same length), so GetProcAddress finds nothing by that name. */
function hideImportName(file: string, name: string): void {
  const bytes = readFileSync(file);
  const at = bytes.indexOf(Buffer.from(`${name}\0`, 'latin1'));
  expect(at).toBeGreaterThan(0);
  bytes.write(`${name.slice(0, -1)}_`, at, 'latin1');
  writeFileSync(file, bytes);
}
