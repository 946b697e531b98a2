// The asynchronous function surface of the Hub (spec 3, Area B): amessages, acompletion, aresponses, aembedding,
// arerank, alist_models and the batch functions. Each takes one object: the operation's parameters, the common options
// (provider, api_key, api_base, client_args, timeout, max_retries, signal, unified_exceptions) and any extra
// provider-specific fields, which are passed through to the provider.

import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import type { z } from 'zod';
import { chatRequestToMessages } from './openai-chat/request-from-chat.ts';
import { messageEventsToChatChunks, messageToChatCompletion } from './openai-chat/response-to-chat.ts';
import { InvalidRequestError, ProviderError, UnsupportedParameterError } from './errors.ts';
import { PORTABLE_MESSAGES_FIELDS } from './message-format/request.ts';
import { cachedHandle } from './core/handle.ts';
import type { ProviderHandle } from './core/handle.ts';
import { DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_MS, invoke, invokeStream, unifiedFromEnv } from './core/invoke.ts';
import type { InvokeSettings } from './core/invoke.ts';
import { planOutputFormat, withParsedOutput } from './core/output-format.ts';
import type { ParsedMessage } from './core/output-format.ts';
import { selectProvider } from './core/selection.ts';
import { validateMessagesParams } from './core/validate.ts';
import type {
  Batch,
  BatchResultItem,
  CompletionChunk,
  CompletionParams,
  CompletionResponse,
  EmbeddingResponse,
  MessagesParams,
  MessagesResponse,
  MessagesStreamEvent,
  Model,
  CountTokensParams,
  CountTokensResponse,
  RerankParams,
  RerankResponse,
  ResponsesParams,
  ResponsesResponse,
  ResponsesStreamEvent,
} from './provider.ts';

export type { ParsedMessage } from './core/output-format.ts';

/** Options every function accepts. */
export interface HubCallOptions {
  api_key?: string;
  api_base?: string;
  client_args?: Record<string, unknown>;
  /** Per attempt, in milliseconds (default 600000). For streams: until the first event. */
  timeout?: number;
  /** Retries of 429/502/503/504/529 answers (default 2). */
  max_retries?: number;
  signal?: AbortSignal;
  /** Convert provider errors to the unified exceptions for this call (default: HUB_UNIFIED_EXCEPTIONS=1). */
  unified_exceptions?: boolean;
}

/** The provider: a key such as 'openai' (or a value of LLMProvider). */
export type ProviderKey = string;

export type MessagesRequest = MessagesParams &
  HubCallOptions & {
    provider?: ProviderKey;
    stream?: boolean;
    /** A zod schema (typed parsed_output) or a JSON-schema output configuration (parsed JSON). */
    output_format?: z.ZodType | Record<string, unknown>;
    [extra: string]: unknown;
  };

export type CompletionRequest = CompletionParams & HubCallOptions & { provider?: ProviderKey; stream?: boolean };
export type ResponsesRequest = ResponsesParams & HubCallOptions & { provider?: ProviderKey; stream?: boolean };
export type EmbeddingRequest = HubCallOptions & {
  model: string;
  inputs: string | string[];
  /** Length of the output vectors (models that can shorten them); sent under each vendor's own field. */
  dimensions?: number | null;
  provider?: ProviderKey;
  [extra: string]: unknown;
};
export type RerankRequest = HubCallOptions & {
  model: string;
  query: string;
  documents: string[];
  /** Only the n most relevant documents (default: all of them). */
  top_n?: number | null;
  /** Cut each document to this many tokens before scoring (providers that cannot are refused). */
  max_tokens_per_doc?: number | null;
  /** Add each result's document text (`document: {text}`), taken from `documents`. */
  return_documents?: boolean | null;
  provider?: ProviderKey;
  [extra: string]: unknown;
};
export type CountTokensRequest = Omit<CountTokensParams, 'model'> &
  HubCallOptions & {
    model: string;
    provider?: ProviderKey;
    [extra: string]: unknown;
  };
