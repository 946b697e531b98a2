// One implementation for OpenAI and every OpenAI-compatible service, on the official `openai` SDK.
// Messages requests are converted to chat completions and back by the shared converters in ../../openai-chat/.

import OpenAI from 'openai';
import { chatChunksToMessageEvents, chatCompletionToMessage, withCachedTokens } from '../../openai-chat/response-from-chat.ts';
import { messagesToChatRequest } from '../../openai-chat/request-to-chat.ts';
import type { ChatDialect } from '../../openai-chat/request-to-chat.ts';
import type { CallOptions, CompletionParams, MessagesParams, Model, Provider, ProviderOptions } from '../../provider.ts';
import { incompleteStreamError } from '../../message-format/stream-builder.ts';
import { ProviderError } from '../../errors.ts';
import { float32sOfBase64 } from '../shared/embeddings.ts';
import { openAIBatches } from './batches.ts';
import { openAIErrorToHub } from './errors.ts';
import { createJsonPost } from './json-post.ts';
import { otariBatches } from './otari-batches.ts';
import { adaptChatRequest, adaptChunks, adaptCompletion, completeModel } from './quirks.ts';
import { baseAddress, type OpenAICompatibleService } from './services.ts';

function createClient(service: OpenAICompatibleService, options: ProviderOptions): OpenAI {
  return new OpenAI({
    // Local servers without a key still get a placeholder: the SDK refuses to start without one.
    apiKey: options.api_key ?? 'no-key',
    baseURL: baseAddress(service, options),
    // The Hub core owns retries and timeouts (one policy).
    maxRetries: 0,
    ...(options.timeout !== undefined ? { timeout: options.timeout } : {}),
    ...(service.azure && options.api_key ? { defaultHeaders: { 'api-key': options.api_key } } : {}),
    ...(service.default_query ? { defaultQuery: service.default_query } : {}),
    ...(options.client_args as Partial<ConstructorParameters<typeof OpenAI>[0]>),
  });
}

export function createOpenAICompatible(service: OpenAICompatibleService, options: ProviderOptions): Provider {
  const name = service.metadata.name;
  const client = createClient(service, options);
  const dialect: ChatDialect = { provider_name: name, ...service.dialect };
  const streamOptions = service.stream_usage ? { stream_options: { include_usage: true } } : {};
  // Always an explicit encoding_format, so that the SDK hands the answer over as it came (unless told, it asks for
  // base64 and decodes every vector as base64): OpenAI's compact base64 for OpenAI and Azure, floats elsewhere (what
  // embedding servers that ignore the field answer anyway). Either way the vectors are read by what arrived.
  const embeddingFormat = { encoding_format: name === 'openai' || name === 'azureopenai' ? ('base64' as const) : ('float' as const) };
  const quirks = service.quirks;
  // The caller's extra fields come last: they may replace anything, stream_options included.
  const chatRequest = (params: MessagesParams, call: CallOptions, stream = false) =>
    adaptChatRequest({ ...messagesToChatRequest(params, dialect), ...(stream ? streamOptions : {}), ...call.extra }, quirks, name, 'messages');
  const completionRequest = (params: CompletionParams, call: CallOptions) =>
    adaptChatRequest({ ...params, ...call.extra }, quirks, name, 'completion');
  // Non-streamed chat completions of a plain client skip the SDK's per-call work (json-post.ts says what it keeps).
  const post = createJsonPost(client, options.client_args as Record<string, unknown> | undefined);
  const createCompletion = (body: OpenAI.ChatCompletionCreateParamsNonStreaming, signal: AbortSignal | undefined): Promise<OpenAI.ChatCompletion> =>
    post ? (post('/chat/completions', body, signal) as Promise<OpenAI.ChatCompletion>) : client.chat.completions.create(body, { signal });
  return {
    metadata: service.metadata,
    async messages(params, call) {
      const completion = await createCompletion(chatRequest(params, call), call.signal);
      return chatCompletionToMessage(adaptCompletion(completion, quirks), name);
    },
    async *messagesStream(params, call) {
      const body = { ...chatRequest(params, call, true), stream: true as const };
      const stream = await client.chat.completions.create(body, { signal: call.signal });
      yield* chatChunksToMessageEvents(adaptChunks(stream, quirks), name);
    },
    async completion(params, call) {
      const completion = await createCompletion({ ...completionRequest(params, call), stream: false }, call.signal);
      withCachedTokens(completion.usage);
      return adaptCompletion(completion, quirks);
    },
    async *completionStream(params, call) {
      const stream = await client.chat.completions.create({ ...completionRequest(params, call), stream: true }, { signal: call.signal });
      // A stream that ends without any finish_reason was cut short (the SDK ends quietly when the body ends).
      let finished = false;
      for await (const chunk of adaptChunks(stream, quirks)) {
        withCachedTokens(chunk.usage);
        if (chunk.choices?.some((choice) => choice.finish_reason)) finished = true;
        yield chunk;
      }
      if (!finished) throw incompleteStreamError(name);
    },
    ...(service.metadata.responses
      ? {
          responses: (params, call) => client.responses.create({ ...params, ...call.extra, stream: false }, { signal: call.signal }),
          async *responsesStream(params, call) {
            const stream = await client.responses.create({ ...params, ...call.extra, stream: true }, { signal: call.signal });
            yield* stream;
          },
        }
      : {}),
    ...(service.metadata.embedding
      ? {
          embedding: async ({ model, inputs, dimensions }, call) =>
            embeddingsAsFloats(
              name,
              await client.embeddings.create(
                { model, input: inputs, ...embeddingFormat, ...call.extra, ...(dimensions !== undefined ? { dimensions } : {}) },
                { signal: call.signal },
              ),
            ),
        }
      : {}),
    ...(service.metadata.list_models
      ? {
          async listModels(call) {
            const catalog = quirks.model_catalog;
            if (catalog) {
              const body = await client.get(catalog.url(client.baseURL), { signal: call.signal, ...(catalog.headers ? { headers: catalog.headers } : {}) });
              return catalog.models(body, name);
            }
            const models: Model[] = [];
            for await (const model of client.models.list({ signal: call.signal })) models.push(completeModel(model, name));
            return models;
          },
        }
      : {}),
    ...(service.metadata.batch ? { batches: service.batch_api === 'otari' ? otariBatches(client, name) : openAIBatches(client, name) } : {}),
    toHubError: (error) => openAIErrorToHub(error, name),
  };
}

/**
 * An embeddings answer with every vector as numbers, by what arrived: a string is base64 of little-endian float32s
 * (what OpenAI sends for `encoding_format: "base64"`), an array is kept. Given an `encoding_format`, the SDK returns
 * the answer as it came (left to itself it asks for base64 and decodes every vector as base64, so a server that
 * ignores the field and answers arrays gave empty vectors).
 */
function embeddingsAsFloats(provider: string, response: OpenAI.CreateEmbeddingResponse): OpenAI.CreateEmbeddingResponse {
  for (const item of Array.isArray(response?.data) ? response.data : []) {
    const embedding = item?.embedding as unknown;
    if (typeof embedding !== 'string') continue;
    const floats = float32sOfBase64(embedding);
    if (floats === null) throw new ProviderError(`${provider} answered a base64 embedding that is not whole float32s`, null, provider);
    item.embedding = floats;
  }
  return response;
}
