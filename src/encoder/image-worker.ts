/**
 * An image thread: decodes and preprocesses images (WebAssembly codecs, PIL's resize: tens of ms to seconds for one
 * image) and runs the image model's onnxruntime session on merged batches, so that neither holds the event loop.
 * It runs the inference worker's script (onnx-worker.ts) started with the role `image`, so that the single
 * executable carries one worker bundle. Messages are the protocol of image-workers.ts; pixels and logits cross as
 * transferred buffers.
 */
import type { MessagePort } from 'node:worker_threads';
import { errorMessageOf, type ErrorMessage } from './errors.ts';
import { decodeImage, pixelValues, type ImageLimits, type ImageProcessorConfig } from './image/index.ts';
import { ImageOnnxModel, type ImageModelExpectation } from './image-model.ts';
import type { OnnxModelOptions } from './onnx-model.ts';
import { codecsOf, type CodecFiles } from './image-codecs.ts';

export interface ImageModelLoad {
  weights: Uint8Array;
  options: OnnxModelOptions;
  expected: ImageModelExpectation;
  preprocessor: ImageProcessorConfig;
  limits: ImageLimits;
  /** Where the codecs' .wasm files are (the single executable's extracted assets); absent: the installed packages. */
  codecFiles?: CodecFiles;
}

/**
 * One image to decode and preprocess, or a batch of pixels to run: on the solo session when `solo` and the thread has
 * one (image-workers.ts, the solo session).
 */
export type ImageJob = { kind: 'preprocess'; bytes: Uint8Array; index: number; field: string } | { kind: 'run'; data: Float32Array; dims: number[]; solo?: boolean };

export type ImageWorkerRequest =
  | { kind: 'load'; load: ImageModelLoad }
  /** A second session of the model, the solo session, with these options (its threads); sent after every thread has loaded. */
  | { kind: 'load-solo'; options: OnnxModelOptions }
  | (ImageJob & { id: number })
  | { kind: 'close' };

export type ImageWorkerReply =
  | { kind: 'loaded' }
  /** decodedPixels: the decoded image's width × height (preprocess only), which tells the pool when to recycle this thread. */
  | { kind: 'done'; id: number; data: Float32Array; dims: number[]; decodedPixels?: number }
  | { kind: 'failed'; id: number | null; error: ErrorMessage }
  /** The solo session loaded (error: null), or did not (the thread goes on with its one session). */
  | { kind: 'solo-loaded'; error: ErrorMessage | null }
  | { kind: 'closed' };

export function serveImages(port: MessagePort): void {
  let model: ImageOnnxModel | undefined;
  let solo: ImageOnnxModel | undefined;
  let soloLoading: Promise<void> = Promise.resolve();
  let load: ImageModelLoad | undefined;
  const reply = (message: ImageWorkerReply, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);
  port.on('message', (request: ImageWorkerRequest) => {
    void (async () => {
      switch (request.kind) {
        case 'load':
          try {
            load = request.load;
            model = await ImageOnnxModel.load(load.weights, load.expected, load.options);
            reply({ kind: 'loaded' });
          } catch (error) {
            reply({ kind: 'failed', id: null, error: errorMessageOf(error) });
          }
          return;
        case 'load-solo':
          soloLoading = ImageOnnxModel.load(load!.weights, load!.expected, request.options).then(
            (loaded) => {
              solo = loaded;
              reply({ kind: 'solo-loaded', error: null });
            },
            (error: unknown) => reply({ kind: 'solo-loaded', error: errorMessageOf(error) }),
          );
          return;
        case 'preprocess':
          try {
            const { index, field } = request;
            const image = await decodeImage(request.bytes, { index, field, limits: load!.limits, wasm: await codecsOf(load!.codecFiles) });
            const pixels = pixelValues([image], load!.preprocessor, field);
            reply({ kind: 'done', id: request.id, data: pixels.data, dims: pixels.dims, decodedPixels: image.width * image.height }, [pixels.data.buffer as ArrayBuffer]);
          } catch (error) {
            reply({ kind: 'failed', id: request.id, error: errorMessageOf(error) });
          }
          return;
        case 'run':
          try {
            const logits = await (request.solo && solo ? solo : model!).run({ data: request.data, dims: request.dims as [number, number, number, number] });
            reply({ kind: 'done', id: request.id, data: logits.data, dims: [...logits.dims] }, [logits.data.buffer as ArrayBuffer]);
          } catch (error) {
            reply({ kind: 'failed', id: request.id, error: errorMessageOf(error) });
          }
          return;
        case 'close':
          await soloLoading; // a session being created is released below, not cut off by the thread's end
          await Promise.all([model?.close(), solo?.close()]);
          model = undefined;
          solo = undefined;
          reply({ kind: 'closed' });
          return;
      }
    })();
  });
}
