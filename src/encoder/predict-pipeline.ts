import { attentionMaskOf, needsAttentionMask, postprocessBatch, type PostprocessSettings } from './batch-postprocess.ts';
import {
  BatchScheduler,
  resolveBatchSettings,
  type BatchRunListener,
  type BatchSchedulerOptions,
  type BatchSettings,
  type BatchStats,
  type RunContext,
  type ScheduledRow,
} from './batch-scheduler.ts';
import { POOLED_MODEL_TYPES, type ModelType, type Pooling } from './config.ts';
import { ConfigError, InputError, InternalError, isEncoderError } from './errors.ts';
import { labelsOf, type ModelPackage } from './model-package.ts';
import { InferenceWorkers } from './inference-workers.ts';
import { OnnxModel, type ModelSignature, type SessionSettings } from './onnx-model.ts';
import { epochMs, requestPhases, setRunTiming } from './request-phases.ts';
import { DEFAULT_INLINE_TOKENIZE_UNITS, requestLimitsOf, type PipelineOptions, type RequestLimits } from './pipeline-options.ts';
import type { BatchingPredictor } from './predictor.ts';
import { mapInSlices, runInPieces, tokenizeRequest, tokensOf, tooManyTokens, type TokenizeWork } from './request-pieces.ts';
import { normalizeInPlace, poolRow } from './pooling.ts';
import { parsePredictRequest } from './requests.ts';
import {
  embeddingResult,
  NonFiniteOutputError,
  requireFinite,
  sentenceEmbeddingResult,
  sequenceClassificationResult,
  tokenClassificationResult,
} from './results.ts';
import type {
  EmbeddingRequest,
  EmbedRequest,
  EmbedResult,
  ModelMetadata,
  PredictRequest,
  PredictResponse,
  DecodeRequest,
  RerankRequest,
  RerankResult,
  SentenceEmbeddingRequest,
  ServingLimits,
  TokenizeRequest,
  TokenSpan,
  TextOrPair,
} from './schemas.ts';
import { parseJsonBytes } from '../shared/json-bytes.ts';
import { releaseMemorySoon } from '../shared/release-memory.ts';
import { traceStartup } from '../shared/startup-trace.ts';
import { softmax, type Tensor } from './tensor.ts';
import { EncoderTokenizer, type Encoding, type PaddedBatch } from './tokenizer/index.ts';
import { TokenizerWorkers } from './tokenizer-workers.ts';
import { checkTransform, DEFAULT_CHECK_TIMEOUT_MS, LuaTransform } from './transform/index.ts';
import { textOf, unitsOfText } from './large-texts.ts';
import { LARGE_WORK_UNITS, unitsOf } from './work-size.ts';

/**
 * An untruncated text (tokenize) may hold this many code points per token of the model's length: text-embeddings-
 * inference's bound (MAX_CHAR_MULTIPLIER), which keeps the tokenizing of one text short.
 */
const MAX_CHARS_PER_TOKEN = 250;

/** What runs the model: a session on this thread, or sessions in worker threads. */
interface ModelRunner {
  readonly signature: ModelSignature;
  readonly settings: SessionSettings;
  run(batch: PaddedBatch): Promise<Tensor>;
  close(): Promise<void>;
}

/** The Lua transform's time limit per batch, as for the build-time check of the script. */
export const DEFAULT_TRANSFORM_TIMEOUT_MS = DEFAULT_CHECK_TIMEOUT_MS;

/**
 * The one path from a request body to spec 2's response: validate, tokenize, run onnxruntime, apply the Lua
 * transform, shape the result. Every front end (CLI, HTTP, gRPC, MCP) calls `predict`, concurrently: the sequences
 * of all waiting requests are merged into onnxruntime runs by one BatchScheduler (design decision 6). Validation
 * and tokenization happen before a request joins the queue, shaping after its rows come back; only padding,
 * onnxruntime and the Lua transform run per merged batch.
 */
