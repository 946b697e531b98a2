import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultCacheDir } from '../../src/encoder/cache/cache-dir.ts';
import { defaultOutputPath, loadBuildConfig, parseBuildConfig } from '../../src/encoder/config.ts';
import { ConfigError } from '../../src/encoder/errors.ts';
import { resolveTruncation } from '../../src/encoder/model-package.ts';

const base = { baseDir: '/models', cwd: '/work', env: { HOME: '/home/u' } };
const minimal = 'encoder:\n  name: my-model\n  path: ./dir\n  model_type: embedding\n';

function configError(yaml: string): string {
  try {
    parseBuildConfig(yaml, base);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('build configuration', () => {
  it('applies every default of the spec table', () => {
    const config = parseBuildConfig(minimal, base);
    expect(config).toEqual({
      name: 'my-model',
      version: '0.1.0',
      modelType: 'embedding',
      paths: {
        modelConfigPath: '/models/dir/config.json',
        modelWeightsPath: '/models/dir/model.onnx',
        tokenizerPath: '/models/dir/tokenizer.json',
        tokenizerConfigPath: '/models/dir/tokenizer_config.json',
        preprocessorConfigPath: '/models/dir/preprocessor_config.json',
      },
      outputPath: null,
      cacheDir: defaultCacheDir({ HOME: '/home/u' }),
      transform: null,
      luaLibs: ['table', 'string', 'math'],
      pooling: null,
      normalize: null,
      rerankLabel: null,
      quantize: 'none',
      quantizeGate: { checkTexts: null, minCosine: 0.99, minLabelAgreement: 0.98 },
      tokenizer: { padStrategy: null, truncationSide: null, truncationStrategy: null, maxLength: null, stride: null },
      session: {},
      format: 'encoder',
      target: null,
      baseBinaryPath: null,
      notes: [],
    });
  });

  it('takes the cache directory from ENCODER_CACHE_DIR when the configuration names none', () => {
    expect(parseBuildConfig(minimal, { ...base, env: { HOME: '/home/u', ENCODER_CACHE_DIR: '/srv/encoder-cache' } }).cacheDir).toBe('/srv/encoder-cache');
    expect(parseBuildConfig(minimal, { ...base, env: { HOME: '/home/u', ENCODER_CACHE_DIR: '' } }).cacheDir).toBe(defaultCacheDir({ HOME: '/home/u' }));
    const withCacheDir = `${minimal}\n  cache_dir: /explicit`;
    expect(parseBuildConfig(withCacheDir, { ...base, env: { ENCODER_CACHE_DIR: '/srv/encoder-cache' } }).cacheDir).toBe('/explicit');
  });

  it('reads every field when given', () => {
    const config = parseBuildConfig(
      [
        'encoder:',
        '  name: ner',
        '  version: 2.3.4',
        '  path:',
        '    model_config_path: a/config.json',
        '    model_weights_path: /abs/model.onnx',
        '    tokenizer_path: t/tokenizer.json',
        '  model_type: token_classification',
        '  output_path: out/ner-bin',
        '  cache_dir: cache',
        '  transform: "return output"',
        '  lua_libs: [math]',
      ].join('\n'),
      base,
    );
    expect(config.version).toBe('2.3.4');
    expect(config.modelType).toBe('token_classification');
    expect(config.paths).toEqual({
      modelConfigPath: '/models/a/config.json',
      modelWeightsPath: '/abs/model.onnx',
      tokenizerPath: '/models/t/tokenizer.json',
      tokenizerConfigPath: '/models/t/tokenizer_config.json',
      preprocessorConfigPath: '/models/a/preprocessor_config.json',
    });
    expect(config.outputPath).toBe('/work/out/ner-bin');
    expect(config.cacheDir).toBe('/models/cache');
    expect(config.transform).toBe('return output');
    expect(config.luaLibs).toEqual(['math']);
  });

  it('reads a transform from a file relative to the configuration', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'config-'));
    writeFileSync(path.join(dir, 't.lua'), 'function Postprocess(arr) return arr end\n');
    writeFileSync(path.join(dir, 'encoder.yaml'), `${minimal}  transform:\n    path: t.lua\n`);
    expect(loadBuildConfig(path.join(dir, 'encoder.yaml')).transform).toContain('function Postprocess');
    writeFileSync(path.join(dir, 'missing.yaml'), `${minimal}  transform:\n    path: nope.lua\n`);
    expect(() => loadBuildConfig(path.join(dir, 'missing.yaml'))).toThrow(`transform not found: ${path.join(dir, 'nope.lua')}`);
  });

  it('lists an empty lua_libs as no optional library', () => {
    expect(parseBuildConfig(`${minimal}  lua_libs: []\n`, base).luaLibs).toEqual([]);
  });

  it('names an unknown key and the allowed keys', () => {
    expect(configError(`${minimal}  modle_type: x\n`)).toBe(
      'configuration: unknown key "encoder.modle_type"; allowed keys: name, version, path, model_type, output_path, cache_dir, transform, lua_libs, pooling, normalize, rerank_label, quantize, quantize_check_texts, quantize_min_cosine, quantize_min_label_agreement, tokenizer, session',
    );
    expect(configError(`${minimal}extra: 1\n`)).toBe('configuration: unknown key "extra"; allowed keys: encoder');
    expect(configError('encoder:\n  name: m\n  model_type: embedding\n  path: {model_config_path: a, model_weights_path: b, tokenizer_path: c, vocab: d}\n')).toBe(
      'configuration: unknown key "encoder.path.vocab"; allowed keys: model_config_path, model_weights_path, tokenizer_path, tokenizer_config_path, preprocessor_config_path',
    );
  });

  it('names a bad enum value and the allowed values', () => {
    expect(configError(minimal.replace('embedding', 'embeddings'))).toBe(
      'configuration: invalid value "embeddings" for "encoder.model_type"; allowed values: embedding, sentence_embedding, sequence_classification, token_classification, image_classification, image_embedding',
    );
    expect(configError(`${minimal}  lua_libs: [math, debug]\n`)).toBe(
      'configuration: invalid value "debug" for "encoder.lua_libs[1]"; allowed values: coroutine, table, io, os, string, utf8, math, package',
    );
  });

  it('names a wrong type and what the key accepts', () => {
    expect(configError(minimal.replace('./dir', '42'))).toBe(
      'configuration: "encoder.path" must be a directory path or an object with model_config_path, model_weights_path and (text models) tokenizer_path, got number 42',
    );
    expect(configError(`${minimal}  lua_libs: io\n`)).toBe(
      'configuration: "encoder.lua_libs" must be a list of coroutine, table, io, os, string, utf8, math, package, got string "io"',
    );
    expect(configError(`${minimal}  transform: 7\n`)).toBe(
      'configuration: "encoder.transform" must be an inline Lua script or an object with path, got number 7',
    );
    expect(configError(`${minimal}  version: 1.0\n`)).toBe('configuration: "encoder.version" must be a string, got number 1');
    expect(configError('encoder: [1]\n')).toBe('configuration: "encoder" must be a mapping, got a list');
  });

  it('names a missing required key', () => {
    expect(configError('encoder:\n  path: d\n  model_type: embedding\n')).toBe('configuration: missing required key "encoder.name"');
    expect(configError('encoder:\n  name: m\n  path: d\n')).toBe('configuration: missing required key "encoder.model_type"');
    expect(configError('encoder:\n  name: m\n  model_type: embedding\n  path: {model_config_path: a, tokenizer_path: c}\n')).toBe(
      'configuration: missing required key "encoder.path.model_weights_path"',
    );
    expect(configError('name: m\n')).toBe('configuration: missing required key "encoder" (this program\'s format) or "encoderfile" (mozilla-ai/encoderfile\'s)');
  });

  it('rejects names that cannot be a file name, duplicates and broken YAML', () => {
    expect(configError(minimal.replace('my-model', 'a/b'))).toContain('"encoder.name" may only contain');
    // "." and ".." would make the default output path the working directory or its parent
    expect(configError(minimal.replace('my-model', '.'))).toContain('"encoder.name" may only contain');
    expect(configError(minimal.replace('my-model', '..'))).toContain('"encoder.name" may only contain');
    expect(parseBuildConfig(minimal.replace('my-model', '.m..'), base).name).toBe('.m..');
    expect(configError(`${minimal}  lua_libs: [math, math]\n`)).toBe('configuration: "encoder.lua_libs" lists a value twice');
    expect(configError(`${minimal}  name: other\n`)).toContain('invalid YAML');
    expect(configError('encoder: [\n')).toContain('invalid YAML');
  });

  it('says when the configuration file is missing', () => {
    expect(() => loadBuildConfig('/nonexistent/encoder.yaml')).toThrow('configuration file not found: /nonexistent/encoder.yaml');
  });

  it('puts the output in the working directory by default, with the target extension', () => {
    expect(defaultOutputPath('m', '/work')).toBe('/work/m');
    expect(defaultOutputPath('m', '/work', '.exe')).toBe('/work/m.exe');
  });

  it('uses the platform cache directory by default', () => {
    expect(defaultCacheDir({ HOME: '/h' }, 'linux')).toBe('/h/.cache/encoder');
    expect(defaultCacheDir({ HOME: '/h', XDG_CACHE_HOME: '/xdg' }, 'linux')).toBe('/xdg/encoder');
    expect(defaultCacheDir({ HOME: '/h' }, 'darwin')).toBe('/h/Library/Caches/encoder');
    expect(defaultCacheDir({ HOME: '/h', LOCALAPPDATA: 'C:\\L' }, 'win32')).toBe('C:\\L\\encoder');
  });
});

