// The Hub class: a client bound to one provider, with the function surface minus `provider`.
// Hub.create resolves the credential at once (MissingApiKeyError is raised there) and keeps one provider instance.

import type { z } from 'zod';
import * as api from './api.ts';
import type {
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
  RerankRequest,
  ResponsesRequest,
} from './api.ts';
import { createHandle } from './core/handle.ts';
import type { ProviderHandle } from './core/handle.ts';
import { providerDefinition, splitModelProvider, supportedProviders } from './core/selection.ts';
import type {
  Batch,
  BatchResultItem,
  CompletionChunk,
  CompletionResponse,
  CountTokensResponse,
  EmbeddingResponse,
  MessagesResponse,
  MessagesStreamEvent,
  Model,
  ProviderMetadata,
  RerankResponse,
  ResponsesResponse,
  ResponsesStreamEvent,
} from './provider.ts';
import { PROVIDERS } from './providers/index.ts';
import * as sync from './sync/index.ts';

/** Options of Hub.create: the common options plus extra provider-specific fields sent with every call. */
export type HubOptions = HubCallOptions & { [extra: string]: unknown };

type Without<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
type Bound<T> = Without<T, 'provider'>;

export class Hub {
  readonly provider: string;
  readonly #options: HubOptions;
  readonly #handle: ProviderHandle;

  private constructor(provider: string, options: HubOptions, handle: ProviderHandle) {
    this.provider = provider;
    this.#options = options;
    this.#handle = handle;
  }

  /** A Hub bound to `provider` (a key or LLMProvider value). */
  static create(provider: string, options: HubOptions = {}): Hub {
    const name = providerDefinition(provider).metadata.name;
    const handle = createHandle(name, options);
    return new Hub(name, { ...options, ...(handle.secret !== undefined ? { api_key: handle.secret } : {}) }, handle);
  }

  /** [provider, model] from 'provider:model' or the deprecated 'provider/model'. */
  static split_model_provider(model: string): [string, string] {
    return splitModelProvider(model);
  }