export class PredictPipeline implements BatchingPredictor {
  readonly modelId: string;
  readonly modelType: ModelType;
  readonly tokenizer: EncoderTokenizer;
  /** Things the user should know about how the model was bound (e.g. a fallback output). */
  readonly notes: readonly string[];
  readonly #model: ModelRunner;
  /** The transform when it runs on this thread (no workers); inference workers hold their own. */
  readonly #transform: LuaTransform | null;
  readonly #hasTransform: boolean;
  readonly #labels: ReadonlyMap<number, string>;
  readonly #pooling: Pooling;
  readonly #quantization: ModelPackage['quantization'];
  readonly #normalize: boolean;
  /** Index of the label whose probability is the rerank score; -1: the last one. */
  readonly #rerankIndex: number;
  readonly #scheduler: BatchScheduler<Encoding, Tensor>;
  readonly #limits: RequestLimits;
  readonly #transformTimeoutMs: number;
  /** Where large requests are tokenized; null: on this thread, in slices. */
  readonly #tokenizerThreads: TokenizerWorkers | null;
  readonly #inlineTokenizeUnits: number;
  /** Softmax of a batch output, computed by the first request shaped from it and shared by the others. */
  readonly #scores = new WeakMap<Tensor, Tensor>();
  #closing: Promise<void> | undefined;
  /** Requests taken and not answered yet: close() lets them finish. */
  readonly #inFlight = new Set<Promise<unknown>>();

