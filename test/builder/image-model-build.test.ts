/**
 * image_classification at build (issue 36): the configuration in both formats, the tiny ViT built into an executable
 * whose assets are the graph, config.json and preprocessor_config.json (no tokenizer), read back and run with the
 * same logits, and every way the folder can be wrong refused at build with a ConfigError naming it.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetSection } from '../../runtime/asset-section.ts';
import { buildModel, BUILD_STEPS } from '../../src/builder/build-model.ts';
import { CACHE_DIR_ENV } from '../../src/encoder/cache/cache-dir.ts';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { ConfigError } from '../../src/encoder/errors.ts';
import { ImageOnnxModel } from '../../src/encoder/image-model.ts';
import { readPackagedImageModel, readPackagedModel } from '../../src/encoder/packaged-model.ts';
import { TINY_VIT, writeVitModelDirectory } from '../../scripts/model-generator/index.ts';
import { writeFakeBaseRuntime } from '../helpers/fake-base-runtime.ts';

let work: string;
let vit: string;
let base: string;
const cacheBefore = process.env[CACHE_DIR_ENV];
beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'image-build-'));
  // the packed model_data is extracted to the cache when read back: this test's own
  process.env[CACHE_DIR_ENV] = path.join(work, 'cache');
  vit = path.join(work, 'vit');
  await writeVitModelDirectory(vit);
  base = writeFakeBaseRuntime(path.join(work, 'runtime'));
});
afterAll(() => {
  if (cacheBefore === undefined) delete process.env[CACHE_DIR_ENV];
  else process.env[CACHE_DIR_ENV] = cacheBefore;
  rmSync(work, { recursive: true, force: true });
});

async function build(yaml: string, name = 'cfg') {
  const cwd = path.join(work, name);
  mkdirSync(cwd, { recursive: true });
  const configFile = path.join(cwd, 'config.yml');
  writeFileSync(configFile, yaml);
  const lines: string[] = [];
  const result = await buildModel(
    { configFile, runtimeVersion: '0.1.0', cwd, baseBinaryPath: base },
    { step: (index, title, detail) => lines.push(`[${index}/${BUILD_STEPS.length}] ${title}: ${detail}`), progress: () => {} },
  ).catch((error: unknown) => error);
  return { lines, result, cwd };
}

/** A copy of the tiny ViT's folder with one file replaced (null: removed). */
function variant(name: string, file: string, text: string | null): string {
  const dir = path.join(work, name);
  mkdirSync(dir, { recursive: true });
  for (const each of ['model.onnx', 'config.json', 'preprocessor_config.json']) writeFileSync(path.join(dir, each), readFileSync(path.join(vit, each)));
  if (text === null) rmSync(path.join(dir, file));
  else writeFileSync(path.join(dir, file), text);
  return dir;
}

