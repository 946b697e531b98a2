// The Hub library: one calling interface to many model providers (spec 3, Area B).
// Asynchronous forms are prefixed with `a`; the plain forms are synchronous (worker thread + Atomics.wait).

export {
  acancel_batch,
  acompletion,
  acount_tokens,
  acreate_batch,
  aembedding,
  alist_batches,
  alist_models,
  amessages,
  aresponses,
  aretrieve_batch,
  aretrieve_batch_results,
  arerank,
} from './api.ts';
export type {
  BatchRequest,
  CompletionRequest,
  CountTokensRequest,
  CreateBatchRequest,
  EmbeddingRequest,
  HubCallOptions,
  ListBatchesRequest,
  ListModelsRequest,
  MessagesRequest,
  ParsedMessage,
  ProviderKey,
  RerankRequest,
  ResponsesRequest,
} from './api.ts';
export {
  cancel_batch,
  completion,
  create_batch,
  embedding,
  list_batches,
  list_models,
  messages,
  rerank,
  responses,
  retrieve_batch,
  retrieve_batch_results,
} from './sync/index.ts';
export { Hub } from './hub.ts';
export type { HubOptions } from './hub.ts';
export * from './errors.ts';
export type * from './provider.ts';
export { LLMProvider } from './providers/names.ts';
export type { LLMProviderName } from './providers/names.ts';
export { PROVIDERS } from './providers/index.ts';
