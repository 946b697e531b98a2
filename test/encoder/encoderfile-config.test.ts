/**
 * Reading mozilla-ai/encoderfile's configuration (`encoderfile:`) and the `tokenizer:` block: what each key becomes,
 * encoderfile's defaults, where the truncation comes from (the block, else tokenizer_config.json for an encoderfile
 * file), and the manifest's `truncation` read back by an executable. Builds of such files: test/builder/
 * encoderfile-config-build.test.ts.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { ConfigError } from '../../src/encoder/errors.ts';
import { resolveTruncation } from '../../src/encoder/model-package.ts';

const base = { baseDir: '/configs', cwd: '/work', env: { HOME: '/home/u' } };

function configError(yaml: string): string {
  try {
    parseBuildConfig(yaml, base);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('an encoderfile: configuration', () => {
  it("takes encoderfile's defaults: version 0.2.0, ./<name>.encoderfile, paths from the working directory", () => {
    const config = parseBuildConfig('encoderfile:\n  name: m\n  path: ./model\n  model_type: embedding\n', base);
    expect(config).toMatchObject({
      name: 'm',
      version: '0.2.0',
      modelType: 'embedding',
      format: 'encoderfile',
      outputPath: '/work/m.encoderfile',
      paths: { modelWeightsPath: '/work/model/model.onnx', tokenizerConfigPath: '/work/model/tokenizer_config.json' },
      luaLibs: ['table', 'string', 'math'],
      target: null,
      baseBinaryPath: null,
      notes: [],
      tokenizer: { padStrategy: null, truncationSide: null, truncationStrategy: null, maxLength: null, stride: null },
    });
  });

  it('reads every key of EncoderfileConfig', () => {
    const config = parseBuildConfig(
      `encoderfile:
  name: full
  version: "3.1"
  path:
    model_config_path: m/config.json
    model_weights_path: /abs/model.onnx
    tokenizer_path: m/tokenizer.json
    tokenizer_config_path: other/tokenizer_config.json
  model_type: token_classification
  output_path: out/full.bin
  cache_dir: ~/cache
  base_binary_path: ./runtime
  transform: "return output"
  lua_libs: [math, os, math]
  tokenizer:
    pad_strategy: ~
    truncation_side: left
    truncation_strategy: only_first
    max_length: 128
    stride: 16
  validate_transform: true
  target: aarch64-apple-darwin
`,
      base,
    );
    expect(config).toMatchObject({
      version: '3.1',
      paths: {
        modelConfigPath: '/work/m/config.json',
        modelWeightsPath: '/abs/model.onnx',
        tokenizerPath: '/work/m/tokenizer.json',
        tokenizerConfigPath: '/work/other/tokenizer_config.json',
      },
      outputPath: '/work/out/full.bin',
      cacheDir: path.join(os.homedir(), 'cache'),
      baseBinaryPath: '/work/runtime',
      transform: 'return output',
      luaLibs: ['math', 'os'],
      tokenizer: { padStrategy: null, truncationSide: 'left', truncationStrategy: 'only_first', maxLength: 128, stride: 16 },
      target: 'aarch64-apple-darwin',
      notes: [],
    });
  });

  it('an encoder: file may have the tokenizer block too; a file with both top-level keys is read as encoder:', () => {
    const config = parseBuildConfig('encoder:\n  name: e\n  path: d\n  model_type: embedding\n  tokenizer:\n    truncation_side: left\n    pad_strategy: {fixed: 8}\n', base);
    expect(config.format).toBe('encoder');
    expect(config.tokenizer).toEqual({ padStrategy: { fixed: 8 }, truncationSide: 'left', truncationStrategy: null, maxLength: null, stride: null });
    expect(configError('encoder:\n  name: e\n  path: d\n  model_type: embedding\nencoderfile:\n  name: x\n')).toBe(
      'configuration: unknown key "encoderfile"; allowed keys: encoder',
    );
  });

  it('names the key of a bad value', () => {
    const head = 'encoderfile:\n  name: m\n  path: d\n';
    expect(configError(`${head}`)).toBe('configuration: missing required key "encoderfile.model_type"');
    expect(configError(`${head}  model_type: embeddings\n`)).toBe(
      'configuration: invalid value "embeddings" for "encoderfile.model_type"; allowed values: embedding, sentence_embedding, sequence_classification, token_classification, image_classification',
    );
    expect(configError(`${head}  model_type: embedding\n  tokenizer:\n    pad_strategy: longest\n`)).toBe(
      'configuration: "encoderfile.tokenizer.pad_strategy" must be batch_longest, null or an object with fixed (a length), got string "longest"',
    );
    expect(configError(`${head}  model_type: embedding\n  tokenizer:\n    max_length: 0\n`)).toBe('configuration: "encoderfile.tokenizer.max_length" must be at least 1, got 0');
    expect(configError(`${head}  model_type: embedding\n  tokenizer:\n    stride: -1\n`)).toBe('configuration: "encoderfile.tokenizer.stride" must be at least 0, got -1');
    expect(configError('encoderfile:\n  name: m\n  model_type: embedding\n  path: {model_config_path: a, tokenizer_path: b}\n')).toBe(
      'configuration: missing required key "encoderfile.path.model_weights_path"',
    );
    expect(configError('encoderfile:\n  name: m\n  model_type: embedding\n  path: {model_config_path: a, model_weights_path: w, tokenizer_path: b, vocab: v}\n')).toBe(
      'configuration: unknown key "encoderfile.path.vocab"; allowed keys: model_config_path, model_weights_path, tokenizer_path, tokenizer_config_path, preprocessor_config_path',
    );
  });
});

describe('where the truncation comes from', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'truncation-'));
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'x'), '');
  const tokenizerConfig = { model_max_length: 512, truncation_side: 'left', truncation_strategy: 'only_second', stride: 3 };

  it("an encoderfile file takes tokenizer_config.json's truncation_side, strategy and stride where its block is silent", () => {
    const config = parseBuildConfig('encoderfile:\n  name: m\n  path: d\n  model_type: embedding\n  tokenizer:\n    stride: 5\n', base);
    expect(resolveTruncation(config, tokenizerConfig)).toEqual({ direction: 'left', strategy: 'only_second', stride: 5 });
    expect(resolveTruncation(config, { truncation_side: 'middle' })).toEqual({ direction: 'right', strategy: 'longest_first', stride: 5 });
    expect(resolveTruncation(config, null)).toEqual({ direction: 'right', strategy: 'longest_first', stride: 5 });
  });

  it('an encoder: file only its block (as before: tokenizer_config.json does not change how it cuts)', () => {
    const config = parseBuildConfig('encoder:\n  name: m\n  path: d\n  model_type: embedding\n', base);
    expect(resolveTruncation(config, tokenizerConfig)).toEqual({ direction: 'right', strategy: 'longest_first', stride: 0 });
  });
});
