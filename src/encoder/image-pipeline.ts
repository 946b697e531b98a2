/**
 * The path of an image classification model from request to labels: decode and preprocess each image (on an image
 * thread when the pipeline has them, image-workers.ts; else here, as `infer` does), merge the images of all waiting
 * requests into onnxruntime runs with the same BatchScheduler as text (one image is one row; images of one
 * preprocessed size share a run), softmax the logits, and give each image its labels with scores, best first,
 * `top_k` of them. docs/image-models.md.
 */
import { BatchScheduler, resolveBatchSettings, type BatchRunListener, type BatchSchedulerOptions, type BatchSettings, type BatchStats, type RunContext } from './batch-scheduler.ts';
import type { ImageModelType } from './config.ts';
import { ConfigError, InputError, InternalError, isEncoderError } from './errors.ts';
import { DEFAULT_IMAGE_LIMITS, preprocessImage, type ImageLimits, type PixelValues } from './image/index.ts';
import { codecsOf, type CodecFiles } from './image-codecs.ts';
import { ImageOnnxModel, imageVectors } from './image-model.ts';
import { normalizeInPlace } from './pooling.ts';
import { expectationOf, type ImageModelPackage } from './image-model-package.ts';
import { checkImageCount, parseImageBody, type ImageRequest } from './image-requests.ts';
import { ImageWorkers } from './image-workers.ts';
import type { ImageModelLoad } from './image-worker.ts';
import { soloSessionOptions, soloSessionThreads, threadsPerWorker, type InferenceWorkerScript } from './inference-workers.ts';
import { sessionOptionsFor, settingsOf, type OnnxModelOptions, type SessionSettings } from './onnx-model.ts';
import { epochMs, requestPhases, runTimingOf, setRunTiming } from './request-phases.ts';
import { softmax, Tensor } from './tensor.ts';

/** Images per onnxruntime run by default: a ViT-base image is ~200 of a text's tokens of work, so runs stay short. */
export const DEFAULT_MAX_BATCH_IMAGES = 16;

export interface ImagePipelineOptions {
  /** Image threads (each decodes and holds a session); 0: everything on the calling thread (`infer`, tests). */
  workers?: number;
  /** How to start a thread (required with workers > 0): the inference worker's script, run with the role `image`. */
  inferenceWorker?: InferenceWorkerScript;
  /**
   * Intra-op threads of each thread's session; default: as text workers (threadsPerWorker), onnxruntime's own with one
   * thread, the cores divided between them with several.
   */
  threads?: number;
  /**
   * Intra-op threads of the solo session, a second session in the first image thread that runs a batch when it is all
   * the work there is (soloSessionThreads); 0: none. Default: onnxruntime's own with several threads and no `threads`,
   * else none. Without image threads, ignored.
   */
  soloThreads?: number;
  sessionOptions?: OnnxModelOptions['sessionOptions'];
  /** Most images in one onnxruntime run. */
  maxBatchImages?: number;
  maxWaitMs?: number;
  /** Most images in one request. */
  maxRequestInputs?: number;
  limits?: ImageLimits;
  codecFiles?: CodecFiles;
  /** An image thread that decoded an image of more pixels is replaced, to give its memory back (DEFAULT_RECYCLE_AFTER_PIXELS). */
  recycleAfterPixels?: number;
}

export interface LabelScore {
  label: string;
  score: number;
}

/** encoderfile's ImageClassificationResponse: per image, its labels with scores. */
export interface ImageClassificationResponse {
  results: { labels: LabelScore[] }[];
  model_id: string;
  metadata?: Record<string, string>;
}

/** An image_embedding model's /predict response: one vector per image, as a sentence_embedding model's. */
export interface ImageEmbeddingResponse {
  results: { embedding: Float32Array }[];
  model_id: string;
  metadata?: Record<string, string>;
}

export type ImagePredictResponse = ImageClassificationResponse | ImageEmbeddingResponse;

/** One image waiting for a run: one row, as the scheduler counts (`ids.length` 1). */
interface ImageRow {
  readonly ids: { readonly length: number };
  readonly pixels: PixelValues;
}

const ONE = { length: 1 } as const;

