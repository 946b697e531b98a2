/** onnxruntime's process-wide environment: what every thread that loads it shares. */

/**
 * onnxruntime 1.30 on Linux starts a telemetry system with its first session: it reads the process's command line
 * (the texts of `infer`), queues events in ~/.cache/Microsoft/DeveloperTools/.onnxruntime/onnxruntime.db and uploads
 * them over HTTPS. Spec 2's executable needs no network access and the texts are the user's, so it is switched off,
 * unless the user set ORT_DISABLE_TELEMETRY. Its command-line parser also overflowed the stack from ~28 KiB of
 * command line on (SIGSEGV on `infer "<a long document>"`). onnxruntime reads the variable from the process
 * environment, which only the main thread can change: a worker's process.env is its own copy, so whoever starts
 * inference workers calls this first.
 */
export function disableOnnxruntimeTelemetry(env: NodeJS.ProcessEnv = process.env): void {
  env.ORT_DISABLE_TELEMETRY ??= '1';
}

/**
 * y = Identity(x) over one float: the smallest model onnxruntime loads (81 bytes, written with scripts/model-generator's
 * encodeOnnxModel). A session of it sets onnxruntime's environment up (onnx-model.ts, warmUpOnnxruntime).
 */
export const WARM_UP_MODEL_BASE64 = 'CAgSBHdhcm0aATE6PgoUCgF4EgF5GgJpZCIISWRlbnRpdHkSBHdhcm1aDwoBeBIKCggIARIECgIIAWIPCgF5EgoKCAgBEgQKAggBQgQKABAR';
