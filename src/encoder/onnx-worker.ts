/**
 * The inference worker: one onnxruntime session in a worker thread, so that `session.run` (synchronous in the
 * binding) never holds the event loop that parses requests, answers /health and writes responses. With `postprocess`
 * in its load message it also owns a Lua state of the model's transform and runs the steps after onnxruntime
 * (batch-postprocess.ts: transform, pooling) on each batch before answering, so that a script that runs up to its
 * time limit holds this thread only. Started by InferenceWorkers (inference-workers.ts); from the sources as this
 * file, in the single executable as a bundle of it (scripts/build-runtime.ts). Messages are the protocol of
 * inference-workers.ts; tensors cross as transferred buffers.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { attentionMaskOf, createPostprocessSteps, needsAttentionMask, postprocessBatch, type PostprocessSettings, type PostprocessSteps } from './batch-postprocess.ts';
import type { ModelType } from './config.ts';
import { errorMessageOf, type ErrorMessage } from './errors.ts';
import { OnnxModel, type OnnxModelOptions, type SessionSettings, warmUpOnnxruntime } from './onnx-model.ts';
import { epochMs } from './request-phases.ts';
import type { PaddedBatch } from './tokenizer/index.ts';
import { serveTokenizer, type WorkerRoleData } from './tokenizer-worker.ts';
import { traceStartup } from '../shared/startup-trace.ts';

export type WorkerRequest =
  | {
      kind: 'load';
      weights: Uint8Array;
      modelType: ModelType;
      options: OnnxModelOptions;
      /**
       * The steps after onnxruntime this worker runs on every batch (its own Lua state of the transform, made after
       * the session; the pooling): a run then answers the final batch output. Absent: the raw output of onnxruntime.
       */
      postprocess?: PostprocessSettings;
    }
  /**
   * Loads a second session of the same model, the solo session, with other options (its threads): runs marked `solo`
   * use it once it has loaded (inference-workers.ts, "solo session"). Sent after the pool has joined, so that it never
   * delays start-up.
   */
  | { kind: 'load-solo'; weights: Uint8Array; modelType: ModelType; options: OnnxModelOptions }
  | { kind: 'run'; id: number; batch: PaddedBatch; solo?: boolean }
  | { kind: 'close' };

export type WorkerReply =
  | { kind: 'loaded'; signature: OnnxModel['signature']; settings: SessionSettings }
  /** ranMs: when onnxruntime started and ended the run, epochMs on this thread (request-phases.ts). */
  | { kind: 'ran'; id: number; data: Float32Array; dims: number[]; ranMs: [number, number] }
  | { kind: 'failed'; id: number | null; error: ErrorMessage }
  | { kind: 'closed' }
  /** The solo session loaded (error: null), or did not (the worker goes on with its one session). */
  | { kind: 'solo-loaded'; error: ErrorMessage | null }
  /** An early worker has warmed onnxruntime up (or failed to): its thread can be ended without breaking a native call. */
  | { kind: 'warm' };

/** What a worker started before its model is known gets in workerData (beside what its caller passes). */
export interface EarlyWorkerData {
  /** Load onnxruntime and create its environment now, before the model arrives (runtime/onnxruntime-warm-up.ts). */
  warmUp?: boolean;
}

if (parentPort && (workerData as WorkerRoleData | null)?.role === 'tokenizer') {
  // the same script is the tokenizer thread (tokenizer-workers.ts), so that the single executable carries one bundle
  serveTokenizer(parentPort);
} else if (parentPort && (workerData as WorkerRoleData | null)?.role === 'image') {
  // and an image model's thread (image-workers.ts); its codecs are loaded only by such a thread
  const port = parentPort;
  // the thread's first message (the load) waits in the port until the listener is on
  void import('./image-worker.ts').then(({ serveImages }) => serveImages(port));
} else if (parentPort) {
  traceStartup('inference worker running');
  const port = parentPort;
  // A failed warm-up costs only the time it would have saved: the model's own load reports what is wrong.
  const warmedUp =
    (workerData as EarlyWorkerData | null)?.warmUp === true
      ? warmUpOnnxruntime()
          .catch(() => {})
          .then(() => {
            traceStartup('onnxruntime warmed up');
            port.postMessage({ kind: 'warm' } satisfies WorkerReply);
          })
      : Promise.resolve();
  let model: OnnxModel | undefined;
  let solo: OnnxModel | undefined;
  let soloLoading: Promise<void> = Promise.resolve();
  let postprocess: PostprocessSteps | undefined;
  port.on('message', (request: WorkerRequest) => {
    void (async () => {
      switch (request.kind) {
        case 'load':
          try {
            await warmedUp;
            model = await OnnxModel.load(request.weights, request.modelType, request.options);
            traceStartup('session ready');
            if (request.postprocess) {
              try {
                postprocess = await createPostprocessSteps(request.modelType, request.postprocess);
              } catch (error) {
                await model.close();
                model = undefined;
                throw error;
              }
              if (postprocess.transform) traceStartup('transform ready');
            }
            port.postMessage({ kind: 'loaded', signature: model.signature, settings: model.settings } satisfies WorkerReply);
          } catch (error) {
            port.postMessage({ kind: 'failed', id: null, error: errorMessageOf(error) } satisfies WorkerReply);
          }
          return;
        case 'load-solo':
          soloLoading = OnnxModel.load(request.weights, request.modelType, request.options).then(
            (loaded) => {
              solo = loaded;
              port.postMessage({ kind: 'solo-loaded', error: null } satisfies WorkerReply);
            },
            (error: unknown) => port.postMessage({ kind: 'solo-loaded', error: errorMessageOf(error) } satisfies WorkerReply),
          );
          return;
        case 'run':
          try {
            // made before the run, from the batch this worker was handed
            const mask = postprocess && needsAttentionMask(postprocess) ? attentionMaskOf(request.batch) : null;
            const ranFrom = epochMs();
            let output = await (request.solo && solo ? solo : model!).run(request.batch);
            const ranMs: [number, number] = [ranFrom, epochMs()];
            if (postprocess) output = postprocessBatch(output, mask, postprocess);
            // Handed over rather than copied: onnxruntime allocates a fresh output per run, and pooling a fresh vector per
            // row. What a transform returned may also be held by its Lua state (a global that keeps the last batch), which
            // a transfer would leave empty: that is copied first, on this thread.
            const data = postprocess?.transform ? output.data.slice() : output.data;
            port.postMessage({ kind: 'ran', id: request.id, data, dims: [...output.dims], ranMs } satisfies WorkerReply, [data.buffer as ArrayBuffer]);
          } catch (error) {
            port.postMessage({ kind: 'failed', id: request.id, error: errorMessageOf(error) } satisfies WorkerReply);
          }
          return;
        case 'close':
          await soloLoading; // a session being created is released below, not cut off by the thread's end
          postprocess?.transform?.close();
          postprocess = undefined;
          await Promise.all([model?.close(), solo?.close()]);
          model = undefined;
          solo = undefined;
          port.postMessage({ kind: 'closed' } satisfies WorkerReply);
          return;
      }
    })();
  });
}
