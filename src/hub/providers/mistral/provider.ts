// Mistral through @mistralai/mistralai: Messages converted to chat completions, embeddings, models, batch jobs.

import { Mistral } from '@mistralai/mistralai';
import type { EmbeddingResponse, Model, Provider, ProviderOptions } from '../../provider.ts';
import { rejectUnknownExtra } from '../../message-format/request.ts';
import { outputDimension } from '../shared/embeddings.ts';
import { mistralBatches } from './batches.ts';
import { signalledHttpClient, withCallSignal, withCallSignals } from './call-signal.ts';
import { fromMistralResponse, fromMistralStream, toMistralRequest } from './convert.ts';
import { mistralErrorToHub } from './errors.ts';
import { MISTRAL_DEFAULT_API_BASE, metadata } from './metadata.ts';

export function createMistral(options: ProviderOptions): Provider {
  const client = new Mistral({
    apiKey: options.api_key,
    serverURL: options.api_base ?? MISTRAL_DEFAULT_API_BASE,
    // the Hub core owns retries
    retryConfig: { strategy: 'none' },
    // aborts and timeouts reach a request after its headers too (see call-signal.ts)
    httpClient: signalledHttpClient(),
    ...(options.client_args as object),
  });
  const requestOptions = (signal: AbortSignal | undefined) => ({ fetchOptions: { signal: signal ?? null } });

  return {
    metadata,
    async messages(params, call) {
      const response = await withCallSignal(call, () => client.chat.complete(toMistralRequest(params, call.extra), requestOptions(call.signal)));
      return fromMistralResponse(response, params.model);
    },
    async *messagesStream(params, call) {
      const events = await withCallSignal(call, () => client.chat.stream(toMistralRequest(params, call.extra), requestOptions(call.signal)));
      yield* fromMistralStream(cancelledOnAbort(events, call.signal), params.model);
    },
    async embedding(params, call): Promise<EmbeddingResponse> {
      rejectUnknownExtra(call.extra, ['outputDimension', 'outputDtype', 'encodingFormat', 'metadata'], metadata.name);
      const request = { model: params.model, inputs: params.inputs, ...call.extra, ...outputDimension(params, call.extra, 'outputDimension', ['outputDimension'], metadata.name) };
      const response = await withCallSignal(call, () => client.embeddings.create(request, requestOptions(call.signal)));
      return {
        object: 'list',
        model: response.model,
        data: response.data.map((item, i) => ({ object: 'embedding', index: item.index ?? i, embedding: item.embedding ?? [] })),
        usage: { prompt_tokens: response.usage.promptTokens ?? 0, total_tokens: response.usage.totalTokens ?? 0 },
      };
    },
    async listModels(call): Promise<Model[]> {
      const list = await withCallSignal(call, () => client.models.list({}, requestOptions(call.signal)));
      // model cards of an unknown type still carry the API's id/created/owned_by fields
      return (list.data ?? []).map((card) => {
        const model = card as { id?: string; created?: number; ownedBy?: string; owned_by?: string };
        return { id: model.id ?? '', object: 'model', created: model.created ?? 0, owned_by: model.ownedBy ?? model.owned_by ?? 'mistralai' };
      });
    },
    batches: withCallSignals(mistralBatches(client)),
    toHubError: (error) => mistralErrorToHub(error, metadata.name),
  };
}

/**
 * Reads a Mistral event stream so that aborting the call cancels it at once, which closes the connection, and so that
 * an early stop (break, a conversion error) closes it too.
 */
async function* cancelledOnAbort<T>(stream: ReadableStream<T>, signal: AbortSignal | undefined): AsyncGenerator<T> {
  const reader = stream.getReader();
  const onAbort = () => void reader.cancel(signal?.reason).catch(() => {});
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    if (signal?.aborted) throw signal.reason;
    for (;;) {
      const step = await reader.read();
      if (signal?.aborted) throw signal.reason;
      if (step.done) return;
      yield step.value;
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    // An early stop (break, a conversion error) must close the connection too.
    await reader.cancel().catch(() => {});
  }
}

