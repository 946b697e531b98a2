import os from 'node:os';
import { isMainThread, workerData } from 'node:worker_threads';
import { nativeFiles } from './native-assets.ts';

/** What the single executable hands its inference workers (src/encoder/inference-workers.ts) as workerData. */
export interface InferenceWorkerData {
  onnxruntimeBinding: string;
}

/**
 * Replaces onnxruntime-node's computed `require('../bin/napi-v6/<platform>/<arch>/onnxruntime_binding.node')`
 * in the bundle (scripts/build-runtime.ts points esbuild here): the binding is loaded with process.dlopen from
 * the extracted native assets; its RUNPATH ($ORIGIN) finds libonnxruntime beside it.
 */
export function loadOnnxruntimeBinding(): unknown {
  // An inference worker gets the path from the main thread, which extracted the files (SEA assets are not read here).
  const fromMain = isMainThread ? undefined : (workerData as InferenceWorkerData | undefined)?.onnxruntimeBinding;
  const binding = fromMain ?? nativeFiles()?.onnxruntimeBinding;
  if (!binding) throw new Error('the onnxruntime binding loader of the single executable was used outside one');
  const module = { exports: {} as unknown };
  process.dlopen(module, binding, os.constants.dlopen.RTLD_NOW);
  return module.exports;
}
