import type { ModelType } from './config.ts';
import { InternalError } from './errors.ts';
import type { Predictor } from './predict-pipeline.ts';
import type { EmbedRequest, EmbedResult, ModelMetadata, PredictResponse, RerankRequest, RerankResult } from './schemas.ts';

/**
 * Stands in for a pipeline that is still loading, so that `serve` builds its front ends meanwhile: until a request
 * comes they ask a predictor only for its model's id and type, which the package already says, and they listen only
 * once the pipeline is bound. Before that every other call is an InternalError.
 */
export class LatePredictor implements Predictor {
  readonly modelId: string;
  readonly modelType: ModelType;
  #pipeline: Predictor | undefined;

  constructor(modelId: string, modelType: ModelType) {
    this.modelId = modelId;
    this.modelType = modelType;
  }

  /** The loaded pipeline, which must serve the same model. */
  bind(pipeline: Predictor): void {
    if (pipeline.modelId !== this.modelId || pipeline.modelType !== this.modelType) {
      throw new InternalError(`bound to ${pipeline.modelId} (${pipeline.modelType}), expected ${this.modelId} (${this.modelType})`);
    }
    this.#pipeline = pipeline;
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

  #bound(): Predictor {
    if (this.#pipeline === undefined) throw new InternalError(`the model ${this.modelId} has not loaded yet`);
    return this.#pipeline;
  }
}
