/** The program's bundle (runtime/main.ts) as a SEA asset, evaluated by the executable's entry (sea-entry.ts). */
export const PROGRAM_ASSET = 'program.cjs';

/**
 * The program's code caches, one per start-up they were made for (scripts/build-runtime.ts, host target only): a
 * cache holding `serve`'s front ends costs `infer` more to load than it saves it (~20 ms against ~8 on the loaded
 * test machine), so `serve` has its own and every other command takes `infer`'s.
 */
export const CODE_CACHE_RUNS = ['infer', 'serve'] as const;
export type CodeCacheRun = (typeof CODE_CACHE_RUNS)[number];

/** V8's code cache of PROGRAM_ASSET as a run of the command left it. */
export const programCodeCacheAsset = (run: CodeCacheRun): string => `program.${run}.code-cache`;

/** The cache a command line starts with. */
export const codeCacheRunFor = (argv: readonly string[]): CodeCacheRun => (argv[0] === 'serve' ? 'serve' : 'infer');

/** Set by scripts/build-runtime.ts: the executable writes the program's code cache to this file when it exits. */
export const WRITE_CODE_CACHE_ENV = 'ENCODER_WRITE_CODE_CACHE';
