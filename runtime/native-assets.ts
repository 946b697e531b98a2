import path from 'node:path';
import * as sea from 'node:sea';
import { writeDurably } from '../src/encoder/cache/cache-entry.ts';
import { cacheRoots, extractedEntry } from '../src/encoder/cache/extracted-entry.ts';
import { ConfigError } from '../src/encoder/errors.ts';
import type { CodecFiles } from '../src/encoder/image-codecs.ts';

/**
 * Native code inside the single executable (design decision 2). `require()` of a `.node` file cannot work from
 * a SEA, so the onnxruntime binding, its shared library and wasmoon's wasm travel as SEA assets. They are
 * extracted once into a folder named by their content hash under the cache directory (by one process while others
 * wait, into a staging folder renamed into place, checked at every start: src/encoder/cache/) and loaded from there.
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
  /** The image codecs' .wasm files (src/encoder/image/wasm-codecs.ts); absent in runtimes built before image models. */
  imageCodecs?: CodecFiles;
}

export interface NativeFiles {
  dir: string;
  onnxruntimeBinding: string;
  luaWasm: string;
  /** Paths of the image codecs' .wasm files, for image threads (image-codecs.ts). */
  imageCodecs?: CodecFiles;
}

let extracted: NativeFiles | null | undefined;

/**
 * The extracted native files, or null when not running as a single executable (from source they are in node_modules).
 * A cache directory that cannot be written anywhere is a ConfigError naming it and ENCODER_CACHE_DIR.
 */
export function nativeFiles(env: NodeJS.ProcessEnv = process.env): NativeFiles | null {
  if (extracted !== undefined) return extracted;
  if (!sea.isSea()) return (extracted = null);
  const manifest = JSON.parse(sea.getAsset(NATIVE_MANIFEST_ASSET, 'utf8')) as NativeManifest;
  const dir = extractNativeFiles(manifest, cacheRoots(env), (key) => new Uint8Array(sea.getRawAsset(key)));
  return (extracted = {
    dir,
    onnxruntimeBinding: path.join(dir, manifest.onnxruntimeBinding),
    luaWasm: path.join(dir, manifest.luaWasm),
    ...(manifest.imageCodecs ? { imageCodecs: mapValues(manifest.imageCodecs, (file) => path.join(dir, file)) } : {}),
  });
}

/**
 * The folder `native/<manifest hash>` of the first root where it is (or can be) extracted. The assets are checked
 * against the manifest's hash before anything is recorded; each file's own SHA-256 goes into the entry's record.
 */
export function extractNativeFiles(manifest: NativeManifest, roots: readonly string[], asset: (key: string) => Uint8Array): string {
  return extractedEntry(roots, { folder: 'native', name: manifest.hash }, (staging, refresh) => {
    // loaded here, not at the top: this module is part of the executable's entry, which should reach the onnxruntime
    // warm-up as early as it can, and only a first start extracts
    const { createHash } = process.getBuiltinModule('node:crypto');
    const all = createHash('sha256');
    const sha256Of: Record<string, string> = {};
    for (const [key, file] of Object.entries(manifest.files)) {
      const bytes = asset(key);
      all.update(bytes);
      sha256Of[file] = createHash('sha256').update(bytes).digest('hex');
      writeDurably(path.join(staging, file), bytes, 0o755);
      refresh();
    }
    const actual = all.digest('hex').slice(0, manifest.hash.length);
    if (actual !== manifest.hash) throw new ConfigError(`native assets do not match their manifest (${actual} != ${manifest.hash})`);
    return sha256Of;
  });
}

function mapValues<K extends string>(record: Record<K, string>, map: (value: string) => string): Record<K, string> {
  return Object.fromEntries(Object.entries<string>(record).map(([key, value]) => [key, map(value)])) as Record<K, string>;
}
