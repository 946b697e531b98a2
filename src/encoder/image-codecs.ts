/**
 * Where a thread finds the image codecs' .wasm files: the paths it is given (the single executable's extracted
 * assets), else the installed npm packages (installed-codecs.ts, loaded only then).
 */
import { readFile } from 'node:fs/promises';
import type { WasmCodec, WasmSource } from './image/index.ts';
import type * as InstalledCodecs from './image/installed-codecs.ts';

/**
 * A variable, so that esbuild leaves this import out of the bundles: installed-codecs.ts needs import.meta, which a
 * CommonJS bundle has not (its build would stop at the warning), and the executable always passes its files.
 */
const INSTALLED_CODECS = './image/installed-codecs.ts';

/** Each codec's .wasm file by path. */
export type CodecFiles = Record<WasmCodec, string>;

export async function codecsOf(files: CodecFiles | undefined): Promise<WasmSource> {
  if (files) return (codec) => readFile(files[codec]);
  return ((await import(INSTALLED_CODECS)) as typeof InstalledCodecs).installedWasmCodecs;
}