describe('image_classification configurations', () => {
  const base = { baseDir: '/m', cwd: '/w' };

  it('reads preprocessor_config.json beside the model, or where path.preprocessor_config_path says, in both formats', () => {
    const own = parseBuildConfig('encoder:\n  name: v\n  path: vit\n  model_type: image_classification\n', base);
    expect(own.modelType).toBe('image_classification');
    expect(own.paths.preprocessorConfigPath).toBe('/m/vit/preprocessor_config.json');
    const theirs = parseBuildConfig(
      'encoderfile:\n  name: v\n  model_type: image_classification\n  path:\n    model_config_path: a/config.json\n    model_weights_path: a/model.onnx\n    preprocessor_config_path: p/pre.json\n',
      base,
    );
    expect(theirs.paths).toMatchObject({ modelConfigPath: '/w/a/config.json', modelWeightsPath: '/w/a/model.onnx', preprocessorConfigPath: '/w/p/pre.json' });
    expect(theirs.notes).toEqual([]);
  });

  it('a text model still needs tokenizer_path; an image model refuses transform, tokenizer and check texts', () => {
    const fail = (yaml: string) => {
      try {
        parseBuildConfig(yaml, base);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
      throw new Error('no error');
    };
    expect(fail('encoder:\n  name: m\n  model_type: embedding\n  path: {model_config_path: a, model_weights_path: b}\n')).toBe(
      'configuration: "path.tokenizer_path" is required for a embedding model (only image models have no tokenizer)',
    );
    const head = 'encoder:\n  name: v\n  path: vit\n  model_type: image_classification\n';
    expect(fail(`${head}  transform: "function Postprocess(x) return x end"\n`)).toBe('configuration: "transform" is not supported for image_classification models (docs/image-models.md)');
    expect(fail(`${head}  tokenizer:\n    max_length: 8\n`)).toBe('configuration: "tokenizer" is not supported for image_classification models (docs/image-models.md)');
    expect(fail(`${head}  quantize: int8\n  quantize_check_texts: [a]\n`)).toBe(
      'configuration: "quantize_check_texts" is not supported for image_classification models (docs/image-models.md)',
    );
    expect(fail(`${head}  pooling: mean\n`)).toContain('"encoder.pooling" applies to embedding, sentence_embedding, image_embedding models, not image_classification');
  });
});

describe('building an image classification model', () => {
  it('packs the graph, config.json and preprocessor_config.json (no tokenizer); read back, it gives the same logits', async () => {
    const { lines, result, cwd } = await build(`encoderfile:\n  name: tiny-vit\n  path: ${vit}\n  model_type: image_classification\n`, 'ok');
    expect(result).not.toBeInstanceOf(Error);
    expect(lines[1]).toBe('[2/6] load and validate the configuration: tiny-vit 0.2.0 (image_classification), a mozilla-ai/encoderfile configuration');
    expect(lines[3]).toMatch(/^\[4\/6\] validate the ONNX model structure: input "pixel_values" \[batch_size, 3, 32, 32\], output "logits" \[batch, 3\] \(3 labels\), run once at 32×32; ViTImageProcessor; graph optimized$/);
    const file = path.join(cwd, 'tiny-vit.encoderfile');
    const section = (await AssetSection.open(file))!;
    try {
      expect(section.manifest.model).toMatchObject({ name: 'tiny-vit', model_type: 'image_classification' });
      // the graph's large initializers may be packed apart (model_data), as for text models
      expect(section.manifest.assets.map((asset) => asset.name).filter((name) => name !== 'model_data').sort()).toEqual(['model_config', 'model_weights', 'preprocessor_config']);
      const pkg = await readPackagedImageModel(section);
      expect(pkg.labels).toEqual(TINY_VIT.labels);
      expect(pkg.preprocessor.resize?.target).toEqual({ height: 32, width: 32 });
      // the text model's reader says what the package is, rather than failing on a missing tokenizer
      await expect(readPackagedModel(section)).rejects.toThrow('image_classification is an image model, read without a tokenizer as an image model package');

      // the packed (optimized) graph and the folder's give the same logits on the same pixels
      const pixels = { dims: [2, 3, 32, 32] as [number, number, number, number], data: Float32Array.from({ length: 2 * 3 * 32 * 32 }, (_, i) => Math.sin(i) * 0.9) };
      const expected = { labels: 3, size: { height: 32, width: 32 } };
      const [packed, original] = await Promise.all([ImageOnnxModel.load(pkg.weights, expected, { weightsDataDir: pkg.weightsDataDir }), ImageOnnxModel.load(readFileSync(path.join(vit, 'model.onnx')), expected)]);
      try {
        const [a, b] = [await packed.run(pixels), await original.run(pixels)];
        expect(a.dims).toEqual([2, 3]);
        for (let i = 0; i < a.data.length; i++) expect(a.data[i]).toBeCloseTo(b.data[i], 5);
        // not a constant: the two images get different logits
        expect(a.data.slice(0, 3)).not.toEqual(a.data.slice(3, 6));
      } finally {
        await Promise.all([packed.close(), original.close()]);
      }
    } finally {
      await section.close();
    }
  });

  it('quantizes to int8 behind the label-agreement gate on check images', async () => {
    // the tiny random ViT's labels flip on some check images: the default floor (98%) refuses it, nothing is written
    const refused = await build(`encoder:\n  name: q\n  path: ${vit}\n  model_type: image_classification\n  quantize: int8\n`, 'int8-refused');
    expect(refused.result).toBeInstanceOf(ConfigError);
    expect((refused.result as Error).message).toMatch(/^int8 quantization fails the accuracy gate: \d+\.\d% of the predicted labels are unchanged, below quantize_min_label_agreement 0\.98; nothing was written/);
    expect(existsSync(path.join(refused.cwd, 'q'))).toBe(false);

    const { lines, result, cwd } = await build(
      `encoder:\n  name: q\n  path: ${vit}\n  model_type: image_classification\n  quantize: int8\n  quantize_min_label_agreement: 0.5\n`,
      'int8',
    );
    expect(result).not.toBeInstanceOf(Error);
    expect(lines[3]).toMatch(/; \d+ MatMul\/Gemm → int8 DynamicQuantizeMatMul; \d+\.\d% of 16 labels unchanged, largest score difference [\d.]+ on 16 check images; graph optimized$/);
    const section = (await AssetSection.open(path.join(cwd, 'q')))!;
    try {
      expect(section.manifest.model.quantization).toBe('int8');
      const pkg = await readPackagedImageModel(section);
      expect(pkg.quantization).toBe('int8');
      const model = await ImageOnnxModel.load(pkg.weights, { labels: 3, size: { height: 32, width: 32 } }, { weightsDataDir: pkg.weightsDataDir });
      try {
        const logits = await model.run({ dims: [1, 3, 32, 32], data: new Float32Array(3 * 32 * 32).fill(0.25) });
        expect(logits.dims).toEqual([1, 3]);
      } finally {
        await model.close();
      }
    } finally {
      await section.close();
    }
  });

  it('refuses a folder that does not make a servable image model, naming what is wrong', async () => {
    const message = async (dir: string, extra = '') => {
      const { result } = await build(`encoder:\n  name: bad\n  path: ${dir}\n  model_type: image_classification\n${extra}`, 'bad');
      expect(result).toBeInstanceOf(ConfigError);
      return (result as Error).message;
    };
    const missing = variant('no-pre', 'preprocessor_config.json', null);
    expect(await message(missing)).toBe(`preprocessor config (preprocessor_config.json) not found: ${missing}/preprocessor_config.json`);
    const badSize = variant('bad-size', 'preprocessor_config.json', JSON.stringify({ image_processor_type: 'ViTImageProcessor', size: { height: 0, width: 32 } }));
    expect(await message(badSize)).toBe(`${badSize}/preprocessor_config.json: size must be a positive integer or an object of positive integers, got {"height":0,"width":32}`);
    const wrongSize = variant('wrong-size', 'preprocessor_config.json', JSON.stringify({ image_processor_type: 'ViTImageProcessor', size: { height: 48, width: 48 } }));
    expect(await message(wrongSize)).toBe('model input "pixel_values" has height 32, but preprocessor_config.json makes images of height 48');
    const config = JSON.parse(readFileSync(path.join(vit, 'config.json'), 'utf8')) as Record<string, unknown>;
    const noLabels = variant('no-labels', 'config.json', JSON.stringify({ ...config, id2label: undefined, label2id: undefined }));
    expect(await message(noLabels)).toBe(`model config ${noLabels}/config.json: an image_classification model needs id2label, the name of each label by index`);
    const fourLabels = variant('four-labels', 'config.json', JSON.stringify({ ...config, id2label: { 0: 'a', 1: 'b', 2: 'c', 3: 'd' } }));
    expect(await message(fourLabels)).toBe('model output "logits" has 3 labels, config.json id2label 4');
    const gap = variant('gap', 'config.json', JSON.stringify({ ...config, id2label: { 0: 'a', 1: 'b', 5: 'c' } }));
    expect(await message(gap)).toBe(`model config ${gap}/config.json: id2label must number its labels 0 to 2, it has "5"`);
    // a text model's graph named as an image model
    const notImage = variant('not-image', 'model.onnx', 'not an onnx model');
    expect(await message(notImage)).toMatch(/^model weights are not a loadable ONNX model: /);
  });
});
