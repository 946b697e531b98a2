/** Writes a complete model directory: the ONNX model and the HF files that go with it. */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
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
}
