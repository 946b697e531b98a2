import os from 'node:os';
import { nativeFiles } from './native-assets.ts';

/**
 * Replaces onnxruntime-node's computed `require('../bin/napi-v6/<platform>/<arch>/onnxruntime_binding.node')`
 * in the bundle (scripts/build-runtime.ts points esbuild here): the binding is loaded with process.dlopen from
 * the extracted native assets; its RUNPATH ($ORIGIN) finds libonnxruntime beside it.
 */
export function loadOnnxruntimeBinding(): unknown {
  const files = nativeFiles();
  if (!files) throw new Error('the onnxruntime binding loader of the single executable was used outside one');
  const module = { exports: {} as unknown };
  process.dlopen(module, files.onnxruntimeBinding, os.constants.dlopen.RTLD_NOW);
  return module.exports;
}
