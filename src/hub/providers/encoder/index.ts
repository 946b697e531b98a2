// This project's encoder server as an embeddings and rerank provider. Embeddings go through its OpenAI-compatible
// POST /v1/embeddings: the server pools (sentence_embedding models, and embedding models with their configured pooling,
// [CLS]/[SEP] included as sentence-transformers does), so a Hub caller gets exactly the vectors the server computes.
// Vectors travel as base64 float32: the server's own values bit for bit, whatever decimal text its float format
// prints, in half the bytes.
// Rerank goes through its Cohere-compatible POST /v1/rerank (sequence_classification servers: cross-encoders), whose
// scores are the model's own. GET /v1/models names the served model.
// A server started with --api-key wants it as a bearer token: the key is api_key, else ENCODER_API_KEY (the variable
// `serve` reads too), and a server without a key needs none.

import { InvalidRequestError, mapProviderFailure, ModelNotFoundError, ProviderError, UnsupportedParameterError, type HubError } from '../../errors.ts';
import type { EmbeddingResponse, Model, Provider, ProviderDefinition, ProviderOptions, RerankResponse } from '../../provider.ts';
import { embeddingList, embeddingsOnly, float32sOfBase64 } from '../shared/embeddings.ts';
import { providerMetadata } from '../shared/metadata.ts';
import { isAbortError, isNetworkError, networkFailure } from '../shared/error-body.ts';
import { joinUrl, requestJson, VendorHttpError } from '../shared/http-json.ts';

const ENCODER_DEFAULT_API_BASE = 'http://127.0.0.1:8080';
const PROVIDER = 'encoder';

const metadata = providerMetadata({
  name: PROVIDER,
  env_key: 'ENCODER_API_KEY',
  api_key_optional: true,
  doc_url: 'docs/http-api.md',
  default_api_base: ENCODER_DEFAULT_API_BASE,
  embedding: true,
  rerank: true,
  list_models: true,
});

interface EmbeddingsResponse {
  data: { index: number; embedding: string }[];
  model: string;
  usage?: { prompt_tokens: number };
}

interface RerankAnswer {
  id: string;
  results: { index: number; relevance_score: number }[];
  model: string;
  usage?: { prompt_tokens: number };
  meta?: { billed_units?: { search_units?: number } };
}

interface OpenAIErrorBody {
  message?: string;
  param?: string | null;
  code?: string | null;
}

/** The server's OpenAI-shaped error (`{error: {message, type, param, code}}`), when the body is one. */
function errorBodyOf(error: VendorHttpError): OpenAIErrorBody | null {
  try {
    const body = JSON.parse(error.body) as { error?: unknown };
    // another server's 404 (e.g. Fastify's {"error": "Not Found"}) has a string there
    return typeof body.error === 'object' && body.error !== null ? (body.error as OpenAIErrorBody) : null;
  } catch {
    return null;
  }
}

/** A base64 vector of little-endian float32s as numbers: each the float32 value itself, read without any rounding. */
function floatsOf(base64: string): number[] {
  const floats = float32sOfBase64(base64);
  if (floats === null) throw new ProviderError(`The encoder server answered a vector of ${Buffer.from(base64, 'base64').length} bytes, not float32s`, null, PROVIDER);
  return floats;
}

/** The answer's vectors in input order; anything but one base64 vector per input is the server's fault. */
function vectorsOf(response: EmbeddingsResponse, inputCount: number): number[][] {
  if (!Array.isArray(response.data) || response.data.length !== inputCount || !response.data.every((item) => typeof item.embedding === 'string')) {
    throw new ProviderError(`The encoder server did not answer ${inputCount} base64 embedding(s)`, null, PROVIDER);
  }
  return [...response.data].sort((a, b) => a.index - b.index).map((item) => floatsOf(item.embedding));
}