export type ListModelsRequest = HubCallOptions & { provider: ProviderKey; [extra: string]: unknown };
export type CreateBatchRequest = HubCallOptions & {
  provider: ProviderKey;
  input_file_path: string;
  endpoint: string;
  completion_window?: string;
  metadata?: Record<string, string>;
  [extra: string]: unknown;
};
export type BatchRequest = HubCallOptions & { provider: ProviderKey; batch_id: string; [extra: string]: unknown };
export type ListBatchesRequest = HubCallOptions & { provider: ProviderKey; after?: string; limit?: number; [extra: string]: unknown };

const OPTION_KEYS = new Set([
  'provider',
  'api_key',
  'api_base',
  'client_args',
  'timeout',
  'max_retries',
  'signal',
  'unified_exceptions',
  'stream',
  'output_format',
]);

/** Fields of the Messages request body; anything else in a messages call is provider-specific passthrough. */
const MESSAGES_FIELDS = new Set([
  ...PORTABLE_MESSAGES_FIELDS,
  // read by Anthropic only (other providers refuse them)
  'container',
  'service_tier',
  'speed',
  'inference_geo',
  'diagnostics',
  'user_profile_id',
  'workspace_id',
  'context_management',
  'mcp_servers',
]);

/** The options that make a provider's client: fixed for the lifetime of a Hub instance. */
export const CLIENT_OPTIONS = ['api_key', 'api_base', 'client_args'] as const;

/** An internal handle a bound Hub passes in (so its provider instance is reused). */
export const BOUND_HANDLE = Symbol('hub.boundHandle');
interface Bound {
  [BOUND_HANDLE]?: ProviderHandle;
}

function split(request: Record<string, unknown>, fields?: ReadonlySet<string>) {
  const options: Record<string, unknown> = {};
  const params: Record<string, unknown> = {};
  const extra: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(request)) {
    if (value === undefined) continue;
    if (OPTION_KEYS.has(key)) options[key] = value;
    else if (!fields || fields.has(key)) params[key] = value;
    else extra[key] = value;
  }
  return { options: options as HubCallOptions & { provider?: string; stream?: boolean; output_format?: unknown }, params, extra };
}

/**
 * The error for a call on a Hub instance that sets its own api_key, api_base or client_args: those make the
 * instance's client. Honouring them silently would also let a server that passes request bodies to a Hub send the
 * instance's key to an address its client chose; ignoring them would send the call where the caller did not ask.
 */
export function fixedClientOption(name: string, provider: string): InvalidRequestError {
  return new InvalidRequestError(`${name} is fixed when the Hub is created; create another Hub for a different one`, null, provider, { param: name });
}

function handleFor(request: Bound, providerKey: string, options: HubCallOptions): ProviderHandle {
  const bound = request[BOUND_HANDLE];
  if (!bound) return cachedHandle(providerKey, options);
  // Hub.#async leaves in the request only the client options that differ from the instance's.
  for (const name of CLIENT_OPTIONS) {
    if (options[name] !== undefined) throw fixedClientOption(name, bound.definition.metadata.name);
  }
  return bound;
}

function settingsFor(handle: ProviderHandle, options: HubCallOptions, extra: Record<string, unknown>): InvokeSettings {
  return {
    provider: handle.provider,
    max_retries: options.max_retries ?? DEFAULT_MAX_RETRIES,
    timeout: options.timeout ?? DEFAULT_TIMEOUT_MS,
    signal: options.signal,
    unified: options.unified_exceptions ?? unifiedFromEnv(),
    secret: handle.secret,
    extra,
  };
}

function requireProvider(provider: unknown, fn: string): string {
  if (typeof provider !== 'string' || provider === '') {
    throw new InvalidRequestError(`${fn} needs the provider parameter`, null, null, { param: 'provider' });
  }
  return provider;
}

function unsupported(handle: ProviderHandle, operation: string): UnsupportedParameterError {
  return new UnsupportedParameterError(operation, handle.definition.metadata.name, 'The provider does not offer this operation.');
}

