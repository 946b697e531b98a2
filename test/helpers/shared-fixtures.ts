import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** `../shared` beside the repository: real model exports and tokenizer goldens, absent on a fresh clone. */
export const sharedDir = path.resolve(repoRoot, '..', 'shared');
export const hasShared = existsSync(path.join(sharedDir, 'models'));

export function sharedModel(name: string): string {
  return path.join(sharedDir, 'models', name);
}

/** Call at the top of a suite that needs ../shared, so a skip says why. */
export function warnIfSharedMissing(suite: string): void {
  if (!hasShared) console.warn(`${suite}: skipped, ${sharedDir} is absent (real model exports and goldens live there)`);
}
