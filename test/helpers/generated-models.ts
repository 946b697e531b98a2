import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PRESETS, writeModelDirectory, type GeneratorOptions } from '../../scripts/model-generator/index.ts';

/** Writes a tiny generated model directory of the given type into a fresh temporary folder. */
export async function generateTinyModel(overrides: Partial<GeneratorOptions> = {}): Promise<string> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tiny-model-'));
  await writeModelDirectory(dir, { ...PRESETS.tiny, ...overrides });
  return dir;
}

/** One tiny model directory per model type, with labels for the classification ones. */
export async function generateTinyModelsOfEachType(): Promise<{ embedding: string; sequence: string; token: string }> {
  const [embedding, sequence, token] = await Promise.all([
    generateTinyModel({ modelType: 'embedding' }),
    generateTinyModel({ modelType: 'sequence_classification', labels: ['negative', 'positive', 'neutral'] }),
    generateTinyModel({ modelType: 'token_classification', labels: ['O', 'B-PER', 'I-PER'] }),
  ]);
  return { embedding, sequence, token };
}

/** A tiny sentence_embedding model directory with its sentence-transformers layout (default: mean pooling, normalized). */
export async function generateTinySentenceEmbeddingModel(
  layout: Pick<GeneratorOptions, 'pooling' | 'normalize'> = {},
): Promise<string> {
  return generateTinyModel({ modelType: 'sentence_embedding', ...layout });
}

/** A tiny cross-encoder: a sequence classifier whose one logit (LABEL_0) scores a [query, document] pair. */
export async function generateTinyCrossEncoder(): Promise<string> {
  return generateTinyModel({ modelType: 'sequence_classification', labels: ['LABEL_0'] });
}
