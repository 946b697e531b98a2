import * as sea from 'node:sea';
import { Worker } from 'node:worker_threads';
import { disableOnnxruntimeTelemetry, WARM_UP_MODEL_BASE64 } from '../src/encoder/onnxruntime-environment.ts';
import type { EarlyWorkerData, WorkerReply } from '../src/encoder/onnx-worker.ts';
import { traceStartup } from '../src/shared/startup-trace.ts';
import { INFERENCE_WORKER_ASSET, nativeFiles } from './native-assets.ts';
import type { InferenceWorkerData } from './onnxruntime-binding.ts';

/**
 * Run by `infer`'s throwaway worker thread: loads the onnxruntime binding, creates onnxruntime's process-wide
 * environment (onnxruntime-node keeps one Ort::Env for every thread) and one session of the smallest model, which
 * sets up the CPU provider's kernel registry and reads the CPU's features. Log level 2 ('warning') is the one
 * onnxruntime-node's own initialisation passes when ort.env.logLevel is unset, as here: the environment keeps the
 * first caller's level.
 */
export const WARM_UP_SCRIPT = `
const { workerData } = require('node:worker_threads');
const binding = { exports: {} };
process.dlopen(binding, workerData.onnxruntimeBinding, require('node:os').constants.dlopen.RTLD_NOW);
binding.exports.initOrtOnce(2, class Tensor {}, false);
const model = Buffer.from('${WARM_UP_MODEL_BASE64}', 'base64');
new binding.exports.InferenceSession().loadModel(model.buffer, model.byteOffset, model.byteLength, { intraOpNumThreads: 1, interOpNumThreads: 1 });
`;

/** Where the entry's bundle hands `serve`'s prestarted inference worker to the program's (two bundles, one process). */
const PRESTARTED_WORKER = Symbol.for('encoder.prestartedInferenceWorker');
type Slot = { [PRESTARTED_WORKER]?: { thread: Worker; alive: boolean; release(): void } };

/**
 * onnxruntime's first session in a process costs several times a later one whatever the model: loading the library,
 * registering every ONNX operator schema and the CPU kernels (~55 ms of one core on this project's test machine,
 * docs/benchmarks.md). When the command line runs a model, a worker thread pays that as the very first thing the
 * executable does, on the other core, while this thread evaluates the program and reads the model and the
 * tokenizer. For `infer`, whose session is on this thread, the worker is a throwaway that creates onnxruntime's
 * process-wide environment; for `serve`, whose sessions are in inference workers, it is the first inference worker
 * itself, started early (takePrestartedInferenceWorker): it warms up in its own thread, then gets the model. Called
 * first by the executable's entry (sea-entry.ts). A thread keeps the process alive no longer than its warm-up unless it
 * is adopted, and its failure is ignored: the model's own load reports what is wrong. Returns the thread, if one was
 * started.
 */
export function warmUpOnnxruntimeFor(argv: readonly string[], binding?: string): Worker | undefined {
  const command = argv[0];
  if ((command !== 'infer' && command !== 'serve') || argv.includes('--help') || argv.includes('-h')) return undefined;
  try {
    binding ??= nativeFiles()?.onnxruntimeBinding; // none outside a single executable: no warm-up
  } catch {
    return undefined; // no cache to extract into: the program says so (runtime/main.ts)
  }
  if (!binding) return undefined;
  disableOnnxruntimeTelemetry(); // a worker's process.env is a copy: set before it starts (see there)
  try {
    // Neither thread is unreferenced while it is in onnxruntime's native set-up: a process that ends meanwhile (a
    // bad argument, a missing file) would stop it there, and the binding then aborts the process ("terminate called
    // after throwing an instance of 'Napi::Error'"). Such an exit waits for the warm-up instead.
    if (command === 'infer') {
      const thread = new Worker(WARM_UP_SCRIPT, { eval: true, workerData: { onnxruntimeBinding: binding } }); // ends by itself
      thread.on('error', () => {});
      traceStartup('onnxruntime warm-up started');
      return thread;
    }
    const workerData = { onnxruntimeBinding: binding, warmUp: true } satisfies InferenceWorkerData & EarlyWorkerData;
    const thread = new Worker(sea.getAsset(INFERENCE_WORKER_ASSET, 'utf8'), { eval: true, workerData });
    const ignoreError = () => {};
    const markDead = () => (prestarted.alive = false);
    // warmed up and not taken yet: it waits for a model that may never come, which must not keep the process alive
    const unrefWhenWarm = (reply: WorkerReply) => reply.kind === 'warm' && thread.unref();
    const prestarted = {
      thread,
      alive: true,
      // only these: removeAllListeners() would also drop Node's own, and the thread's messages would stop arriving
      release: () => thread.off('error', ignoreError).off('exit', markDead).off('message', unrefWhenWarm),
    };
    thread.on('error', ignoreError).once('exit', markDead).on('message', unrefWhenWarm);
    (globalThis as Slot)[PRESTARTED_WORKER] = prestarted;
    traceStartup('inference worker started (onnxruntime warm-up)');
    return thread;
  } catch {
    return undefined; // no warm-up: the session pays onnxruntime's first-use cost itself
  }
}

/** `serve`'s prestarted inference worker, once, if it is still running (InferenceWorkerScript.prestarted). */
export function takePrestartedInferenceWorker(): Worker | undefined {
  const slot = globalThis as Slot;
  const prestarted = slot[PRESTARTED_WORKER];
  delete slot[PRESTARTED_WORKER];
  if (!prestarted?.alive) return undefined;
  prestarted.release();
  return prestarted.thread;
}
