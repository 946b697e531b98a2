/**
 * Where a thread finds the image codecs' .wasm files: the paths it is given (the single executable's extracted
 * assets), else the installed npm packages (installed-codecs.ts, loaded only then: it is not bundled).
 */
import { readFile } from 'node:fs/promises';
import type { WasmCodec, WasmSource } from './image/index.ts';

/** Each codec's .wasm file by path. */
export type CodecFiles = Record<WasmCodec, string>;

export async function codecsOf(files: CodecFiles | undefined): Promise<WasmSource> {
  if (files) return (codec) => readFile(files[codec]);
  return (await import('./image/installed-codecs.ts')).installedWasmCodecs;
}
