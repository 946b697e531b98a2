/**
 * The single executable's first script (its SEA main). It starts onnxruntime's warm-up, then evaluates the program
 * (runtime/main.ts, bundled apart and carried as a SEA asset) with V8's code cache of it. That cache is made by
 * scripts/build-runtime.ts from a run of the program (`infer` of a tiny model with ENCODER_WRITE_CODE_CACHE set;
 * `serve` has its own, runtime/program-assets.ts), so it holds every function such a run compiles: a cache made from
 * the source alone, as Node's own SEA code cache is, holds only the top level, and compiling each module's code on its
 * first call was ~40 ms of a warm `infer` (docs/benchmarks.md). Targets other than the builder's own get no cache (it
 * is specific to the V8 build and CPU features that made it) and compile as they go.
 */
import { writeFileSync } from 'node:fs';
import * as sea from 'node:sea';
import { reexecWithMallocTuning } from '../src/shared/malloc-tuning.ts';
import { traceStartup } from '../src/shared/startup-trace.ts';
import { evaluateBundleAsset } from './bundle-script.ts';
import { warmUpOnnxruntimeFor } from './onnxruntime-warm-up.ts';
import { codeCacheRunFor, PROGRAM_ASSET, programCodeCacheAsset, WRITE_CODE_CACHE_ENV } from './program-assets.ts';

function programCodeCache(): Buffer | undefined {
  try {
    return Buffer.from(sea.getRawAsset(programCodeCacheAsset(codeCacheRunFor(process.argv.slice(2)))));
  } catch {
    return undefined; // a target without one
  }
}

// before anything starts: a serve may re-execute itself with malloc tuned (the same process, from the top)
reexecWithMallocTuning(process.argv.slice(2));
warmUpOnnxruntimeFor(process.argv.slice(2));

const writeTo = process.env[WRITE_CODE_CACHE_ENV];
// V8 drops the bytecode of functions that have not run for a few collections (module bodies run once), and a cache
// holds only what is still compiled when it is made: serve's run collects often enough to lose most module bodies.
// (node:v8 is loaded only here: it brings five more modules to every start.)
const v8 = writeTo ? process.getBuiltinModule('node:v8') : undefined;
v8?.setFlagsFromString('--no-flush-bytecode');
// Building a cache: compile from the source, so that the cache holds what this run compiles.
const program = evaluateBundleAsset(PROGRAM_ASSET, {
  codeCache: writeTo ? undefined : programCodeCache(),
  compiled: (use) => traceStartup(`program compiled (code cache: ${use})`),
});
if (writeTo) {
  process.once('exit', () => {
    v8!.setFlagsFromString('--flush-bytecode'); // V8 checks a cache against the flags: as every run has them
    writeFileSync(writeTo, program.createCodeCache());
  });
}
