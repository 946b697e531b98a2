import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ENGLISH_WORDS } from '../scripts/model-generator/english-words.ts';
import { PRESETS, writeModelDirectory } from '../scripts/model-generator/index.ts';

/** What the benchmarks run on: the MiniLM-shaped generated model and deterministic English-like text. */

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