function createEncoder(options: ProviderOptions): Provider {
  const base = options.api_base ?? ENCODER_DEFAULT_API_BASE;
  const headers = {
    ...(options.api_key ? { authorization: `Bearer ${options.api_key}` } : {}),
    ...(options.client_args?.headers as Record<string, string> | undefined),
  };

  /** The server's errors are OpenAI's body: 400 the caller's input, 404 another model or another model type, 5xx the server's. */
  function toHubError(error: unknown): HubError | undefined {
    if (isAbortError(error)) return undefined;
    if (error instanceof VendorHttpError) {
      const body = errorBodyOf(error);
      const message = body?.message ?? (error.body.trim() || error.message);
      if (error.status === 404 && body?.code === 'model_not_found') {
        return new ModelNotFoundError(message, error, PROVIDER, { status_code: 404, param: 'model', code: 'model_not_found' });
      }
      if (error.status === 404) {
        // a model of another type (a classifier asked for embeddings, an embedder for rerank), or an older server
        const operation = new URL(error.url).pathname.endsWith('/rerank') ? 'rerank' : 'embeddings';
        return new InvalidRequestError(`The encoder server at ${base} does not serve ${operation}: ${message}`, error, PROVIDER, { status_code: 404, param: 'model' });
      }
      return mapProviderFailure({ provider_name: PROVIDER, status_code: error.status, message, param: body?.param ?? null, code: body?.code ?? null, original_exception: error });
    }
    if (isNetworkError(error)) return networkFailure(PROVIDER, error);
    return undefined;
  }

  return {
    metadata,
    ...embeddingsOnly(PROVIDER, 'The encoder server serves embeddings and rerank only'),
    async embedding(params, call): Promise<EmbeddingResponse> {
      if (Object.keys(call.extra).length > 0) throw new UnsupportedParameterError(Object.keys(call.extra)[0], PROVIDER);
      const response = await requestJson<EmbeddingsResponse>(joinUrl(base, 'v1/embeddings'), {
        headers,
        body: {
          input: params.inputs,
          ...(params.model ? { model: params.model } : {}),
          ...(params.dimensions !== undefined ? { dimensions: params.dimensions } : {}),
          encoding_format: 'base64',
        },
        ...(call.signal ? { signal: call.signal } : {}),
      });
      return embeddingList(response.model, vectorsOf(response, params.inputs.length), response.usage?.prompt_tokens ?? 0);
    },
    async rerank(params, call): Promise<RerankResponse> {
      if (Object.keys(call.extra).length > 0) throw new UnsupportedParameterError(Object.keys(call.extra)[0], PROVIDER);
      if (params.max_tokens_per_doc !== undefined) {
        throw new UnsupportedParameterError('max_tokens_per_doc', PROVIDER, "The encoder server truncates each (query, document) pair to the model's length");
      }
      const response = await requestJson<RerankAnswer>(joinUrl(base, 'v1/rerank'), {
        headers,
        body: { query: params.query, documents: params.documents, ...(params.model ? { model: params.model } : {}), ...(params.top_n !== undefined ? { top_n: params.top_n } : {}) },
        ...(call.signal ? { signal: call.signal } : {}),
      });
      if (!Array.isArray(response.results)) throw new ProviderError('The encoder server did not answer rerank results', null, PROVIDER);
      const tokens = response.usage?.prompt_tokens;
      const searchUnits = response.meta?.billed_units?.search_units;
      return {
        id: response.id,
        model: response.model,
        results: response.results.map(({ index, relevance_score }) => ({ index, relevance_score })),
        usage: typeof tokens === 'number' ? { prompt_tokens: tokens, total_tokens: tokens } : null,
        meta: typeof searchUnits === 'number' ? { billed_units: { search_units: searchUnits } } : null,
      };
    },
    async listModels(call): Promise<Model[]> {
      const models = await requestJson<{ data: Model[] }>(joinUrl(base, 'v1/models'), { headers, ...(call.signal ? { signal: call.signal } : {}) });
      return models.data.map((model) => ({ id: model.id, object: 'model', created: model.created, owned_by: model.owned_by }));
    },
    toHubError,
  };
}

export const encoderProvider: ProviderDefinition = { metadata, create: createEncoder };
