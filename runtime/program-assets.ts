/** The program's bundle (runtime/main.ts) as a SEA asset, evaluated by the executable's entry (sea-entry.ts). */
export const PROGRAM_ASSET = 'program.cjs';
/** V8's code cache of PROGRAM_ASSET, made by scripts/build-runtime.ts from a run of the program (host target only). */
export const PROGRAM_CODE_CACHE_ASSET = 'program.code-cache';
/** Set by scripts/build-runtime.ts: the executable writes the program's code cache to this file when it exits. */
export const WRITE_CODE_CACHE_ENV = 'ENCODER_WRITE_CODE_CACHE';