  static get_all_provider_metadata(): ProviderMetadata[] {
    return Object.values(PROVIDERS)
      .map((definition) => ({ ...definition.metadata }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  static get_supported_providers(): string[] {
    return supportedProviders();
  }

  get_provider_metadata(): ProviderMetadata {
    return { ...this.#handle.definition.metadata };
  }

  /**
   * The request for the async functions: instance options, the call's fields, the bound provider instance. The
   * instance's api_key, api_base and client_args live in that instance; a call's own different values stay in the
   * request, where the async function rejects them (see #checkClientOptions).
   */
  #async<T extends object>(request: T): T {
    const out: Record<string | symbol, unknown> = { ...this.#options, ...request, provider: this.provider, [api.BOUND_HANDLE]: this.#handle };
    // undefined, not deleted: the same to every reader of a request, and `delete` would turn the object into a slow one
    for (const name of api.CLIENT_OPTIONS) {
      if (out[name] === this.#options[name]) out[name] = undefined;
    }
    return out as T;
  }

  /** The request for the sync functions (the worker makes its own provider instance from plain options). */
  #sync<T extends object>(request: T): T {
    this.#checkClientOptions(request);
    return { ...this.#options, ...request, provider: this.provider } as T;
  }

  /**
   * api_key, api_base and client_args make the instance's client, so a call cannot change them: one that tries gets
   * InvalidRequestError instead of being sent, silently, with the instance's credential to the instance's address.
   * (Honouring them is no option either: a server that passes request bodies to a Hub would let its clients send
   * the instance's key to an address of their choosing.)
   */
  #checkClientOptions(request: object): void {
    const call = request as HubCallOptions;
    for (const name of api.CLIENT_OPTIONS) {
      if (call[name] !== undefined && call[name] !== this.#options[name]) throw api.fixedClientOption(name, this.provider);
    }
  }

  amessages(request: Bound<MessagesRequest> & { stream: true }): AsyncIterable<MessagesStreamEvent>;
  amessages<S extends z.ZodType>(request: Bound<MessagesRequest> & { output_format: S; stream?: false }): Promise<ParsedMessage<z.output<S>>>;
  amessages(request: Bound<MessagesRequest> & { output_format: Record<string, unknown>; stream?: false }): Promise<ParsedMessage<unknown>>;
  amessages(request: Bound<MessagesRequest> & { stream?: false }): Promise<MessagesResponse>;
  amessages(request: Bound<MessagesRequest>): Promise<MessagesResponse> | AsyncIterable<MessagesStreamEvent>;
  amessages(request: Bound<MessagesRequest>): Promise<MessagesResponse> | AsyncIterable<MessagesStreamEvent> {
    return api.amessages(this.#async(request as MessagesRequest));
  }

  messages(request: Bound<MessagesRequest> & { stream: true }): Iterable<MessagesStreamEvent>;
  messages<S extends z.ZodType>(request: Bound<MessagesRequest> & { output_format: S; stream?: false }): ParsedMessage<z.output<S>>;
  messages(request: Bound<MessagesRequest> & { output_format: Record<string, unknown>; stream?: false }): ParsedMessage<unknown>;
  messages(request: Bound<MessagesRequest> & { stream?: false }): MessagesResponse;
  messages(request: Bound<MessagesRequest>): MessagesResponse | Iterable<MessagesStreamEvent>;
  messages(request: Bound<MessagesRequest>): MessagesResponse | Iterable<MessagesStreamEvent> {
    return sync.messages(this.#sync(request as MessagesRequest));
  }

  acompletion(request: Bound<CompletionRequest> & { stream: true }): AsyncIterable<CompletionChunk>;
  acompletion(request: Bound<CompletionRequest> & { stream?: false }): Promise<CompletionResponse>;
  acompletion(request: Bound<CompletionRequest>): Promise<CompletionResponse> | AsyncIterable<CompletionChunk>;
  acompletion(request: Bound<CompletionRequest>): Promise<CompletionResponse> | AsyncIterable<CompletionChunk> {
    return api.acompletion(this.#async(request as CompletionRequest));
  }

  completion(request: Bound<CompletionRequest> & { stream: true }): Iterable<CompletionChunk>;
  completion(request: Bound<CompletionRequest> & { stream?: false }): CompletionResponse;
  completion(request: Bound<CompletionRequest>): CompletionResponse | Iterable<CompletionChunk>;
  completion(request: Bound<CompletionRequest>): CompletionResponse | Iterable<CompletionChunk> {
    return sync.completion(this.#sync(request as CompletionRequest));
  }

  aresponses(request: Bound<ResponsesRequest> & { stream: true }): AsyncIterable<ResponsesStreamEvent>;
  aresponses(request: Bound<ResponsesRequest> & { stream?: false }): Promise<ResponsesResponse>;
  aresponses(request: Bound<ResponsesRequest>): Promise<ResponsesResponse> | AsyncIterable<ResponsesStreamEvent> {
    return api.aresponses(this.#async(request as ResponsesRequest));
  }

  responses(request: Bound<ResponsesRequest> & { stream: true }): Iterable<ResponsesStreamEvent>;
  responses(request: Bound<ResponsesRequest> & { stream?: false }): ResponsesResponse;
  responses(request: Bound<ResponsesRequest>): ResponsesResponse | Iterable<ResponsesStreamEvent> {
    return sync.responses(this.#sync(request as ResponsesRequest));
  }

  aembedding(request: Bound<EmbeddingRequest>): Promise<EmbeddingResponse> {
    return api.aembedding(this.#async(request as EmbeddingRequest));
  }

  embedding(request: Bound<EmbeddingRequest>): EmbeddingResponse {
    return sync.embedding(this.#sync(request as EmbeddingRequest));
  }

  arerank(request: Bound<RerankRequest>): Promise<RerankResponse> {
    return api.arerank(this.#async(request as RerankRequest));
  }

  rerank(request: Bound<RerankRequest>): RerankResponse {
    return sync.rerank(this.#sync(request as RerankRequest));
  }

  /** The input tokens of a Messages request, counted by the provider (those with metadata.count_tokens); async only. */
  acount_tokens(request: Bound<CountTokensRequest>): Promise<CountTokensResponse> {
    return api.acount_tokens(this.#async(request as CountTokensRequest));
  }

  alist_models(request: Bound<ListModelsRequest> = {}): Promise<Model[]> {
    return api.alist_models(this.#async(request as ListModelsRequest));
  }

  list_models(request: Bound<ListModelsRequest> = {}): Model[] {
    return sync.list_models(this.#sync(request as ListModelsRequest));
  }

  acreate_batch(request: Bound<CreateBatchRequest>): Promise<Batch> {
    return api.acreate_batch(this.#async(request as CreateBatchRequest));
  }

  create_batch(request: Bound<CreateBatchRequest>): Batch {
    return sync.create_batch(this.#sync(request as CreateBatchRequest));
  }

  aretrieve_batch(request: Bound<BatchRequest>): Promise<Batch> {
    return api.aretrieve_batch(this.#async(request as BatchRequest));
  }

  retrieve_batch(request: Bound<BatchRequest>): Batch {
    return sync.retrieve_batch(this.#sync(request as BatchRequest));
  }

  acancel_batch(request: Bound<BatchRequest>): Promise<Batch> {
    return api.acancel_batch(this.#async(request as BatchRequest));
  }

  cancel_batch(request: Bound<BatchRequest>): Batch {
    return sync.cancel_batch(this.#sync(request as BatchRequest));
  }

  alist_batches(request: Bound<ListBatchesRequest> = {}): Promise<Batch[]> {
    return api.alist_batches(this.#async(request as ListBatchesRequest));
  }

  list_batches(request: Bound<ListBatchesRequest> = {}): Batch[] {
    return sync.list_batches(this.#sync(request as ListBatchesRequest));
  }

  aretrieve_batch_results(request: Bound<BatchRequest>): Promise<BatchResultItem[]> {
    return api.aretrieve_batch_results(this.#async(request as BatchRequest));
  }

  retrieve_batch_results(request: Bound<BatchRequest>): BatchResultItem[] {
    return sync.retrieve_batch_results(this.#sync(request as BatchRequest));
  }
}