// mozilla-ai/encoderfile's configuration (`encoderfile:`) and the `tokenizer:` block; builds of such files:
// test/builder/encoderfile-config-build.test.ts.
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
        preprocessorConfigPath: '/work/m/preprocessor_config.json',
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
    expect(config.notes).toEqual(['tokenizer.pad_strategy fixed 8: no effect on results, batches are padded to their longest input (padding is masked, so every output is the same)']);
    expect(configError('encoder:\n  name: e\n  path: d\n  model_type: embedding\nencoderfile:\n  name: x\n')).toBe(
      'configuration: unknown key "encoderfile"; allowed keys: encoder',
    );
  });

  it("takes any name, as encoderfile does (a Hugging Face id too), the default output following it", () => {
    const config = parseBuildConfig('encoderfile:\n  name: org/model v1\n  path: d\n  model_type: embedding\n', base);
    expect(config.name).toBe('org/model v1');
    expect(config.outputPath).toBe('/work/org/model v1.encoderfile');
    expect(configError('encoderfile:\n  name: "a\\tb"\n  path: d\n  model_type: embedding\n')).toBe('configuration: "encoderfile.name" must not hold control characters, got "a\\tb"');
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

describe('the session: block', () => {
  const encoder = (block: string) => `${minimal}${block}`;
  const encoderfile = (block: string) => encoder(block).replace('encoder:', 'encoderfile:');

  it('is read in both formats, with the values the flags take (a YAML integer level too)', () => {
    const block = '  session:\n    intra_op_threads: 2\n    inter_op_threads: 3\n    graph_optimization_level: 2\n    execution_provider: CPU\n';
    const expected = { intraOpThreads: 2, interOpThreads: 3, graphOptimizationLevel: 'extended', executionProvider: 'cpu' };
    expect(parseBuildConfig(encoder(block), base).session).toEqual(expected);
    expect(parseBuildConfig(encoderfile(block), base).session).toEqual(expected);
    expect(parseBuildConfig(encoder('  session:\n    graph_optimization_level: disable\n'), base).session).toEqual({ graphOptimizationLevel: 'disabled' });
    expect(parseBuildConfig(encoder('  session:\n    graph_optimization_level: layout\n'), base).session).toEqual({ graphOptimizationLevel: 'layout' });
    expect(parseBuildConfig(minimal, base).session).toEqual({});
    // no "ignored" note for it in an encoderfile configuration: it is this program's own key there
    expect(parseBuildConfig(encoderfile(block), base).notes.join('\n')).not.toMatch(/session/);
  });

  it('refuses bad values naming the key, for the reasons the flags give', () => {
    expect(configError(encoder('  session:\n    graph_optimization_level: 4\n'))).toMatch(
      /"encoder\.session\.graph_optimization_level": "4" is not a graph optimization level; use disable, 1, 2 or 3/,
    );
    expect(configError(encoderfile('  session:\n    execution_provider: cuda\n'))).toMatch(
      /"encoderfile\.session\.execution_provider": "cuda" is not available: this executable carries onnxruntime's CPU execution provider only/,
    );
    expect(configError(encoder('  session:\n    execution_provider: quantum\n'))).toMatch(/"quantum" is not an execution provider; available: cpu/);
    expect(configError(encoder('  session:\n    intra_op_threads: 0\n'))).toMatch(/"encoder\.session\.intra_op_threads" must be at least 1, got 0/);
    expect(configError(encoder('  session:\n    inter_op_threads: two\n'))).toMatch(/"encoder\.session\.inter_op_threads" must be a integer, got string "two"/);
    expect(configError(encoder('  session:\n    threads: 2\n'))).toMatch(/unknown key "encoder\.session\.threads"; allowed keys: intra_op_threads, inter_op_threads/);
    expect(configError(encoder('  session: fast\n'))).toMatch(/"encoder\.session" must be a mapping/);
  });
});
