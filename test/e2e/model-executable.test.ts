import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, chmodSync, copyFileSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync, truncateSync, writeFileSync, writeSync, closeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelType } from '../../src/encoder/config.ts';
import { baseRuntimePath, hasBaseRuntime, runExecutable, runExecutableAsync, startListening, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';
import { hasShared, sharedModel } from '../helpers/shared-fixtures.ts';

let work: string;
let cacheDir: string;
const texts = ['Hello world, this is a test.', 'second input', 'the third one is a little longer than the others'];

function writeConfig(name: string, modelDir: string, modelType: ModelType, extra = ''): string {
  const file = path.join(work, `${name}.yaml`);
  writeFileSync(file, `encoder:\n  name: ${name}\n  path: ${modelDir}\n  model_type: ${modelType}\n${extra}`);
  return file;
}

/** `encoder build` run by the base runtime itself, as a user would. */
function build(config: string, output: string, extra: string[] = []) {
  return runExecutable(baseRuntimePath(), ['build', '-f', config, '--base-binary-path', baseRuntimePath(), '-o', output, ...extra], {
    cacheDir,
    cwd: work,
  });
}

function buildOk(config: string, name: string): string {
  const output = path.join(work, name);
  const result = build(config, output);
  expect(result.stderr).toContain('[6/6] write the output file');
  expect(result.status).toBe(0);
  return output;
}

async function inProcessInfer(config: string, args: string[]): Promise<string> {
  const { code, stdout, stderr } = await runCliCaptured(['infer', '--config', config, ...args]);
  expect(stderr).not.toContain('error');
  expect(code).toBe(0);
  return stdout;
}

warnIfNoBaseRuntime('model executables');
describe.skipIf(!hasBaseRuntime())('model executables built by the base runtime', () => {
  beforeAll(() => {
    work = mkdtempSync(path.join(os.tmpdir(), 'e2e-exe-'));
    cacheDir = path.join(work, 'cache');
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('says so when the base runtime holds no model, and shows the builder help', () => {
    const result = runExecutable(baseRuntimePath(), [], { cacheDir });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain('This is the encoder base runtime: it holds no model assets');
    expect(result.stderr).toContain('build [options]');
  });

  it("compiles its program from the code cache made when it was built, and warms onnxruntime up only to run a model", () => {
    const traced = (args: string[]) => runExecutable(baseRuntimePath(), args, { cacheDir, env: { ENCODER_TRACE_STARTUP: '1' } });
    const version = traced(['--version']);
    expect(version.status).toBe(0);
    // a cache V8 rejects (another V8, other flags, another source) would say "rejected" and compile everything again
    expect(version.stderr).toContain('program compiled (code cache: accepted)');
    expect(version.stderr).not.toContain('onnxruntime warm-up started');
    const help = traced(['infer', '--help']);
    expect(help.stdout).toContain('Run the model on one or more texts');
    expect(help.stderr).not.toContain('onnxruntime warm-up started');
    // an error that ends the process while the warm-up is still in onnxruntime's native set-up waits for it, and the
    // exit code is the error's (stopping the thread there made the binding abort the process: 134)
    const missingConfig = traced(['infer', '--config', path.join(work, 'missing.yaml'), 'text']);
    expect(missingConfig.stderr).toContain('onnxruntime warm-up started');
    expect(missingConfig.stderr).toContain('configuration file not found');
    expect(missingConfig.status).toBe(2);
    const nothingToServe = traced(['serve', '--config', path.join(work, 'missing.yaml'), '--disable-http', '--disable-grpc']);
    expect(nothingToServe.stderr).toContain('inference worker started (onnxruntime warm-up)');
    expect(nothingToServe.status).toBe(2);
  });

  it("loads for infer none of Node's modules that only other commands need (each costs start-up)", async () => {
    const model = buildOk(writeConfig('module-list', await generateTinyModel(), 'embedding'), 'module-list');
    const list = path.join(work, 'module-list.txt');
    const preload = path.join(work, 'module-list.cjs');
    writeFileSync(preload, `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(list)}, process.moduleLoadList.join('\\n')));`);
    const result = runExecutable(model, ['infer', 'hello'], { cacheDir, env: { NODE_OPTIONS: `--require ${preload}` } });
    expect(result.status).toBe(0);
    const loaded = new Set(readFileSync(list, 'utf8').split('\n'));
    expect(loaded.has('NativeModule worker_threads')).toBe(true); // the list is the executable's own
    // child_process: commander's, for subcommands it never runs here; v8: the build's code-cache runs only; http,
    // http2 and zlib: the servers'; readline: the build's progress bar (net is loaded: standard output is a pipe here)
    for (const name of ['child_process', 'v8', 'http', 'http2', 'zlib', 'readline']) expect(loaded.has(`NativeModule ${name}`), name).toBe(false);
  });

  it('ends a successful infer without the process teardown, once a slow reader has all of its output', async () => {
    const model = buildOk(writeConfig('fast-exit', await generateTinyModel(), 'embedding'), 'fast-exit');
    // ~400 KB of vectors: more than a pipe holds, so the executable's writes wait for this reader, which starts late
    const inputs = Array.from({ length: 80 }, (_, i) => `sentence number ${i} of a long run of inputs`);
    const child = spawn(model, ['infer', ...inputs], { env: { PATH: '/usr/bin:/bin', ENCODER_CACHE_DIR: cacheDir, ENCODER_TRACE_STARTUP: '1' } });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const chunks: Buffer[] = [];
    for await (const chunk of child.stdout) chunks.push(chunk as Buffer);
    expect(await exited).toBe(0);
    expect(stderr).toContain('exit without teardown');
    const output = Buffer.concat(chunks).toString();
    expect(output.length).toBeGreaterThan(128 * 1024);
    const { results } = JSON.parse(output) as { results: { embeddings: unknown[] }[] };
    expect(results).toHaveLength(inputs.length);
    // a failure keeps the usual exit and its code
    const failed = runExecutable(model, ['infer', '--threads', '0', 'text'], { cacheDir, env: { ENCODER_TRACE_STARTUP: '1' } });
    expect(failed.status).toBe(2);
    expect(failed.stderr).not.toContain('exit without teardown');
  });

  it('serves with the inference worker it started before loading the program, and with its own code cache', async () => {
    const config = writeConfig('early-worker', await generateTinyModel(), 'embedding');
    const server = await startListening(
      baseRuntimePath(),
      ['serve', '--config', config, '--http-hostname', '127.0.0.1', '--http-port', '0', '--disable-grpc', '--workers', '1'],
      { cacheDir, env: { ENCODER_TRACE_STARTUP: '1' } },
      /HTTP {2}(http:\/\/\S+)/,
    );
    try {
      const response = await fetch(`${server.address}/predict`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: ['hello'], normalize: true }),
      });
      expect(response.status).toBe(200);
      expect(((await response.json()) as { results: unknown[] }).results).toHaveLength(1);
      expect(server.stderr()).toContain('inference worker started (onnxruntime warm-up)');
      expect(server.stderr()).toContain('program compiled (code cache: accepted)');
      // the worker's phases are on the process's timeline: after the main thread started it, before the pool was ready
      const at = (phase: RegExp) => Number(new RegExp(`startup +([\\d.]+) ms .*${phase.source}`).exec(server.stderr())?.[1]);
      const [started, running, loaded, ready] = [/inference worker started/, /\(thread \d+\) inference worker running/, /\(thread \d+\) session ready/, /onnxruntime session ready/].map(at);
      expect(running).toBeGreaterThan(started);
      expect(loaded).toBeGreaterThan(running);
      expect(loaded).toBeLessThanOrEqual(ready);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  for (const modelType of ['embedding', 'sequence_classification', 'token_classification'] as const) {
    it(`builds a generated ${modelType} model whose infer output equals the in-process pipeline's`, async () => {
      const dir = await generateTinyModel({ modelType });
      const transform = modelType === 'sequence_classification' ? '  transform: |\n    function Postprocess(arr)\n      return arr * 0.5\n    end\n' : '';
      const config = writeConfig(`gen-${modelType}`, dir, modelType, transform);
      const executable = buildOk(config, `gen-${modelType}`);
      expect(statSync(executable).mode & 0o111).not.toBe(0);
      const result = runExecutable(executable, ['infer', ...texts], { cacheDir });
      expect(result.stderr).toBe('');
      expect(result.status).toBe(0);
      expect(result.stdout).toBe(await inProcessInfer(config, texts));

      const out = path.join(work, `${modelType}.json`);
      expect(runExecutable(executable, ['infer', texts[0], '-o', out], { cacheDir }).status).toBe(0);
      expect(JSON.parse((await import('node:fs')).readFileSync(out, 'utf8')).results).toHaveLength(1);
    });
  }

  it.skipIf(!hasShared)('builds the shared tiny-bert exports with identical infer output', async () => {
    for (const [name, modelType] of [
      ['tiny-bert-embedding', 'embedding'],
      ['tiny-bert-sequence-classification', 'sequence_classification'],
      ['tiny-bert-token-classification', 'token_classification'],
    ] as const) {
      const config = writeConfig(name, sharedModel(name), modelType);
      const executable = buildOk(config, name);
      const result = runExecutable(executable, ['infer', ...texts], { cacheDir });
      expect(result.status).toBe(0);
      expect(result.stdout).toBe(await inProcessInfer(config, texts));
      rmSync(executable);
    }
  });

  it('prints its version and its manifest', async () => {
    const dir = await generateTinyModel({ modelType: 'token_classification', labels: ['O', 'B-X', 'I-X'] });
    const executable = buildOk(writeConfig('ner', dir, 'token_classification', '  version: 2.1.0\n'), 'ner');
    const version = runExecutable(executable, ['--version'], { cacheDir });
    expect(version.stdout).toMatch(/^ner 2\.1\.0 \(token_classification\)\nruntime: encoder \d+\.\d+\.\d+, Node 26\.10\.0\ntarget: x86_64-unknown-linux-gnu|aarch64-unknown-linux-gnu/);
    const manifest = JSON.parse(runExecutable(executable, ['inspect'], { cacheDir }).stdout);
    expect(manifest.model).toEqual({
      name: 'ner',
      version: '2.1.0',
      model_type: 'token_classification',
      lua_libs: ['table', 'string', 'math'],
      // the generator's 128 positions, which its config.json and tokenizer_config.json also say (issue 30)
      max_length: 128,
      max_length_reason:
        'position table of model.onnx (embeddings.position_embeddings.weight): 128 rows; config.json max_position_embeddings says 128; tokenizer_config.json model_max_length says 128',
    });
    expect(manifest.assets.map((a: { name: string }) => a.name)).toEqual(['model_weights', 'model_data', 'tokenizer', 'model_config', 'tokenizer_config']);
  });

  it('names build errors and exits non-zero', async () => {
    const missing = build(writeConfig('missing', path.join(work, 'nowhere'), 'embedding'), path.join(work, 'missing'));
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain(`model weights not found: ${path.join(work, 'nowhere', 'model.onnx')}`);
    const dir = await generateTinyModel();
    const intel = build(writeConfig('intel', dir, 'embedding'), path.join(work, 'intel'), ['--platform', 'x86_64-apple-darwin']);
    expect(intel.status).toBe(2);
    expect(intel.stderr).toContain('x86_64-apple-darwin has no base runtime: onnxruntime-node 1.30 ships no binding for it');
    const bogus = build(writeConfig('bogus', dir, 'embedding'), path.join(work, 'bogus'), ['--platform', 'riscv64']);
    expect(bogus.stderr).toContain('unknown platform "riscv64"');
  });

  it('runs with an empty environment, a fresh cache and no network, then again with the cache filled', async () => {
    const probe = spawnSync('unshare', ['-n', 'true']);
    if (probe.status !== 0) {
      console.warn('self-containment test: skipped, `unshare -n` is not permitted here (needs root)');
      return;
    }
    const dir = await generateTinyModel({ modelType: 'sequence_classification', labels: ['a', 'b'] });
    const config = writeConfig('sealed', dir, 'sequence_classification');
    const executable = buildOk(config, 'sealed');
    const home = path.join(work, 'empty-home');
    mkdirSync(home);
    const expected = await inProcessInfer(config, texts);
    for (const run of ['cold', 'warm']) {
      const result = spawnSync('env', ['-i', `HOME=${home}`, 'unshare', '-n', executable, 'infer', ...texts], { encoding: 'utf8' });
      expect(result.stderr, run).toBe('');
      expect(result.status, run).toBe(0);
      expect(result.stdout, run).toBe(expected);
    }
    // the native files and the model's initializers were extracted once into the fresh cache directory, where
    // onnxruntime maps the latter from
    expect(statSync(path.join(home, '.cache', 'encoder', 'native')).isDirectory()).toBe(true);
    const manifest = JSON.parse(runExecutable(executable, ['inspect'], { cacheDir }).stdout) as { assets: { name: string; length: number; sha256: string }[] };
    const data = manifest.assets.find((asset) => asset.name === 'model_data')!;
    expect(statSync(path.join(home, '.cache', 'encoder', 'models', data.sha256, 'model.data')).size).toBe(data.length);
  });

  it('extracts the initializers again when they are missing or cut short, and leaves no partial file', async () => {
    const executable = buildOk(writeConfig('extracted', await generateTinyModel(), 'embedding'), 'extracted');
    const ownCache = mkdtempSync(path.join(work, 'extracted-cache-'));
    const infer = () => runExecutable(executable, ['infer', texts[0]], { cacheDir: ownCache });
    const expected = infer();
    expect(expected.status).toBe(0);
    const manifest = JSON.parse(runExecutable(executable, ['inspect'], { cacheDir }).stdout) as { assets: { name: string; length: number; sha256: string }[] };
    const data = manifest.assets.find((asset) => asset.name === 'model_data')!;
    const file = path.join(ownCache, 'models', data.sha256, 'model.data');
    truncateSync(file, data.length - 1);
    expect(infer().stdout).toBe(expected.stdout);
    expect(statSync(file).size).toBe(data.length);
    rmSync(file);
    expect(infer().stdout).toBe(expected.stdout);
    expect(statSync(file).size).toBe(data.length);
    expect(readdirSync(path.dirname(file)).sort()).toEqual(['.complete', 'model.data']); // no partial file left behind
  });

  it('repairs at the next start a flipped bit in the cached weights and a cached native library cut in half', async () => {
    const executable = buildOk(writeConfig('repaired', await generateTinyModel(), 'embedding'), 'repaired');
    const ownCache = mkdtempSync(path.join(work, 'repaired-cache-'));
    const infer = () => runExecutable(executable, ['infer', ...texts], { cacheDir: ownCache });
    const expected = infer();
    expect(expected.status, expected.stderr).toBe(0);
    const manifest = JSON.parse(runExecutable(executable, ['inspect'], { cacheDir }).stdout) as { assets: { name: string; length: number; sha256: string }[] };
    const data = manifest.assets.find((asset) => asset.name === 'model_data')!;
    const weights = path.join(ownCache, 'models', data.sha256, 'model.data');
    flipByte(weights, Math.floor(data.length / 2));
    const afterFlip = infer();
    expect(afterFlip.stderr).toBe('');
    expect(afterFlip.stdout).toBe(expected.stdout);
    expect(createHash('sha256').update(readFileSync(weights)).digest('hex')).toBe(data.sha256);

    const [nativeDir] = readdirSync(path.join(ownCache, 'native')).map((name) => path.join(ownCache, 'native', name));
    const library = readdirSync(nativeDir).find((name) => name.startsWith('libonnxruntime'))!;
    const size = statSync(path.join(nativeDir, library)).size;
    truncateSync(path.join(nativeDir, library), Math.floor(size / 2));
    const afterCut = infer();
    expect(afterCut.status, afterCut.stderr).toBe(0);
    expect(afterCut.stdout).toBe(expected.stdout);
    expect(statSync(path.join(nativeDir, library)).size).toBe(size);
  });

  it('ten simultaneous first starts on one empty cache extract each entry once', async () => {
    const executable = buildOk(writeConfig('crowd', await generateTinyModel(), 'embedding'), 'crowd');
    const ownCache = mkdtempSync(path.join(work, 'crowd-cache-'));
    const runs = await Promise.all(
      Array.from({ length: 10 }, () => runExecutableAsync(executable, ['infer', texts[0]], { cacheDir: ownCache, env: { ENCODER_TRACE_STARTUP: '1' } })),
    );
    for (const run of runs) expect(run.status, run.stderr).toBe(0);
    expect(new Set(runs.map((run) => run.stdout)).size).toBe(1);
    const extracted = runs.flatMap((run) => run.stderr.split('\n').filter((line) => / extracted (native|models)\//.test(line)));
    expect(extracted.filter((line) => line.includes('extracted native/'))).toHaveLength(1);
    expect(extracted.filter((line) => line.includes('extracted models/'))).toHaveLength(1);
    for (const folder of ['native', 'models']) expect(readdirSync(path.join(ownCache, folder))).toHaveLength(1); // no staging, no lock
  });

  it('runs as a user id without a passwd entry and without HOME, extracting into the temporary directory', async () => {
    if (process.getuid?.() !== 0) {
      console.warn('no-passwd user test: skipped, it needs root to run as another user id');
      return;
    }
    const uid = 48_213;
    const place = mkdtempSync(path.join(os.tmpdir(), 'no-passwd-'));
    chmodSync(place, 0o755);
    const executable = path.join(place, 'model');
    copyFileSync(buildOk(writeConfig('nobody', await generateTinyModel(), 'embedding'), 'nobody'), executable);
    chmodSync(executable, 0o755);
    const fallback = path.join(os.tmpdir(), `encoder-${uid}`);
    rmSync(fallback, { recursive: true, force: true });
    try {
      for (const run of ['cold', 'warm']) {
        const result = spawnSync(executable, ['infer', texts[0]], { encoding: 'utf8', uid, gid: uid, env: {}, cwd: place, timeout: 120_000 });
        expect(result.status, `${run}: ${result.stderr}`).toBe(0);
        expect(JSON.parse(result.stdout)).toBeTruthy();
        if (run === 'cold') expect(result.stderr).toBe(`note: no home directory and no XDG_CACHE_HOME; using ${fallback} (set ENCODER_CACHE_DIR to choose one)\n`);
        else expect(result.stderr).toBe('');
      }
      expect(readdirSync(path.join(fallback, 'native'))).toHaveLength(1);
      expect(readdirSync(place)).toEqual(['model']); // nothing written in the working directory
    } finally {
      rmSync(place, { recursive: true, force: true });
      rmSync(fallback, { recursive: true, force: true });
    }
  });

  describe('a damaged model file', () => {
    let pristine: string;
    let manifest: { assets: { name: string; offset: number; length: number }[] };

    beforeAll(async () => {
      const dir = await generateTinyModel({ modelType: 'sequence_classification' });
      const config = writeConfig('fragile', dir, 'sequence_classification', '  transform: "return output"\n');
      pristine = buildOk(config, 'fragile');
      manifest = JSON.parse(runExecutable(pristine, ['inspect'], { cacheDir }).stdout);
    });

    /** A run of a changed copy, with a cache of its own: model_data is checked when it is extracted to the cache. */
    function damaged(change: (file: string) => void): ReturnType<typeof runExecutable> {
      const copy = path.join(work, 'damaged');
      copyFileSync(pristine, copy);
      change(copy);
      const ownCache = mkdtempSync(path.join(work, 'damaged-cache-'));
      const result = runExecutable(copy, ['infer', 'some text'], { cacheDir: ownCache });
      rmSync(copy);
      rmSync(ownCache, { recursive: true, force: true });
      return result;
    }

    it('names the asset whose bytes changed', () => {
      expect(manifest.assets.map((a) => a.name)).toEqual(['model_weights', 'model_data', 'tokenizer', 'model_config', 'tokenizer_config', 'transform']);
      for (const asset of manifest.assets) {
        const result = damaged((file) => flipByte(file, asset.offset + Math.floor(asset.length / 2)));
        expect(result.status, asset.name).not.toBe(0);
        expect(result.stderr, asset.name).toContain(`asset ${asset.name}: checksum mismatch`);
      }
    });

    it('says when the file is truncated', () => {
      const size = statSync(pristine).size;
      const result = damaged((file) => truncateSync(file, size - 100));
      expect(result.status).not.toBe(0);
      expect(result.stderr).toMatch(/file is truncated/);
    });

    it('says when data was appended', () => {
      const result = damaged((file) => appendFileSync(file, Buffer.alloc(300, 7)));
      expect(result.status).not.toBe(0);
      expect(result.stderr).toContain('appended data?');
    });
  });
});

function flipByte(file: string, offset: number): void {
  const fd = openSync(file, 'r+');
  const byte = Buffer.alloc(1);
  readSync(fd, byte, 0, 1, offset);
  byte[0] ^= 0xff;
  writeSync(fd, byte, 0, 1, offset);
  closeSync(fd);
}
