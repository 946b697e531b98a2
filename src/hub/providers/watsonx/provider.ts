// IBM watsonx.ai over its documented HTTP API with fetch (IBM's Node SDK would dwarf the few calls needed):
//   token   POST {iam}/identity/token  grant_type=urn:ibm:params:oauth:grant-type:apikey&apikey=…
//           → {access_token, expires_in, expiration}; cached per provider instance, renewed once 80 % of its
//           lifetime has passed (as IBM's SDKs do), and once more when the service answers 401 to a cached token.
//   chat    POST {base}/ml/v1/text/chat?version=…         {model_id, project_id | space_id, messages, …}
//   stream  POST {base}/ml/v1/text/chat_stream?version=…  the same body; SSE `event: message` chunks
//   models  GET  {base}/ml/v1/foundation_model_specs?version=…&limit=200 (pages followed through `next`)
// The chat API takes OpenAI's chat messages and answers OpenAI-shaped choices, so Messages go through the shared
// OpenAI chat converters; what differs is named in toWatsonxChat / fromWatsonx*.

import type OpenAI from 'openai';
import { AuthenticationError, InvalidRequestError, ProviderError, type HubError } from '../../errors.ts';
import { incompleteStreamError } from '../../message-format/stream-builder.ts';
import { chatChunksToMessageEvents, chatCompletionToMessage } from '../../openai-chat/response-from-chat.ts';
import { messagesToChatRequest, type ChatDialect } from '../../openai-chat/request-to-chat.ts';
import type { CallOptions, CompletionChunk, CompletionResponse, Model, Provider, ProviderOptions } from '../../provider.ts';
import { answerFailure, isAbortError, isNetworkError, networkFailure } from '../shared/error-body.ts';
import { joinUrl, VendorHttpError } from '../shared/http-json.ts';
import { readSse } from '../shared/sse.ts';
import { metadata, WATSONX_DEFAULT_API_BASE } from './metadata.ts';

export const WATSONX_IAM_URL = 'https://iam.cloud.ibm.com/identity/token';
/** The API version date sent with every call (client_args.version to change it). */
export const WATSONX_API_VERSION = '2024-10-08';
/** A token is renewed once this share of its lifetime has passed. */
const TOKEN_RENEWAL = 0.8;
/** The longest wait for IBM's token endpoint (the token is shared by concurrent calls, so no caller's signal stops it). */
const IAM_TIMEOUT_MS = 60_000;

const dialect: ChatDialect = { provider_name: metadata.name, top_k: false, reasoning: false, max_tokens_field: 'max_tokens', user: false, image: true };

/** Options read from client_args. */
interface WatsonxClientArgs {
  project_id?: string;
  space_id?: string;
  iam_url?: string;
  version?: string;
  headers?: Record<string, string>;
}

/** A failure of IBM's token endpoint (its body is {errorCode, errorMessage}). */
class IamTokenError extends VendorHttpError {}

interface Token {
  value: string;
  /** Date.now() after which the token is renewed. */
  renewAt: number;
}

/** The bearer tokens of one API key: fetched on demand, shared by concurrent calls, renewed before expiry. */
export class IamTokens {
  private token: Token | undefined;
  private pending: Promise<Token> | undefined;
  private readonly apiKey: string;
  private readonly url: string;
  constructor(apiKey: string, url: string) {
    this.apiKey = apiKey;
    this.url = url;
  }

  /** A valid token; `fresh` is false when it came from the cache (a 401 to it is worth one renewal). */
  async get(signal?: AbortSignal): Promise<{ value: string; fresh: boolean }> {
    if (this.token && Date.now() < this.token.renewAt) return { value: this.token.value, fresh: false };
    this.pending ??= this.fetchToken().finally(() => (this.pending = undefined));
    const token = await abortable(this.pending, signal);
    return { value: token.value, fresh: true };
  }

  /** Forgets a token the service refused (a later get fetches a new one). */
  invalidate(value: string): void {
    if (this.token?.value === value) this.token = undefined;
  }

