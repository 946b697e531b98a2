// This project's encoder server as an embeddings provider: POST /predict {inputs, normalize: false} answers one
// vector per token (special tokens left out); the provider averages them (mean pooling) and scales the mean to unit
// length, the sentence embedding of sentence-transformers' mean-pooling models. GET /model names the served model.

import { InvalidRequestError, mapProviderFailure, ModelNotFoundError, ProviderError, UnsupportedParameterError, type HubError } from '../../errors.ts';
import type { EmbeddingResponse, Model, Provider, ProviderDefinition, ProviderOptions } from '../../provider.ts';
import { embeddingList, embeddingsOnly } from '../shared/embeddings.ts';
import { providerMetadata } from '../shared/metadata.ts';
import { isAbortError, isNetworkError, networkFailure } from '../shared/error-body.ts';
import { joinUrl, requestJson, VendorHttpError } from '../shared/http-json.ts';

const ENCODER_DEFAULT_API_BASE = 'http://127.0.0.1:8080';
const PROVIDER = 'encoder';

const metadata = providerMetadata({
  name: PROVIDER,
  env_key: null,
  doc_url: 'docs/http-api.md',
  default_api_base: ENCODER_DEFAULT_API_BASE,
  embedding: true, list_models: true,
});

interface PredictResponse {
  model_id: string;
  results: { embeddings?: { embedding: number[] }[] }[];
}

/** Mean of the token vectors, scaled to unit L2 length (a zero vector stays zero). */
export function meanPooledUnitVector(tokens: readonly { embedding: readonly number[] }[]): number[] {
  const width = tokens[0].embedding.length;
  const mean = new Array<number>(width).fill(0);
  for (const { embedding } of tokens) {
    if (embedding.length !== width) throw new ProviderError('The encoder server answered token vectors of different widths', null, PROVIDER);
    for (let i = 0; i < width; i++) mean[i] += embedding[i];
  }
  let squares = 0;
  for (let i = 0; i < width; i++) {
    mean[i] /= tokens.length;
    squares += mean[i] * mean[i];
  }
  const scale = 1 / Math.max(Math.sqrt(squares), 1e-12);
  return mean.map((value) => value * scale);
}

/** The server's errors are text/plain: 422 "Invalid input: …" (the caller's), 500 (the server's). */
function encoderErrorToHub(error: unknown): HubError | undefined {
  if (isAbortError(error)) return undefined;
  if (error instanceof VendorHttpError) {
    return mapProviderFailure({ provider_name: PROVIDER, status_code: error.status, message: error.body.trim() || error.message, original_exception: error });
  }
  if (isNetworkError(error)) return networkFailure(PROVIDER, error);
  return undefined;
}

function createEncoder(options: ProviderOptions): Provider {
  const base = options.api_base ?? ENCODER_DEFAULT_API_BASE;
  const headers = (options.client_args?.headers as Record<string, string> | undefined) ?? {};
  const notEmbedding = (cause: unknown) =>
    new InvalidRequestError(`The encoder server at ${base} does not serve an embedding model`, cause, PROVIDER, { param: 'model' });
  return {
    metadata,
    ...embeddingsOnly(PROVIDER, 'The encoder server serves embeddings only'),
    async embedding(params, call): Promise<EmbeddingResponse> {
      if (params.dimensions !== undefined) {
        throw new UnsupportedParameterError('dimensions', PROVIDER, 'The encoder server answers the full vectors of its model (mean pooling cannot shorten them)');
      }
      if (Object.keys(call.extra).length > 0) throw new UnsupportedParameterError(Object.keys(call.extra)[0], PROVIDER);
      const response = await requestJson<PredictResponse>(joinUrl(base, 'predict'), {
        headers,
        body: { inputs: params.inputs, normalize: false },
        ...(call.signal ? { signal: call.signal } : {}),
      }).catch((error: unknown) => {
        // a classification model refuses the embedding-only field
        if (error instanceof VendorHttpError && error.status === 422 && error.body.includes('unknown field "normalize"')) throw notEmbedding(error);
        throw error;
      });
      if (params.model && params.model !== response.model_id) {
        throw new ModelNotFoundError(`The encoder server at ${base} serves ${response.model_id}, not ${params.model}`, null, PROVIDER, { status_code: null });
      }
      let tokens = 0;
      const vectors = response.results.map((result, index) => {
        if (!Array.isArray(result.embeddings)) throw notEmbedding(null);
        if (result.embeddings.length === 0) throw new ProviderError(`The encoder server answered no token vectors for input ${index}`, null, PROVIDER);
        tokens += result.embeddings.length;
        return meanPooledUnitVector(result.embeddings);
      });
      return embeddingList(response.model_id, vectors, tokens);
    },
    async listModels(call): Promise<Model[]> {
      const model = await requestJson<{ model_id: string }>(joinUrl(base, 'model'), { headers, ...(call.signal ? { signal: call.signal } : {}) });
      return [{ id: model.model_id, object: 'model', created: 0, owned_by: PROVIDER }];
    },
    toHubError: encoderErrorToHub,
  };
}

export const encoderProvider: ProviderDefinition = { metadata, create: createEncoder };
