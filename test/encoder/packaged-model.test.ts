import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AssetSection, writeModelExecutable, type AssetSource, type ManifestModel } from '../../runtime/asset-section.ts';
import { parseBuildConfig, type BuildConfig } from '../../src/encoder/config.ts';
import { ConfigError } from '../../src/encoder/errors.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { manifestModelOf, packageAssets, readPackagedModel } from '../../src/encoder/packaged-model.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';

let modelDir: string;
let dir: string;
let basePath: string;

beforeAll(async () => {
  modelDir = await generateTinyModel({ modelType: 'sequence_classification' });
});
afterAll(() => rmSync(modelDir, { recursive: true, force: true }));

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'packaged-model-'));
  basePath = path.join(dir, 'base-runtime');
  writeFileSync(basePath, randomBytes(4096));
  return () => rmSync(dir, { recursive: true, force: true });
});

function configFor(modelPath: string, extra = ''): BuildConfig {
  return parseBuildConfig(`encoder:\n  name: tiny\n  version: 2.0.0\n  model_type: sequence_classification\n  path: ${modelPath}\n${extra}`, {
    baseDir: dir,
  });
}

/** Builds an executable from `assets` and opens its section. */
async function packaged(assets: AssetSource[], model: ManifestModel): Promise<AssetSection> {
  const outputPath = path.join(dir, 'model');
  await writeModelExecutable({
    baseBinaryPath: basePath,
    outputPath,
    assets,
    manifest: { runtime_version: '0.1.0', target: 'x86_64-unknown-linux-gnu', model },
  });
  const section = await AssetSection.open(outputPath);
  if (!section) throw new Error('no section');
  return section;
}

async function packagedPackageOf(config: BuildConfig) {
  // the maximum length as a build records it
  const section = await packaged(packageAssets(config), manifestModelOf(config, 'none', readModelPackage(config).maxLength));
  try {
    return await readPackagedModel(section);
  } finally {
    await section.close();
  }
}

