import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';
import type { RerankResponse } from '../hub/index.ts';
import { GatewayError } from './errors.ts';

export type ChatCompletion = OpenAI.ChatCompletion;
export type ChatCompletionChunk = OpenAI.ChatCompletionChunk;
export type EmbeddingResponse = OpenAI.CreateEmbeddingResponse;
export type ModelInfo = OpenAI.Models.Model;
export type AnthropicMessage = Anthropic.Message;
export type AnthropicStreamEvent = Anthropic.RawMessageStreamEvent;
export type RerankResult = RerankResponse;
/** A Responses API answer: the fields the gateway reads are typed, the rest passes through. */
export interface ResponsesResult {
  output_text?: string;
  output?: unknown;
  usage?: { input_tokens?: number; output_tokens?: number } | null;
  [field: string]: unknown;
}
/** A Responses API stream event (`response.created`, `response.output_text.delta`, `response.completed`, …). */
export interface ResponsesStreamEvent {
  type: string;
  delta?: unknown;
  response?: ResponsesResult;
  [field: string]: unknown;
}

/** What an embeddings call asks besides the model and the inputs. */
export interface EmbeddingOptions {
  /** Length of the output vectors (a positive integer; the route checks it). */
  dimensions?: number;
}

/** A rerank: the query, the document texts and Cohere's options (the route checks them). */
export interface RerankQuery {
  query: string;
  documents: string[];
  top_n?: number;
  max_tokens_per_doc?: number;
  return_documents?: boolean;
}

export interface ProviderSettings {
  api_key?: string;
  api_base?: string;
}

/**
 * The gateway's one door to the providers. Route handlers call these methods, never Hub or a vendor SDK; the
 * implementation is HubUpstream (hub-upstream.ts); tests may pass their own. `provider` is a configured provider or
 * the connection of a model route target (CallTarget.connection). Every failure comes out as a
 * GatewayError with the status the client should see (see `upstreamErrorOf`).
 */
