// The contract every Hub provider implements.
//
// Stability: other engineers implement this interface. Changes are additive only (new optional members); any
// change is listed here with its date.
//   2026-11-22  first version.
//   2026-11-22  ProviderMetadata.api_key_optional (optional): a key is read from env_key if set but not required.
//   2026-11-22  EmbeddingParams.dimensions (optional): the output vector length; send it under the vendor's own
//               field, or raise UnsupportedParameterError('dimensions') when the vendor cannot shorten vectors.
//   2026-11-29  ProviderMetadata.rerank (optional) and Provider.rerank (optional): reranking documents by relevance.
//   2026-11-29  ProviderMetadata.count_tokens (optional) and Provider.countTokens (optional): the input tokens a
//               Messages request would use, counted by the vendor (Anthropic's /v1/messages/count_tokens).
//
// Division of labour: the core (src/hub/hub.ts and friends) resolves credentials, validates parameters, applies the
// timeout/abort signal, retries, converts errors to the unified exceptions and gives completion/completionStream to
// providers that implement only `messages`. A provider only talks to its vendor: convert, call, convert back.
// Providers must turn their SDK's own retries off (e.g. `maxRetries: 0`) so there is exactly one retry policy.

import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';
import type { HubError } from './errors.ts';

/** What a provider can do; the spec's fields (name, streaming, embedding, responses, list_models) and more. */
export interface ProviderMetadata {
  /** The provider key, as used in `provider` and `provider:model`. */
  name: string;
  /** The environment variable holding the API key; null when the provider needs no key (local servers). */
  env_key: string | null;
  /** True when env_key names a key that is used if present but not required (local servers such as vLLM). */
  api_key_optional?: boolean;
  /** The vendor's documentation. */
  doc_url: string;
  /** The base address used when `api_base` is not given (empty when the SDK decides). */
  default_api_base?: string;
  streaming: boolean;
  messages: boolean;
  completion: boolean;
  embedding: boolean;
  responses: boolean;
  list_models: boolean;
  batch: boolean;
  reasoning: boolean;
  image: boolean;
  /** Reranks documents against a query (Cohere, Voyage, this project's cross-encoder servers). */
  rerank?: boolean;
  /** Counts the input tokens of a Messages request without running it (Anthropic's count_tokens). */
  count_tokens?: boolean;
}

/** Given to a provider's `create`. The core has already resolved the key (api_key option, else env var). */
export interface ProviderOptions {
  /** Resolved credential; undefined only for providers whose metadata.env_key is null. */
  api_key?: string;
  /** Base address override (`api_base`). */
  api_base?: string;
  /** Provider-specific client settings (`client_args`), passed to the vendor SDK client as they are. */
  client_args?: Record<string, unknown>;
  /** Per-call timeout in ms the core applies; informative (the core enforces it through CallOptions.signal). */
  timeout?: number;
}

/** Per-call context. */
export interface CallOptions {
  /** Aborts the call (user abort or the core's timeout). Pass it to the SDK / fetch. */
  signal?: AbortSignal;
  /** Provider-specific passthrough options (the "extra keyword arguments" of the spec). */
  extra: Record<string, unknown>;
}

/**
 * Messages request in the Anthropic Messages format, without `stream` (streaming is a separate method). The spec's
 * sampling parameters are added here because this SDK version no longer declares them (the API still takes them).
 */
export type MessagesParams = Omit<Anthropic.MessageCreateParamsNonStreaming, 'stream'> & {
  temperature?: number;
  top_p?: number;
  top_k?: number;
};
export type MessagesResponse = Anthropic.Message;
/** A count_tokens request: the Messages request's model, messages, system, tools, tool_choice, thinking. */
export type CountTokensParams = Anthropic.MessageCountTokensParams;
export type CountTokensResponse = Anthropic.MessageTokensCount;
export type MessagesStreamEvent = Anthropic.RawMessageStreamEvent;

/** OpenAI chat completions request, without `stream`. */
export type CompletionParams = Omit<OpenAI.ChatCompletionCreateParamsNonStreaming, 'stream'>;
export type CompletionResponse = OpenAI.ChatCompletion;
export type CompletionChunk = OpenAI.ChatCompletionChunk;

export type ResponsesParams = Omit<OpenAI.Responses.ResponseCreateParamsNonStreaming, 'stream'>;
export type ResponsesResponse = OpenAI.Responses.Response;
export type ResponsesStreamEvent = OpenAI.Responses.ResponseStreamEvent;

export interface EmbeddingParams {
  model: string;
  inputs: string[];
  /**
   * Length of the output vectors (OpenAI's name), a positive integer checked by the core. A provider sends it under
   * its vendor's field or refuses it (UnsupportedParameterError); it never drops it.
   */
  dimensions?: number;
}
export type EmbeddingResponse = OpenAI.CreateEmbeddingResponse;

