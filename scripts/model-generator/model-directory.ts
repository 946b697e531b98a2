/** Writes a complete model directory: the ONNX model and the HF files that go with it. */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { buildOnnxModel } from './bert-onnx-model.ts';
import { modelConfigJson } from './model-config.ts';
import { normalizeOptions } from './options.ts';
import type { GeneratorOptions } from './options.ts';
import { specialTokensMapJson, tokenizerConfigJson, tokenizerJson, vocabTxt } from './tokenizer-files.ts';
import { buildVocabulary } from './vocabulary.ts';
import { generateWeights } from './weights.ts';

/** The files `writeModelDirectory` writes, in the order it writes them. */
export const MODEL_DIRECTORY_FILES = [
  'model.onnx',
  'config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'vocab.txt',
] as const;

/** The sentence-transformers layout of a sentence_embedding model, as sentence-transformers writes it (file → content). */
export function sentenceTransformersFiles(options: GeneratorOptions): Record<string, string> {
  const pooling = options.pooling ?? 'mean';
  const normalize = options.normalize ?? true;
  const modules = [
    { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
    { idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' },
    ...(normalize ? [{ idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' }] : []),
  ];
  const poolingConfig = {
    word_embedding_dimension: options.hidden,
    pooling_mode_cls_token: pooling === 'cls',
    pooling_mode_mean_tokens: pooling === 'mean',
    pooling_mode_max_tokens: pooling === 'max',
    pooling_mode_mean_sqrt_len_tokens: false,
    pooling_mode_weightedmean_tokens: false,
    pooling_mode_lasttoken: pooling === 'last',
    include_prompt: true,
  };
  return {
    'modules.json': `${JSON.stringify(modules, null, 2)}\n`,
    '1_Pooling/config.json': `${JSON.stringify(poolingConfig, null, 2)}\n`,
    'sentence_bert_config.json': `${JSON.stringify({ max_seq_length: options.maxPositions, do_lower_case: false }, null, 2)}\n`,
    'config_sentence_transformers.json': `${JSON.stringify({ __version__: { sentence_transformers: '3.0.1' }, prompts: {}, default_prompt_name: null, similarity_fn_name: 'cosine' }, null, 2)}\n`,
  };
}

export async function writeModelDirectory(dir: string, options: GeneratorOptions): Promise<void> {
  const opts = normalizeOptions(options);
  const vocabulary = buildVocabulary(opts.vocabSize);
  const model = buildOnnxModel(opts, generateWeights(opts));
  const contents: Record<(typeof MODEL_DIRECTORY_FILES)[number], string | Uint8Array> = {
    'model.onnx': model,
    'config.json': modelConfigJson(opts),
    'tokenizer.json': tokenizerJson(vocabulary),
    'tokenizer_config.json': tokenizerConfigJson(opts.maxPositions),
    'special_tokens_map.json': specialTokensMapJson(),
    'vocab.txt': vocabTxt(vocabulary),
  };
  await mkdir(dir, { recursive: true });
  for (const file of MODEL_DIRECTORY_FILES) await writeFile(join(dir, file), contents[file]);
  if (opts.modelType === 'sentence_embedding') {
    for (const [file, text] of Object.entries(sentenceTransformersFiles(opts))) {
      await mkdir(dirname(join(dir, file)), { recursive: true });
      await writeFile(join(dir, file), text);
    }
    // sentence-transformers saves the Normalize module as an empty folder
    if (opts.normalize ?? true) await mkdir(join(dir, '2_Normalize'), { recursive: true });
  }
}
