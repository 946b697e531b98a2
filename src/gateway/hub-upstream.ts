import { Hub } from '../hub/index.ts';
import { OPENAI_COMPATIBLE_SERVICES } from '../hub/providers/openai/index.ts';
import type { Connection } from './model-router.ts';
import { createNodeFetch } from './node-fetch.ts';
import type {
  AnthropicMessage,
  AnthropicStreamEvent,
  ChatCompletion,
  ChatCompletionChunk,
  EmbeddingOptions,
  EmbeddingResponse,
  ModelInfo,
  ProviderSettings,
  RerankQuery,
  RerankResult,
  ResponsesResult,
  ResponsesStreamEvent,
  Upstream,
} from './upstream.ts';
import { upstreamErrorOf } from './upstream.ts';

/** Hub providers built on the openai or Anthropic SDK, whose clients take a `fetch` option (client_args). */
const FETCH_OPTION_PROVIDERS = new Set([...OPENAI_COMPATIBLE_SERVICES.map((service) => service.metadata.name), 'anthropic']);

/**
 * Provider calls through Hub (src/hub): `provider:model` names a Hub provider, whose key and base address come from
 * the gateway configuration; one `Hub` instance per provider, made at its first call. The `provider` argument of
 * every method may also name one of the `connections` (a model route target with its own key, address or timeout,
 * see ModelRouter), which gets a `Hub` of its own. Hub's own retries are off
 * (max_retries 0): the gateway's client decides whether to retry, and a retried call would otherwise hold its
 * budget reservation and connection for several attempts. Errors come back as Hub's unified exceptions and leave
 * as GatewayErrors (see upstreamErrorOf).
 */
export class HubUpstream implements Upstream {
  #settings: Record<string, ProviderSettings>;
  readonly #connections: Record<string, Connection>;
  readonly #timeoutMs: number;
  readonly #hubs = new Map<string, Hub>();
  readonly #fetch = createNodeFetch();

  constructor(settings: Record<string, ProviderSettings>, options: { timeoutMs?: number; connections?: Record<string, Connection> } = {}) {
    this.#settings = settings;
    this.#connections = options.connections ?? {};
    this.#timeoutMs = options.timeoutMs ?? 600_000;
  }

