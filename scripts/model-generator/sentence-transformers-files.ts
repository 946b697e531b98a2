/**
 * The sentence-transformers layout of a sentence_embedding model directory, byte for byte as
 * `SentenceTransformer.save()` of sentence-transformers 3.0.1 writes it for Transformer → Pooling
 * (→ Normalize): json.dump(indent=2), keys in its order, no final newline. The server reads
 * modules.json and 1_Pooling/config.json to pool and normalise as `model.encode()` does.
 */
import type { Pooling } from '../../src/encoder/config.ts';
import { formatJson } from './json-format.ts';
import type { JsonObject } from './json-format.ts';
import type { GeneratorOptions } from './options.ts';

/** The layout's files, in the order `writeModelDirectory` writes them. */
export const SENTENCE_TRANSFORMERS_FILES = [
  'modules.json',
  '1_Pooling/config.json',
  'sentence_bert_config.json',
  'config_sentence_transformers.json',
] as const;
export type SentenceTransformersFile = (typeof SENTENCE_TRANSFORMERS_FILES)[number];

/** sentence-transformers saves the Normalize module (which has no state) as this empty folder. */
export const NORMALIZE_MODULE_FOLDER = '2_Normalize';

/** The `pooling_mode_*` flag that each pooling sets in 1_Pooling/config.json. */
const POOLING_FLAGS: Readonly<Record<Pooling, string>> = {
  mean: 'pooling_mode_mean_tokens',
  cls: 'pooling_mode_cls_token',
  max: 'pooling_mode_max_tokens',
  last: 'pooling_mode_lasttoken',
};

/** Versions in config_sentence_transformers.json: what a sentence-transformers 3.0.1 install of mid-2024 records. */
const SAVED_WITH: JsonObject = { sentence_transformers: '3.0.1', transformers: '4.41.2', pytorch: '2.3.0' };

/** Whether the layout ends with a Normalize module: unless asked otherwise, as all-MiniLM-L6-v2's does. */
export function normalizesVectors(options: GeneratorOptions): boolean {
  return options.normalize ?? true;
}

/** File (relative path) → content of the layout; `options` must be those of a sentence_embedding model. */
export function sentenceTransformersFiles(options: GeneratorOptions): Record<SentenceTransformersFile, string> {
  const pooling = options.pooling ?? 'mean';
  const module = (idx: number, path: string, type: string): JsonObject => ({
    idx,
    name: String(idx),
    path,
    type: `sentence_transformers.models.${type}`,
  });
  const modules = [module(0, '', 'Transformer'), module(1, '1_Pooling', 'Pooling')];
  if (normalizesVectors(options)) modules.push(module(2, NORMALIZE_MODULE_FOLDER, 'Normalize'));
  const flag = (name: string): boolean => POOLING_FLAGS[pooling] === name;
  const poolingConfig: JsonObject = {
    word_embedding_dimension: options.hidden,
    pooling_mode_cls_token: flag('pooling_mode_cls_token'),
    pooling_mode_mean_tokens: flag('pooling_mode_mean_tokens'),
    pooling_mode_max_tokens: flag('pooling_mode_max_tokens'),
    // Never set: the server does not compute these two, and refuses layouts that ask for them.
    pooling_mode_mean_sqrt_len_tokens: false,
    pooling_mode_weightedmean_tokens: false,
    pooling_mode_lasttoken: flag('pooling_mode_lasttoken'),
    include_prompt: true,
  };
  return {
    'modules.json': formatJson(modules),
    '1_Pooling/config.json': formatJson(poolingConfig),
    // The tokenizer lowercases by itself (BertNormalizer), so sentence-transformers does not.
    'sentence_bert_config.json': formatJson({ max_seq_length: options.maxPositions, do_lower_case: false }),
    'config_sentence_transformers.json': formatJson({
      __version__: SAVED_WITH,
      prompts: {},
      default_prompt_name: null,
      similarity_fn_name: 'cosine',
    }),
  };
}
