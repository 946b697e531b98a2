import type { InferenceWorkerScript } from '../encoder/inference-workers.ts';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { HostBaseRuntime } from '../builder/base-runtime.ts';
import { executableExtension, hostTarget, type Target } from '../builder/targets.ts';
import { createRequire } from 'node:module';
import type { SwaggerUiFile } from '../tools/http/docs-page.ts';
import type { DashboardFiles } from '../gateway/dashboard/files.ts';
import type { ThreadScript } from '../shared/thread-script.ts';

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

/** The gateway dashboard from source: bundled from src/gateway/dashboard/page when `gateway serve` starts (esbuild loads only then). */
export async function sourceDashboardFiles(): Promise<DashboardFiles> {
  const { bundleDashboard } = await import('../gateway/dashboard/bundle.ts');
  return bundleDashboard();
}

/** The gateway's SQLite reader thread from source, as the inference worker. */
export function sourceSqliteReader(): ThreadScript {
  return { script: new URL('../gateway/storage/sqlite-reader.ts', import.meta.url) };
}

/** The inference worker from source: a worker thread runs the TypeScript file directly (the pinned Node strips types). */
export function sourceInferenceWorker(): InferenceWorkerScript {
  return { script: new URL('../encoder/onnx-worker.ts', import.meta.url) };
}

/**
 * The repository's own base runtime for this machine (`npm run build:runtime`), when it has been built: from source,
 * `build` uses it for the host's target before the cache and a release download.
 */
export function repositoryBaseRuntime(): HostBaseRuntime | undefined {
  let target: Target;
  try {
    target = hostTarget();
  } catch {
    return undefined; // a machine no base runtime is built for
  }
  const file = fileURLToPath(new URL(`../../dist/runtime/${target}/encoder${executableExtension(target)}`, import.meta.url));
  return existsSync(file) ? { path: file, target, kind: 'repository' } : undefined;
}
