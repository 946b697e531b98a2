import { acompletion, aembedding, alist_models, amessages } from '../hub/index.ts';
import type { AnthropicMessage, AnthropicStreamEvent, ChatCompletion, ChatCompletionChunk, EmbeddingResponse, ModelInfo, ProviderSettings, Upstream } from './upstream.ts';
import { upstreamErrorOf } from './upstream.ts';

/**
 * Provider calls through Hub (src/hub): `provider:model` names a Hub provider, whose key and base address come from
 * the gateway configuration. Hub's own retries are off (max_retries 0): the gateway's client decides whether to
 * retry, and a retried call would otherwise hold its budget reservation and connection for several attempts.
 * Errors come back as Hub's unified exceptions and leave as GatewayErrors (see upstreamErrorOf).
 */
export class HubUpstream implements Upstream {
  readonly #settings: Record<string, ProviderSettings>;
  readonly #timeoutMs: number;

  constructor(settings: Record<string, ProviderSettings>, options: { timeoutMs?: number } = {}) {
    this.#settings = settings;
    this.#timeoutMs = options.timeoutMs ?? 600_000;
  }

  get providers(): string[] {
    return Object.keys(this.#settings);
  }

  #options(provider: string, signal: AbortSignal) {
    const settings = this.#settings[provider] ?? {};
    return {
      provider,
      api_key: settings.api_key,
      api_base: settings.api_base,
      max_retries: 0,
      timeout: this.#timeoutMs,
      unified_exceptions: true,
      signal,
    };
  }

  async chat(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<ChatCompletion> {
    return call(provider, () => acompletion({ ...body, ...this.#options(provider, signal), model, stream: false } as Parameters<typeof acompletion>[0] & { stream: false }));
  }

  async chatStream(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AsyncIterable<ChatCompletionChunk>> {
    const stream = acompletion({ ...body, ...this.#options(provider, signal), model, stream: true } as Parameters<typeof acompletion>[0] & { stream: true });
    return firstEventOrError(provider, stream);
  }

  async embeddings(provider: string, model: string, inputs: string[], signal: AbortSignal): Promise<EmbeddingResponse> {
    return call(provider, () => aembedding({ ...this.#options(provider, signal), model, inputs }));
  }

  async models(provider: string, signal: AbortSignal): Promise<ModelInfo[]> {
    return call(provider, () => alist_models(this.#options(provider, signal)));
  }

  async messages(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AnthropicMessage> {
    return call(provider, () => amessages({ ...body, ...this.#options(provider, signal), model, stream: false } as Parameters<typeof amessages>[0] & { stream: false }) as Promise<AnthropicMessage>);
  }

  async messagesStream(provider: string, model: string, body: Record<string, unknown>, signal: AbortSignal): Promise<AsyncIterable<AnthropicStreamEvent>> {
    const stream = amessages({ ...body, ...this.#options(provider, signal), model, stream: true } as Parameters<typeof amessages>[0] & { stream: true });
    return firstEventOrError(provider, stream);
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
async function firstEventOrError<T>(provider: string, stream: AsyncIterable<T>): Promise<AsyncIterable<T>> {
  const iterator = stream[Symbol.asyncIterator]();
  let first: IteratorResult<T>;
  try {
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