  private constructor(fields: {
    pkg: ModelPackage;
    tokenizer: EncoderTokenizer;
    model: ModelRunner;
    transform: LuaTransform | null;
    batching: BatchSchedulerOptions;
    limits: RequestLimits;
    transformTimeoutMs: number;
    tokenizerThreads: TokenizerWorkers | null;
    inlineTokenizeUnits: number;
  }) {
    this.modelId = fields.pkg.name;
    this.modelType = fields.pkg.modelType;
    this.tokenizer = fields.tokenizer;
    this.#model = fields.model;
    this.#transform = fields.transform;
    this.#hasTransform = fields.pkg.transform !== null;
    this.#labels = labelsOf(fields.pkg.modelConfig);
    this.#pooling = fields.pkg.pooling;
    this.#quantization = fields.pkg.quantization;
    this.#normalize = fields.pkg.normalize;
    this.#rerankIndex = rerankIndexOf(fields.pkg, this.#labels);
    this.notes = fields.model.signature.note ? [fields.model.signature.note] : [];
    const model = fields.model;
    this.#scheduler = new BatchScheduler((rows, context) => this.#runBatch(rows, context), {
      ...fields.batching,
      soloAvailable: model instanceof InferenceWorkers ? () => model.soloReady : undefined,
    });
    this.#limits = fields.limits;
    this.#transformTimeoutMs = fields.transformTimeoutMs;
    this.#tokenizerThreads = fields.tokenizerThreads;
    this.#inlineTokenizeUnits = fields.inlineTokenizeUnits;
  }

  /** Loads tokenizer, model and transform; every problem is a ConfigError. */
  static async load(pkg: ModelPackage, options: PipelineOptions = {}): Promise<PredictPipeline> {
    const workers = options.workers ?? 0;
    if (!(Number.isInteger(workers) && workers >= 0)) throw new ConfigError(`workers must be an integer >= 0, got ${String(options.workers)}`);
    const worker = options.inferenceWorker;
    if (workers > 0 && worker === undefined) throw new ConfigError('workers > 0 needs inferenceWorker: how to start the worker script');
    const batching: BatchSchedulerOptions = {
      // each worker runs one batch at a time; more runs in flight only wait in its queue
      maxRunsInFlight: Math.max(1, workers),
      ...options.schedulerTuning,
      maxBatchTokens: options.maxBatchTokens,
      maxWaitMs: options.maxWaitMs,
      maxBatchSequences: options.maxBatchSequences,
    };
    resolveBatchSettings(batching); // a bad setting is a ConfigError before the model loads
    const limits = requestLimitsOf(options);
    const tokenizerThreadCount = workers > 0 ? (options.tokenizerThreads ?? 1) : 0;
    if (!(Number.isInteger(tokenizerThreadCount) && tokenizerThreadCount >= 0)) {
      throw new ConfigError(`tokenizerThreads must be an integer >= 0, got ${String(options.tokenizerThreads)}`);
    }
    const inlineTokenizeUnits = options.inlineTokenizeUnits ?? DEFAULT_INLINE_TOKENIZE_UNITS;
    const transformTimeoutMs = options.transformTimeoutMs ?? DEFAULT_TRANSFORM_TIMEOUT_MS;
    if (!(transformTimeoutMs > 0)) throw new ConfigError(`transformTimeoutMs must be > 0, got ${options.transformTimeoutMs}`);
    rerankIndexOf(pkg, labelsOf(pkg.modelConfig)); // an unknown rerank_label is a ConfigError before the model loads
    const modelOptions = { threads: options.threads, sessionOptions: options.sessionOptions, weightsDataDir: pkg.weightsDataDir };
    const transformSettings = { libs: pkg.luaLibs, modelType: pkg.modelType, wasmPath: options.luaWasmPath, memoryLimitBytes: options.transformMemoryLimitBytes };
    // With workers, each worker runs the transform (in a Lua state of its own) and the pooling after its session, so
    // that a script running up to its time limit holds that worker, not the event loop (batch-postprocess.ts).
    const postprocess: PostprocessSettings = {
      pooling: pkg.pooling,
      transform: pkg.transform === null ? null : { script: pkg.transform, options: { ...transformSettings, timeoutMs: transformTimeoutMs } },
    };
    // Workers create their sessions on their own threads while this one reads the tokenizer.
    const loading: Promise<ModelRunner> =
      workers === 0
        ? OnnxModel.load(pkg.weights, pkg.modelType, modelOptions)
        : InferenceWorkers.load(pkg.weights, pkg.modelType, { ...modelOptions, workers, soloThreads: options.soloThreads, worker: worker!, postprocess });
    // started beside the model's workers; they load the tokenizer while this thread does the same
    const tokenizerThreads = tokenizerThreadCount > 0 ? new TokenizerWorkers(worker!, { tokenizerJson: pkg.tokenizerJson, tokenizerConfig: pkg.tokenizerConfig, maxLength: pkg.maxLength?.tokens, truncation: pkg.truncation }, tokenizerThreadCount) : null;
    let tokenizer: EncoderTokenizer;
    try {
      tokenizer = EncoderTokenizer.fromJson(pkg.tokenizerJson, pkg.tokenizerConfig, { maxLength: pkg.maxLength?.tokens, truncation: pkg.truncation });
      traceStartup('tokenizer ready');
    } catch (error) {
      await Promise.all([loading.then((model) => model.close(), () => {}), tokenizerThreads?.close()]);
      throw error;
    }
    let model: ModelRunner;
    try {
      [model] = await Promise.all([loading, tokenizerThreads?.ready()]);
    } catch (error) {
      await Promise.all([loading.then((loaded) => loaded.close(), () => {}), tokenizerThreads?.close()]);
      throw error;
    }
    traceStartup('onnxruntime session ready');
    let transform: LuaTransform | null = null;
    try {
      if (pkg.transform !== null) {
        // Run it once on a small output of the model's shape, so a broken script fails at load, not per request.
        await checkTransform(pkg.transform, { ...transformSettings, outputDims: sampleOutputDims(model.signature, pkg) });
        // without workers it runs on this thread (#runBatch)
        if (workers === 0) transform = await LuaTransform.create(pkg.transform, { ...transformSettings, timeoutMs: transformTimeoutMs });
      }
    } catch (error) {
      await Promise.all([model.close(), tokenizerThreads?.close()]);
      throw error;
    }
    // with workers, each worker traces its own transform's readiness
    if (pkg.transform !== null) traceStartup(transform ? 'transform ready' : 'transform checked');
    return new PredictPipeline({ pkg, tokenizer, model, transform, batching, limits, transformTimeoutMs, tokenizerThreads, inlineTokenizeUnits });
  }

  /** How runs are formed (for the server banner): token budget, wait bound and the other scheduler settings. */
  get batchingSettings(): Readonly<BatchSettings> {
    return this.#scheduler.settings;
  }

  /** Most tokens one request may hold (Infinity: no limit). */
  get maxRequestTokens(): number {
    return this.#limits.tokens;
  }

  /** Most inputs one request may hold (Infinity: no limit). */
  get maxRequestInputs(): number {
    return this.#limits.inputs;
  }

  /** The Lua transform's time limit per batch, in ms. */
  get transformTimeoutMs(): number {
    return this.#transformTimeoutMs;
  }

  /**
   * Resolves once every inference worker asked for runs (the pipeline serves from its first one on; the others join as
   * they load), at once without workers: for tests and benchmarks that need them all.
   */
  get workersJoined(): Promise<void> {
    return this.#model instanceof InferenceWorkers ? this.#model.joined : Promise.resolve();
  }

  /** Batches run on the solo session so far (inference-workers.ts, soloSessionThreads); 0 without one. */
  get soloRuns(): number {
    return this.#model instanceof InferenceWorkers ? this.#model.soloRuns : 0;
  }

  /** The solo session's options, or null when there is none (it may still be loading, or have failed to: soloLoaded). */
  get soloSessionSettings(): SessionSettings | null {
    return this.#model instanceof InferenceWorkers ? this.#model.soloSettings : null;
  }

  /** Resolves true once the solo session has loaded; false when there is none (or it did not load). */
  get soloLoaded(): Promise<boolean> {
    return this.#model instanceof InferenceWorkers ? this.#model.soloLoaded : Promise.resolve(false);
  }

  batchingStats(): BatchStats {
    return this.#scheduler.stats();
  }

  async parseJson(bytes: Uint8Array): Promise<unknown> {
    if (this.#tokenizerThreads === null || this.#closing) return parseJsonBytes(bytes);
    return this.#tokenizerThreads.parseJson(bytes);
  }

  observeBatches(listener: BatchRunListener): () => void {
    return this.#scheduler.observe(listener);
  }

  /** How the model was bound: inputs, and the output read. */
  get signature(): ModelSignature {
    return this.#model.signature;
  }

  /** The onnxruntime options the (first) session was created with: provider, graph optimisations, threads. */
  get sessionSettings(): SessionSettings {
    return this.#model.settings;
  }

  metadata(): ModelMetadata {
    const metadata: ModelMetadata = { model_id: this.modelId, model_type: this.modelType };
    if (POOLED_MODEL_TYPES.includes(this.modelType)) {
      metadata.pooling = this.#pooling;
      metadata.normalize = this.#normalize;
    } else {
      metadata.id2label = Object.fromEntries([...this.#labels].map(([index, label]) => [String(index), label]));
    }
    if (this.#quantization !== 'none') metadata.quantization = this.#quantization;
    return metadata;
  }

  /** Validates the body (InputError) and returns the model type's response; runtime failures are InternalError. */
  async predict(body: unknown): Promise<PredictResponse> {
    const request = parsePredictRequest(this.modelType, body);
    const inputs = request.inputs as readonly TextOrPair[];
    const perToken = this.modelType === 'embedding' || this.modelType === 'token_classification';
    const results = await this.#request(
      {
        field: 'inputs',
        count: inputs.length,
        units: unitsOf(inputs.flat()),
        job: () => ({
          texts: inputs.map((input) => (typeof input === 'string' ? input : input[0])),
          pairs: inputs.some((input) => typeof input !== 'string') ? inputs.map((input) => (typeof input === 'string' ? null : input[1])) : null,
          tokens: perToken,
        }),
        encodeHere: (index) => {
          const input = inputs[index];
          return typeof input === 'string' ? this.tokenizer.encode(textOf(input)) : this.tokenizer.encodePair(textOf(input[0]), textOf(input[1]));
        },
        maxTokens: perToken ? this.#limits.tokenResults : this.#limits.tokens,
      },
      ({ output, row }, encoding, index) => this.#finite(index, () => this.#shape(request, output, row, encoding)),
    );
    const response = { results: results.shaped, model_id: this.modelId } as PredictResponse;
    if (request.metadata !== undefined) response.metadata = request.metadata;
    return response;
  }

  /**
   * One vector per input, pooled with the model's pooling (a sentence_embedding batch output is pooled already), then
   * scaled to unit length when the model normalises. With `dimensions`, the first n components, always re-normalised.
   */
  async embed(request: EmbedRequest): Promise<EmbedResult> {
    if (!POOLED_MODEL_TYPES.includes(this.modelType)) {
      throw new InputError(`this server serves a ${this.modelType} model, which gives no embeddings`);
    }
    const { dimensions, inputs } = request;
    const unitLength = request.normalize ?? (dimensions !== undefined || this.#normalize);
    if (dimensions !== undefined && !(Number.isInteger(dimensions) && dimensions >= 1)) {
      throw new InputError(`dimensions must be a positive integer, got ${String(dimensions)}`, { field: 'dimensions' });
    }
    const width = this.#model.signature.output.shape.at(-1);
    if (dimensions !== undefined && typeof width === 'number' && dimensions > width) throw tooManyDimensions(dimensions, width);
    const texts = inputs.every((input) => typeof input === 'string') ? (inputs as string[]) : null;
    const { shaped: vectors, tokens } = await this.#request(
      {
        field: 'input',
        count: inputs.length,
        units: texts ? unitsOf(texts) : 0,
        job: texts ? () => ({ texts, pairs: null, tokens: false }) : null,
        encodeHere: (index) => {
          const input = inputs[index];
          return typeof input === 'string' ? this.tokenizer.encode(textOf(input)) : this.#encodeIds(input, index);
        },
        maxTokens: this.#limits.tokens,
      },
      ({ output, row }, encoding, index) =>
        this.#finite(index, () => {
          let vector =
            this.modelType === 'sentence_embedding'
              ? output.data.slice(row * output.dims[1], (row + 1) * output.dims[1])
              : poolRow(output, row, Math.min(encoding.ids.length, output.dims[1]), this.#pooling);
          if (dimensions !== undefined) {
            if (dimensions > vector.length) throw tooManyDimensions(dimensions, vector.length);
            vector = vector.slice(0, dimensions);
          }
          if (unitLength) normalizeInPlace(vector);
          return requireFinite(vector);
        }),
    );
    return { model_id: this.modelId, vectors, promptTokens: tokens };
  }

  /**
   * Each document tokenized as the pair (query, document); its score is the sigmoid of a one-logit model's logit, or
   * the softmax probability of the rerank label (default: the last label); with `raw`, that logit itself.
   */
  async rerank(request: RerankRequest): Promise<RerankResult> {
    if (this.modelType !== 'sequence_classification') {
      throw new InputError(`this server serves a ${this.modelType} model; rerank needs a sequence_classification (cross-encoder) model`);
    }
    const { query, documents, raw = false } = request;
    const { shaped: scores, tokens } = await this.#request(
      {
        field: 'documents',
        count: documents.length,
        units: unitsOf([query]) * documents.length + unitsOf(documents),
        job: () => ({ texts: documents.map(() => query), pairs: documents, tokens: false }),
        encodeHere: (index) => this.tokenizer.encodePair(textOf(query), textOf(documents[index])),
        maxTokens: this.#limits.tokens,
      },
      ({ output, row }, _encoding, index) =>
        this.#finite(index, () => {
          const width = output.dims[1];
          const logits = output.data.subarray(row * width, (row + 1) * width);
          const label = width === 1 ? 0 : this.#rerankIndex < 0 ? width - 1 : this.#rerankIndex;
          const score = raw ? logits[label] : width === 1 ? 1 / (1 + Math.exp(-logits[0])) : this.#scoresOf(output).data[row * width + label];
          return requireFinite(Float32Array.of(score))[0];
        }),
    );
    return { model_id: this.modelId, scores, promptTokens: tokens };
  }

  /**
   * Each text's tokens, not truncated (what the tokenizer makes of the whole text), with or without the special
   * tokens; tokenized here in slices. A text is refused beyond MAX_CHARS_PER_TOKEN code points per token of the
   * model's length (TEI's bound on untruncated tokenizing), a request beyond the limits of inputs and tokens.
   */
  async tokenize(request: TokenizeRequest): Promise<TokenSpan[][]> {
    const { inputs, addSpecialTokens } = request;
    if (inputs.length > this.#limits.inputs) {
      throw new InputError(`the request holds ${inputs.length} inputs, more than the limit of ${this.#limits.inputs} inputs per request; send fewer inputs per request`, { field: 'inputs' });
    }
    const maxChars = this.tokenizer.maxLength * MAX_CHARS_PER_TOKEN;
    // a code point is one or two UTF-16 units: a text of more than twice the bound is refused without reading it
    inputs.forEach((text, index) => {
      const units = unitsOfText(text);
      const chars = units > 2 * maxChars ? Math.ceil(units / 2) : units > maxChars ? [...textOf(text)].length : 0;
      if (chars > maxChars) throw new InputError(`inputs[${index}] holds ${units > 2 * maxChars ? 'more than ' : ''}${chars} characters, more than ${maxChars}`, { field: 'inputs' });
    });
    let tokens = 0;
    return mapInSlices(inputs, (text) => {
      const encoding = this.tokenizer.encodeWith(textOf(text), { truncation: null, padding: null });
      tokens += encoding.ids.length;
      if (tokens > this.#limits.tokens) throw tooManyTokens(`more than ${this.#limits.tokens} tokens`, 'inputs', this.#limits.tokens);
      const spans: TokenSpan[] = [];
      encoding.ids.forEach((id, k) => {
        const special = encoding.specialTokensMask[k] === 1;
        if (special && !addSpecialTokens) return;
        const [start, end] = encoding.offsets[k];
        spans.push({ id, token: encoding.tokens[k], special, start: special ? null : start, end: special ? null : end });
      });
      return spans;
    });
  }

  async decode(request: DecodeRequest): Promise<string[]> {
    if (request.ids.length > this.#limits.inputs) {
      throw new InputError(`the request holds ${request.ids.length} inputs, more than the limit of ${this.#limits.inputs} inputs per request; send fewer inputs per request`, { field: 'ids' });
    }
    return mapInSlices(request.ids, (ids) => this.tokenizer.decode(ids, request.skipSpecialTokens));
  }

  servingLimits(): ServingLimits {
    const { maxBatchTokens, maxBatchSequences } = this.#scheduler.settings;
    return {
      maxInputLength: this.tokenizer.maxLength,
      maxRequestInputs: Number.isFinite(this.#limits.inputs) ? this.#limits.inputs : Number.MAX_SAFE_INTEGER,
      maxBatchTokens,
      maxBatchSequences: Number.isFinite(maxBatchSequences) ? maxBatchSequences : null,
      tokenizerThreads: this.#tokenizerThreads?.size ?? 0,
    };
  }

  /**
   * Stops taking requests, lets every request already taken finish (it was accepted: a graceful shutdown answers it),
   * waits for the runs, then releases the transform, the tokenizer threads and the onnxruntime session. Later
   * predicts are InternalErrors.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#scheduler.hurry();
      await Promise.allSettled([...this.#inFlight]);
      await this.#scheduler.close();
      this.#transform?.close();
      await Promise.all([this.#model.close(), this.#tokenizerThreads?.close()]);
    })();
    return this.#closing;
  }

  /** One request: tokenize its inputs (tokenizeRequest), run them in pieces (runInPieces), shape each row. */
  async #request<R>(work: TokenizeWork, shape: (placed: ScheduledRow<Tensor>, encoding: Encoding, index: number) => R): Promise<{ shaped: R[]; tokens: number }> {
    if (this.#closing) throw new InternalError('the model is shutting down; the request was not run');
    const running = (async () => {
      const tokenizing = requestPhases.getStore() ? epochMs() : 0;
      const encodings = await tokenizeRequest(work, { limits: this.#limits, threads: this.#tokenizerThreads, inlineUnits: this.#inlineTokenizeUnits });
      if (tokenizing) requestPhases.getStore()?.phase('tokenize', tokenizing, epochMs(), { inputs: encodings.length, tokens: tokensOf(encodings) });
      const shaped = await runInPieces(this.#scheduler, encodings, (placed, index) => shape(placed, encodings[index], index));
      return { shaped, tokens: tokensOf(encodings) };
    })();
    this.#inFlight.add(running);
    try {
      return await running;
    } finally {
      this.#inFlight.delete(running);
      // what a large request left here goes back to the system once the large work has settled: with a tokenizer
      // thread, only the young wrappers of its held bytes (large-texts.ts); without one, its strings
      if (work.units > LARGE_WORK_UNITS) releaseMemorySoon(this.#tokenizerThreads === null ? 'full' : 'young');
    }
  }

  /** Token ids given as they are: every id must be in the vocabulary, and the sequence no longer than the model takes. */
  #encodeIds(ids: readonly number[], index: number): Encoding {
    if (ids.length === 0) throw new InputError(`input[${index}] is an empty list of token ids`, { field: 'input' });
    if (ids.length > this.tokenizer.maxLength) {
      throw new InputError(`input[${index}] holds ${ids.length} token ids, more than the model's ${this.tokenizer.maxLength}`, { field: 'input' });
    }
    const tokens = ids.map((id, position) => {
      const token = Number.isInteger(id) ? this.tokenizer.idToToken(id) : undefined;
      if (token === undefined) {
        throw new InputError(`input[${index}][${position}]: token id ${String(id)} is not in the model's vocabulary`, { field: 'input' });
      }
      return token;
    });
    return {
      ids: [...ids],
      tokens,
      offsets: ids.map(() => [0, 0] as [number, number]),
      typeIds: ids.map(() => 0),
      specialTokensMask: ids.map(() => 0),
      attentionMask: ids.map(() => 1),
    };
  }

  /** Runs `shape` for input `index`, turning a value JSON cannot carry into an InternalError that names the input. */
  #finite<T>(index: number, shape: () => T): T {
    try {
      return shape();
    } catch (error) {
      if (!(error instanceof NonFiniteOutputError)) throw error;
      const after = this.#hasTransform ? ' (after the transform)' : '';
      throw new InternalError(`the model output${after} of input ${index} holds ${error.value}, which is not a number JSON can carry`, { cause: error });
    }
  }

  /**
   * One merged batch: pad, run onnxruntime, apply the transform to the whole batch (transforms are row-wise). A
   * sentence_embedding batch leaves pooled, [batch, hidden], unless the transform pooled it already. Inference workers
   * run the transform and the pooling beside onnxruntime; without workers they run here (batch-postprocess.ts).
   */
  async #runBatch(rows: readonly Encoding[], context: RunContext): Promise<Tensor> {
    try {
      const batch = this.tokenizer.pad(rows as Encoding[]);
      if (this.#model instanceof InferenceWorkers) return await this.#model.run(batch, { alone: context.alone });
      const steps = { modelType: this.modelType, pooling: this.#pooling, transform: this.#transform };
      const mask = needsAttentionMask(steps) ? attentionMaskOf(batch) : null;
      const ranFromMs = epochMs();
      const raw = await this.#model.run(batch);
      const ranToMs = epochMs();
      const output = postprocessBatch(raw, mask, steps);
      setRunTiming(output, { dispatchedMs: ranFromMs, ranFromMs, ranToMs, rows: batch.batchSize, sequenceLength: batch.sequenceLength });
      return output;
    } catch (error) {
      if (isEncoderError(error)) throw error;
      throw new InternalError(`running the model failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
    }
  }

  /** One input's result from its row of a batch output; runs per request, after the scheduler handed the rows back. */
  #shape(request: PredictRequest, output: Tensor, row: number, encoding: Encoding): PredictResponse['results'][number] {
    switch (this.modelType) {
      case 'embedding':
        return embeddingResult(output, row, encoding, (request as EmbeddingRequest).normalize ?? false);
      case 'sentence_embedding':
        return sentenceEmbeddingResult(output, row, (request as SentenceEmbeddingRequest).normalize ?? this.#normalize);
      case 'sequence_classification':
        // predicted_label only when the model has label mappings at all (spec 2)
        return sequenceClassificationResult(output, this.#scoresOf(output), row, this.#labels.size > 0 ? this.#labels : null);
      case 'token_classification':
        return tokenClassificationResult(output, this.#scoresOf(output), row, encoding, this.#labels);
    }
  }

  #scoresOf(output: Tensor): Tensor {
    let scores = this.#scores.get(output);
    if (!scores) {
      scores = softmax(output, -1);
      this.#scores.set(output, scores);
    }
    return scores;
  }
}

function tooManyDimensions(dimensions: number, width: number): InputError {
  return new InputError(`dimensions ${dimensions} is more than the model's ${width}`, { field: 'dimensions' });
}

/** The label index of `rerank_label`, -1 for the default (the last label); an unknown label is a ConfigError. */
function rerankIndexOf(pkg: ModelPackage, labels: ReadonlyMap<number, string>): number {
  if (pkg.rerankLabel === null) return -1;
  const found = [...labels].find(([, label]) => label === pkg.rerankLabel);
  if (found === undefined) {
    throw new ConfigError(`rerank_label "${pkg.rerankLabel}" is not a label of the model; its labels: ${[...labels.values()].join(', ') || '(none in config.json id2label)'}`);
  }
  return found[0];
}

/** A small output of the model's shape for checking a transform: 2 sequences of 3 tokens. */
function sampleOutputDims(signature: ModelSignature, pkg: ModelPackage): number[] {
  const last = signature.output.shape.at(-1);
  const width = typeof last === 'number' && last > 0 ? last : Math.max(labelsOf(pkg.modelConfig).size, 2);
  return pkg.modelType === 'sequence_classification' ? [2, width] : [2, 3, width];
}
