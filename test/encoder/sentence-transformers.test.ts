import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { ConfigError } from '../../src/encoder/errors.ts';
import { resolvePooling } from '../../src/encoder/model-package.ts';
import { readSentenceTransformersLayout } from '../../src/encoder/sentence-transformers.ts';

const MODULES = [
  { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
  { idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' },
];

function layout(files: Record<string, unknown>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'st-layout-'));
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), typeof content === 'string' ? content : JSON.stringify(content));
  }
  return dir;
}

const flags = (on: string[]) =>
  Object.fromEntries(
    ['cls_token', 'mean_tokens', 'max_tokens', 'mean_sqrt_len_tokens', 'weightedmean_tokens', 'lasttoken'].map((flag) => [`pooling_mode_${flag}`, on.includes(flag)]),
  );

describe('the sentence-transformers layout of a model folder', () => {
  it('is absent without modules.json', () => {
    expect(readSentenceTransformersLayout(layout({ 'config.json': {} }))).toBeNull();
  });

  it('names the pooling and whether a Normalize module follows', () => {
    const normalized = [...MODULES, { idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' }];
    expect(readSentenceTransformersLayout(layout({ 'modules.json': normalized, '1_Pooling/config.json': flags(['mean_tokens']) }))).toEqual({ pooling: 'mean', normalize: true });
    expect(readSentenceTransformersLayout(layout({ 'modules.json': MODULES, '1_Pooling/config.json': flags(['lasttoken']) }))).toEqual({ pooling: 'last', normalize: false });
    // a bare Transformer pools nothing itself: the default applies
    expect(readSentenceTransformersLayout(layout({ 'modules.json': MODULES.slice(0, 1) }))).toEqual({ pooling: 'mean', normalize: false });
  });

  it.each([
    ['an unsupported pooling', { 'modules.json': MODULES, '1_Pooling/config.json': flags(['weightedmean_tokens']) }, /pooling_mode_weightedmean_tokens is not supported; set "pooling"/],
    ['two poolings at once', { 'modules.json': MODULES, '1_Pooling/config.json': flags(['cls_token', 'mean_tokens']) }, /pooling_mode_mean_tokens and pooling_mode_cls_token are both set/],
    ['no pooling flag', { 'modules.json': MODULES, '1_Pooling/config.json': flags([]) }, /no pooling_mode_\* flag is true/],
    ['a missing pooling config', { 'modules.json': MODULES }, /names a Pooling module, but .*1_Pooling\/config.json is missing/],
    ['modules.json that is not a list', { 'modules.json': { modules: [] } }, /modules.json: expected a list of modules/],
    ['modules.json that is not JSON', { 'modules.json': '[{' }, /modules.json is not valid JSON/],
  ])('refuses %s with a ConfigError', (_name, files, message) => {
    const dir = layout(files);
    expect(() => readSentenceTransformersLayout(dir)).toThrow(ConfigError);
    expect(() => readSentenceTransformersLayout(dir)).toThrow(message);
  });

  it('is overridden by pooling and normalize in the build configuration', () => {
    const dir = layout({ 'modules.json': MODULES, '1_Pooling/config.json': flags(['cls_token']) });
    const config = (extra: string) => parseBuildConfig(`encoder:\n  name: m\n  path: ${dir}\n  model_type: sentence_embedding\n${extra}`, { baseDir: dir });
    expect(resolvePooling(config(''))).toEqual({ pooling: 'cls', normalize: false });
    expect(resolvePooling(config('  pooling: max\n  normalize: true\n'))).toEqual({ pooling: 'max', normalize: true });
    // a classification model never reads the layout
    expect(resolvePooling({ ...config(''), modelType: 'sequence_classification' })).toEqual({ pooling: 'mean', normalize: true });
  });

  it('a layout this server cannot reproduce does not fail a configuration that sets both pooling and normalize', () => {
    const dir = layout({ 'modules.json': MODULES, '1_Pooling/config.json': flags(['weightedmean_tokens']) });
    const config = (extra: string) => parseBuildConfig(`encoder:\n  name: m\n  path: ${dir}\n  model_type: sentence_embedding\n${extra}`, { baseDir: dir });
    expect(resolvePooling(config('  pooling: mean\n  normalize: true\n'))).toEqual({ pooling: 'mean', normalize: true });
    expect(() => resolvePooling(config('  pooling: mean\n'))).toThrow(/pooling_mode_weightedmean_tokens is not supported/);
  });

  it('pooling and normalize are refused on a classification model, rerank_label on an embedding model', () => {
    const yaml = (type: string, extra: string) => `encoder:\n  name: m\n  path: ./m\n  model_type: ${type}\n${extra}`;
    expect(() => parseBuildConfig(yaml('token_classification', '  pooling: mean\n'), { baseDir: '/' })).toThrow('"encoder.pooling" applies to embedding, sentence_embedding, image_embedding models, not token_classification');
    expect(() => parseBuildConfig(yaml('embedding', '  rerank_label: yes\n'), { baseDir: '/' })).toThrow('"encoder.rerank_label" applies to sequence_classification models (rerank), not embedding');
    expect(() => parseBuildConfig(yaml('embedding', '  pooling: sum\n'), { baseDir: '/' })).toThrow('invalid value "sum" for "encoder.pooling"; allowed values: mean, cls, max, last');
  });
});
