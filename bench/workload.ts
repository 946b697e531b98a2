import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ENGLISH_WORDS } from '../scripts/model-generator/english-words.ts';
import { PRESETS, writeModelDirectory, writeVitModelDirectory, type VitOptions } from '../scripts/model-generator/index.ts';

/** What the benchmarks run on: the MiniLM-shaped and ViT-S/16-shaped generated models and deterministic English-like text. */

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const benchModelDir = path.join(repoRoot, '.cache', 'bench', 'minilm');

/** Generates the all-MiniLM-L6-v2-shaped model once into .cache/bench/minilm. */
export async function ensureBenchModel(): Promise<string> {
  if (!existsSync(path.join(benchModelDir, 'model.onnx'))) {
    console.log(`generating the MiniLM-shaped model in ${path.relative(repoRoot, benchModelDir)} …`);
    await writeModelDirectory(benchModelDir, PRESETS.minilm);
  }
  return benchModelDir;
}

/**
 * An image classifier shaped as ViT-S/16 (DeiT-small: 224×224 in patches of 16, hidden 384, 6 heads, 12 layers, MLP
 * 1536; ~4.6 GFLOPs an image) with ImageNet's 1000 labels, random weights: big enough that inference costs what a
 * deployed model's does, and generated in about a second.
 */
export const BENCH_VIT: VitOptions = {
  seed: 36,
  imageSize: 224,
  patchSize: 16,
  hidden: 384,
  heads: 6,
  layers: 12,
  intermediate: 1536,
  labels: Array.from({ length: 1000 }, (_, i) => `class_${i}`),
};
export const benchVitDir = path.join(repoRoot, '.cache', 'bench', 'vit-small');

/** Generates BENCH_VIT once into .cache/bench/vit-small. */
export async function ensureBenchVit(): Promise<string> {
  if (!existsSync(path.join(benchVitDir, 'model.onnx'))) {
    console.log(`generating the ViT-S/16-shaped model in ${path.relative(repoRoot, benchVitDir)} …`);
    await writeVitModelDirectory(benchVitDir, BENCH_VIT);
  }
  return benchVitDir;
}

/** Deterministic English-like text of `words` words. */
export function sentence(words: number, seed: number): string {
  const out: string[] = [];
  let state = seed * 2654435761;
  for (let i = 0; i < words; i++) {
    state = (state * 1103515245 + 12345) >>> 0;
    out.push(ENGLISH_WORDS[state % ENGLISH_WORDS.length]);
  }
  return `${out.join(' ')}.`;
}
