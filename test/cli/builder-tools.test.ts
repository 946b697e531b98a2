/**
 * mozilla-ai/encoderfile's builder commands and flags, as a user of it types them (issue 33): `version`,
 * `new-transform -m`, `inspect <file>`, `runtime list|add|remove`, `build --output-dir --cache-dir --no-download
 * --no-build --runtime-version` (its docs' names) and `--target --output-path --directory` (its 0.7.0 --help's),
 * `infer -f json`. Each flag that cannot apply says why and exits 2.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostTarget } from '../../src/builder/targets.ts';
import { RUNTIME_VERSION } from '../../src/cli/program.ts';
import { MODEL_TYPES } from '../../src/encoder/config-names.ts';
import { baseRuntimePath, hasBaseRuntime, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { startReleaseServer, type ReleaseServer } from '../helpers/release-server.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';

const work = mkdtempSync(path.join(os.tmpdir(), 'builder-tools-'));
let modelDir: string;
let config: string;

beforeAll(async () => {
  modelDir = await generateTinyModel({ modelType: 'sequence_classification', labels: ['no', 'yes'] });
  config = path.join(work, 'cls.yaml');
  writeFileSync(config, `encoder:\n  name: cls\n  path: ${modelDir}\n  model_type: sequence_classification\n`);
}, 60_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('version and new-transform', () => {
  it('version prints the version', async () => {
    const { code, stdout } = await runCliCaptured(['version']);
    expect(code).toBe(0);
    expect(stdout).toBe(`encoder ${RUNTIME_VERSION}\n`);
  });

  it('new-transform prints, for every model type, a transform that builds and leaves the results as they were', { timeout: 120_000 }, async () => {
    const dirs: Record<string, string> = {
      embedding: await generateTinyModel({ modelType: 'embedding' }),
      sentence_embedding: await generateTinyModel({ modelType: 'sentence_embedding' }),
      sequence_classification: modelDir,
      token_classification: await generateTinyModel({ modelType: 'token_classification', labels: ['O', 'B-X'] }),
    };
    for (const modelType of MODEL_TYPES) {
      const made = await runCliCaptured(['new-transform', '-m', modelType]);
      expect(made.code, made.stderr).toBe(0);
      expect(made.stdout).toContain('function Postprocess(arr, mask)');
      const script = path.join(work, `${modelType}.lua`);
      writeFileSync(script, made.stdout);
      const plain = path.join(work, `${modelType}.yaml`);
      const withTransform = path.join(work, `${modelType}-t.yaml`);
      const head = `encoder:\n  name: t\n  path: ${dirs[modelType]}\n  model_type: ${modelType}\n`;
      writeFileSync(plain, head);
      writeFileSync(withTransform, `${head}  transform:\n    path: ${script}\n`);
      const [without, withIt] = [await runCliCaptured(['infer', '-c', plain, 'hello world']), await runCliCaptured(['infer', '-c', withTransform, 'hello world'])];
      expect(withIt.code, withIt.stderr).toBe(0);
      expect(JSON.parse(withIt.stdout)).toEqual(JSON.parse(without.stdout));
    }
  });

  it('new-transform refuses a model type it does not know, with the ones it does', async () => {
    const { code, stderr } = await runCliCaptured(['new-transform', '-m', 'image_segmentation']);
    expect(code).toBe(2);
    expect(stderr).toContain('sequence_classification');
    expect((await runCliCaptured(['new-transform'])).code).toBe(2);
  });
});

describe('infer -f', () => {
  it('json is the format, as encoderfile has it; another is refused with exit 2', async () => {
    const json = await runCliCaptured(['infer', '-c', config, '-f', 'json', 'good']);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual(JSON.parse((await runCliCaptured(['infer', '-c', config, 'good'])).stdout));
    const yaml = await runCliCaptured(['infer', '-c', config, '--format', 'yaml', 'good']);
    expect(yaml.code).toBe(2);
    expect(yaml.stderr).toContain('json');
  });
});

describe('build flags', () => {
  it('--no-build runs every check and writes nothing; a broken model still fails it', { timeout: 120_000 }, async () => {
    const out = path.join(work, 'never', 'cls');
    const checked = await runCliCaptured(['build', '-f', config, '-o', out, '--no-build', '--base-binary-path', process.execPath]);
    expect(checked.code, checked.stderr).toBe(0);
    expect(checked.stderr).toMatch(/validate the ONNX model structure: .*run once at that length/);
    expect(checked.stderr).toContain('nothing written (--no-build)');
    expect(existsSync(out)).toBe(false);

    const broken = path.join(work, 'broken');
    mkdirSync(broken, { recursive: true });
    for (const file of ['config.json', 'tokenizer.json']) writeFileSync(path.join(broken, file), readFileSync(path.join(modelDir, file)));
    writeFileSync(path.join(broken, 'model.onnx'), 'not a graph');
    const brokenConfig = path.join(work, 'broken.yaml');
    writeFileSync(brokenConfig, `encoder:\n  name: broken\n  path: ${broken}\n  model_type: sequence_classification\n`);
    const refused = await runCliCaptured(['build', '-f', brokenConfig, '--no-build', '--base-binary-path', process.execPath]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/onnx|ONNX|model/);
  });

  it('--runtime-version other than the builder\'s cannot apply: exit 2, saying why', async () => {
    const { code, stderr } = await runCliCaptured(['build', '-f', config, '--runtime-version', '0.0.1', '--no-build']);
    expect(code).toBe(2);
    expect(stderr).toContain(`base runtime ${RUNTIME_VERSION} only`);
  });

  it("encoderfile's own names --target and --output-path are the same options; given twice differently, or a --directory that is no folder: exit 2", async () => {
    const twice = await runCliCaptured(['build', '-f', config, '--platform', 'x86_64-unknown-linux-gnu', '--target', 'aarch64-unknown-linux-gnu', '--no-build']);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toContain('error: --platform x86_64-unknown-linux-gnu and --target aarch64-unknown-linux-gnu are one option under two names; give one');
    const outputs = await runCliCaptured(['build', '-f', config, '-o', 'a', '--output-path', 'b', '--no-build']);
    expect(outputs.code).toBe(2);
    expect(outputs.stderr).toContain('-o a and --output-path b are one option under two names');
    const noFolder = await runCliCaptured(['build', '-f', config, '--directory', path.join(work, 'no-such-folder'), '--no-build']);
    expect(noFolder.code).toBe(2);
    expect(noFolder.stderr).toContain(`error: --directory ${path.join(work, 'no-such-folder')}: no such folder`);
    const unknownTarget = await runCliCaptured(['build', '-f', config, '--target', 'x86_64-unknown-linux-musl', '--no-build']);
    expect(unknownTarget.code).toBe(2);
    expect(unknownTarget.stderr).toContain('x86_64-unknown-linux-musl');
  });

  it('--no-download with no cached base runtime for the target: exit 2 naming `runtime add`', async () => {
    const other = hostTarget() === 'aarch64-unknown-linux-gnu' ? 'x86_64-unknown-linux-gnu' : 'aarch64-unknown-linux-gnu';
    const { code, stderr } = await runCliCaptured(['build', '-f', config, '--platform', other, '--no-download', '--cache-dir', path.join(work, 'empty-cache')]);
    expect(code).toBe(2);
    expect(stderr).toContain(`encoder runtime add ${other}`);
    expect(stderr).toContain(path.join(work, 'empty-cache'));
  });
});

warnIfNoBaseRuntime('builder tools (inspect, runtime add)');
describe.skipIf(!hasBaseRuntime())('with the base runtime: build --output-dir, inspect, runtime list|add|remove', () => {
  let release: ReleaseServer;
  let releaseUrl: string;
  let requests: string[];

  beforeAll(async () => {
    release = await startReleaseServer(work, [hostTarget()]);
    ({ url: releaseUrl, requests } = release);
  }, 120_000);

  afterAll(async () => {
    await release?.close();
  });

  it('build --output-dir writes the model there under its name; inspect prints its manifest and config.json', { timeout: 120_000 }, async () => {
    const outDir = path.join(work, 'out');
    const built = await runCliCaptured(['build', '-f', config, '--output-dir', outDir, '--base-binary-path', baseRuntimePath()]);
    expect(built.code, built.stderr).toBe(0);
    const executable = path.join(outDir, 'cls');
    expect(statSync(executable).size).toBeGreaterThan(statSync(baseRuntimePath()).size);
    const inspected = await runCliCaptured(['inspect', executable]);
    expect(inspected.code, inspected.stderr).toBe(0);
    const info = JSON.parse(inspected.stdout) as { manifest: { model: { name: string; model_type: string }; runtime_version: string }; model_config: unknown };
    expect(info.manifest.model).toMatchObject({ name: 'cls', model_type: 'sequence_classification' });
    expect(info.manifest.runtime_version).toBe(RUNTIME_VERSION);
    expect(info.model_config).toEqual(JSON.parse(readFileSync(path.join(modelDir, 'config.json'), 'utf8')));

    const bare = await runCliCaptured(['inspect', baseRuntimePath()]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('carries no model');
    const missing = await runCliCaptured(['inspect', path.join(work, 'no-such-file')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cannot read');
  });

  it('runtime add downloads and verifies into the cache, list shows it, a build then uses it with --no-download, remove removes it', { timeout: 180_000 }, async () => {
    const cacheDir = path.join(work, 'runtime-cache');
    const previous = process.env.ENCODER_RELEASE_URL;
    process.env.ENCODER_RELEASE_URL = releaseUrl;
    try {
      expect((await runCliCaptured(['--cache-dir', cacheDir, 'runtime', 'list'])).stdout).toBe('');
      const added = await runCliCaptured(['--cache-dir', cacheDir, 'runtime', 'add', hostTarget()]);
      expect(added.code, added.stderr).toBe(0);
      expect(added.stderr).toContain('downloaded and verified');
      expect(requests.some((url) => url.endsWith('SHA256SUMS'))).toBe(true);
      expect((await runCliCaptured(['runtime', 'add', hostTarget(), '--cache-dir', cacheDir])).stderr).toContain('already in the cache');
      expect((await runCliCaptured(['runtime', 'list', '--cache-dir', cacheDir])).stdout).toBe(`${RUNTIME_VERSION} ${hostTarget()}\n`);
      const fromCache = await runCliCaptured(['build', '-f', config, '-o', path.join(work, 'from-cache'), '--no-download', '--cache-dir', cacheDir]);
      expect(fromCache.code, fromCache.stderr).toBe(0);
      expect(fromCache.stderr).toMatch(/fetch the base runtime: .*cache/);

      const remove = await runCliCaptured(['runtime', 'remove', hostTarget(), '--cache-dir', cacheDir]);
      expect(remove.code, remove.stderr).toBe(0);
      expect((await runCliCaptured(['runtime', 'list', '--cache-dir', cacheDir])).stdout).toBe('');
      const again = await runCliCaptured(['runtime', 'remove', hostTarget(), '--cache-dir', cacheDir]);
      expect(again.code).toBe(2);
      expect(again.stderr).toContain('no base runtime');
      expect((await runCliCaptured(['runtime', 'add', 'sparc-sun-solaris', '--cache-dir', cacheDir])).code).toBe(2);
      expect((await runCliCaptured(['runtime', 'add', hostTarget(), '--runtime-version', '../x', '--cache-dir', cacheDir])).code).toBe(2);
    } finally {
      if (previous === undefined) delete process.env.ENCODER_RELEASE_URL;
      else process.env.ENCODER_RELEASE_URL = previous;
    }
  });
});
