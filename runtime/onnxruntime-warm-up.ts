import { Worker } from 'node:worker_threads';
import { disableOnnxruntimeTelemetry } from '../src/encoder/onnxruntime-telemetry.ts';
import { traceStartup } from '../src/shared/startup-trace.ts';
import { nativeFiles } from './native-assets.ts';

/** The commands whose first result waits for an onnxruntime session. */
const COMMANDS_WITH_A_SESSION = new Set(['infer', 'serve']);

/**
 * Run by a throwaway worker thread: loads the onnxruntime binding, creates onnxruntime's process-wide environment
 * (onnxruntime-node keeps one Ort::Env for every thread) and one session of the smallest model, which sets up the
 * CPU provider's kernel registry and reads the CPU's features. Log level 2 ('warning') is the one onnxruntime-node's
 * own initialisation passes when ort.env.logLevel is unset, as here: the environment keeps the first caller's level.
 * The model is y = Identity(x) over one float (81 bytes, made with scripts/model-generator's encodeOnnxModel).
 */
export const WARM_UP_SCRIPT = `
const { workerData } = require('node:worker_threads');
const binding = { exports: {} };
process.dlopen(binding, workerData.onnxruntimeBinding, require('node:os').constants.dlopen.RTLD_NOW);
binding.exports.initOrtOnce(2, class Tensor {}, false);
const model = Buffer.from('CAgSBHdhcm0aATE6PgoUCgF4EgF5GgJpZCIISWRlbnRpdHkSBHdhcm1aDwoBeBIKCggIARIECgIIAWIPCgF5EgoKCAgBEgQKAggBQgQKABAR', 'base64');
new binding.exports.InferenceSession().loadModel(model.buffer, model.byteOffset, model.byteLength, { intraOpNumThreads: 1, interOpNumThreads: 1 });
`;

/**
 * onnxruntime's first session in a process costs several times a later one whatever the model: loading the library,
 * registering every ONNX operator schema and the CPU kernels (~55 ms of one core on this project's test machine,
 * docs/benchmarks.md). When the command line runs a model, a worker thread pays that as the very first thing the
 * program does, on the other core, while this thread evaluates the rest of the program and reads the model and the
 * tokenizer; the model's own session then finds onnxruntime ready. Imported first by the executable's entry
 * (sea-entry.ts), so that it runs before the program is evaluated. The thread does not keep the process alive and its failure is ignored: the
 * model's own load reports what is wrong. Returns the thread, if one was started.
 */
export function warmUpOnnxruntimeFor(argv: readonly string[], binding?: string): Worker | undefined {
  if (!COMMANDS_WITH_A_SESSION.has(argv[0] ?? '') || argv.includes('--help') || argv.includes('-h')) return undefined;
  binding ??= nativeFiles()?.onnxruntimeBinding; // none outside a single executable: no warm-up
  if (!binding) return undefined;
  disableOnnxruntimeTelemetry(); // a worker's process.env is a copy: set before it starts (see there)
  try {
    const thread = new Worker(WARM_UP_SCRIPT, { eval: true, workerData: { onnxruntimeBinding: binding } });
    thread.on('error', () => {});
    thread.unref();
    traceStartup('onnxruntime warm-up started');
    return thread;
  } catch {
    return undefined; // no warm-up: the session pays onnxruntime's first-use cost itself
  }
}

warmUpOnnxruntimeFor(process.argv.slice(2));