  get providers(): string[] {
    return Object.keys(this.#settings);
  }

  /**
   * New provider settings (a change of the runtime configuration; the connections object is the router's, changed in
   * place). Clients are made again at their next call; calls in flight finish on the client they started with.
   */
  reconfigure(settings: Record<string, ProviderSettings>): void {
    this.#settings = settings;
    this.#hubs.clear();
  }

  #hub(name: string): Hub {
    let hub = this.#hubs.get(name);
    if (!hub) {
      const connection = this.#connections[name];
      const provider = connection?.provider ?? name;
      const settings = connection ?? this.#settings[name] ?? {};
      hub = Hub.create(provider, {
        api_key: settings.api_key,
        api_base: settings.api_base,
        max_retries: 0,
        timeout: connection?.timeoutMs ?? this.#timeoutMs,
        unified_exceptions: true,
        ...(FETCH_OPTION_PROVIDERS.has(provider) ? { client_args: { fetch: this.#fetch } } : {}),
      });
      this.#hubs.set(name, hub);
    }
    return hub;
  }

  /**
   * OpenAI's own API (and Azure OpenAI's) wants max_completion_tokens — its reasoning models refuse max_tokens; every
   * other provider takes max_tokens (Hub sends it under the vendor's own field: maxOutputTokens, num_predict, …).
   */
  chatOutputLimitField(provider: string): 'max_tokens' | 'max_completion_tokens' {
    const name = this.#providerOf(provider);
    return OPENAI_COMPATIBLE_SERVICES.find((service) => service.metadata.name === name)?.dialect.max_tokens_field ?? 'max_tokens';
  }

  /** The provider a name stands for, for error messages: a connection's provider, or the name itself. */
  #providerOf(name: string): string {
    return this.#connections[name]?.provider ?? name;
  }

  async chat(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<ChatCompletion> {
    return call(this.#providerOf(provider), () => this.#hub(provider).acompletion({ ...body, model, signal, stream: false } as Parameters<Hub['acompletion']>[0] & { stream: false }));
  }

  async chatStream(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AsyncIterable<ChatCompletionChunk>> {
    return firstEventOrError(this.#providerOf(provider), () => this.#hub(provider).acompletion({ ...body, model, signal, stream: true } as Parameters<Hub['acompletion']>[0] & { stream: true }));
  }

  async embeddings(provider: string, model: string, inputs: string[], signal: AbortSignal, options: EmbeddingOptions = {}): Promise<EmbeddingResponse> {
    // Hub sends dimensions under the provider's own field, or refuses it (UnsupportedParameterError → 400)
    const dimensions = options.dimensions !== undefined ? { dimensions: options.dimensions } : {};
    return call(this.#providerOf(provider), () => this.#hub(provider).aembedding({ model, inputs, signal, ...dimensions }));
  }

  async rerank(provider: string, model: string, request: RerankQuery, signal: AbortSignal): Promise<RerankResult> {
    // Hub sends top_n and max_tokens_per_doc under the provider's own fields, or refuses them (→ 400)
    return call(this.#providerOf(provider), () => this.#hub(provider).arerank({ ...request, model, signal }));
  }

  async models(provider: string, signal: AbortSignal): Promise<ModelInfo[]> {
    return call(this.#providerOf(provider), () => this.#hub(provider).alist_models({ signal }));
  }

  async countTokens(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<{ input_tokens: number } | null> {
    const hub = this.#hub(provider);
    if (!hub.get_provider_metadata().count_tokens) return null;
    return call(this.#providerOf(provider), () => hub.acount_tokens({ ...body, model, signal } as Parameters<Hub['acount_tokens']>[0]));
  }

  async messages(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AnthropicMessage> {
    return call(this.#providerOf(provider), () => this.#hub(provider).amessages({ ...body, model, signal, stream: false } as Parameters<Hub['amessages']>[0] & { stream: false }) as Promise<AnthropicMessage>);
  }

  async messagesStream(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AsyncIterable<AnthropicStreamEvent>> {
    return firstEventOrError(this.#providerOf(provider), () => this.#hub(provider).amessages({ ...body, model, signal, stream: true } as Parameters<Hub['amessages']>[0] & { stream: true }));
  }

  async responses(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<ResponsesResult> {
    return call(this.#providerOf(provider), async () => (await this.#hub(provider).aresponses({ ...body, model, signal, stream: false } as Parameters<Hub['aresponses']>[0] & { stream: false })) as unknown as ResponsesResult);
  }

  async responsesStream(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AsyncIterable<ResponsesStreamEvent>> {
    return firstEventOrError(this.#providerOf(provider), () => this.#hub(provider).aresponses({ ...body, model, signal, stream: true } as Parameters<Hub['aresponses']>[0] & { stream: true }) as AsyncIterable<ResponsesStreamEvent>);
  }
}

async function call<T>(provider: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw upstreamErrorOf(error, provider);
  }
}

/**
 * Waits for a stream's first event, so that a call the provider refuses outright (429, 400, 401) is answered with
 * that status instead of a 200 stream that carries an error event; later failures surface while iterating.
 */
async function firstEventOrError<T>(provider: string, open: () => AsyncIterable<T>): Promise<AsyncIterable<T>> {
  let iterator: AsyncIterator<T>;
  let first: IteratorResult<T>;
  try {
    iterator = open()[Symbol.asyncIterator]();
    first = await iterator.next();
  } catch (error) {
    throw upstreamErrorOf(error, provider);
  }
  return {
    async *[Symbol.asyncIterator]() {
      try {
        if (first.done) return;
        yield first.value;
        for (;;) {
          const next = await iterator.next();
          if (next.done) return;
          yield next.value;
        }
      } catch (error) {
        throw upstreamErrorOf(error, provider);
      } finally {
        await iterator.return?.();
      }
    },
  };
}
