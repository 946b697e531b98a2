import type { BatchRunListener, BatchStats } from './batch-scheduler.ts';
import type { ModelType } from './config.ts';
import type {
  DecodeRequest,
  EmbedRequest,
  EmbedResult,
  ModelMetadata,
  PredictResponse,
  RerankRequest,
  RerankResult,
  ServingLimits,
  TokenizeRequest,
  TokenSpan,
} from './schemas.ts';

/** What every front end (CLI, HTTP, gRPC, MCP) calls: one model, its metadata, and predictions. */
export interface Predictor {
  readonly modelId: string;
  readonly modelType: ModelType;
  metadata(): ModelMetadata;
  /** Validates the body (InputError `Invalid input: …`) and returns the model type's response; runtime failures are InternalError. */
  predict(body: unknown): Promise<PredictResponse>;
  /** One pooled vector per input; embedding and sentence_embedding models only (else InputError). */
  embed(request: EmbedRequest): Promise<EmbedResult>;
  /** Cross-encoder scores of documents against a query; sequence_classification models only (else InputError). */
  rerank(request: RerankRequest): Promise<RerankResult>;
  /** Each text's tokens as the model's tokenizer gives them, not truncated; any model type. */
  tokenize(request: TokenizeRequest): Promise<TokenSpan[][]>;
  /** Token ids back to texts; any model type. InputError for an id outside the vocabulary. */
  decode(request: DecodeRequest): Promise<string[]>;
  /** The limits requests are held to and how runs are formed. */
  servingLimits(): ServingLimits;
  /**
   * JSON.parse of a large request body's UTF-8 bytes (their buffer is handed over), on a thread when the predictor
   * has one: parsing MiBs held the event loop for ~100 ms on a busy machine. A SyntaxError as JSON.parse gives it.
   */
  parseJson?(bytes: Uint8Array): Promise<unknown>;
}

/** A predictor whose batching can be watched, as `serve` does for its metrics. */
export interface BatchingPredictor extends Predictor {
  /** Counters of the batch scheduler: runs, sequences, tokens and padded tokens, what is queued now. */
  batchingStats(): BatchStats;
  /** Calls `listener` as each onnxruntime run ends; returns the function that stops it. */
  observeBatches(listener: BatchRunListener): () => void;
}
