/**
 * Generator options, presets and their validation. Every entry point normalises its options
 * here first, so a bad combination fails with one clear message before any work is done.
 */
import { ConfigError } from '../../src/encoder/errors.ts';
import { BASE_VOCABULARY_SIZE } from './vocabulary.ts';

import { MODEL_TYPES, POOLING_MODES, type ModelType, type Pooling } from '../../src/encoder/config.ts';

export { MODEL_TYPES };
export type { ModelType };

export interface GeneratorOptions {
  modelType: ModelType;
  layers: number;
  hidden: number;
  heads: number;
  intermediate: number;
  vocabSize: number;
  maxPositions: number;
  /** Classification labels in id order (id2label); absent for embedding models. One label: a cross-encoder's one logit. */
  labels?: string[];
  seed: number;
  /** sentence_embedding: the pooling its sentence-transformers layout names (default mean). */
  pooling?: Pooling;
  /** sentence_embedding: whether the layout ends with a Normalize module (default true, as all-MiniLM-L6-v2). */
  normalize?: boolean;
}

/** HF default names for labels given only by count. */
export function numberedLabels(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `LABEL_${i}`);
}

/** Labels used when a classification model is asked for without labels. */
export const DEFAULT_LABELS: Readonly<Record<Exclude<ModelType, 'embedding' | 'sentence_embedding'>, readonly string[]>> = {
  sequence_classification: numberedLabels(2),
  // CoNLL-2003 NER tags, so that the IOB handling of token classification has something real to show.
  token_classification: ['O', 'B-PER', 'I-PER', 'B-ORG', 'I-ORG', 'B-LOC', 'I-LOC', 'B-MISC', 'I-MISC'],
};

export const PRESET_NAMES = ['tiny', 'example', 'minilm'] as const;
export type PresetName = (typeof PRESET_NAMES)[number];

/** Smallest vocabulary that holds the base set, rounded up to a multiple of 64 as model vocabularies usually are. */
const SMALL_VOCAB_SIZE = Math.ceil(BASE_VOCABULARY_SIZE / 64) * 64;

export const PRESETS: Readonly<Record<PresetName, Readonly<GeneratorOptions>>> = {
  /** Fast enough to build and run in every test. */
  tiny: {
    modelType: 'embedding',
    layers: 2,
    hidden: 32,
    heads: 4,
    intermediate: 64,
    vocabSize: SMALL_VOCAB_SIZE,
    maxPositions: 128,
    seed: 42,
  },
  /** The quick-start model that encoder.example.yaml points at. */
  example: {
    modelType: 'embedding',
    layers: 2,
    hidden: 64,
    heads: 4,
    intermediate: 256,
    vocabSize: SMALL_VOCAB_SIZE,
    maxPositions: 512,
    seed: 42,
  },
  /** The shape of sentence-transformers/all-MiniLM-L6-v2, for benchmarks. */
  minilm: {
    modelType: 'embedding',
    layers: 6,
    hidden: 384,
    heads: 12,
    intermediate: 1536,
    vocabSize: 30522,
    maxPositions: 512,
    seed: 42,
  },
};

/** Checks the options and returns a copy with defaults filled in (labels of classification models). */
export function normalizeOptions(options: GeneratorOptions): GeneratorOptions {
  if (!(MODEL_TYPES as readonly string[]).includes(options.modelType)) {
    throw new ConfigError(`unknown model type '${String(options.modelType)}'; expected one of ${MODEL_TYPES.join(', ')}`);
  }
  requirePositiveInteger('layers', options.layers);
  requirePositiveInteger('hidden', options.hidden);
  requirePositiveInteger('heads', options.heads);
  requirePositiveInteger('intermediate', options.intermediate);
  requirePositiveInteger('vocabSize', options.vocabSize);
  requirePositiveInteger('maxPositions', options.maxPositions);
  if (!Number.isSafeInteger(options.seed) || options.seed < 0) {
    throw new ConfigError(`seed must be a non-negative integer, got ${String(options.seed)}`);
  }
  if (options.hidden % options.heads !== 0) {
    throw new ConfigError(`hidden size ${options.hidden} is not divisible by the number of heads ${options.heads}`);
  }
  if (options.vocabSize < BASE_VOCABULARY_SIZE) {
    throw new ConfigError(
      `vocabulary size ${options.vocabSize} is smaller than the base vocabulary (${BASE_VOCABULARY_SIZE} tokens)`,
    );
  }
  if (options.maxPositions < 2) {
    throw new ConfigError(`maxPositions must be at least 2 ([CLS] and [SEP]), got ${options.maxPositions}`);
  }
  const normalized: GeneratorOptions = { ...options };
  const layoutOptions = (['pooling', 'normalize'] as const).filter((name) => options[name] !== undefined);
  if (options.modelType !== 'sentence_embedding' && layoutOptions.length > 0) {
    throw new ConfigError(
      `${layoutOptions.join(' and ')} describe${layoutOptions.length === 1 ? 's' : ''} a sentence-transformers layout, ` +
        `which only sentence_embedding models have; got model type ${options.modelType}`,
    );
  }
  if (options.normalize !== undefined && typeof options.normalize !== 'boolean') {
    throw new ConfigError(`normalize must be true or false, got ${String(options.normalize)}`);
  }
  if (options.pooling !== undefined && !(POOLING_MODES as readonly string[]).includes(options.pooling)) {
    throw new ConfigError(`unknown pooling '${String(options.pooling)}'; expected one of ${POOLING_MODES.join(', ')}`);
  }
  if (options.modelType === 'embedding' || options.modelType === 'sentence_embedding') {
    if (options.labels !== undefined) {
      throw new ConfigError(
        'labels are only for classification models; choose model type sequence_classification or token_classification',
      );
    }
    delete normalized.labels;
    return normalized;
  }
  const labels = options.labels ?? [...DEFAULT_LABELS[options.modelType]];
  validateLabels(labels, options.modelType === 'sequence_classification' ? 1 : 2);
  normalized.labels = [...labels];
  return normalized;
}

/** A sequence classifier may have one label (a cross-encoder's single relevance logit); a token classifier needs two. */
function validateLabels(labels: readonly string[], minimum: number): void {
  if (labels.length < minimum) {
    throw new ConfigError(`a ${minimum === 1 ? 'sequence' : 'token'} classification model needs at least ${minimum} label${minimum === 1 ? '' : 's'}, got ${labels.length}`);
  }
  const seen = new Set<string>();
  for (const label of labels) {
    if (typeof label !== 'string' || label.trim() === '') {
      throw new ConfigError('label names must be non-empty strings');
    }
    if (seen.has(label)) throw new ConfigError(`duplicate label '${label}'`);
    seen.add(label);
  }
}

function requirePositiveInteger(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new ConfigError(`${name} must be a positive integer, got ${String(value)}`);
  }
}