  private async fetchToken(): Promise<Token> {
    const requested = Date.now();
    const response = await fetch(this.url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams({ grant_type: 'urn:ibm:params:oauth:grant-type:apikey', apikey: this.apiKey }).toString(),
      signal: AbortSignal.timeout(IAM_TIMEOUT_MS),
    });
    const text = await response.text();
    if (!response.ok) throw new IamTokenError(response.status, response.headers, text, this.url);
    let answer: { access_token?: unknown; expires_in?: unknown; expiration?: unknown };
    try {
      answer = JSON.parse(text) as typeof answer;
    } catch (error) {
      throw new IamTokenError(response.status, response.headers, `token answer is not JSON: ${text.slice(0, 200)}`, this.url, { cause: error });
    }
    if (typeof answer.access_token !== 'string' || answer.access_token === '') {
      throw new IamTokenError(response.status, response.headers, 'token answer has no access_token', this.url);
    }
    // expires_in (seconds) counts from the request; expiration (epoch seconds) when that is all there is
    const lifetimeMs =
      typeof answer.expires_in === 'number' ? answer.expires_in * 1000 : typeof answer.expiration === 'number' ? answer.expiration * 1000 - requested : 0;
    const token = { value: answer.access_token, renewAt: requested + Math.max(0, lifetimeMs) * TOKEN_RENEWAL };
    this.token = token;
    return token;
  }
}

/** Waits for a shared promise, or rejects with the signal's reason when the caller aborts first. */
function abortable<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error as Error);
      },
    );
  });
}

/**
 * An OpenAI chat request as watsonx takes it: `model` is `model_id`, the project (or deployment space) goes in the
 * body, string tool choices ("auto", "none", "required") are `tool_choice_option`, and `max_completion_tokens` is
 * `max_tokens`. `stream` and `stream_options` are dropped: the endpoint decides streaming, and the last chunk carries
 * the usage unasked.
 */
export function toWatsonxChat(request: Record<string, unknown>, scope: Record<string, string>): Record<string, unknown> {
  const { model, stream: _stream, stream_options: _streamOptions, tool_choice, max_completion_tokens, ...rest } = request;
  const body: Record<string, unknown> = { model_id: model, ...scope, ...rest };
  if (typeof tool_choice === 'string') body.tool_choice_option = tool_choice;
  else if (tool_choice !== undefined && tool_choice !== null) body.tool_choice = tool_choice;
  if (max_completion_tokens !== undefined && max_completion_tokens !== null) body.max_tokens ??= max_completion_tokens;
  return body;
}

type FinishReason = OpenAI.ChatCompletion.Choice['finish_reason'];

/** watsonx's finish reasons are OpenAI's; the text-generation names are read as theirs in case a model answers them. */
function finishReason(reason: unknown): FinishReason | null {
  if (reason === null || reason === undefined) return null;
  if (reason === 'max_tokens' || reason === 'token_limit') return 'length';
  if (reason === 'eos_token' || reason === 'stop_sequence') return 'stop';
  return reason as FinishReason;
}

interface WatsonxChoice {
  index?: number;
  message?: { role?: string; content?: string | null; refusal?: string | null; tool_calls?: OpenAI.ChatCompletionMessageToolCall[] };
  delta?: { role?: string; content?: string | null; refusal?: string | null; tool_calls?: (Partial<OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall> & { index?: number })[] };
  finish_reason?: string | null;
}

interface WatsonxChat {
  id?: string;
  model_id?: string;
  model?: string;
  created?: number;
  choices?: WatsonxChoice[];
  usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number };
}

function usageOf(usage: WatsonxChat['usage']): OpenAI.CompletionUsage | undefined {
  if (!usage) return undefined;
  const prompt = usage.prompt_tokens ?? 0;
  const completion = usage.completion_tokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: usage.total_tokens ?? prompt + completion };
}

export function fromWatsonxChat(answer: WatsonxChat, model: string): CompletionResponse {
  if (!Array.isArray(answer.choices) || answer.choices.length === 0) {
    throw new ProviderError('The watsonx chat answer has no choices', null, metadata.name);
  }
  const usage = usageOf(answer.usage);
  return {
    id: answer.id ?? `chatcmpl-${crypto.randomUUID()}`,
    object: 'chat.completion',
    created: answer.created ?? 0,
    model: answer.model_id ?? answer.model ?? model,
    choices: answer.choices.map((choice, position) => {
      const message = choice.message ?? {};
      return {
        index: choice.index ?? position,
        message: {
          role: 'assistant',
          content: message.content ?? null,
          refusal: message.refusal ?? null,
          ...(message.tool_calls?.length ? { tool_calls: message.tool_calls } : {}),
        },
        finish_reason: finishReason(choice.finish_reason) ?? 'stop',
        logprobs: null,
      };
    }),
    ...(usage ? { usage } : {}),
  };
}