export interface Upstream {
  chat(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<ChatCompletion>;
  chatStream(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AsyncIterable<ChatCompletionChunk>>;
  embeddings(provider: string, model: string, inputs: string[], signal: AbortSignal, options?: EmbeddingOptions): Promise<EmbeddingResponse>;
  rerank(provider: string, model: string, request: RerankQuery, signal: AbortSignal): Promise<RerankResult>;
  models(provider: string, signal: AbortSignal): Promise<ModelInfo[]>;
  messages(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AnthropicMessage>;
  messagesStream(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AsyncIterable<AnthropicStreamEvent>>;
  responses(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<ResponsesResult>;
  /** The input tokens of an Anthropic-format request, counted by the provider; null when it has no such API. */
  countTokens(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<{ input_tokens: number } | null>;
  responsesStream(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AsyncIterable<ResponsesStreamEvent>>;
  /** Providers named in the configuration (listed by GET /v1/models). */
  readonly providers: string[];
  /** Takes the providers' new settings after a change of the runtime configuration (absent: fixed providers). */
  reconfigure?(settings: Record<string, ProviderSettings>): void;
  /** The chat completions field that limits a provider's output tokens (what its API reads; both mean the same). */
  chatOutputLimitField(provider: string): 'max_tokens' | 'max_completion_tokens';
}

/**
 * Fields that configure how the gateway calls a provider (Hub's call options: credentials, address, client, timeout,
 * retries, error style, provider choice), not what the request asks. Forwarded bodies must not carry them: a client
 * could otherwise raise the gateway's retries and timeouts or point its provider key elsewhere.
 */
export const CALL_OPTION_FIELDS: readonly string[] = ['api_key', 'api_base', 'client_args', 'timeout', 'max_retries', 'unified_exceptions', 'signal', 'provider'];

/**
 * What a provider failure means to the gateway's client. Works on vendor SDK errors (`status`, `headers`) and on
 * Hub's HubError family (`status_code`, `retry_after`, class name):
 * 429 → 429 with Retry-After; the client's own mistakes (400, 404, 409, 413, 422) → 400; the provider rejecting
 * the gateway's credentials (401, 403) → 502, since the caller cannot fix them; timeouts → 504; anything else
 * (5xx, connection failures) → 502. Never a bare 500.
 */
export function upstreamErrorOf(error: unknown, provider: string): GatewayError {
  if (error instanceof GatewayError) return error;
  const e = (error ?? {}) as {
    name?: string;
    status?: unknown;
    status_code?: unknown;
    retry_after?: unknown;
    headers?: unknown;
    message?: string;
    raw_message?: string;
    error_type?: unknown;
    code?: unknown;
    param?: unknown;
  };
  const name = (error as object | null)?.constructor?.name ?? e.name ?? '';
  const status = typeof e.status_code === 'number' ? e.status_code : typeof e.status === 'number' ? e.status : null;
  const text = stripSecrets(e.raw_message ?? e.message ?? String(error));
  const message = `Provider ${provider}: ${text}`;
  // Hub names the parameter it refuses in parameter_name (UnsupportedParameterError), e.g. dimensions
  const param = typeof e.param === 'string' ? e.param : typeof (e as { parameter_name?: unknown }).parameter_name === 'string' ? (e as { parameter_name: string }).parameter_name : null;
  if (name === 'RateLimitError' || status === 429) {
    return new GatewayError(429, 'rate_limit_error', 'upstream_rate_limited', message, { retryAfter: retryAfterOf(e) ?? 1, cause: error });
  }
  // Hub reports its own per-attempt timeout as a ProviderError with error_type "timeout" (spec: timeouts → ProviderError).
  const hubTimeout = name === 'ProviderError' && e.error_type === 'timeout';
  if (name === 'GatewayTimeoutError' || name === 'APIConnectionTimeoutError' || hubTimeout || status === 504 || status === 408) {
    return new GatewayError(504, 'timeout_error', 'upstream_timeout', message, { cause: error });
  }
  if (name === 'AbortError' || name === 'APIUserAbortError') {
    return new GatewayError(499, 'api_error', 'client_closed_request', message, { cause: error });
  }
  if (name === 'AuthenticationError' || name === 'PermissionDeniedError' || name === 'MissingApiKeyError' || status === 401 || status === 403) {
    return new GatewayError(502, 'upstream_error', 'upstream_authentication_failed', `${message} (the gateway's credentials for this provider were refused)`, { cause: error });
  }
  if (
    ['InvalidRequestError', 'BadRequestError', 'ContextLengthExceededError', 'UnsupportedParameterError', 'ModelNotFoundError', 'NotFoundError', 'UnprocessableEntityError'].includes(name) ||
    (status !== null && status >= 400 && status < 500)
  ) {
    const code = typeof e.code === 'string' ? e.code : name === 'ModelNotFoundError' || status === 404 ? 'model_not_found' : 'upstream_invalid_request';
    return new GatewayError(400, 'invalid_request_error', code, message, { param, cause: error });
  }
  // A connection that failed says why only deep in its causes: refused, no such host, a certificate not trusted.
  const reason = systemCodeOf(error);
  return new GatewayError(502, 'upstream_error', 'upstream_error', reason && !message.includes(reason) ? `${message} (${reason})` : message, { cause: error });
}

/**
 * The code of the system or TLS error under a failure (ECONNREFUSED, ENOTFOUND, DEPTH_ZERO_SELF_SIGNED_CERT, ...),
 * found through `cause` and Hub's `original_exception`; null when there is none. A code names the kind of failure
 * and nothing of the provider's answer or the gateway's address book.
 */
function systemCodeOf(error: unknown): string | null {
  let next = error as { cause?: unknown; original_exception?: unknown } | null;
  for (let depth = 0; depth < 8 && next && typeof next === 'object'; depth++) {
    next = (next.cause ?? next.original_exception ?? null) as typeof next;
    const code = (next as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && /^[A-Z][A-Z0-9_]{2,}$/.test(code)) return code;
  }
  return null;
}

function retryAfterOf(e: { retry_after?: unknown; headers?: unknown }): number | null {
  if (typeof e.retry_after === 'number') return Math.max(1, Math.ceil(e.retry_after));
  const headers = e.headers as { get?: (name: string) => string | null } | Record<string, string> | undefined;
  const raw = typeof headers?.get === 'function' ? headers.get('retry-after') : (headers as Record<string, string> | undefined)?.['retry-after'];
  if (!raw) return null;
  const seconds = Number(raw);
  if (Number.isFinite(seconds)) return Math.max(1, Math.ceil(seconds));
  const date = Date.parse(raw);
  return Number.isNaN(date) ? null : Math.max(1, Math.ceil((date - Date.now()) / 1000));
}

/**
 * Provider messages sometimes echo a key ("Incorrect API key provided: sk-abc…"); keep them out of responses. The
 * key shapes of the configured providers: sk-/sk-ant- (OpenAI, Anthropic, DeepSeek …), xai- (xAI), gsk_ (Groq),
 * AIza (Google), pk-/rk-/key- (others), gw- (this gateway's own virtual keys).
 */
export function stripSecrets(text: string): string {
  return text
    .replace(/\b(sk|gw|pk|rk|key|xai)-[A-Za-z0-9_*.-]{5,}[A-Za-z0-9_*]/g, '$1-***') // a sentence's full stop stays
    .replace(/\bgsk_[A-Za-z0-9_*.-]{5,}[A-Za-z0-9_*]/g, 'gsk_***')
    .replace(/\bAIza[A-Za-z0-9_-]{10,}/g, 'AIza***');
}