// ---------------------------------------------------------------------------------------------------------------
// messages

export function amessages(request: MessagesRequest & { stream: true }): AsyncIterable<MessagesStreamEvent>;
export function amessages<S extends z.ZodType>(
  request: MessagesRequest & { output_format: S; stream?: false },
): Promise<ParsedMessage<z.output<S>>>;
export function amessages(request: MessagesRequest & { output_format: Record<string, unknown>; stream?: false }): Promise<ParsedMessage<unknown>>;
export function amessages(request: MessagesRequest & { stream?: false }): Promise<MessagesResponse>;
export function amessages(request: MessagesRequest): Promise<MessagesResponse> | AsyncIterable<MessagesStreamEvent>;
export function amessages(request: MessagesRequest): Promise<MessagesResponse> | AsyncIterable<MessagesStreamEvent> {
  if (request.stream) return messagesStream(request);
  return messagesOnce(request);
}

function prepareMessages(request: MessagesRequest) {
  const { options, params, extra } = split(request, MESSAGES_FIELDS);
  const selected = selectProvider(options.provider, String(params.model ?? ''));
  params.model = selected.model;
  validateMessagesParams(params, selected.provider);
  const handle = handleFor(request as Bound, selected.provider, options);
  return { options, params: params as MessagesParams, extra, handle };
}

async function messagesOnce(request: MessagesRequest): Promise<MessagesResponse> {
  const { options, params, extra, handle } = prepareMessages(request);
  if (options.output_format !== undefined) {
    const plan = planOutputFormat(options.output_format, handle.definition.metadata.name);
    const withFormat = { ...params, output_config: { ...params.output_config, format: plan.format } };
    const message = await invoke(settingsFor(handle, options, extra), (call) => handle.provider.messages(withFormat, call));
    return withParsedOutput(message, plan, handle.definition.metadata.name);
  }
  return invoke(settingsFor(handle, options, extra), (call) => handle.provider.messages(params, call));
}

async function* messagesStream(request: MessagesRequest): AsyncGenerator<MessagesStreamEvent> {
  const { options, params, extra, handle } = prepareMessages(request);
  if (options.output_format !== undefined) {
    throw new UnsupportedParameterError('output_format', handle.definition.metadata.name, 'output_format is not supported with stream: true.');
  }
  if (!handle.definition.metadata.streaming) throw unsupported(handle, 'stream');
  yield* invokeStream(settingsFor(handle, options, extra), (call) => handle.provider.messagesStream(params, call));
}

// ---------------------------------------------------------------------------------------------------------------
// completion (OpenAI chat shape); providers without it go through the Messages adapter

export function acompletion(request: CompletionRequest & { stream: true }): AsyncIterable<CompletionChunk>;
export function acompletion(request: CompletionRequest & { stream?: false }): Promise<CompletionResponse>;
export function acompletion(request: CompletionRequest): Promise<CompletionResponse> | AsyncIterable<CompletionChunk>;
export function acompletion(request: CompletionRequest): Promise<CompletionResponse> | AsyncIterable<CompletionChunk> {
  if (request.stream) return completionStream(request);
  return completionOnce(request);
}

function prepareCompletion(request: CompletionRequest) {
  const { options, params } = split(request as unknown as Record<string, unknown>);
  const selected = selectProvider(options.provider, String(params.model ?? ''));
  if (!Array.isArray(params.messages)) {
    throw new InvalidRequestError('messages is required (a list of messages)', null, selected.provider, { param: 'messages' });
  }
  params.model = selected.model;
  const handle = handleFor(request as Bound, selected.provider, options);
  return { options, params: params as unknown as CompletionParams, handle };
}

async function completionOnce(request: CompletionRequest): Promise<CompletionResponse> {
  const { options, params, handle } = prepareCompletion(request);
  const provider = handle.provider;
  const settings = settingsFor(handle, options, {});
  if (provider.completion) return invoke(settings, (call) => provider.completion!(params, call));
  const converted = chatRequestToMessages(params, provider.metadata.name);
  return messageToChatCompletion(await invoke(settings, (call) => provider.messages(converted, call)));
}

