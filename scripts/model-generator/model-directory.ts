/** Writes a complete model directory: the ONNX model and the HF files that go with it. */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { buildOnnxModel } from './bert-onnx-model.ts';
import { modelConfigJson } from './model-config.ts';
import { normalizeOptions } from './options.ts';
import type { GeneratorOptions } from './options.ts';
import {
  NORMALIZE_MODULE_FOLDER,
  SENTENCE_TRANSFORMERS_FILES,
  normalizesVectors,
  sentenceTransformersFiles,
} from './sentence-transformers-files.ts';
import { specialTokensMapJson, tokenizerConfigJson, tokenizerJson, vocabTxt } from './tokenizer-files.ts';
import { buildVocabulary } from './vocabulary.ts';
import { generateWeights } from './weights.ts';

/** The files every model directory has, in the order `writeModelDirectory` writes them. */
export const MODEL_DIRECTORY_FILES = [
  'model.onnx',
  'config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'vocab.txt',
] as const;

/** The files (paths relative to the directory) that `writeModelDirectory` writes for these options, in order. */
export function modelDirectoryFiles(options: GeneratorOptions): string[] {
  const layout = normalizeOptions(options).modelType === 'sentence_embedding' ? SENTENCE_TRANSFORMERS_FILES : [];
  return [...MODEL_DIRECTORY_FILES, ...layout];
}

/**
 * Writes the model directory and returns the files it wrote (`modelDirectoryFiles`). A sentence_embedding model
 * also gets the sentence-transformers layout, with an empty 2_Normalize folder when it normalises.
 */
export async function writeModelDirectory(dir: string, options: GeneratorOptions): Promise<string[]> {
  const opts = normalizeOptions(options);
  const vocabulary = buildVocabulary(opts.vocabSize);
  const contents = new Map<string, string | Uint8Array>([
    ['model.onnx', buildOnnxModel(opts, generateWeights(opts))],
    ['config.json', modelConfigJson(opts)],
    ['tokenizer.json', tokenizerJson(vocabulary)],
    ['tokenizer_config.json', tokenizerConfigJson(opts.maxPositions)],
    ['special_tokens_map.json', specialTokensMapJson()],
    ['vocab.txt', vocabTxt(vocabulary)],
  ]);
  if (opts.modelType === 'sentence_embedding') {
    for (const [file, text] of Object.entries(sentenceTransformersFiles(opts))) contents.set(file, text);
  }
  await mkdir(dir, { recursive: true });
  for (const [file, content] of contents) {
    await mkdir(dirname(join(dir, file)), { recursive: true });
    await writeFile(join(dir, file), content);
  }
  if (opts.modelType === 'sentence_embedding' && normalizesVectors(opts)) {
    await mkdir(join(dir, NORMALIZE_MODULE_FOLDER), { recursive: true });
  }
  return [...contents.keys()];
}
