import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { ConfigError } from '../../src/encoder/errors.ts';
import { labelsOf, readModelPackage } from '../../src/encoder/model-package.ts';

let dir: string;
const configFor = (yamlPath: string, extra = '') =>
  parseBuildConfig(`encoder:\n  name: m\n  model_type: sequence_classification\n  path: ${yamlPath}\n${extra}`, { baseDir: dir });

function writeModelDir(files: Record<string, string>): void {
  for (const [name, content] of Object.entries(files)) writeFileSync(path.join(dir, name), content);
}

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'model-package-'));
  return () => rmSync(dir, { recursive: true, force: true });
});

describe('model package from a directory', () => {
  it('reads weights, tokenizer, configs and transform', () => {
    writeModelDir({
      'model.onnx': 'ONNX',
      'tokenizer.json': '{"model":{}}',
      'config.json': '{"id2label":{"0":"O","1":"B-PER"}}',
      'tokenizer_config.json': '{"model_max_length":128}',
    });
    const pkg = readModelPackage(configFor('.', '  transform: "return output"\n  lua_libs: [math]\n'));
    expect(Buffer.from(pkg.weights).toString()).toBe('ONNX');
    expect(pkg.tokenizerJson).toEqual({ model: {} });
    expect(pkg.tokenizerConfig).toEqual({ model_max_length: 128 });
    expect([...labelsOf(pkg.modelConfig)]).toEqual([
      [0, 'O'],
      [1, 'B-PER'],
    ]);
    expect(pkg).toMatchObject({ name: 'm', version: '0.1.0', modelType: 'sequence_classification', transform: 'return output', luaLibs: ['math'] });
  });

  it('treats tokenizer_config.json as optional', () => {
    writeModelDir({ 'model.onnx': 'x', 'tokenizer.json': '{}', 'config.json': '{}' });
    const pkg = readModelPackage(configFor('.'));
    expect(pkg.tokenizerConfig).toBeNull();
    expect(labelsOf(pkg.modelConfig).size).toBe(0);
  });

  it('names each missing required file', () => {
    expect(() => readModelPackage(configFor('.'))).toThrow(`model weights not found: ${path.join(dir, 'model.onnx')}`);
    writeModelDir({ 'model.onnx': 'x' });
    expect(() => readModelPackage(configFor('.'))).toThrow(`model config not found: ${path.join(dir, 'config.json')}`);
    writeModelDir({ 'config.json': '{}' });
    expect(() => readModelPackage(configFor('.'))).toThrow(`tokenizer not found: ${path.join(dir, 'tokenizer.json')}`);
    expect(() => readModelPackage(configFor('.'))).toThrow(ConfigError);
  });

  it('names missing files given one by one', () => {
    const config = parseBuildConfig(
      'encoder:\n  name: m\n  model_type: embedding\n  path:\n    model_config_path: c.json\n    model_weights_path: w.onnx\n    tokenizer_path: t.json\n',
      { baseDir: dir },
    );
    expect(() => readModelPackage(config)).toThrow(`model weights not found: ${path.join(dir, 'w.onnx')}`);
  });

  it('rejects invalid JSON and a malformed id2label', () => {
    writeModelDir({ 'model.onnx': 'x', 'tokenizer.json': '{', 'config.json': '{}' });
    expect(() => readModelPackage(configFor('.'))).toThrow(`tokenizer is not valid JSON: ${path.join(dir, 'tokenizer.json')}`);
    writeModelDir({ 'tokenizer.json': '{}', 'config.json': '[1]' });
    expect(() => readModelPackage(configFor('.'))).toThrow(`model config ${path.join(dir, 'config.json')} is not a JSON object`);
    writeModelDir({ 'config.json': '{"id2label":{"zero":"O"}}' });
    expect(() => readModelPackage(configFor('.'))).toThrow('id2label must map label indices');
  });
});
