// Gemini (Google AI Studio API) through @google/genai: Messages converted to generateContent, embeddings, models.

import { GoogleGenAI, type EmbedContentConfig } from '@google/genai';
import { rejectUnknownExtra } from '../../message-format/request.ts';
import type { EmbeddingResponse, Model, Provider, ProviderMetadata, ProviderOptions } from '../../provider.ts';
import { embeddingList, inChunks, outputDimension } from '../shared/embeddings.ts';
import { fromGeminiResponse, fromGeminiStream, toGeminiRequest } from './convert.ts';
import { geminiErrorToHub } from './errors.ts';
import { GEMINI_DEFAULT_API_BASE, metadata } from './metadata.ts';

const GEMINI_EMBED_BATCH = 100;
const GEMINI_EMBED_OPTIONS = ['taskType', 'title', 'outputDimensionality', 'mimeType', 'autoTruncate'] as const satisfies readonly (keyof EmbedContentConfig)[];

export function createGemini(options: ProviderOptions): Provider {
  const clientArgs = (options.client_args ?? {}) as Partial<NonNullable<ConstructorParameters<typeof GoogleGenAI>[0]>>;
  // no retryOptions: the SDK then makes exactly one attempt (the Hub core owns retries)
  const client = new GoogleGenAI({
    apiKey: options.api_key,
    ...clientArgs,
    httpOptions: { baseUrl: options.api_base ?? GEMINI_DEFAULT_API_BASE, ...clientArgs.httpOptions },
  });
  return genAIProvider(client, metadata);
}

/**
 * A provider over a @google/genai client: the Gemini API's (gemini) or Vertex AI's (vertexai, `vertexai: true`);
 * the SDK picks each backend's paths and request shapes, so conversions and operations are the same.
 */
export function genAIProvider(client: GoogleGenAI, metadata: ProviderMetadata): Provider {
  // Gemini names models/<id>, Vertex AI publishers/google/models/<id>
  const modelId = (name: string | undefined) => (name ?? '').replace(/^.*models\//, '');

  return {
    metadata,
    async messages(params, call) {
      const request = toGeminiRequest(params, call.extra, metadata.name);
      const response = await client.models.generateContent({ ...request, config: { ...request.config, abortSignal: call.signal } });
      return fromGeminiResponse(response, params.model);
    },
    async *messagesStream(params, call) {
      const request = toGeminiRequest(params, call.extra, metadata.name);
      const chunks = await client.models.generateContentStream({ ...request, config: { ...request.config, abortSignal: call.signal } });
      yield* fromGeminiStream(chunks, params.model, metadata.name);
    },
    async embedding(params, call): Promise<EmbeddingResponse> {
      rejectUnknownExtra(call.extra, GEMINI_EMBED_OPTIONS, metadata.name);
      const config = { ...(call.extra as EmbedContentConfig), ...outputDimension(params, call.extra, 'outputDimensionality', ['outputDimensionality'], metadata.name) };
      // batchEmbedContents takes at most 100 requests: larger inputs go in several calls, in order
      const embeddings = [];
      for (const contents of inChunks(params.inputs, GEMINI_EMBED_BATCH)) {
        const response = await client.models.embedContent({ model: params.model, contents, config: { ...config, abortSignal: call.signal } });
        embeddings.push(...(response.embeddings ?? []));
      }
      // the Gemini API reports no token counts for embeddings (Vertex AI does, in statistics)
      const tokens = embeddings.reduce((sum, e) => sum + (e.statistics?.tokenCount ?? 0), 0);
      return embeddingList(params.model, embeddings.map((e) => e.values ?? []), tokens);
    },
    async listModels(call): Promise<Model[]> {
      const models: Model[] = [];
      const pager = await client.models.list({ config: { abortSignal: call.signal } });
      for await (const model of pager) models.push({ id: modelId(model.name), object: 'model', created: 0, owned_by: 'google' });
      return models;
    },
    toHubError: (error) => geminiErrorToHub(error, metadata.name),
  };
}