async function* completionStream(request: CompletionRequest): AsyncGenerator<CompletionChunk> {
  const { options, params, handle } = prepareCompletion(request);
  const provider = handle.provider;
  const settings = settingsFor(handle, options, {});
  if (provider.completionStream) {
    yield* invokeStream(settings, (call) => provider.completionStream!(params, call));
    return;
  }
  const converted = chatRequestToMessages(params, provider.metadata.name);
  yield* messageEventsToChatChunks(invokeStream(settings, (call) => provider.messagesStream(converted, call)));
}

// ---------------------------------------------------------------------------------------------------------------
// responses (OpenAI Responses API, where the provider offers it)

export function aresponses(request: ResponsesRequest & { stream: true }): AsyncIterable<ResponsesStreamEvent>;
export function aresponses(request: ResponsesRequest & { stream?: false }): Promise<ResponsesResponse>;
export function aresponses(request: ResponsesRequest): Promise<ResponsesResponse> | AsyncIterable<ResponsesStreamEvent>;
export function aresponses(request: ResponsesRequest): Promise<ResponsesResponse> | AsyncIterable<ResponsesStreamEvent> {
  if (request.stream) return responsesStream(request);
  return responsesOnce(request);
}

function prepareResponses(request: ResponsesRequest) {
  const { options, params } = split(request as unknown as Record<string, unknown>);
  const selected = selectProvider(options.provider, String(params.model ?? ''));
  params.model = selected.model;
  const handle = handleFor(request as Bound, selected.provider, options);
  return { options, params: params as unknown as ResponsesParams, handle };
}

async function responsesOnce(request: ResponsesRequest): Promise<ResponsesResponse> {
  const { options, params, handle } = prepareResponses(request);
  const provider = handle.provider;
  if (!provider.responses) throw unsupported(handle, 'responses');
  return invoke(settingsFor(handle, options, {}), (call) => provider.responses!(params, call));
}

async function* responsesStream(request: ResponsesRequest): AsyncGenerator<ResponsesStreamEvent> {
  const { options, params, handle } = prepareResponses(request);
  const provider = handle.provider;
  if (!provider.responsesStream) throw unsupported(handle, 'responses');
  yield* invokeStream(settingsFor(handle, options, {}), (call) => provider.responsesStream!(params, call));
}

// ---------------------------------------------------------------------------------------------------------------
// embedding, models

/** An optional positive integer of a request (null: not given). */
function positiveInteger(value: unknown, param: string, provider: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (!(Number.isSafeInteger(value) && (value as number) > 0)) {
    const shown = typeof value === 'string' ? JSON.stringify(value) : String(value);
    throw new InvalidRequestError(`${param} must be a positive integer, got ${shown}`, null, provider, { param });
  }
  return value as number;
}

const EMBEDDING_FIELDS: ReadonlySet<string> = new Set(['model', 'inputs', 'dimensions']);

export async function aembedding(request: EmbeddingRequest): Promise<EmbeddingResponse> {
  const { options, params, extra } = split(request, EMBEDDING_FIELDS);
  const selected = selectProvider(options.provider, String(params.model ?? ''));
  const inputs = typeof params.inputs === 'string' ? [params.inputs] : params.inputs;
  if (!Array.isArray(inputs) || inputs.some((input) => typeof input !== 'string')) {
    throw new InvalidRequestError('inputs must be a string or a list of strings', null, selected.provider, { param: 'inputs' });
  }
  // null is "not given", as in OpenAI's API
  const dimensions = positiveInteger(params.dimensions, 'dimensions', selected.provider);
  const handle = handleFor(request as Bound, selected.provider, options);
  const provider = handle.provider;
  if (!provider.embedding) throw unsupported(handle, 'embedding');
  const embeddingParams = { model: selected.model, inputs: inputs as string[], ...(dimensions !== undefined ? { dimensions } : {}) };
  return invoke(settingsFor(handle, options, extra), (call) => provider.embedding!(embeddingParams, call));
}

