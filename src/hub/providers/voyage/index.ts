// Voyage AI embeddings over its REST API with fetch (its TypeScript SDK is generated and thinly kept; the API is
// one POST): POST /v1/embeddings {input, model, input_type?, …} → {data: [{embedding, index}], model, usage}.

import type { HubError } from '../../errors.ts';
import type { EmbeddingResponse, Provider, ProviderDefinition, ProviderOptions } from '../../provider.ts';
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
});

interface VoyageEmbeddings {
  object: 'list';
  data: { object: 'embedding'; embedding: number[]; index: number }[];
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
  return {
    metadata,
    ...embeddingsOnly(metadata.name, 'Voyage AI serves embeddings only'),
    async embedding(params, call): Promise<EmbeddingResponse> {
      const response = await requestJson<VoyageEmbeddings>(joinUrl(base, 'embeddings'), {
        headers: { authorization: `Bearer ${options.api_key ?? ''}`, ...(options.client_args?.headers as Record<string, string> | undefined) },
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
    toHubError: (error) => voyageErrorToHub(error, metadata.name),
  };
}

export const voyageProvider: ProviderDefinition = { metadata, create: createVoyage };
