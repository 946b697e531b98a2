// Voyage AI embeddings and rerank over its REST API with fetch (its TypeScript SDK is generated and thinly kept; each
// operation is one POST): POST /v1/embeddings {input, model, input_type?, …} → {data: [{embedding, index}], model, usage};
// POST /v1/rerank {query, documents, model, top_k?, truncation?} → {data: [{index, relevance_score}], model, usage}.

import { UnsupportedParameterError, type HubError } from '../../errors.ts';
import type { EmbeddingResponse, Provider, ProviderDefinition, ProviderOptions, RerankResponse } from '../../provider.ts';
import { embeddingsOnly, outputDimension } from '../shared/embeddings.ts';
import { providerMetadata } from '../shared/metadata.ts';
import { answerFailure, isAbortError, isNetworkError, networkFailure } from '../shared/error-body.ts';
import { joinUrl, requestJson, VendorHttpError } from '../shared/http-json.ts';

const VOYAGE_DEFAULT_API_BASE = 'https://api.voyageai.com/v1';

const metadata = providerMetadata({
  name: 'voyage',
  env_key: 'VOYAGE_API_KEY',
  doc_url: 'https://docs.voyageai.com/reference/embeddings-api',
  default_api_base: VOYAGE_DEFAULT_API_BASE,
  embedding: true,
  rerank: true,
});

interface VoyageEmbeddings {
  object: 'list';
  data: { object: 'embedding'; embedding: number[]; index: number }[];
  model: string;
  usage: { total_tokens: number };
}

interface VoyageRerank {
  object: 'list';
  data: { index: number; relevance_score: number }[];
  model: string;
  usage: { total_tokens: number };
}

/** Voyage errors: {detail: "..."} with the HTTP status. */
function voyageErrorToHub(error: unknown, provider = 'voyage'): HubError | undefined {
  if (isAbortError(error)) return undefined;
  if (error instanceof VendorHttpError) {
    return answerFailure(provider, { status: error.status, body: error.body, headers: error.headers, fallback_message: error.message }, error);
  }
  if (isNetworkError(error)) return networkFailure(provider, error);
  return undefined;
}

function createVoyage(options: ProviderOptions): Provider {
  const base = options.api_base ?? VOYAGE_DEFAULT_API_BASE;
  const headers = { authorization: `Bearer ${options.api_key ?? ''}`, ...(options.client_args?.headers as Record<string, string> | undefined) };
  return {
    metadata,
    ...embeddingsOnly(metadata.name, 'Voyage AI serves embeddings and rerank only'),
    async embedding(params, call): Promise<EmbeddingResponse> {
      const response = await requestJson<VoyageEmbeddings>(joinUrl(base, 'embeddings'), {
        headers,
        // extra options are Voyage's own fields: input_type, truncation, output_dimension, output_dtype
        body: { input: params.inputs, model: params.model, ...call.extra, ...outputDimension(params, call.extra, 'output_dimension', ['output_dimension'], metadata.name) },
        ...(call.signal ? { signal: call.signal } : {}),
      });
      return {
        object: 'list',
        model: response.model,
        data: response.data.map((item) => ({ object: 'embedding', index: item.index, embedding: item.embedding })),
        usage: { prompt_tokens: response.usage.total_tokens, total_tokens: response.usage.total_tokens },
      };
    },
    async rerank(params, call): Promise<RerankResponse> {
      // Voyage truncates each (query, document) pair to the model's context (its `truncation` option) but cannot cut
      // documents to a given length
      if (params.max_tokens_per_doc !== undefined) {
        throw new UnsupportedParameterError('max_tokens_per_doc', metadata.name, 'Voyage AI truncates to the model\'s context length only (truncation)');
      }
      const response = await requestJson<VoyageRerank>(joinUrl(base, 'rerank'), {
        headers,
        // extra options are Voyage's own fields (truncation); top_n is its top_k
        body: { query: params.query, documents: params.documents, model: params.model, ...(params.top_n !== undefined ? { top_k: params.top_n } : {}), ...call.extra },
        ...(call.signal ? { signal: call.signal } : {}),
      });
      const tokens = response.usage?.total_tokens;
      return {
        id: '',
        model: response.model ?? params.model,
        results: response.data.map((item) => ({ index: item.index, relevance_score: item.relevance_score })),
        usage: typeof tokens === 'number' ? { prompt_tokens: tokens, total_tokens: tokens } : null,
        meta: null,
      };
    },
    toHubError: (error) => voyageErrorToHub(error, metadata.name),
  };
}

export const voyageProvider: ProviderDefinition = { metadata, create: createVoyage };
