// Cohere through cohere-ai (API v2): Messages converted to v2 chat, embeddings (v2 embed), rerank (v2 rerank), models.

import { CohereClientV2 } from 'cohere-ai';
import type { EmbeddingResponse, Model, Provider, ProviderOptions, RerankResponse } from '../../provider.ts';
import { embeddingList, inChunks, outputDimension } from '../shared/embeddings.ts';
import { fromCohereResponse, fromCohereStream, toCohereRequest } from './convert.ts';
import { cohereErrorToHub } from './errors.ts';
import { COHERE_DEFAULT_API_BASE, metadata } from './metadata.ts';

const COHERE_EMBED_BATCH = 96;

export function createCohere(options: ProviderOptions): Provider {
  const client = new CohereClientV2({
    token: options.api_key,
    baseUrl: options.api_base ?? COHERE_DEFAULT_API_BASE,
    // the Hub core owns retries
    maxRetries: 0,
    ...(options.client_args as object),
  });
  const requestOptions = (signal: AbortSignal | undefined) => ({ maxRetries: 0, ...(signal ? { abortSignal: signal } : {}) });

  return {
    metadata,
    async messages(params, call) {
      return fromCohereResponse(await client.chat(toCohereRequest(params, call.extra), requestOptions(call.signal)), params.model);
    },
    async *messagesStream(params, call) {
      yield* fromCohereStream(await client.chatStream(toCohereRequest(params, call.extra), requestOptions(call.signal)), params.model);
    },
    async embedding(params, call): Promise<EmbeddingResponse> {
      // the SDK's name, and the wire name an extra option passes through under
      const dimension = outputDimension(params, call.extra, 'outputDimension', ['outputDimension', 'output_dimension'], metadata.name);
      // embed takes at most 96 texts: larger inputs go in several calls, in order
      const vectors: number[][] = [];
      let tokens = 0;
      for (const texts of inChunks(params.inputs, COHERE_EMBED_BATCH)) {
        const response = await client.embed(
          { model: params.model, texts, inputType: 'search_document', embeddingTypes: ['float'], ...call.extra, ...dimension },
          requestOptions(call.signal),
        );
        vectors.push(...(response.embeddings.float ?? []));
        tokens += response.meta?.billedUnits?.inputTokens ?? 0;
      }
      return embeddingList(params.model, vectors, tokens);
    },
    async rerank(params, call): Promise<RerankResponse> {
      // extra options are the SDK's own request fields (e.g. priority)
      const response = await client.rerank(
        {
          model: params.model,
          query: params.query,
          documents: params.documents,
          ...(params.top_n !== undefined ? { topN: params.top_n } : {}),
          ...(params.max_tokens_per_doc !== undefined ? { maxTokensPerDoc: params.max_tokens_per_doc } : {}),
          ...call.extra,
        },
        requestOptions(call.signal),
      );
      const billed = response.meta?.billedUnits;
      const tokens = response.meta?.tokens?.inputTokens;
      return {
        id: response.id ?? '',
        model: params.model,
        results: response.results.map((result) => ({ index: result.index, relevance_score: result.relevanceScore })),
        usage: tokens !== undefined ? { prompt_tokens: tokens, total_tokens: tokens } : null,
        meta: billed
          ? {
              billed_units: {
                ...(billed.searchUnits !== undefined ? { search_units: billed.searchUnits } : {}),
                ...(billed.inputTokens !== undefined ? { input_tokens: billed.inputTokens } : {}),
              },
            }
          : null,
      };
    },
    async listModels(call): Promise<Model[]> {
      const models: Model[] = [];
      let pageToken: string | undefined;
      do {
        const page = await client.models.list({ pageSize: 1000, ...(pageToken ? { pageToken } : {}) }, requestOptions(call.signal));
        for (const model of page.models) models.push({ id: model.name ?? '', object: 'model', created: 0, owned_by: 'cohere' });
        pageToken = page.nextPageToken || undefined;
      } while (pageToken);
      return models;
    },
    toHubError: (error) => cohereErrorToHub(error, metadata.name),
  };
}
