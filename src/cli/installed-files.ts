import type { InferenceWorkerScript } from '../encoder/inference-workers.ts';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { SwaggerUiFile } from '../tools/http/docs-page.ts';

/**
 * The files the command line reads from the repository and its installed packages when it runs from source (or as
 * an npm package); the single executable carries the same files as SEA assets (runtime/main.ts). Not bundled.
 */
const require = createRequire(import.meta.url);

export function repositoryProtoText(): string {
  return readFileSync(new URL('../../proto/encoder.proto', import.meta.url), 'utf8');
}

export function installedSwaggerUiFile(file: SwaggerUiFile): Uint8Array {
  return readFileSync(require.resolve(`swagger-ui-dist/${file}`));
}

/** The inference worker from source: a worker thread runs the TypeScript file directly (the pinned Node strips types). */
export function sourceInferenceWorker(): InferenceWorkerScript {
  return { script: new URL('../encoder/onnx-worker.ts', import.meta.url) };
}
