/**
 * mozilla-ai/encoderfile 0.7.0 configurations (`encoderfile:` at the top) built unchanged: every key its
 * EncoderfileConfig documents, on the four text model types, through `build` with no flags (the configuration's own
 * `target` and `base_binary_path`), then the built executable's model package loaded and run: encoderfile's defaults
 * (version 0.2.0, output `./<name>.encoderfile`, paths from the working directory), the `tokenizer:` block in effect
 * (left truncation, max_length, strategy, stride recorded), and the one line naming what has no effect here.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetSection } from '../../runtime/asset-section.ts';
import { buildModel, BUILD_STEPS } from '../../src/builder/build-model.ts';
import { ConfigError } from '../../src/encoder/errors.ts';
import { readPackagedModel } from '../../src/encoder/packaged-model.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { PipelineOptions } from '../../src/encoder/pipeline-options.ts';
import { sourceInferenceWorker } from '../../src/cli/installed-files.ts';
import type { EmbeddingResponse, SentenceEmbeddingResponse, SequenceClassificationResponse, TokenClassificationResponse } from '../../src/encoder/schemas.ts';
import { writeFakeBaseRuntime } from '../helpers/fake-base-runtime.ts';
import { hasShared, sharedModel, warnIfSharedMissing } from '../helpers/shared-fixtures.ts';

warnIfSharedMissing('encoderfile configurations built unchanged');

let work: string;
beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), 'encoderfile-config-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

function fakeBaseRuntime(name: string): string {
  return writeFakeBaseRuntime(path.join(work, name));
}

/** Builds `yaml` from `cwd` with no flags at all; the step lines and the result or error. */
async function build(yaml: string, cwd: string) {
  mkdirSync(cwd, { recursive: true });
  const configFile = path.join(cwd, 'encoderfile.yml');
  writeFileSync(configFile, yaml);
  const lines: string[] = [];
  const result = await buildModel(
    { configFile, runtimeVersion: '0.1.0', cwd },
    { step: (index, title, detail) => lines.push(`[${index}/${BUILD_STEPS.length}] ${title}: ${detail}`), progress: () => {} },
  ).catch((error: unknown) => error);
  return { lines, result };
}

async function packaged(file: string) {
  const section = (await AssetSection.open(file))!;
  try {
    return { manifest: section.manifest, pkg: await readPackagedModel(section) };
  } finally {
    await section.close();
  }
}

/** The built file's manifest, its pipeline's answer to `body`, and its tokenizer. */
async function predictBuilt(file: string, body: unknown, options?: PipelineOptions) {
  const { manifest, pkg } = await packaged(file);
  const pipeline = await PredictPipeline.load(pkg, options);
  try {
    return { manifest, response: await pipeline.predict(body), tokenizer: pipeline.tokenizer };
  } finally {
    await pipeline.close();
  }
}

const LONG = Array.from({ length: 80 }, (_, i) => `word${i}`).join(' ');

