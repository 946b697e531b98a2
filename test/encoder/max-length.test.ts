/**
 * The maximum length (issue 30): which source decides (the position table, a fixed input dimension, config.json,
 * tokenizer_config.json; the smallest, RoBERTa's offset applied), the tokenizer truncating to it, token ids refused
 * beyond it, and the manifest carrying it to a built executable (an older manifest without it still loads).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetSection, writeModelExecutable, type ManifestModel } from '../../runtime/asset-section.ts';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { ConfigError, InputError } from '../../src/encoder/errors.ts';
import { DEFAULT_MAX_LENGTH, describeMaxLength, positionOffset, resolveMaxLength, type MaxLengthSources } from '../../src/encoder/max-length.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { manifestModelOf, packageAssets, readPackagedModel } from '../../src/encoder/packaged-model.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import { EncoderTokenizer } from '../../src/encoder/tokenizer/index.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';

const table = (rows: number) => ({ positionTable: { name: 'embeddings.position_embeddings.weight', rows }, fixedSequence: null });

function sources(overrides: Partial<MaxLengthSources>): MaxLengthSources {
  return { graph: null, weightsFile: 'model.onnx', modelConfig: {}, modelConfigFile: 'config.json', tokenizerConfig: null, ...overrides };
}

describe('resolveMaxLength', () => {
  it('takes the position table over larger claims of config.json and tokenizer_config.json, and says so first', () => {
    const length = resolveMaxLength(
      sources({ graph: table(100), modelConfig: { max_position_embeddings: 512 }, tokenizerConfig: { model_max_length: 512 } }),
    );
    expect(length.tokens).toBe(100);
    expect(describeMaxLength(length)).toBe(
      'max length: 100 tokens (position table of model.onnx (embeddings.position_embeddings.weight): 100 rows; ' +
        'config.json max_position_embeddings says 512; tokenizer_config.json model_max_length says 512)',
    );
  });

  it('takes the smallest source, whichever it is', () => {
    const tokenizer = resolveMaxLength(sources({ graph: table(512), modelConfig: { max_position_embeddings: 512 }, tokenizerConfig: { model_max_length: 256 } }));
    expect(tokenizer.tokens).toBe(256);
    expect(tokenizer.reason).toMatch(/^tokenizer_config\.json model_max_length: 256; position table of model\.onnx \(.*\): 512 rows; config\.json max_position_embeddings says 512$/);

    const config = resolveMaxLength(sources({ graph: table(512), modelConfig: { max_position_embeddings: 300 }, tokenizerConfig: { model_max_length: 512 } }));
    expect(config.tokens).toBe(300);
    expect(config.reason).toMatch(/^config\.json max_position_embeddings: 300; /);

    const fixed = resolveMaxLength(sources({ graph: { positionTable: table(512).positionTable, fixedSequence: { input: 'input_ids', length: 128 } } }));
    expect(fixed).toEqual({ tokens: 128, reason: 'input "input_ids" of model.onnx: fixed sequence length 128; position table of model.onnx (embeddings.position_embeddings.weight): 512 rows' });
  });

  it('lets the graph decide among equals, and names the files as the configuration does', () => {
    const length = resolveMaxLength(
      sources({ graph: table(128), weightsFile: 'w.onnx', modelConfigFile: 'c.json', modelConfig: { max_position_embeddings: 128 }, tokenizerConfig: { model_max_length: 128 } }),
    );
    expect(length.reason).toBe('position table of w.onnx (embeddings.position_embeddings.weight): 128 rows; c.json max_position_embeddings says 128; tokenizer_config.json model_max_length says 128');
  });

  it('subtracts the RoBERTa family position offset (pad_token_id + 1) from the table and from max_position_embeddings', () => {
    for (const modelType of ['roberta', 'xlm-roberta', 'camembert']) {
      const length = resolveMaxLength(
        sources({ graph: table(514), modelConfig: { model_type: modelType, pad_token_id: 1, max_position_embeddings: 514 }, tokenizerConfig: { model_max_length: 512 } }),
      );
      expect(length.tokens, modelType).toBe(512);
      expect(length.reason, modelType).toContain(`514 rows, 2 fewer positions: ${modelType} numbers them from pad_token_id + 1`);
    }
    // only config.json and a larger tokenizer length: the offset still applies
    expect(resolveMaxLength(sources({ modelConfig: { model_type: 'roberta', max_position_embeddings: 514 }, tokenizerConfig: { model_max_length: 1000 } })).tokens).toBe(512);
    expect(positionOffset({ model_type: 'roberta' })).toBe(2); // pad_token_id absent: RoBERTa's 1
    expect(positionOffset({ model_type: 'xlm-roberta', pad_token_id: 0 })).toBe(1);
    expect(positionOffset({ model_type: 'bert', pad_token_id: 0 })).toBe(0);
    expect(positionOffset({})).toBe(0);
    expect(resolveMaxLength(sources({ graph: table(512), modelConfig: { model_type: 'bert', pad_token_id: 0 } })).tokens).toBe(512);
  });

  it("ignores HF's no-limit sentinel and nonsense, and falls back to 512 when nothing states a length", () => {
    const sentinel = resolveMaxLength(sources({ modelConfig: { max_position_embeddings: 256 }, tokenizerConfig: { model_max_length: 1e30 } }));
    expect(sentinel).toEqual({ tokens: 256, reason: 'config.json max_position_embeddings: 256' });
    const nothing = resolveMaxLength(sources({ modelConfig: { max_position_embeddings: '512' }, tokenizerConfig: { model_max_length: -1 } }));
    expect(nothing.tokens).toBe(DEFAULT_MAX_LENGTH);
    expect(nothing.reason).toBe('the default: no position table found in model.onnx, and neither config.json nor tokenizer_config.json states a length');
    expect(resolveMaxLength(sources({ tokenizerConfig: [1, 2] })).tokens).toBe(DEFAULT_MAX_LENGTH);
  });
});

describe('the maximum length in a model package and a built executable', () => {
  let modelDir: string;
  let work: string;
  beforeAll(async () => {
    modelDir = await generateTinyModel({ modelType: 'embedding', maxPositions: 64 });
    work = mkdtempSync(path.join(os.tmpdir(), 'max-length-'));
  });
  afterAll(() => {
    rmSync(modelDir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  });

  const configFor = (dir: string) => parseBuildConfig(`encoder:\n  name: tiny\n  path: ${dir}\n  model_type: embedding\n`, { baseDir: work });

  /** A folder with the generated model's files, tokenizer_config.json replaced by `tokenizerConfig` (null: none). */
  function copyWith(name: string, tokenizerConfig: object | null): string {
    const dir = path.join(work, name);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir);
    for (const file of ['model.onnx', 'config.json', 'tokenizer.json']) writeFileSync(path.join(dir, file), readFileSync(path.join(modelDir, file)));
    if (tokenizerConfig !== null) writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig));
    return dir;
  }

  async function packaged(model: ManifestModel, dir = modelDir) {
    const base = path.join(work, 'base');
    writeFileSync(base, randomBytes(1024));
    const outputPath = path.join(work, `model-${Math.random().toString(36).slice(2)}`);
    await writeModelExecutable({ baseBinaryPath: base, outputPath, assets: packageAssets(configFor(dir)), manifest: { runtime_version: '0.1.0', target: 'x86_64-unknown-linux-gnu', model } });
    const section = (await AssetSection.open(outputPath))!;
    try {
      return await readPackagedModel(section);
    } finally {
      await section.close();
    }
  }

  it('readModelPackage reconciles config.json and tokenizer_config.json (the graph is the builder\'s to read)', () => {
    expect(readModelPackage(configFor(modelDir)).maxLength).toEqual({
      tokens: 64,
      reason: 'config.json max_position_embeddings: 64; tokenizer_config.json model_max_length says 64',
    });
  });

  it('travels in the manifest as max_length and max_length_reason, and comes back the same', async () => {
    const pkg = readModelPackage(configFor(modelDir));
    const model = manifestModelOf(configFor(modelDir), 'none', { tokens: 40, reason: 'why not' });
    expect(model).toMatchObject({ max_length: 40, max_length_reason: 'why not' });
    const fromExecutable = await packaged(model);
    expect(fromExecutable.maxLength).toEqual({ tokens: 40, reason: 'why not' });
    expect(fromExecutable).toEqual({ ...pkg, maxLength: { tokens: 40, reason: 'why not' } });
    const pipeline = await PredictPipeline.load(fromExecutable);
    try {
      expect(pipeline.tokenizer.maxLength).toBe(40);
      const { results } = (await pipeline.predict({ inputs: ['word '.repeat(500)], normalize: false })) as { results: { embeddings: unknown[] }[] };
      expect(results[0].embeddings).toHaveLength(40 - 2); // [CLS] and [SEP] are not in the results
    } finally {
      await pipeline.close();
    }
  });

  it("loads an older executable's manifest without max_length with the tokenizer's own length, as before", async () => {
    const dir = copyWith('old', { model_max_length: 48 });
    const pkg = await packaged(manifestModelOf(configFor(dir)), dir);
    expect(pkg.maxLength).toBeUndefined();
    const pipeline = await PredictPipeline.load(pkg);
    try {
      expect(pipeline.tokenizer.maxLength).toBe(48);
    } finally {
      await pipeline.close();
    }
    expect((await packaged({ ...manifestModelOf(configFor(dir)), max_length: 30 }, dir)).maxLength).toEqual({ tokens: 30, reason: 'recorded at build' });
  });

  it('refuses a manifest whose max_length is not a positive integer', async () => {
    for (const bad of [0, -5, 1.5, '512', null]) {
      await expect(packaged({ ...manifestModelOf(configFor(modelDir)), max_length: bad })).rejects.toThrow(
        new ConfigError(`packaged model: max_length must be a positive integer, got ${JSON.stringify(bad)}`),
      );
    }
    await expect(packaged({ ...manifestModelOf(configFor(modelDir)), max_length: 10, max_length_reason: 3 })).rejects.toThrow('max_length_reason must be a string');
  });

  it("reads the manifest's truncation (the tokenizer block) back, and refuses one that is not valid", async () => {
    const recorded = await packaged({ ...manifestModelOf(configFor(modelDir)), truncation: { side: 'left', strategy: 'only_first', stride: 3 } });
    expect(recorded.truncation).toEqual({ direction: 'left', strategy: 'only_first', stride: 3 });
    expect((await packaged(manifestModelOf(configFor(modelDir)))).truncation).toBeUndefined();
    for (const bad of [{ side: 'up', strategy: 'only_first', stride: 0 }, { side: 'left', strategy: 'longest_first', stride: -1 }, 'left', null]) {
      await expect(packaged({ ...manifestModelOf(configFor(modelDir)), truncation: bad })).rejects.toThrow(
        `packaged model: truncation must be {side: right|left, strategy: longest_first|only_first|only_second, stride: integer >= 0}, got ${JSON.stringify(bad)}`,
      );
    }
  });

  it('the tokenizer truncates to the length it is given, and refuses a length that is not one', () => {
    const json = readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8');
    const config = { model_max_length: 64 };
    const text = 'word '.repeat(500);
    expect(EncoderTokenizer.fromJson(json, config).encode(text).ids).toHaveLength(64);
    const shorter = EncoderTokenizer.fromJson(json, config, { maxLength: 20 });
    expect(shorter.maxLength).toBe(20);
    expect(shorter.encode(text).ids).toHaveLength(20);
    expect(shorter.encodePair(text, text).ids).toHaveLength(20);
    expect(EncoderTokenizer.fromJson(json, null, { maxLength: 1000 }).encode(text).ids).toHaveLength(502);
    for (const bad of [0, -1, 2.5, Number.NaN]) {
      expect(() => EncoderTokenizer.fromJson(json, config, { maxLength: bad })).toThrow(
        new ConfigError(`tokenizer: the maximum length must be a positive integer, got ${String(bad)}`),
      );
    }
    expect(() => EncoderTokenizer.fromJson(json, config, { maxLength: 2 })).toThrow("tokenizer: the model's maximum length 2 leaves no room next to the special tokens");
  });

  it('refuses token ids longer than the length with a 400-type InputError, and runs those at the length', async () => {
    const pipeline = await PredictPipeline.load({ ...readModelPackage(configFor(modelDir)), maxLength: { tokens: 32, reason: 'test' } });
    try {
      const ok = await pipeline.embed({ inputs: [Array.from({ length: 32 }, () => 10)] });
      expect(ok.promptTokens).toBe(32);
      const error = await pipeline.embed({ inputs: [[5, 6], Array.from({ length: 33 }, () => 10)] }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InputError);
      expect((error as InputError).message).toBe("Invalid input: input[1] holds 33 token ids, more than the model's 32");
      expect((error as InputError).field).toBe('input');
    } finally {
      await pipeline.close();
    }
  });
});
