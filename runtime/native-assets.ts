import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as sea from 'node:sea';
import { cacheDirFromEnvironment, fallbackCacheRoot } from '../src/encoder/cache-dir.ts';

/**
 * Native code inside the single executable (design decision 2). `require()` of a `.node` file cannot work from
 * a SEA, so the onnxruntime binding, its shared library and wasmoon's wasm travel as SEA assets. They are
 * extracted once into a folder named by their content hash under the cache directory (written to a temporary
 * folder, then renamed, so concurrent first starts never see half a folder) and loaded from there.
 */

/** SEA asset with the text of proto/encoder.proto, for the gRPC front end. */
export const PROTO_ASSET = 'encoder.proto';
/** The inference worker (src/encoder/onnx-worker.ts) bundled on its own: a worker thread runs it from source text. */
export const INFERENCE_WORKER_ASSET = 'onnx-worker.cjs';
/** The gateway's SQLite reader thread (src/gateway/storage/sqlite-reader.ts) bundled on its own, likewise. */
export const SQLITE_READER_ASSET = 'sqlite-reader.cjs';
/** Swagger UI's files for the tool server's /docs, read from the blob without extraction. */
export const swaggerUiAsset = (file: string): string => `swagger-ui/${file}`;

/** SEA asset holding `NativeManifest`, written by scripts/build-runtime.ts. */
export const NATIVE_MANIFEST_ASSET = 'native.json';

export interface NativeManifest {
  /** Content hash of all files; names the extraction folder. */
  hash: string;
  /** SEA asset key → file name in the extraction folder. */
  files: Record<string, string>;
  /** File names of the roles the runtime needs. */
  onnxruntimeBinding: string;
  luaWasm: string;
}

export interface NativeFiles {
  dir: string;
  onnxruntimeBinding: string;
  luaWasm: string;
}

let extracted: NativeFiles | null | undefined;

/** The extracted native files, or null when not running as a single executable (from source they are in node_modules). */
export function nativeFiles(env: NodeJS.ProcessEnv = process.env): NativeFiles | null {
  if (extracted !== undefined) return extracted;
  if (!sea.isSea()) return (extracted = null);
  const manifest = JSON.parse(sea.getAsset(NATIVE_MANIFEST_ASSET, 'utf8')) as NativeManifest;
  const dir = extractOnce(manifest, runtimeCacheDir(env));
  return (extracted = {
    dir,
    onnxruntimeBinding: path.join(dir, manifest.onnxruntimeBinding),
    luaWasm: path.join(dir, manifest.luaWasm),
  });
}

/** `ENCODER_CACHE_DIR`, else the platform's cache directory, else (not writable) the temporary directory. */
export function runtimeCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return cacheDirFromEnvironment(env);
}

function extractOnce(manifest: NativeManifest, cacheDir: string): string {
  for (const root of [cacheDir, fallbackCacheRoot()]) {
    const dir = path.join(root, 'native', manifest.hash);
    if (existsSync(path.join(dir, '.complete'))) return dir;
    try {
      extractTo(manifest, dir);
      return dir;
    } catch (error) {
      if (root !== cacheDir) throw error;
      // an unwritable cache directory falls back to the temporary directory
    }
  }
  throw new Error('unreachable');
}

function extractTo(manifest: NativeManifest, dir: string): void {
  const parent = path.dirname(dir);
  mkdirSync(parent, { recursive: true });
  const staging = mkdtempSync(path.join(parent, `.${manifest.hash}-`));
  try {
    // loaded here, not at the top: this module is part of the executable's entry, which should reach the onnxruntime
    // warm-up as early as it can, and only a first start extracts
    const hash = process.getBuiltinModule('node:crypto').createHash('sha256');
    for (const [key, file] of Object.entries(manifest.files)) {
      const bytes = new Uint8Array(sea.getRawAsset(key));
      hash.update(bytes);
      writeFileSync(path.join(staging, file), bytes, { mode: 0o755 });
    }
    const actual = hash.digest('hex').slice(0, manifest.hash.length);
    if (actual !== manifest.hash) throw new Error(`native assets do not match their manifest (${actual} != ${manifest.hash})`);
    writeFileSync(path.join(staging, '.complete'), '');
    try {
      renameSync(staging, dir);
    } catch (error) {
      // another process finished first: use its folder
      if (!existsSync(path.join(dir, '.complete'))) throw error;
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}