const RERANK_FIELDS = new Set(['model', 'query', 'documents', 'top_n', 'max_tokens_per_doc', 'return_documents']);

export async function arerank(request: RerankRequest): Promise<RerankResponse> {
  const { options, params, extra } = split(request, RERANK_FIELDS);
  const selected = selectProvider(options.provider, String(params.model ?? ''));
  const name = selected.provider;
  const { query, documents } = params;
  if (typeof query !== 'string' || query === '') throw new InvalidRequestError('query is required (a non-empty string)', null, name, { param: 'query' });
  if (!Array.isArray(documents) || documents.length === 0 || documents.some((document) => typeof document !== 'string')) {
    throw new InvalidRequestError('documents must be a non-empty list of strings', null, name, { param: 'documents' });
  }
  const topN = positiveInteger(params.top_n, 'top_n', name);
  const maxTokensPerDoc = positiveInteger(params.max_tokens_per_doc, 'max_tokens_per_doc', name);
  const returnDocuments = params.return_documents ?? false;
  if (typeof returnDocuments !== 'boolean') throw new InvalidRequestError('return_documents must be true or false', null, name, { param: 'return_documents' });
  const handle = handleFor(request as Bound, name, options);
  const provider = handle.provider;
  if (!provider.rerank) throw unsupported(handle, 'rerank');
  const rerankParams: RerankParams = {
    model: selected.model,
    query,
    documents: documents as string[],
    ...(topN !== undefined ? { top_n: topN } : {}),
    ...(maxTokensPerDoc !== undefined ? { max_tokens_per_doc: maxTokensPerDoc } : {}),
  };
  const response = await invoke(settingsFor(handle, options, extra), (call) => provider.rerank!(rerankParams, call));
  return rankedResponse(response, rerankParams, returnDocuments, handle.definition.metadata.name);
}

/**
 * The provider's answer as the contract promises it whatever the vendor did: most relevant first (ties by position),
 * at most top_n, each index a document of the request, and the texts when asked for.
 */
function rankedResponse(response: RerankResponse, params: RerankParams, returnDocuments: boolean, provider: string): RerankResponse {
  const count = params.documents.length;
  for (const result of response.results) {
    if (!Number.isInteger(result.index) || result.index < 0 || result.index >= count || typeof result.relevance_score !== 'number') {
      throw new ProviderError(`The provider answered a rerank result for document ${String(result.index)} of ${count}`, null, provider);
    }
  }
  const results = [...response.results]
    .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
    .slice(0, params.top_n ?? count)
    .map(({ index, relevance_score }) => ({ index, relevance_score, ...(returnDocuments ? { document: { text: params.documents[index] } } : {}) }));
  // Voyage's answer has no id
  return { ...response, id: response.id || `rerank-${randomUUID()}`, results };
}

const COUNT_TOKENS_FIELDS = new Set(['model', 'messages', 'system', 'tools', 'tool_choice', 'thinking', 'mcp_servers', 'output_config', 'context_management']);

/**
 * The input tokens a Messages request would use, counted by the provider without running the model (Anthropic's
 * count_tokens). Providers without such an API raise UnsupportedParameterError('count_tokens'); no estimate is made
 * here, since a guess passed off as the vendor's count would mislead.
 */
export async function acount_tokens(request: CountTokensRequest): Promise<CountTokensResponse> {
  const { options, params, extra } = split(request, COUNT_TOKENS_FIELDS);
  const selected = selectProvider(options.provider, String(params.model ?? ''));
  if (!Array.isArray(params.messages)) {
    throw new InvalidRequestError('messages is required (a list of messages)', null, selected.provider, { param: 'messages' });
  }
  params.model = selected.model;
  const handle = handleFor(request as Bound, selected.provider, options);
  const provider = handle.provider;
  if (!provider.countTokens) throw unsupported(handle, 'count_tokens');
  return invoke(settingsFor(handle, options, extra), (call) => provider.countTokens!(params as unknown as CountTokensParams, call));
}