describe('packaged model', () => {
  it('equals the model package read from the model directory', async () => {
    const config = configFor(modelDir, '  transform: "return output"\n  lua_libs: [math, string]\n');
    const fromDirectory = readModelPackage(config);
    const fromExecutable = await packagedPackageOf(config);
    expect(fromExecutable).toEqual(fromDirectory);
    expect(Buffer.from(fromExecutable.weights).equals(readFileSync(path.join(modelDir, 'model.onnx')))).toBe(true);
    expect(fromExecutable).toMatchObject({ name: 'tiny', version: '2.0.0', modelType: 'sequence_classification', luaLibs: ['math', 'string'] });
    expect(fromExecutable.tokenizerConfig).not.toBeNull();
    expect(fromExecutable.transform).toBe('return output');
  });

  it('carries the session options of the configuration, and refuses a manifest whose session is not valid', async () => {
    const config = configFor(modelDir, '  session:\n    intra_op_threads: 3\n    execution_provider: cpu\n');
    const fromExecutable = await packagedPackageOf(config);
    expect(fromExecutable.session).toEqual({ intraOpThreads: 3, executionProvider: 'cpu' });
    expect(fromExecutable).toEqual(readModelPackage(config));
    const model = manifestModelOf(config);
    for (const [session, message] of [
      [{ execution_provider: 'cuda' }, 'packaged model: "session.execution_provider": "cuda" is not available'],
      [{ inter_op_threads: 0 }, 'packaged model: "session.inter_op_threads": must be a positive integer, got 0'],
      [{ graph_optimization_level: true }, 'packaged model: "session.graph_optimization_level": must be a string, got true'],
      ['fast', 'packaged model: session must be a mapping, got "fast"'],
    ] as const) {
      const section = await packaged(packageAssets(config), { ...model, session });
      try {
        const error = await readPackagedModel(section).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as Error).message).toContain(message);
      } finally {
        await section.close();
      }
    }
  });

  it('has no tokenizer config and no transform when the build had none', async () => {
    const copy = mkdtempSync(path.join(os.tmpdir(), 'tiny-copy-'));
    try {
      for (const file of ['model.onnx', 'config.json', 'tokenizer.json']) writeFileSync(path.join(copy, file), readFileSync(path.join(modelDir, file)));
      const config = configFor(copy);
      const pkg = await packagedPackageOf(config);
      expect(pkg.tokenizerConfig).toBeNull();
      expect(pkg.transform).toBeNull();
      expect(pkg).toEqual(readModelPackage(config));
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('keeps an empty transform as an empty string', async () => {
    const config = configFor(modelDir, '  transform: ""\n');
    expect((await packagedPackageOf(config)).transform).toBe('');
  });
});

describe('packageAssets', () => {
  it('lists the model files by path, the tokenizer config when present, and the transform as data', () => {
    const config = configFor(modelDir, '  transform: "return ünïcode"\n');
    const assets = packageAssets(config);
    expect(assets.map((a) => a.name)).toEqual(['model_weights', 'tokenizer', 'model_config', 'tokenizer_config', 'transform']);
    expect(assets.slice(0, 4).map((a) => a.path)).toEqual(
      ['model.onnx', 'tokenizer.json', 'config.json', 'tokenizer_config.json'].map((file) => path.join(modelDir, file)),
    );
    expect(Buffer.from(assets[4].data!).toString('utf8')).toBe('return ünïcode');
    expect(assets[4].path).toBeUndefined();
    expect(manifestModelOf(config)).toEqual({ name: 'tiny', version: '2.0.0', model_type: 'sequence_classification', lua_libs: ['table', 'string', 'math'] });
  });

  it('names the first missing required file like readModelPackage', () => {
    const config = configFor('.');
    expect(() => packageAssets(config)).toThrow(new ConfigError(`model weights not found: ${path.join(dir, 'model.onnx')}`));
    writeFileSync(path.join(dir, 'model.onnx'), 'x');
    expect(() => packageAssets(config)).toThrow(`model config not found: ${path.join(dir, 'config.json')}`);
    writeFileSync(path.join(dir, 'config.json'), '{}');
    expect(() => packageAssets(config)).toThrow(`tokenizer not found: ${path.join(dir, 'tokenizer.json')}`);
    writeFileSync(path.join(dir, 'tokenizer.json'), '{}');
    expect(packageAssets(config).map((a) => a.name)).toEqual(['model_weights', 'tokenizer', 'model_config']);
  });
});

describe('packaged model errors', () => {
  const model: ManifestModel = { name: 'm', version: '1', model_type: 'embedding', lua_libs: ['table'] };
  const text = (name: string, value: string): AssetSource => ({ name, data: Buffer.from(value) });
  const valid = [text('model_weights', 'ONNX'), text('tokenizer', '{}'), text('model_config', '{}')];
  const replace = (asset: AssetSource) => [...valid.filter((a) => a.name !== asset.name), asset];

  async function readError(assets: AssetSource[], manifestModel: ManifestModel = model): Promise<unknown> {
    const section = await packaged(assets, manifestModel);
    try {
      return await readPackagedModel(section).then(
        () => new Error('expected an error'),
        (error: unknown) => error,
      );
    } finally {
      await section.close();
    }
  }

  it('names the asset holding invalid JSON', async () => {
    for (const name of ['tokenizer', 'model_config']) {
      const error = await readError(replace(text(name, '{"a":')));
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(new RegExp(`^asset ${name} is not valid JSON: `));
    }
    const error = await readError([...valid, text('tokenizer_config', 'nope')]);
    expect((error as Error).message).toMatch(/^asset tokenizer_config is not valid JSON: /);
  });

  it('checks the model config like a model directory', async () => {
    expect(await readError(replace(text('model_config', '[1]')))).toEqual(new ConfigError('asset model_config is not a JSON object'));
    expect(((await readError(replace(text('model_config', '{"id2label":{"zero":"O"}}')))) as Error).message).toBe(
      'asset model_config: id2label must map label indices ("0", "1", ...) to label names',
    );
  });

  it('names a missing required asset', async () => {
    for (const missing of ['model_weights', 'tokenizer', 'model_config']) {
      const error = await readError(valid.filter((a) => a.name !== missing));
      expect(error).toEqual(new ConfigError(`packaged model has no ${missing} asset`));
    }
  });

  it('rejects a model type or Lua library this runtime does not know', async () => {
    expect(((await readError(valid, { ...model, model_type: 'image_generation' })) as Error).message).toBe(
      'packaged model: unknown model type "image_generation"; this runtime knows embedding, sentence_embedding, sequence_classification, token_classification',
    );
    expect(((await readError(valid, { ...model, lua_libs: ['table', 'debug'] })) as Error).message).toMatch(
      /^packaged model: unknown Lua library "debug"/,
    );
  });

  it('passes on a corrupted asset as a checksum mismatch', async () => {
    const section = await packaged(valid, model);
    await section.close();
    const file = path.join(dir, 'model');
    const bytes = readFileSync(file);
    const weights = section.manifest.assets.find((a) => a.name === 'model_weights')!;
    bytes[weights.offset] ^= 1;
    writeFileSync(file, bytes);
    const reopened = (await AssetSection.open(file))!;
    try {
      await expect(readPackagedModel(reopened)).rejects.toThrow(new ConfigError('asset model_weights: checksum mismatch'));
    } finally {
      await reopened.close();
    }
  });
});
