import { randomUUID } from 'node:crypto';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { compileBuiltInSchema } from '../../shared/built-in-schema.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Predictor } from '../../encoder/predict-pipeline.ts';
import { HttpError, JSON_TYPE } from './errors.ts';

/**
 * Rerank with a cross-encoder, in the shape Cohere (v1 and v2) and Infinity use: POST /v1/rerank and /v2/rerank (the
 * path the Cohere SDK's v2 client calls). Each document is scored as the pair (query, document); results come sorted
 * by score. Only sequence-classification servers serve it; the others answer 404 saying why.
 */

const nonEmptyText = { type: 'string', minLength: 1 } as const;

export const RERANK_REQUEST_SCHEMA = {
  type: 'object',
  required: ['query', 'documents'],
  additionalProperties: false,
  properties: {
    model: { type: 'string', description: 'Optional; when given it must be the served model.' },
    query: nonEmptyText,
    documents: {
      type: 'array',
      minItems: 1,
      description: 'Texts, or objects with a text field (Cohere v1).',
      items: {
        oneOf: [nonEmptyText, { type: 'object', required: ['text'], additionalProperties: true, properties: { text: nonEmptyText } }],
      },
    },
    top_n: { type: 'integer', minimum: 1, description: 'Return only the n best documents; default: all.' },
    return_documents: { type: 'boolean', description: 'Include each document\'s text in its result; default false.' },
  },
} as const;

interface RerankBody {
  model?: string;
  query: string;
  documents: (string | { text: string })[];
  top_n?: number;
  return_documents?: boolean;
}

/** Compiled on the first request, not at start-up (a server of another model type never needs it). */
let validateRerankBody: ValidateFunction<RerankBody> | undefined;

export function registerRerankRoutes(app: FastifyInstance, predictor: Predictor): void {
  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    if (predictor.modelType !== 'sequence_classification') {
      throw new HttpError(404, `This server serves a ${predictor.modelType} model; rerank is served by sequence_classification (cross-encoder) models`);
    }
    const body = parseRerankBody(request.body);
    if (body.model !== undefined && body.model !== predictor.modelId) {
      throw new HttpError(404, `The model '${body.model}' does not exist; this server serves '${predictor.modelId}'`, { param: 'model', code: 'model_not_found' });
    }
    const documents = body.documents.map((document) => (typeof document === 'string' ? document : document.text));
    const { scores, promptTokens, model_id } = await predictor.rerank({ query: body.query, documents });
    const ranked = scores
      .map((relevance_score, index) => ({ index, relevance_score }))
      .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
      .slice(0, body.top_n ?? scores.length)
      .map((result) => (body.return_documents ? { ...result, document: { text: documents[result.index] } } : result));
    const usage = { prompt_tokens: promptTokens, total_tokens: promptTokens };
    return reply.type(JSON_TYPE).send(JSON.stringify({ id: randomUUID(), results: ranked, model: model_id, usage, meta: { billed_units: { search_units: 1 } } }));
  };
  app.post('/v1/rerank', handler);
  app.post('/v2/rerank', handler);
}

function parseRerankBody(body: unknown): RerankBody {
  const validate = (validateRerankBody ??= compileBuiltInSchema<RerankBody>(RERANK_REQUEST_SCHEMA, { allErrors: false }));
  if (validate(body)) return body;
  const error = validate.errors?.[0];
  throw new HttpError(400, describeError(error, body), { param: paramOf(error) });
}

function paramOf(error: ErrorObject | undefined): string | undefined {
  if (!error) return undefined;
  if (error.keyword === 'additionalProperties' && error.instancePath === '') return (error.params as { additionalProperty: string }).additionalProperty;
  if (error.keyword === 'required' && error.instancePath === '') return (error.params as { missingProperty: string }).missingProperty;
  return error.instancePath.split('/')[1] || undefined;
}

function describeError(error: ErrorObject | undefined, body: unknown): string {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return 'The request body must be a JSON object';
  if (!error) return 'The request does not match the rerank request schema';
  const field = paramOf(error);
  if (error.keyword === 'additionalProperties' && error.instancePath === '') return `Unrecognized request argument supplied: ${field}`;
  if (error.keyword === 'required' && error.instancePath === '') return `Missing required parameter: '${field}'`;
  if (field === 'query') return "'query' must be a non-empty text";
  if (field === 'documents') {
    const item = /^\/documents\/(\d+)/.exec(error.instancePath);
    if (item) return `'documents[${item[1]}]' must be a non-empty text or an object with a non-empty text field`;
    return "'documents' must be a non-empty list of texts";
  }
  if (field === 'top_n') return `'top_n' must be an integer of at least 1`;
  if (field === 'return_documents') return "'return_documents' must be true or false";
  return `'${field}' ${error.message ?? 'is invalid'}`;
}
