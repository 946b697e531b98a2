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
