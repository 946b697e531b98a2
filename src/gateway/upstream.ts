import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { GatewayError } from './errors.ts';

export type ChatCompletion = OpenAI.ChatCompletion;
export type ChatCompletionChunk = OpenAI.ChatCompletionChunk;
export type EmbeddingResponse = OpenAI.CreateEmbeddingResponse;
export type ModelInfo = OpenAI.Models.Model;
export type AnthropicMessage = Anthropic.Message;
export type AnthropicStreamEvent = Anthropic.RawMessageStreamEvent;

export interface ProviderSettings {
  api_key?: string;
  api_base?: string;
}

/**
 * The gateway's one door to the providers. Route handlers call these methods and never a vendor SDK; the
 * implementation below is to be backed by Hub (src/hub) once its public API lands, without changing callers.
 * Every failure comes out as a GatewayError with the status the client should see (see `upstreamErrorOf`).
 */
export interface Upstream {
  chat(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<ChatCompletion>;
  chatStream(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AsyncIterable<ChatCompletionChunk>>;
  embeddings(provider: string, model: string, inputs: string[], signal: AbortSignal): Promise<EmbeddingResponse>;
  models(provider: string, signal: AbortSignal): Promise<ModelInfo[]>;
  messages(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AnthropicMessage>;
  messagesStream(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AsyncIterable<AnthropicStreamEvent>>;
  /** Providers named in the configuration (listed by GET /v1/models). */
  readonly providers: string[];
}

/**
 * Provider calls through the vendors' own SDKs: OpenAI-compatible providers through `openai`, `anthropic`
 * through `@anthropic-ai/sdk`. Retries are off (the client decides). Interim until Hub's public API exists.
 */
export class SdkUpstream implements Upstream {
  readonly #settings: Record<string, ProviderSettings>;
  readonly #timeoutMs: number;
  readonly #openai = new Map<string, OpenAI>();
  readonly #anthropic = new Map<string, Anthropic>();

  constructor(settings: Record<string, ProviderSettings>, options: { timeoutMs?: number } = {}) {
    this.#settings = settings;
    this.#timeoutMs = options.timeoutMs ?? 600_000;
  }

  get providers(): string[] {
    return Object.keys(this.#settings);
  }

  #openaiClient(provider: string): OpenAI {
    let client = this.#openai.get(provider);
    if (!client) {
      const settings = this.#settingsOf(provider);
      client = new OpenAI({ apiKey: settings.api_key ?? 'none', baseURL: settings.api_base, maxRetries: 0, timeout: this.#timeoutMs });
      this.#openai.set(provider, client);
    }
    return client;
  }

  #anthropicClient(provider: string): Anthropic {
    let client = this.#anthropic.get(provider);
    if (!client) {
      const settings = this.#settingsOf(provider);
      client = new Anthropic({ apiKey: settings.api_key ?? 'none', baseURL: settings.api_base, maxRetries: 0, timeout: this.#timeoutMs });
      this.#anthropic.set(provider, client);
    }
    return client;
  }

  #settingsOf(provider: string): ProviderSettings {
    const settings = this.#settings[provider];
    if (!settings) {
      throw new GatewayError(400, 'invalid_request_error', 'unknown_provider', `Provider "${provider}" is not configured on this gateway (configured: ${this.providers.join(', ') || 'none'})`, {
        param: 'model',
      });
    }
    return settings;
  }

  async chat(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<ChatCompletion> {
    return call(provider, () =>
      this.#openaiClient(provider).chat.completions.create({ ...body, model, stream: false } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming, { signal }),
    );
  }

  async chatStream(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AsyncIterable<ChatCompletionChunk>> {
    const stream = await call(provider, () =>
      this.#openaiClient(provider).chat.completions.create({ ...body, model, stream: true } as unknown as OpenAI.ChatCompletionCreateParamsStreaming, { signal }),
    );
    return mapErrors(provider, stream);
  }

  async embeddings(provider: string, model: string, inputs: string[], signal: AbortSignal): Promise<EmbeddingResponse> {
    return call(provider, () => this.#openaiClient(provider).embeddings.create({ model, input: inputs, encoding_format: 'float' }, { signal }));
  }

  async models(provider: string, signal: AbortSignal): Promise<ModelInfo[]> {
    return call(provider, async () => {
      const models: ModelInfo[] = [];
      if (provider === 'anthropic') {
        for await (const model of this.#anthropicClient(provider).models.list({}, { signal })) {
          models.push({ id: model.id, object: 'model', created: Math.floor(Date.parse(model.created_at) / 1000), owned_by: 'anthropic' });
        }
        return models;
      }
      for await (const model of this.#openaiClient(provider).models.list({ signal })) models.push(model);
      return models;
    });
  }

  async messages(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AnthropicMessage> {
    return call(provider, () =>
      this.#anthropicClient(provider).messages.create({ ...body, model, stream: false } as unknown as Anthropic.MessageCreateParamsNonStreaming, { signal }),
    );
  }

  async messagesStream(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AsyncIterable<AnthropicStreamEvent>> {
    const stream = await call(provider, () =>
      this.#anthropicClient(provider).messages.create({ ...body, model, stream: true } as unknown as Anthropic.MessageCreateParamsStreaming, { signal }),
    );
    return mapErrors(provider, stream);
  }
}

async function call<T>(provider: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw upstreamErrorOf(error, provider);
  }
}

async function* mapErrors<T>(provider: string, stream: AsyncIterable<T>): AsyncIterable<T> {
  try {
    yield* stream;
  } catch (error) {
    throw upstreamErrorOf(error, provider);
  }
}

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
    code?: unknown;
    param?: unknown;
  };
  const name = (error as object | null)?.constructor?.name ?? e.name ?? '';
  const status = typeof e.status_code === 'number' ? e.status_code : typeof e.status === 'number' ? e.status : null;
  const text = stripSecrets(e.raw_message ?? e.message ?? String(error));
  const message = `Provider ${provider}: ${text}`;
  const param = typeof e.param === 'string' ? e.param : null;
  if (name === 'RateLimitError' || status === 429) {
    return new GatewayError(429, 'rate_limit_error', 'upstream_rate_limited', message, { retryAfter: retryAfterOf(e) ?? 1, cause: error });
  }
  if (name === 'GatewayTimeoutError' || name === 'APIConnectionTimeoutError' || status === 504 || status === 408) {
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
  return new GatewayError(502, 'upstream_error', 'upstream_error', message, { cause: error });
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

/** Provider messages sometimes echo a key ("Incorrect API key provided: sk-abc…"); keep them out of responses. */
export function stripSecrets(text: string): string {
  return text.replace(/\b(sk|gw|pk|rk|key)-[A-Za-z0-9_*.-]{6,}/g, '$1-***');
}