export function fromWatsonxChunk(chunk: WatsonxChat, model: string, id: string): CompletionChunk {
  const usage = usageOf(chunk.usage);
  return {
    id: chunk.id ?? id,
    object: 'chat.completion.chunk',
    created: chunk.created ?? 0,
    model: chunk.model_id ?? chunk.model ?? model,
    choices: (chunk.choices ?? []).map((choice, position) => {
      const delta = choice.delta ?? {};
      return {
        index: choice.index ?? position,
        delta: {
          ...(delta.role ? { role: delta.role as 'assistant' } : {}),
          ...(delta.content !== undefined ? { content: delta.content } : {}),
          ...(delta.refusal !== undefined ? { refusal: delta.refusal } : {}),
          // a fragment's index defaults to its position, as any-llm reads it
          ...(delta.tool_calls?.length ? { tool_calls: delta.tool_calls.map((call, i) => ({ ...call, index: call.index ?? i })) } : {}),
        },
        finish_reason: finishReason(choice.finish_reason),
        logprobs: null,
      };
    }),
    ...(usage ? { usage } : {}),
  };
}

/** Where the calls go: the project or space, the API version and the token source of one provider instance. */
interface WatsonxClient {
  base: string;
  version: string;
  headers: Record<string, string>;
  scope: () => Record<string, string>;
  tokens: IamTokens;
}

function clientOf(options: ProviderOptions): WatsonxClient {
  const { project_id, space_id, iam_url, version, headers } = (options.client_args ?? {}) as WatsonxClientArgs;
  const env = process.env;
  const scope = (): Record<string, string> => {
    // client_args first (as any-llm passes project_id to IBM's SDK), then the environment
    const project = project_id ?? (space_id ? undefined : env.WATSONX_PROJECT_ID);
    const space = space_id ?? (project ? undefined : env.WATSONX_SPACE_ID);
    if (project) return { project_id: project };
    if (space) return { space_id: space };
    throw new InvalidRequestError(
      'watsonx needs a project or a deployment space: set WATSONX_PROJECT_ID (or WATSONX_SPACE_ID), or pass client_args.project_id',
      null,
      metadata.name,
      { param: 'project_id' },
    );
  };
  return {
    base: options.api_base ?? env.WATSONX_URL ?? WATSONX_DEFAULT_API_BASE,
    version: version ?? WATSONX_API_VERSION,
    headers: headers ?? {},
    scope,
    tokens: new IamTokens(options.api_key ?? '', iam_url ?? env.WATSONX_IAM_URL ?? WATSONX_IAM_URL),
  };
}

