import type { BatchRunListener, BatchStats } from './batch-scheduler.ts';
import type { ModelType } from './config.ts';
import { InternalError } from './errors.ts';
import { parseJsonBytes } from '../shared/json-bytes.ts';
import type { BatchingPredictor } from './predictor.ts';
import type { DecodeRequest, EmbedRequest, EmbedResult, ModelMetadata, PredictResponse, RerankRequest, RerankResult, ServingLimits, TokenizeRequest, TokenSpan } from './schemas.ts';

/**
 * Stands in for a pipeline that is still loading, so that `serve` builds its front ends meanwhile: until a request
 * comes they ask a predictor only for its model's id and type, which the package already says, and they listen only
 * once the pipeline is bound. Before that every other call is an InternalError, but for observers of runs, which are
 * kept and handed to the pipeline when it is bound (serve's metrics subscribe while the model loads).
 */
export class LatePredictor implements BatchingPredictor {
  readonly modelId: string;
  readonly modelType: ModelType;
  #pipeline: BatchingPredictor | undefined;
  /** Observers of runs registered before the pipeline was bound, with the function that stops each once bound. */
  readonly #observers = new Map<BatchRunListener, () => void>();

  constructor(modelId: string, modelType: ModelType) {
    this.modelId = modelId;
    this.modelType = modelType;
  }

  /** The loaded pipeline, which must serve the same model. */
  bind(pipeline: BatchingPredictor): void {
    if (pipeline.modelId !== this.modelId || pipeline.modelType !== this.modelType) {
      throw new InternalError(`bound to ${pipeline.modelId} (${pipeline.modelType}), expected ${this.modelId} (${this.modelType})`);
    }
    this.#pipeline = pipeline;
    for (const listener of this.#observers.keys()) this.#observers.set(listener, pipeline.observeBatches(listener));
  }

  metadata(): ModelMetadata {
    return this.#bound().metadata();
  }

  async predict(body: unknown): Promise<PredictResponse> {
    return this.#bound().predict(body);
  }

  async embed(request: EmbedRequest): Promise<EmbedResult> {
    return this.#bound().embed(request);
  }

  async rerank(request: RerankRequest): Promise<RerankResult> {
    return this.#bound().rerank(request);
  }

  async tokenize(request: TokenizeRequest): Promise<TokenSpan[][]> {
    return this.#bound().tokenize(request);
  }

  async decode(request: DecodeRequest): Promise<string[]> {
    return this.#bound().decode(request);
  }

  servingLimits(): ServingLimits {
    return this.#bound().servingLimits();
  }

  batchingStats(): BatchStats {
    return this.#bound().batchingStats();
  }

  async parseJson(bytes: Uint8Array): Promise<unknown> {
    const pipeline = this.#bound();
    if (pipeline.parseJson) return pipeline.parseJson(bytes);
    return parseJsonBytes(bytes);
  }

  observeBatches(listener: BatchRunListener): () => void {
    if (this.#pipeline) return this.#pipeline.observeBatches(listener);
    this.#observers.set(listener, () => {});
    return () => {
      this.#observers.get(listener)?.();
      this.#observers.delete(listener);
    };
  }

  #bound(): BatchingPredictor {
    if (this.#pipeline === undefined) throw new InternalError(`the model ${this.modelId} has not loaded yet`);
    return this.#pipeline;
  }
}
