// Ollama through the ollama SDK: Messages converted to /api/chat (NDJSON streaming), embeddings (/api/embed),
// local models (/api/tags). No key is needed; one given is sent as a bearer token (for Ollama behind a proxy).

import { Ollama, type ChatResponse } from 'ollama';
import type { EmbeddingResponse, Model, Provider, ProviderOptions } from '../../provider.ts';
import { embeddingList } from '../shared/embeddings.ts';
import { fromOllamaResponse, fromOllamaStream, toOllamaRequest } from './convert.ts';
import { isOllamaResponseError, ollamaErrorToHub } from './errors.ts';
import { OLLAMA_DEFAULT_API_BASE, metadata } from './metadata.ts';

export function createOllama(options: ProviderOptions): Provider {
  const host = options.api_base ?? OLLAMA_DEFAULT_API_BASE;
  const headers = options.api_key ? { Authorization: `Bearer ${options.api_key}` } : undefined;

  /**
   * One SDK client per call: its fetch carries the call's AbortSignal (the SDK has no per-call signal) and keeps
   * the headers of a failed response so Retry-After reaches the error (the SDK's ResponseError drops them).
   */
  async function withClient<T>(signal: AbortSignal | undefined, run: (client: Ollama) => Promise<T>): Promise<T> {
    let failedHeaders: Headers | undefined;
    const client = new Ollama({
      host,
      ...(headers ? { headers } : {}),
      ...(options.client_args as object),
      fetch: async (input: string | URL | Request, init?: RequestInit) => {
        const response = await fetch(input, { ...init, ...(signal ? { signal } : {}) });
        if (!response.ok) failedHeaders = response.headers;
        return response;
      },
    });
    try {
      return await run(client);
    } catch (error) {
      if (isOllamaResponseError(error) && failedHeaders) error.headers = failedHeaders;
      throw error;
    }
  }

  return {
    metadata,
    async messages(params, call) {
      const request = toOllamaRequest(params, call.extra);
      return fromOllamaResponse(await withClient(call.signal, (client) => client.chat({ ...request, stream: false })));
    },
    async *messagesStream(params, call) {
      const request = toOllamaRequest(params, call.extra);
      const chunks = await withClient(call.signal, (client) => client.chat({ ...request, stream: true }));
      yield* fromOllamaStream(chunks as AsyncIterable<ChatResponse>, params.model);
    },
    async embedding(params, call): Promise<EmbeddingResponse> {
      const dimensions = params.dimensions !== undefined ? { dimensions: params.dimensions } : {};
      const response = await withClient(call.signal, (client) => client.embed({ model: params.model, input: params.inputs, ...call.extra, ...dimensions }));
      return embeddingList(response.model ?? params.model, response.embeddings, response.prompt_eval_count ?? 0);
    },
    async listModels(call): Promise<Model[]> {
      const list = await withClient(call.signal, (client) => client.list());
      return list.models.map((model) => ({
        id: model.name,
        object: 'model',
        created: model.modified_at ? Math.floor(new Date(model.modified_at).getTime() / 1000) : 0,
        owned_by: 'ollama',
      }));
    },
    toHubError: (error) => ollamaErrorToHub(error, metadata.name),
  };
}
