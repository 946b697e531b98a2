import os from 'node:os';
import { isMainThread, workerData } from 'node:worker_threads';
import { InternalError } from '../src/encoder/errors.ts';
import { nativeFiles } from './native-assets.ts';

/** What the single executable hands its inference workers (src/encoder/inference-workers.ts) as workerData. */
export interface InferenceWorkerData {
  onnxruntimeBinding: string;
}

/**
 * Replaces onnxruntime-node's computed `require('../bin/napi-v6/<platform>/<arch>/onnxruntime_binding.node')`
 * in the bundle (scripts/build-runtime.ts points esbuild here): the binding is loaded with process.dlopen from
 * the extracted native assets; its RUNPATH ($ORIGIN) finds libonnxruntime beside it (on Windows, LoadLibraryEx's
 * altered search path finds onnxruntime.dll there).
 */
export function loadOnnxruntimeBinding(): unknown {
  // An inference worker gets the path from the main thread, which extracted the files (SEA assets are not read here).
  const fromMain = isMainThread ? undefined : (workerData as InferenceWorkerData | undefined)?.onnxruntimeBinding;
  const binding = fromMain ?? nativeFiles()?.onnxruntimeBinding;
  if (!binding) throw new Error('the onnxruntime binding loader of the single executable was used outside one');
  const module = { exports: {} as unknown };
  try {
    process.dlopen(module, binding, os.constants.dlopen.RTLD_NOW);
  } catch (error) {
    // Windows does not name the missing DLL ("The specified module could not be found."; Wine: "Module not
    // found."): name the likely one, the MSVC C++ runtime onnxruntime links against.
    if (process.platform === 'win32' && /module (could )?not (be )?found/i.test((error as Error).message)) {
      throw new InternalError(`cannot load onnxruntime (${(error as Error).message.split('\n')[0].trim()}): ${WINDOWS_RUNTIME_HINT}`, { cause: error });
    }
    throw error;
  }
  return module.exports;
}

/** onnxruntime.dll and its binding import MSVCP140.dll, VCRUNTIME140.dll and VCRUNTIME140_1.dll, which Windows lacks without it. */
export const WINDOWS_RUNTIME_HINT =
  'install the Microsoft Visual C++ Redistributable 2015-2022 for x64 (https://aka.ms/vs/17/release/vc_redist.x64.exe), which provides MSVCP140.dll and VCRUNTIME140.dll';
