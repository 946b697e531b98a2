/**
 * The tiny ViT generator: a complete image-classification model directory (model.onnx, config.json with id2label,
 * preprocessor_config.json) whose graph onnxruntime runs on pixel_values made by src/encoder/image from real image
 * files, and whose logits equal an independent float64 forward pass (test/helpers/vit-reference.ts).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/encoder/errors.ts';
import { decodeImage } from '../../../src/encoder/image/decode-image.ts';
import { installedWasmCodecs } from '../../../src/encoder/image/installed-codecs.ts';
import { parseImageProcessorConfig } from '../../../src/encoder/image/preprocessor-config.ts';
import { pixelValues } from '../../../src/encoder/image/preprocess.ts';
import { TINY_VIT, VIT_MODEL_DIRECTORY_FILES, buildVitOnnxModel, generateVitWeights, writeVitModelDirectory } from '../../../scripts/model-generator/index.ts';
import { vitReferenceForward } from '../../helpers/vit-reference.ts';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vit-generator-'));
  expect(await writeVitModelDirectory(dir)).toEqual([...VIT_MODEL_DIRECTORY_FILES]);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Two different pictures as a PNG and a JPEG of other sizes than the model's input. */
async function images(): Promise<Buffer[]> {
  const picture = (width: number, height: number, seed: number) =>
    sharp(Buffer.from(Array.from({ length: width * height * 3 }, (_, i) => (i * seed + Math.floor(i / (width * 3)) * 13) & 255)), { raw: { width, height, channels: 3 } });
  return [await picture(50, 40, 7).png().toBuffer(), await picture(23, 71, 31).jpeg({ quality: 92 }).toBuffer()];
}

describe('tiny ViT generator', () => {
  it('writes config.json with the labels and a ViTImageProcessor preprocessor_config.json at the input size', async () => {
    const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
    expect(config).toMatchObject({ architectures: ['ViTForImageClassification'], model_type: 'vit', image_size: 32, patch_size: 8, id2label: { 0: 'cat', 1: 'dog', 2: 'bird' } });
    const processor = parseImageProcessorConfig(JSON.parse(await readFile(join(dir, 'preprocessor_config.json'), 'utf8')));
    expect(processor).toMatchObject({ processorType: 'ViTImageProcessor', resize: { target: { height: 32, width: 32 }, resample: 2 }, rescaleFactor: 1 / 255 });
  });

  it('classifies decoded, preprocessed images: logits [batch, labels] equal to an independent forward pass', async () => {
    const processor = parseImageProcessorConfig(JSON.parse(await readFile(join(dir, 'preprocessor_config.json'), 'utf8')));
    const decoded = await Promise.all((await images()).map((bytes, index) => decodeImage(bytes, { index, wasm: installedWasmCodecs })));
    const pixels = pixelValues(decoded, processor);
    expect(pixels.dims).toEqual([2, 3, 32, 32]);

    const session = await ort.InferenceSession.create(join(dir, 'model.onnx'));
    try {
      expect([session.inputNames, session.outputNames]).toEqual([['pixel_values'], ['logits']]);
      const result = await session.run({ pixel_values: new ort.Tensor('float32', pixels.data, pixels.dims) });
      expect(result.logits.dims).toEqual([2, 3]);
      const logits = Array.from(result.logits.data as Float32Array);
      const expected = vitReferenceForward(generateVitWeights(TINY_VIT), TINY_VIT.heads, pixels.data, 2).flat();
      for (let i = 0; i < expected.length; i++) expect(Math.abs(logits[i] - expected[i])).toBeLessThan(1e-4 * Math.max(1, Math.abs(expected[i])));
      // the two images get different scores (the model looks at its input), at a scale a softmax does not flatten
      expect(Math.max(...logits.slice(0, 3).map((value, i) => Math.abs(value - logits[3 + i])))).toBeGreaterThan(0.05);
    } finally {
      await session.release();
    }
  });

  it('is deterministic for a seed and differs between seeds', () => {
    const model = (seed: number) => buildVitOnnxModel({ ...TINY_VIT, seed }, generateVitWeights({ ...TINY_VIT, seed }));
    expect(Buffer.compare(model(5), model(5))).toBe(0);
    expect(Buffer.compare(model(5), model(6))).not.toBe(0);
  });

  it('refuses shapes a ViT cannot have', () => {
    expect(() => generateVitWeights({ ...TINY_VIT, imageSize: 30 })).toThrow(ConfigError);
    expect(() => generateVitWeights({ ...TINY_VIT, heads: 5 })).toThrow(/hidden 32 is not a multiple of heads 5/);
    expect(() => generateVitWeights({ ...TINY_VIT, labels: ['a', 'a'] })).toThrow(/distinct/);
  });
});