/** Runs pixels and preprocesses images: a session here, or the image threads. */
interface ImageRunner {
  preprocess(bytes: Uint8Array, index: number, field: string): Promise<PixelValues>;
  run(pixels: PixelValues, options?: { alone?: boolean }): Promise<Tensor>;
  close(): Promise<void>;
}

export class ImagePipeline {
  readonly modelId: string;
  readonly modelType: ImageModelType;
  readonly labels: readonly string[];
  /** The options every session was created with (each thread's, or this thread's). */
  readonly sessionSettings: SessionSettings;
  /** The solo session's options, or null when there is none; it may still be loading, or have failed to (soloLoaded). */
  readonly soloSessionSettings: SessionSettings | null;
  readonly #runner: ImageRunner;
  readonly #scheduler: BatchScheduler<ImageRow, Tensor>;
  readonly #maxInputs: number;
  readonly #quantization: ImageModelPackage['quantization'];
  readonly #pooling: ImageModelPackage['pooling'];
  readonly #normalize: boolean;
  readonly #inFlight = new Set<Promise<unknown>>();
  #closing: Promise<void> | undefined;

  private constructor(
    pkg: ImageModelPackage,
    runner: ImageRunner,
    batching: BatchSchedulerOptions,
    maxInputs: number,
    sessionSettings: SessionSettings,
    soloSessionSettings: SessionSettings | null,
  ) {
    this.sessionSettings = sessionSettings;
    this.soloSessionSettings = soloSessionSettings;
    this.#quantization = pkg.quantization;
    this.#pooling = pkg.pooling;
    this.#normalize = pkg.normalize;
    this.modelId = pkg.name;
    this.modelType = pkg.modelType;
    this.labels = pkg.labels;
    this.#runner = runner;
    this.#scheduler = new BatchScheduler((rows, context) => this.#runBatch(rows, context), {
      ...batching,
      soloAvailable: runner instanceof ImageWorkers ? () => runner.soloReady : undefined,
    });
    this.#maxInputs = maxInputs;
  }

  static async load(pkg: ImageModelPackage, options: ImagePipelineOptions = {}): Promise<ImagePipeline> {
    const workers = options.workers ?? 0;
    if (!(Number.isInteger(workers) && workers >= 0)) throw new ConfigError(`workers must be an integer >= 0, got ${String(options.workers)}`);
    if (workers > 0 && options.inferenceWorker === undefined) throw new ConfigError('workers > 0 needs inferenceWorker: how to start the worker script');
    const maxImages = options.maxBatchImages ?? DEFAULT_MAX_BATCH_IMAGES;
    // one image is one row of one "token": the token budget is the images per run, never grouped by length
    const batching: BatchSchedulerOptions = { maxRunsInFlight: Math.max(1, workers), maxBatchTokens: maxImages, maxWaitMs: options.maxWaitMs, groupByLength: false };
    resolveBatchSettings(batching);
    const maxInputs = options.maxRequestInputs ?? Infinity;
    if (!(maxInputs >= 1)) throw new ConfigError(`maxRequestInputs must be at least 1, got ${maxInputs}`);
    // with threads, each session's threads as text workers have them, and the solo session beside (inference-workers.ts)
    const threads = workers > 0 ? threadsPerWorker(workers, options.threads) : options.threads;
    const soloThreads = workers > 0 ? soloSessionThreads(workers, options.threads, options.soloThreads) : null;
    const load: ImageModelLoad = {
      weights: pkg.weights,
      options: { threads, sessionOptions: options.sessionOptions, weightsDataDir: pkg.weightsDataDir },
      expected: expectationOf(pkg),
      preprocessor: pkg.preprocessor,
      limits: options.limits ?? DEFAULT_IMAGE_LIMITS,
      ...(options.codecFiles ? { codecFiles: options.codecFiles } : {}),
    };
    const solo = soloThreads === null ? null : soloSessionOptions(load.options, soloThreads);
    const runner =
      workers > 0 ? await ImageWorkers.load(options.inferenceWorker!, workers, load, { recycleAfterPixels: options.recycleAfterPixels, solo }) : await inlineRunner(load);
    const soloSettings = solo === null ? null : settingsOf(sessionOptionsFor(solo));
    return new ImagePipeline(pkg, runner, batching, maxInputs, settingsOf(sessionOptionsFor(load.options)), soloSettings);
  }

  metadata(): { model_id: string; model_type: ImageModelType; id2label: Record<string, string>; quantization?: 'int8' } {
    const id2label = Object.fromEntries(this.labels.map((label, index) => [String(index), label]));
    return { model_id: this.modelId, model_type: this.modelType, id2label, ...(this.#quantization === 'int8' ? { quantization: this.#quantization } : {}) };
  }

  batchingStats(): BatchStats {
    return this.#scheduler.stats();
  }

  observeBatches(listener: BatchRunListener): () => void {
    return this.#scheduler.observe(listener);
  }

  /** How runs are formed (for the banner): images per run (the token budget, one "token" per image), wait bound. */
  get batchingSettings(): Readonly<BatchSettings> {
    return this.#scheduler.settings;
  }

  get maxRequestInputs(): number {
    return this.#maxInputs;
  }

  /** Resolves true once the solo session has loaded; false when there is none (or it did not load). */
  get soloLoaded(): Promise<boolean> {
    return this.#runner instanceof ImageWorkers ? this.#runner.soloLoaded : Promise.resolve(false);
  }

  /** onnxruntime runs on the solo session so far (a merged batch of images of one preprocessed size is one run). */
  get soloRuns(): number {
    return this.#runner instanceof ImageWorkers ? this.#runner.soloRuns : 0;
  }

  /** Image threads replaced after a large image (0 without threads). */
  get threadsRecycled(): number {
    return this.#runner instanceof ImageWorkers ? this.#runner.recycled : 0;
  }

  /** `POST /predict` in JSON: images in base64 or data URLs (image-requests.ts). */
  async predict(body: unknown): Promise<ImagePredictResponse> {
    return this.predictImages(parseImageBody(body, this.#maxInputs, this.modelType));
  }

  /** Images as bytes (multipart, gRPC, MCP, `infer`); `field` names them in errors (`inputs`, `files`). */
  async predictImages(request: ImageRequest, field = 'inputs'): Promise<ImagePredictResponse> {
    const results = await this.#rows(request, field, (output, row) =>
      this.modelType === 'image_embedding' ? { embedding: this.#vectorOf(output, row, request.normalize ?? this.#normalize) } : { labels: this.#labelsOf(output, row, request.topK) },
    );
    return { results, model_id: this.modelId, ...(request.metadata !== undefined ? { metadata: request.metadata } : {}) } as ImagePredictResponse;
  }

  /**
   * /v1/embeddings of an image_embedding model: one vector per image; with `dimensions` the first n components, then
   * always unit length (Matryoshka, as for text); else as the model normalises.
   */
  async embedImages(images: Uint8Array[], options: { dimensions?: number; field?: string } = {}): Promise<Float32Array[]> {
    if (this.modelType !== 'image_embedding') throw new InputError(`this server serves a ${this.modelType} model, which gives no embeddings`);
    const { dimensions } = options;
    return this.#rows({ images }, options.field ?? 'input', (output, row) => {
      const width = output.dims[1];
      if (dimensions !== undefined && dimensions > width) throw new InputError(`dimensions ${dimensions} is more than the model's ${width}`, { field: 'dimensions' });
      const vector = this.#vectorOf(output, row, false).slice(0, dimensions ?? width);
      return dimensions !== undefined || this.#normalize ? normalizeInPlace(vector) : vector;
    });
  }

  /** One request's images decoded, run in merged batches, and each row shaped by `shape`. */
  async #rows<R>(request: Pick<ImageRequest, 'images'>, field: string, shape: (output: Tensor, row: number) => R): Promise<R[]> {
    if (this.#closing) throw new InternalError('the model is shutting down; the request was not run');
    const running = (async () => {
      const { images } = request;
      checkImageCount(images.length, this.#maxInputs, field);
      const recorder = requestPhases.getStore();
      const decoding = epochMs();
      const pixels = await Promise.all(images.map((bytes, index) => this.#runner.preprocess(bytes, index, field)));
      const submitted = epochMs();
      recorder?.phase('decode and preprocess', decoding, submitted, { inputs: images.length });
      const placed = await this.#scheduler.submit(pixels.map((p) => ({ ids: ONE, pixels: p })));
      const timing = placed.length > 0 ? runTimingOf(placed[0].output) : undefined;
      if (recorder && timing) {
        recorder.phase('queue wait', submitted, Math.max(submitted, timing.dispatchedMs), { rows: placed.length });
        recorder.phase('onnxruntime run', timing.ranFromMs, timing.ranToMs, { 'batch.rows': timing.rows });
      }
      return placed.map(({ output, row }) => shape(output, row));
    })();
    this.#inFlight.add(running);
    try {
      return await running;
    } finally {
      this.#inFlight.delete(running);
    }
  }

  /** A row's vector, a copy; scaled to unit length when asked. */
  #vectorOf(vectors: Tensor, row: number, unitLength: boolean): Float32Array {
    const width = vectors.dims[1];
    const vector = vectors.data.slice(row * width, (row + 1) * width);
    if (unitLength) normalizeInPlace(vector);
    if (!vector.every(Number.isFinite)) throw new InternalError("the model's vector holds a value that is not a number JSON can carry");
    return vector;
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#scheduler.hurry();
      await Promise.allSettled([...this.#inFlight]);
      await this.#scheduler.close();
      await this.#runner.close();
    })();
    return this.#closing;
  }

  /** Softmax of the row's logits; labels by score, best first (ties by index), the first top_k. */
  #labelsOf(probabilities: Tensor, row: number, topK: number | undefined): LabelScore[] {
    const width = probabilities.dims[1];
    const scores = probabilities.data.subarray(row * width, (row + 1) * width);
    const order = Array.from(scores.keys()).sort((a, b) => scores[b] - scores[a] || a - b);
    const labels = order.slice(0, topK ?? width).map((index) => ({ label: this.labels[index], score: scores[index] }));
    for (const { score } of labels) if (!Number.isFinite(score)) throw new InternalError(`the model's scores hold ${score}, which is not a number JSON can carry`);
    return labels;
  }

  /**
   * One merged run: the rows' pixels stacked into one batch per preprocessed size (one for a fixed size), run, and
   * the softmax of the logits put back in row order.
   */
  async #runBatch(rows: readonly ImageRow[], context: RunContext): Promise<Tensor> {
    const dispatchedMs = epochMs();
    try {
      const groups = new Map<string, number[]>();
      rows.forEach((row, index) => {
        const key = row.pixels.dims.slice(1).join('x');
        groups.set(key, [...(groups.get(key) ?? []), index]);
      });
      let out: Float32Array | null = null;
      let width = 0;
      for (const indices of groups.values()) {
        const [, channels, height, imageWidth] = rows[indices[0]].pixels.dims;
        const plane = channels * height * imageWidth;
        const data = new Float32Array(indices.length * plane);
        indices.forEach((index, k) => data.set(rows[index].pixels.data, k * plane));
        const raw = await this.#runner.run({ dims: [indices.length, channels, height, imageWidth], data }, { alone: context.alone });
        // a classifier's probabilities, or an embedding model's vectors [rows, dim]
        const scores = this.modelType === 'image_embedding' ? imageVectors(raw, this.#pooling) : softmax(raw, -1);
        width = scores.dims[1];
        out ??= new Float32Array(rows.length * width);
        indices.forEach((index, k) => out!.set(scores.data.subarray(k * width, (k + 1) * width), index * width));
      }
      const output = new Tensor(out!, [rows.length, width]);
      // timed here, around the thread's run and its messages (the text workers time onnxruntime on their thread)
      setRunTiming(output, { dispatchedMs, ranFromMs: dispatchedMs, ranToMs: epochMs(), rows: rows.length, sequenceLength: 1 });
      return output;
    } catch (error) {
      if (isEncoderError(error)) throw error;
      throw new InternalError(`running the model failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
    }
  }
}

/** Without threads: the session and the codecs on this thread. */
async function inlineRunner(load: ImageModelLoad): Promise<ImageRunner> {
  const [model, wasm] = await Promise.all([ImageOnnxModel.load(load.weights, load.expected, load.options), codecsOf(load.codecFiles)]);
  return {
    preprocess: (bytes, index, field) => preprocessImage(bytes, load.preprocessor, { index, field, limits: load.limits, wasm }),
    run: (pixels) => model.run(pixels),
    close: () => model.close(),
  };
}
