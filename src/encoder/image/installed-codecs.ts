import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { WASM_CODEC_FILES, type WasmSource } from './wasm-codecs.ts';

/**
 * The codecs' .wasm files from the installed npm packages, when running from source; the single executable carries
 * the same files as SEA assets. Not bundled (import.meta is empty in the CommonJS bundle).
 */
const require = createRequire(import.meta.url);

export const installedWasmCodecs: WasmSource = (codec) => readFile(require.resolve(WASM_CODEC_FILES[codec]));
