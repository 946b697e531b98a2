import path from 'node:path';
import * as sea from 'node:sea';
import vm from 'node:vm';

/** Whether a bundle was compiled from a code cache, for the start-up trace (which the executable's tests read). */
export type CodeCacheUse = 'none' | 'accepted' | 'rejected';

export interface EvaluatedBundle {
  exports: unknown;
  /** V8's code cache of the bundle as compiled so far: every function run until now, not only the top level. */
  createCodeCache(): Buffer;
}

/**
 * Evaluates a CommonJS bundle carried as a SEA asset (the program, a split bundle) in this context and returns its
 * exports. With `codeCache`, V8 takes the compiled code from it instead of compiling the source, if it was made by
 * the same V8 with the same flags from the same source (else it compiles as usual and says so); `compiled` hears
 * which, before the bundle runs.
 */
export function evaluateBundleAsset(asset: string, options: { codeCache?: Buffer; compiled?: (use: CodeCacheUse) => void } = {}): EvaluatedBundle {
  const { codeCache } = options;
  const filename = path.join(path.dirname(process.execPath), asset); // names the code in stack traces
  // Bundles are ASCII (scripts/build-runtime.ts escapes the rest): read as Latin-1, a plain copy, instead of decoding
  // UTF-8 (~5 ms for the program's 2 MB).
  const source = Buffer.from(sea.getRawAsset(asset)).toString('latin1');
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename,
    ...(codeCache ? { cachedData: codeCache } : {}),
  });
  const use: CodeCacheUse = codeCache === undefined ? 'none' : script.cachedDataRejected ? 'rejected' : 'accepted';
  options.compiled?.(use);
  const wrapper = script.runInThisContext() as (...args: unknown[]) => void;
  const module = { exports: {} as unknown };
  // The SEA's `require` loads built-in modules, which is all a bundle requires.
  wrapper.call(module.exports, module.exports, require, module, filename, path.dirname(filename));
  return { exports: module.exports, createCodeCache: () => script.createCachedData() };
}