describe.skipIf(!hasShared)('encoderfile configurations build as they are', () => {
  it('every documented key, object paths, inline transform: a token_classification model truncated on the left', async () => {
    const cwd = path.join(work, 'ner');
    mkdirSync(path.join(cwd, 'out'), { recursive: true });
    const model = sharedModel('tiny-bert-token-classification');
    const base = fakeBaseRuntime('runtime-ner');
    const { lines, result } = await build(
      `encoderfile:
  name: my-ner
  version: "1.2.3"
  path:
    model_config_path: ${model}/config.json
    model_weights_path: ${model}/model.onnx
    tokenizer_path: ${model}/tokenizer.json
    tokenizer_config_path: ${model}/tokenizer_config.json
    preprocessor_config_path: ${model}/none.json
  model_type: token_classification
  output_path: ./out/my-ner.encoderfile
  cache_dir: ./cache
  base_binary_path: ${base}
  transform: |
    function Postprocess(logits)
      return logits:clamp(-50, 50)
    end
  lua_libs:
    - table
    - math
    - debug
  tokenizer:
    pad_strategy:
      fixed: 64
    truncation_side: left
    truncation_strategy: longest_first
    max_length: 24
    stride: 4
  validate_transform: false
  target: x86_64-unknown-linux-gnu
`,
      cwd,
    );
    expect(result).not.toBeInstanceOf(Error);
    expect(lines[0]).toBe(`[1/6] detect platform and fetch the base runtime: x86_64-unknown-linux-gnu, local: ${base}`);
    expect(lines[1]).toBe(
      '[2/6] load and validate the configuration: my-ner 1.2.3 (token_classification), a mozilla-ai/encoderfile configuration; accepted without effect here: ' +
        'path.preprocessor_config_path: no effect, only image models read it, not a token_classification model; ' +
        'lua_libs debug: not opened, a transform never gets the debug library here (it can escape the sandbox); ' +
        'validate_transform false: no effect, the transform is run once on a sample of the output whenever the model loads (at build and at start), so one that fails that run cannot be served; ' +
        'tokenizer.pad_strategy fixed 64: no effect on results, batches are padded to their longest input (padding is masked, so every output is the same)',
    );
    expect(lines[3]).toMatch(/max length: 24 tokens \(tokenizer\.max_length of the configuration; the model runs 512/);
    const output = path.join(cwd, 'out', 'my-ner.encoderfile');
    expect((result as { outputPath: string }).outputPath).toBe(output);

    const { manifest, response, tokenizer } = await predictBuilt(output, { inputs: [LONG] });
    expect(manifest.model).toMatchObject({ name: 'my-ner', version: '1.2.3', lua_libs: ['table', 'math'], max_length: 24, truncation: { side: 'left', strategy: 'longest_first', stride: 4 } });
    // left: the last 22 content tokens of the text (24 less [CLS] and [SEP]), up to its very end
    const tokens = (response as TokenClassificationResponse).results[0].tokens;
    expect(tokens).toHaveLength(22);
    expect(tokens.at(-1)!.token_info.end).toBe(LONG.length);
    expect(tokens[0].token_info.start).toBeGreaterThan(0);
    const all = tokenizer.encodeWith(LONG, { truncation: null, padding: null }).ids.slice(1, -1);
    expect(tokens.map((t) => t.token_info.token_id)).toEqual(all.slice(-22));
    // served with a worker, the text tokenized on a tokenizer thread: cut the same way
    const threaded = await predictBuilt(output, { inputs: [LONG] }, { workers: 1, inferenceWorker: sourceInferenceWorker(), inlineTokenizeUnits: 100 });
    expect((threaded.response as TokenClassificationResponse).results[0].tokens.map((t) => t.token_info.token_id)).toEqual(all.slice(-22));
  });

  it('a model directory, a transform file, defaults: version 0.2.0, ./<name>.encoderfile, paths from the working directory', async () => {
    const cwd = path.join(work, 'defaults');
    mkdirSync(path.join(cwd, 'transforms'), { recursive: true });
    // encoderfile's own Matryoshka recipe, on a 16-wide model
    writeFileSync(
      path.join(cwd, 'transforms', 'matryoshka.lua'),
      'function Postprocess(arr, mask)\n  local e = arr:mean_pool(mask)\n  e = e:layer_norm(2, 1e-5)\n  e = e:truncate_axis(2, 8)\n  return e:lp_normalize(2.0, 2)\nend\n',
    );
    // the configuration lives elsewhere: its relative paths are read from the working directory, as encoderfile does
    const elsewhere = path.join(work, 'configs');
    mkdirSync(elsewhere, { recursive: true });
    const configFile = path.join(elsewhere, 'encoderfile.yml');
    writeFileSync(
      configFile,
      `encoderfile:
  name: nomic-like
  path: ${path.relative(cwd, sharedModel('tiny-bert-sentence-embedding'))}
  model_type: sentence_embedding
  base_binary_path: ../runtime-defaults
  transform:
    path: transforms/matryoshka.lua
`,
    );
    fakeBaseRuntime('runtime-defaults');
    const lines: string[] = [];
    const result = await buildModel({ configFile, runtimeVersion: '0.1.0', cwd }, { step: (i, t, d) => lines.push(`[${i}] ${t}: ${d}`), progress: () => {} }).catch((e: unknown) => e);
    expect(result).not.toBeInstanceOf(Error);
    expect(lines[1]).toBe('[2] load and validate the configuration: nomic-like 0.2.0 (sentence_embedding), a mozilla-ai/encoderfile configuration');
    const output = path.join(cwd, 'nomic-like.encoderfile');
    expect(existsSync(output)).toBe(true);
    const { manifest, response } = await predictBuilt(output, { inputs: ['hello world', 'a second text'] });
    expect(manifest.model.version).toBe('0.2.0');
    expect(manifest.model.truncation).toBeUndefined();
    expect(manifest.model.lua_libs).toEqual(['table', 'string', 'math']);
    for (const { embedding } of (response as SentenceEmbeddingResponse).results) {
      expect(embedding).toHaveLength(8);
      expect(Math.hypot(...embedding)).toBeCloseTo(1, 5);
    }
  });

  it("sentence_embedding without a transform: encoderfile's mean pool, not normalised, whatever the folder's layout says", async () => {
    const cwd = path.join(work, 'sentence');
    // the model with a sentence-transformers layout asking for cls pooling and a Normalize module; encoderfile reads
    // neither (its default transform mean-pools and stops there)
    const model = path.join(cwd, 'model');
    cpSync(sharedModel('tiny-bert-sentence-embedding'), model, { recursive: true });
    const modules = [
      { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
      { idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' },
      { idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' },
    ];
    writeFileSync(path.join(model, 'modules.json'), JSON.stringify(modules));
    mkdirSync(path.join(model, '1_Pooling'));
    writeFileSync(path.join(model, '1_Pooling', 'config.json'), JSON.stringify({ word_embedding_dimension: 16, pooling_mode_cls_token: true, pooling_mode_mean_tokens: false }));
    const base = fakeBaseRuntime('runtime-sentence');
    const head = (name: string) => `encoderfile:\n  name: ${name}\n  path: ${model}\n  model_type: sentence_embedding\n  base_binary_path: ${base}\n`;
    const texts = { inputs: ['hello world', 'a second, longer text to pool'] };
    const vectors = async (yaml: string, name: string, body: object = texts) => {
      const { result } = await build(yaml, cwd);
      expect(result).not.toBeInstanceOf(Error);
      const built = await predictBuilt(path.join(cwd, `${name}.encoderfile`), body);
      return { model: built.manifest.model, embeddings: (built.response as SentenceEmbeddingResponse).results.map((r) => r.embedding) };
    };

    const plain = await vectors(head('plain'), 'plain');
    expect(plain.model).toMatchObject({ pooling: 'mean', normalize: false });
    // encoderfile's own template transform (`encoderfile new-transform`), which returns its mean pool as it is
    const template = await vectors(`${head('template')}  transform: "function Postprocess(arr, mask) return arr:mean_pool(mask) end"\n`, 'template');
    expect(plain.embeddings).toHaveLength(2);
    plain.embeddings.forEach((vector, i) => {
      expect(Math.abs(Math.hypot(...vector) - 1)).toBeGreaterThan(1e-3);
      vector.forEach((value, j) => expect(value).toBeCloseTo(template.embeddings[i][j], 5));
    });
    // a request may still ask for unit length: the same vectors, scaled
    const asked = await vectors(head('plain'), 'plain', { ...texts, normalize: true });
    asked.embeddings.forEach((vector, i) => {
      const norm = Math.hypot(...plain.embeddings[i]);
      vector.forEach((value, j) => expect(value).toBeCloseTo(plain.embeddings[i][j] / norm, 5));
    });
    // this project's own keys in the section still decide
    const own = await vectors(`${head('own')}  normalize: true\n  pooling: cls\n`, 'own');
    expect(own.model).toMatchObject({ pooling: 'cls', normalize: true });
    for (const vector of own.embeddings) expect(Math.hypot(...vector)).toBeCloseTo(1, 5);
  });

  it('embedding and sequence_classification, with the tokenizer block and this project\'s own keys beside encoderfile\'s', async () => {
    const cwd = path.join(work, 'two');
    const base = fakeBaseRuntime('runtime-two');
    const emb = await build(
      `encoderfile:
  name: emb
  path: ${sharedModel('tiny-bert-embedding')}
  model_type: embedding
  base_binary_path: ${base}
  normalize: false
  tokenizer:
    pad_strategy: batch_longest
    truncation_side: right
    truncation_strategy: only_first
    max_length: 10
    stride: 0
`,
      cwd,
    );
    expect(emb.result).not.toBeInstanceOf(Error);
    expect(emb.lines[1]).toBe('[2/6] load and validate the configuration: emb 0.2.0 (embedding), a mozilla-ai/encoderfile configuration');
    const built = await predictBuilt(path.join(cwd, 'emb.encoderfile'), { inputs: [LONG], normalize: false });
    expect(built.manifest.model).toMatchObject({ max_length: 10, normalize: false, truncation: { side: 'right', strategy: 'only_first', stride: 0 } });
    const tokens = (built.response as EmbeddingResponse).results[0].embeddings.map((e) => e.token_info!.token);
    expect(tokens).toEqual(built.tokenizer.encodeWith(LONG, { truncation: null, padding: null }).tokens.slice(1, 9));

    const cls = await build(
      `encoderfile:
  name: cls
  path: ${sharedModel('tiny-bert-sequence-classification')}
  model_type: sequence_classification
  base_binary_path: ${base}
  target: x86_64-unknown-linux-gnu
  transform: "return output:softmax(2)"
  extra_setting: 3
other_top_level: true
`,
      cwd,
    );
    expect(cls.result).not.toBeInstanceOf(Error);
    expect(cls.lines[1]).toBe(
      '[2/6] load and validate the configuration: cls 0.2.0 (sequence_classification), a mozilla-ai/encoderfile configuration; accepted without effect here: ' +
        'other_top_level, encoderfile.extra_setting: ignored, as encoderfile ignores keys it does not know',
    );
    const classified = (await predictBuilt(path.join(cwd, 'cls.encoderfile'), { inputs: ['good', 'bad'] })).response as SequenceClassificationResponse;
    // the transform's softmax, then the server's: probabilities of probabilities, still summing to 1
    expect(classified.results).toHaveLength(2);
    for (const result of classified.results) expect(result.scores[0] + result.scores[1]).toBeCloseTo(1, 5);
  });

  it('refuses what cannot be built, naming the key', async () => {
    const cwd = path.join(work, 'refused');
    const model = sharedModel('tiny-bert-embedding');
    const base = fakeBaseRuntime('runtime-refused');
    const head = `encoderfile:\n  name: bad\n  path: ${model}\n  base_binary_path: ${base}\n`;
    const message = async (yaml: string) => {
      const { result } = await build(yaml, cwd);
      expect(result).toBeInstanceOf(ConfigError);
      return (result as Error).message;
    };
    // a text model's folder named as an image model: no preprocessor_config.json there
    expect(await message(`${head}  model_type: image_classification\n`)).toBe(`preprocessor config (preprocessor_config.json) not found: ${model}/preprocessor_config.json`);
    expect(await message(`${head}  model_type: embedding\n  target: x86_64-unknown-linux-musl\n`)).toMatch(/^"encoderfile\.target" names an unknown target "x86_64-unknown-linux-musl"; allowed values: /);
    expect(await message(`${head}  model_type: embedding\n  tokenizer:\n    truncation_side: middle\n`)).toMatch(
      /invalid value "middle" for "encoderfile\.tokenizer\.truncation_side"; allowed values: right, left$/,
    );
    expect(await message(`${head}  model_type: embedding\n  tokenizer:\n    stride: 600\n`)).toMatch(/stride 600 must be at least 0 and below 510/);
    expect(await message(`${head}  model_type: embedding\n  tokenizer:\n    max_lenght: 3\n`)).toMatch(/unknown key "encoderfile\.tokenizer\.max_lenght"; allowed keys: pad_strategy, truncation_side, truncation_strategy, max_length, stride$/);
    expect(await message(`${head}  model_type: embedding\n  validate_transform: "no"\n`)).toMatch(/"encoderfile\.validate_transform" must be a boolean, got string "no"$/);
    expect(await message(`${head}  model_type: embedding\n  lua_libs: [ffi]\n`)).toMatch(/invalid value "ffi" for "encoderfile\.lua_libs\[0\]"/);
    expect(readFileSync(path.join(cwd, 'encoderfile.yml'), 'utf8')).toContain('lua_libs: [ffi]');
  });
});
