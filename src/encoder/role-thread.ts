/**
 * Starting a thread that runs the inference worker's script in another role (the tokenizer thread, an image thread):
 * the role in its workerData, its load message, and its answer awaited. The single executable thus carries one worker
 * bundle for every kind of thread.
 */
import { Worker } from 'node:worker_threads';
import { ConfigError, errorFromMessage, type ErrorMessage } from './errors.ts';
import type { InferenceWorkerScript } from './inference-workers.ts';
import type { WorkerRoleData } from './tokenizer-worker.ts';

/** What a role thread answers to its load message. */
export type LoadReply = { kind: 'loaded' } | { kind: 'failed'; error: ErrorMessage } | { kind: string };

/**
 * Starts the thread and resolves with it once it answered `loaded`; a failed load, an error or an exit before it is a
 * ConfigError (the thread then ended). `names.thread` names it in messages ("the tokenizer thread"), `names.loading`
 * what it was loading.
 */
export async function startRoleThread(
  script: InferenceWorkerScript,
  role: NonNullable<WorkerRoleData['role']>,
  load: object,
  names: { thread: string; loading: string },
): Promise<Worker> {
  const data = { ...(script.workerData as object | undefined), role } satisfies WorkerRoleData;
  const worker = new Worker(script.script, { eval: script.eval ?? false, workerData: data });
  try {
    await new Promise<void>((resolve, reject) => {
      const onError = (error: Error) => reject(new ConfigError(`${names.thread} failed to start: ${error.message}`, { cause: error }));
      const onExit = (code: number) => reject(new ConfigError(`${names.thread} exited with code ${code} while loading ${names.loading}`));
      worker.once('error', onError);
      worker.once('exit', onExit);
      worker.once('message', (reply: LoadReply) => {
        worker.off('error', onError);
        worker.off('exit', onExit);
        if (reply.kind === 'loaded') resolve();
        else if ('error' in reply) reject(errorFromMessage(reply.error));
        else reject(new ConfigError(`${names.thread} answered ${reply.kind} to load`));
      });
      worker.postMessage(load);
    });
  } catch (error) {
    await worker.terminate();
    throw error;
  }
  return worker;
}