export async function alist_models(request: ListModelsRequest): Promise<Model[]> {
  const { options, extra } = split(request, new Set());
  const handle = handleFor(request as Bound, requireProvider(options.provider, 'list_models'), options);
  const provider = handle.provider;
  if (!provider.listModels) throw unsupported(handle, 'list_models');
  return invoke(settingsFor(handle, options, extra), (call) => provider.listModels!(call));
}

// ---------------------------------------------------------------------------------------------------------------
// batches (experimental)

let experimentalWarned = false;
function warnExperimental(): void {
  if (experimentalWarned) return;
  experimentalWarned = true;
  process.emitWarning('The Hub batch functions are experimental and may change; provider support is limited.', {
    type: 'ExperimentalWarning',
    code: 'HUB_EXPERIMENTAL_BATCH',
  });
}

function batchContext(request: Record<string, unknown>, fields: ReadonlySet<string>, fn: string) {
  warnExperimental();
  const { options, params, extra } = split(request, fields);
  const handle = handleFor(request as Bound, requireProvider(options.provider, fn), options);
  const batches = handle.provider.batches;
  if (!batches) throw unsupported(handle, fn);
  return { batches, params, settings: settingsFor(handle, options, extra), handle };
}

function requireString(value: unknown, param: string, provider: string): string {
  if (typeof value !== 'string' || value === '') {
    throw new InvalidRequestError(`${param} is required (a string)`, null, provider, { param });
  }
  return value;
}

export async function acreate_batch(request: CreateBatchRequest): Promise<Batch> {
  const fields = new Set(['input_file_path', 'endpoint', 'completion_window', 'metadata']);
  const { batches, params, settings, handle } = batchContext(request, fields, 'create_batch');
  const name = handle.definition.metadata.name;
  const inputFile = requireString(params.input_file_path, 'input_file_path', name);
  if (!statSync(inputFile, { throwIfNoEntry: false })?.isFile()) {
    throw new InvalidRequestError(`input_file_path '${inputFile}' is not a readable file`, null, name, { param: 'input_file_path' });
  }
  const create = {
    input_file_path: inputFile,
    endpoint: requireString(params.endpoint, 'endpoint', name),
    completion_window: (params.completion_window as string | undefined) ?? '24h',
    ...(params.metadata !== undefined ? { metadata: params.metadata as Record<string, string> } : {}),
  };
  return invoke(settings, (call) => batches.create(create, call));
}

export async function aretrieve_batch(request: BatchRequest): Promise<Batch> {
  const { batches, params, settings, handle } = batchContext(request, new Set(['batch_id']), 'retrieve_batch');
  const id = requireString(params.batch_id, 'batch_id', handle.definition.metadata.name);
  return invoke(settings, (call) => batches.retrieve(id, call));
}

export async function acancel_batch(request: BatchRequest): Promise<Batch> {
  const { batches, params, settings, handle } = batchContext(request, new Set(['batch_id']), 'cancel_batch');
  const id = requireString(params.batch_id, 'batch_id', handle.definition.metadata.name);
  return invoke(settings, (call) => batches.cancel(id, call));
}

export async function alist_batches(request: ListBatchesRequest): Promise<Batch[]> {
  const { batches, params, settings } = batchContext(request, new Set(['after', 'limit']), 'list_batches');
  const list: { after?: string; limit?: number } = {};
  if (params.after !== undefined) list.after = params.after as string;
  if (params.limit !== undefined) list.limit = params.limit as number;
  return invoke(settings, (call) => batches.list(list, call));
}

export async function aretrieve_batch_results(request: BatchRequest): Promise<BatchResultItem[]> {
  const { batches, params, settings, handle } = batchContext(request, new Set(['batch_id']), 'retrieve_batch_results');
  const id = requireString(params.batch_id, 'batch_id', handle.definition.metadata.name);
  return invoke(settings, (call) => batches.results(id, call));
}