export function createWatsonx(options: ProviderOptions): Provider {
  const client = clientOf(options);

  /** One call with a bearer token; a 401 to a cached token renews it and tries once more. Non-2xx → VendorHttpError. */
  async function send(path: string, init: { method: 'GET' | 'POST'; body?: unknown; query?: Record<string, string> }, call: CallOptions): Promise<Response> {
    const url = new URL(joinUrl(client.base, path));
    url.searchParams.set('version', client.version);
    for (const [key, value] of Object.entries(init.query ?? {})) url.searchParams.set(key, value);
    for (let attempt = 0; ; attempt++) {
      const token = await client.tokens.get(call.signal);
      const response = await fetch(url, {
        method: init.method,
        headers: {
          accept: 'application/json',
          ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...client.headers,
          authorization: `Bearer ${token.value}`,
        },
        ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
        ...(call.signal ? { signal: call.signal } : {}),
      });
      if (response.ok) return response;
      const text = await response.text();
      if (response.status === 401 && !token.fresh && attempt === 0) {
        // the cached token expired early or was revoked: fetch a new one and try again
        client.tokens.invalidate(token.value);
        continue;
      }
      throw new VendorHttpError(response.status, response.headers, text, url.toString());
    }
  }

  async function chat(request: Record<string, unknown>, call: CallOptions): Promise<CompletionResponse> {
    const body = toWatsonxChat(request, client.scope());
    const response = await send('/ml/v1/text/chat', { method: 'POST', body }, call);
    const text = await response.text();
    let answer: WatsonxChat;
    try {
      answer = JSON.parse(text) as WatsonxChat;
    } catch (error) {
      throw new ProviderError(`The watsonx chat answer is not JSON: ${text.slice(0, 200)}`, error, metadata.name);
    }
    return fromWatsonxChat(answer, String(request.model));
  }

  async function* chatStream(request: Record<string, unknown>, call: CallOptions): AsyncGenerator<CompletionChunk> {
    const body = toWatsonxChat(request, client.scope());
    const response = await send('/ml/v1/text/chat_stream', { method: 'POST', body }, call);
    if (!response.body) throw new ProviderError('The watsonx stream answered without a body', null, metadata.name);
    const id = `chatcmpl-${crypto.randomUUID()}`;
    let finished = false;
    for await (const event of readSse(response.body)) {
      if (event.event === 'error') throw new VendorHttpError(500, response.headers, event.data, response.url);
      if (event.event !== undefined && event.event !== 'message') continue;
      if (event.data === '[DONE]') break;
      let chunk: WatsonxChat;
      try {
        chunk = JSON.parse(event.data) as WatsonxChat;
      } catch (error) {
        throw new ProviderError(`A watsonx stream event is not JSON: ${event.data.slice(0, 200)}`, error, metadata.name);
      }
      const converted = fromWatsonxChunk(chunk, String(request.model), id);
      if (converted.choices.some((choice) => choice.finish_reason)) finished = true;
      yield converted;
    }
    // the body ended without a finish reason: the answer was cut
    if (!finished) throw incompleteStreamError(metadata.name);
  }

  return {
    metadata,
    async messages(params, call) {
      return chatCompletionToMessage(await chat({ ...messagesToChatRequest(params, dialect), ...call.extra }, call), metadata.name);
    },
    async *messagesStream(params, call) {
      const request = { ...messagesToChatRequest(params, dialect), ...call.extra };
      yield* chatChunksToMessageEvents(chatStream(request, call), metadata.name);
    },
    completion: (params, call) => chat({ ...params, ...call.extra }, call),
    completionStream: (params, call) => chatStream({ ...params, ...call.extra }, call),
    async listModels(call): Promise<Model[]> {
      const models: Model[] = [];
      let start: string | undefined;
      // the catalog is paged (limit at most 200); `next.href` carries the next page's `start` token
      for (let page = 0; page < 100; page++) {
        const response = await send('/ml/v1/foundation_model_specs', { method: 'GET', query: { limit: '200', ...(start ? { start } : {}) } }, call);
        const answer = (await response.json()) as { resources?: { model_id?: string; provider?: string }[]; next?: { href?: string } };
        for (const resource of answer.resources ?? []) {
          if (typeof resource.model_id === 'string' && resource.model_id !== '') models.push({ id: resource.model_id, object: 'model', created: 0, owned_by: 'watsonx' });
        }
        const next = answer.next?.href ? new URL(answer.next.href, client.base).searchParams.get('start') : null;
        if (!next || next === start) break;
        start = next;
      }
      return models;
    },
    toHubError: watsonxErrorToHub,
  };
}

/**
 * watsonx errors: `{errors: [{code, message, more_info}], trace, status_code}`; IBM IAM's: `{errorCode, errorMessage}`.
 * A key the token endpoint refuses (400 BXNIM0415E "Provided API key could not be found", 401, 403) is an
 * AuthenticationError.
 */
export function watsonxErrorToHub(error: unknown): HubError | undefined {
  if (isAbortError(error)) return undefined;
  if (error instanceof VendorHttpError) {
    let body: unknown = error.body;
    try {
      body = JSON.parse(error.body);
    } catch {
      // a text body is read as the message
    }
    const record = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
    if (error instanceof IamTokenError) {
      const message = typeof record.errorMessage === 'string' ? record.errorMessage : error.message;
      const code = typeof record.errorCode === 'string' ? record.errorCode : null;
      if (error.status === 400 || error.status === 401 || error.status === 403) {
        return new AuthenticationError(`IBM IAM refused the API key: ${message}`, error, metadata.name, { status_code: error.status, code });
      }
      return answerFailure(metadata.name, { status: error.status, body: { message, code }, headers: error.headers, fallback_message: error.message }, error);
    }
    const first = Array.isArray(record.errors) ? (record.errors[0] as Record<string, unknown> | undefined) : undefined;
    return answerFailure(
      metadata.name,
      { status: error.status, body: first ? { message: first.message, code: first.code } : body, headers: error.headers, fallback_message: error.message },
      error,
    );
  }
  if (isNetworkError(error)) return networkFailure(metadata.name, error);
  return undefined;
}