/**
 * A rerank request as the core hands it over (checked: a query, at least one document, positive integers). The
 * provider sends top_n and max_tokens_per_doc under its vendor's fields, or refuses one it cannot honour
 * (UnsupportedParameterError); it never drops one. `return_documents` is the core's (it adds the texts it was given).
 */
export interface RerankParams {
  model: string;
  query: string;
  documents: string[];
  /** Only the n most relevant documents. */
  top_n?: number;
  /** Each document is cut to this many tokens before scoring. */
  max_tokens_per_doc?: number;
}

export interface RerankResult {
  /** Position of the document in the request's `documents`. */
  index: number;
  /** Higher is more relevant; Cohere, Voyage and the encoder server give scores between 0 and 1. */
  relevance_score: number;
  /** The document's text, when the request asked for it (`return_documents`). */
  document?: { text: string };
}

/** The answer of a rerank, in Cohere's v2 shape (as any-llm normalises it), plus the model and a token count. */
export interface RerankResponse {
  id: string;
  model: string;
  /** Most relevant first; top_n of them when it was given. */
  results: RerankResult[];
  /** Tokens the provider counted (Voyage, the encoder server); null when it reports none (Cohere bills search units). */
  usage: { prompt_tokens: number; total_tokens: number } | null;
  /** What the provider bills, in Cohere's field names; null when it says nothing. */
  meta: { billed_units: { search_units?: number; input_tokens?: number } } | null;
}
export type Model = OpenAI.Models.Model;

/** Batches are normalised to the OpenAI Batch object (id, status, ...); vendors map their statuses onto it. */
export type Batch = OpenAI.Batches.Batch;

export interface CreateBatchParams {
  /** Local JSONL file of {custom_id, method, url, body} lines. */
  input_file_path: string;
  /** Target path applied to every line, e.g. /v1/chat/completions. */
  endpoint: string;
  /** Defaults to '24h' (the core fills it in). */
  completion_window: string;
  metadata?: Record<string, string>;
}

export interface ListBatchesParams {
  after?: string;
  limit?: number;
}

/** One line of a batch's results. `result` is the response body for that line (e.g. a ChatCompletion). */
export interface BatchResultItem {
  custom_id: string;
  result: unknown;
  error: { code: string | null; message: string } | null;
}

export interface BatchOperations {
  create(params: CreateBatchParams, call: CallOptions): Promise<Batch>;
  retrieve(batch_id: string, call: CallOptions): Promise<Batch>;
  cancel(batch_id: string, call: CallOptions): Promise<Batch>;
  list(params: ListBatchesParams, call: CallOptions): Promise<Batch[]>;
  /** Downloads the results; throws BatchNotCompleteError when the batch is not complete. */
  results(batch_id: string, call: CallOptions): Promise<BatchResultItem[]>;
}

export interface Provider {
  readonly metadata: ProviderMetadata;
  messages(params: MessagesParams, call: CallOptions): Promise<MessagesResponse>;
  messagesStream(params: MessagesParams, call: CallOptions): AsyncIterable<MessagesStreamEvent>;
  /** Optional: when absent the core converts completion requests to messages and back. */
  completion?(params: CompletionParams, call: CallOptions): Promise<CompletionResponse>;
  completionStream?(params: CompletionParams, call: CallOptions): AsyncIterable<CompletionChunk>;
  responses?(params: ResponsesParams, call: CallOptions): Promise<ResponsesResponse>;
  responsesStream?(params: ResponsesParams, call: CallOptions): AsyncIterable<ResponsesStreamEvent>;
  embedding?(params: EmbeddingParams, call: CallOptions): Promise<EmbeddingResponse>;
  /** Present exactly when metadata.rerank is true. Results may come in any order; the core sorts and cuts them. */
  rerank?(params: RerankParams, call: CallOptions): Promise<RerankResponse>;
  /** Present exactly when metadata.count_tokens is true. */
  countTokens?(params: CountTokensParams, call: CallOptions): Promise<CountTokensResponse>;
  listModels?(call: CallOptions): Promise<Model[]>;
  batches?: BatchOperations;
  /**
   * Describes a thrown error as a unified exception (use `mapProviderFailure` from errors.ts so the spec's
   * status table and message rules apply). Return undefined for errors that are not the provider's (they are
   * rethrown as they are). Called for every failure: the core reads status_code and RateLimitError.retry_after
   * to decide on retries even when unified exceptions are off.
   */
  toHubError(error: unknown): HubError | undefined;
}

/** A registry entry: static metadata plus a factory. */
export interface ProviderDefinition {
  readonly metadata: ProviderMetadata;
  create(options: ProviderOptions): Provider;
}
