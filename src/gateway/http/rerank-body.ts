import { invalidRequest } from '../errors.ts';
import type { RerankQuery, RerankResult } from '../upstream.ts';

/**
 * The body of POST /v1/rerank (and /v2/rerank) in Cohere's shape: `{model, query, documents, top_n?,
 * max_tokens_per_doc?, return_documents?, user?}`, documents as texts or Cohere v1's `{text}` objects. Any other field
 * is refused, not ignored: Cohere v1's `rank_fields` or `max_chunks_per_doc` silently dropped would rank on something
 * else than the caller asked, and Hub's call options must not come from a client.
 */
export interface RerankBody {
  model: unknown;
  user: unknown;
  rerank: RerankQuery;
}

const FIELDS = new Set(['model', 'query', 'documents', 'top_n', 'max_tokens_per_doc', 'return_documents', 'user']);

export function parseRerankBody(body: Record<string, unknown>): RerankBody {
  const unknown = Object.keys(body).find((field) => !FIELDS.has(field));
  if (unknown !== undefined) throw invalidRequest(`Unrecognized request argument supplied: ${unknown}`, unknown);
  const { query, documents } = body;
  if (typeof query !== 'string' || query === '') throw invalidRequest('"query" is required: a non-empty string', 'query');
  if (!Array.isArray(documents) || documents.length === 0) throw invalidRequest('"documents" must be a non-empty array of texts (or {"text": …} objects)', 'documents');
  const texts = documents.map((document, i) => {
    const text = typeof document === 'string' ? document : (document as { text?: unknown } | null)?.text;
    if (typeof text !== 'string' || text === '') throw invalidRequest(`documents[${i}] must be a non-empty text or an object with a non-empty "text"`, `documents[${i}]`);
    return text;
  });
  const rerank: RerankQuery = { query, documents: texts };
  for (const field of ['top_n', 'max_tokens_per_doc'] as const) {
    const value = body[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) throw invalidRequest(`"${field}" must be a positive integer, got ${JSON.stringify(value)}`, field);
    rerank[field] = value;
  }
  const returnDocuments = body.return_documents;
  if (returnDocuments !== undefined && returnDocuments !== null) {
    if (typeof returnDocuments !== 'boolean') throw invalidRequest('"return_documents" must be true or false', 'return_documents');
    rerank.return_documents = returnDocuments;
  }
  return { model: body.model, user: body.user, rerank };
}

/** Search units Cohere bills a rerank of this many documents: one per query and (up to) 100 documents. */
export function estimatedSearchUnits(documents: number): number {
  return Math.ceil(documents / 100);
}

/** Hub's answer as the client gets it: Cohere's fields, with `meta` and `usage` left out when the provider gave none. */
export function rerankReply(result: RerankResult): Record<string, unknown> {
  const { usage, meta, ...rest } = result;
  return { ...rest, ...(meta ? { meta } : {}), ...(usage ? { usage } : {}) };
}

/** The OpenAPI schemas of the rerank body and answer (openapi.ts). */
export const RERANK_REQUEST_SCHEMA = {
  type: 'object',
  required: ['model', 'query', 'documents'],
  additionalProperties: false,
  properties: {
    model: { type: 'string', description: 'provider:model of a provider with rerank (cohere, voyage, encoder)', examples: ['cohere:rerank-v3.5'] },
    query: { type: 'string', minLength: 1 },
    documents: {
      type: 'array',
      minItems: 1,
      items: { oneOf: [{ type: 'string', minLength: 1 }, { type: 'object', required: ['text'], properties: { text: { type: 'string', minLength: 1 } } }] },
      description: 'Texts, or objects with a text field (Cohere v1)',
    },
    top_n: { type: 'integer', minimum: 1, description: 'Only the n most relevant documents (default: all)' },
    max_tokens_per_doc: { type: 'integer', minimum: 1, description: 'Cut each document to this many tokens (Cohere; other providers refuse it: 400)' },
    return_documents: { type: 'boolean', description: "Add each result's document text (default false)" },
    user: { type: 'string', description: 'The user charged (required with the master key)' },
  },
} as const;

export const RERANK_RESPONSE_SCHEMA = {
  type: 'object',
  required: ['id', 'model', 'results'],
  properties: {
    id: { type: 'string' },
    model: { type: 'string', description: "The provider's model name (without provider:)" },
    results: {
      type: 'array',
      description: 'Most relevant first; top_n of them when given',
      items: {
        type: 'object',
        required: ['index', 'relevance_score'],
        properties: {
          index: { type: 'integer', minimum: 0, description: 'Position of the document in the request' },
          relevance_score: { type: 'number' },
          document: { type: 'object', required: ['text'], properties: { text: { type: 'string' } } },
        },
      },
    },
    usage: { type: 'object', description: 'Tokens the provider counted (absent when it counted none)', properties: { prompt_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } } },
    meta: {
      type: 'object',
      description: 'What the provider billed, in Cohere\'s names (absent when it said nothing)',
      properties: { billed_units: { type: 'object', properties: { search_units: { type: 'number' }, input_tokens: { type: 'number' } } } },
    },
  },
} as const;
