import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Predictor } from '../../encoder/predictor.ts';
import type { ServedModelNames } from '../model-names.ts';
import { HttpError, JSON_TYPE } from './errors.ts';
import { fieldApiBodyParser, orNull } from './field-api-body.ts';
import { requireServedModel } from './model-name.ts';

/**
 * Rerank with a cross-encoder, in the shape Cohere (v1 and v2) and Infinity use: POST /v1/rerank and /v2/rerank (the
 * path the Cohere SDK's v2 client calls). Each document is scored as the pair (query, document); results come sorted
 * by score. Only sequence-classification servers serve it; the others answer 404 saying why.
 *
 * The clients' other fields are accepted where what they ask for is what happens anyway (documents are truncated to
 * the model's length with the query, whatever Cohere's max_tokens_per_doc or TEI's truncate say), honoured where they
 * can be (Infinity's and TEI's raw_scores: true scores with the model's logit) and refused where they would ask for
 * another result (TEI's truncation_direction Left).
 */

const nonEmptyText = { type: 'string', minLength: 1 } as const;
const positiveInteger = { type: 'integer', minimum: 1 } as const;

export const RERANK_REQUEST_SCHEMA = {
  type: 'object',
  required: ['query', 'documents'],
  additionalProperties: false,
  properties: {
    model: orNull({ type: 'string', description: 'Any name is taken as the served model (answered under its served name), unless the server runs with --strict-model-name.' }),
    query: nonEmptyText,
    documents: {
      type: 'array',
      minItems: 1,
      description: 'Texts, or objects (Cohere v1) ranked by their text field, or by the fields rank_fields names.',
      items: { oneOf: [nonEmptyText, { type: 'object' }] },
    },
    top_n: orNull({ ...positiveInteger, description: 'Return only the n best documents; default: all.' }),
    return_documents: orNull({ type: 'boolean', description: 'Include each document in its result ({text} for a text, an object as given); default false.' }),
    rank_fields: orNull({
      type: 'array',
      minItems: 1,
      items: nonEmptyText,
      description: 'Cohere v1: the fields of object documents to rank by, in order, as "field: value" lines; default ["text"].',
    }),
    max_tokens_per_doc: orNull({ ...positiveInteger, description: "Cohere v2: accepted and ignored; documents are truncated to the model's length with the query." }),
    max_chunks_per_doc: orNull({ ...positiveInteger, description: "Cohere v1: accepted and ignored; documents are not chunked but truncated to the model's length." }),
    priority: orNull({ type: 'integer', description: 'Cohere v2: accepted and ignored; requests are batched in arrival order.' }),
    return_text: orNull({ type: 'boolean', description: 'TEI: true is return_documents: true.' }),
    raw_scores: orNull({ type: 'boolean', description: "Infinity and TEI: true scores with the model's logit (of the rerank label) instead of its probability; default false." }),
    truncate: orNull({ type: 'boolean', description: "TEI: accepted; documents are always truncated to the model's length (false does not make a long one an error)." }),
    truncation_direction: orNull({ type: 'string', enum: ['Right', 'right'], description: 'TEI: Right (its default) only; documents are truncated at their end.' }),
  },
} as const;

type Document = string | Record<string, unknown>;

interface RerankBody {
  model?: string;
  query: string;
  documents: Document[];
  top_n?: number;
  return_documents?: boolean;
  return_text?: boolean;
  rank_fields?: string[];
  raw_scores?: boolean;
}

const parseRerankBody = fieldApiBodyParser<RerankBody>(RERANK_REQUEST_SCHEMA, {
  query: () => "'query' must be a non-empty text",
  documents: (_value, error) => {
    const item = /^\/documents\/(\d+)/.exec(error.instancePath);
    return item ? documentProblem(Number(item[1])) : "'documents' must be a non-empty list of texts";
  },
  top_n: () => "'top_n' must be an integer of at least 1",
  return_documents: () => "'return_documents' must be true or false",
  rank_fields: () => "'rank_fields' must be a non-empty list of field names",
  raw_scores: () => "'raw_scores' must be true or false",
  truncation_direction: (value) => `'truncation_direction' ${JSON.stringify(value)} is not supported: documents are truncated at their end ('Right')`,
});

export function registerRerankRoutes(app: FastifyInstance, predictor: Predictor, names: ServedModelNames): void {
  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    if (predictor.modelType !== 'sequence_classification') {
      throw new HttpError(404, `This server serves a ${predictor.modelType} model; rerank is served by sequence_classification (cross-encoder) models`);
    }
    const body = parseRerankBody(request.body);
    requireServedModel(names, body.model);
    const rankFields = body.rank_fields ?? ['text'];
    const documents = body.documents.map((document, index) => textOf(document, index, rankFields));
    const { scores, promptTokens } = await predictor.rerank({ query: body.query, documents, raw: body.raw_scores });
    const returnDocuments = body.return_documents === true || body.return_text === true;
    const ranked = rankedByScore(scores, body.top_n).map(({ index, score }) =>
      returnDocuments ? { index, relevance_score: score, document: documentOf(body.documents[index]) } : { index, relevance_score: score },
    );
    const usage = { prompt_tokens: promptTokens, total_tokens: promptTokens };
    return reply.type(JSON_TYPE).send(JSON.stringify({ id: randomUUID(), results: ranked, model: names.served, usage, meta: { billed_units: { search_units: 1 } } }));
  };
  app.post('/v1/rerank', handler);
  app.post('/v2/rerank', handler);
}

/** Documents by score, best first (ties in the documents' order); the best `topN` of them (default: all). */
export function rankedByScore(scores: readonly number[], topN = scores.length): { index: number; score: number }[] {
  return scores
    .map((score, index) => ({ index, score }))
    .sort((a, b) => b.score - a.score || a.index - b.index)
    .slice(0, topN);
}

function documentProblem(index: number): string {
  return `'documents[${index}]' must be a non-empty text or an object with a non-empty text field`;
}

/**
 * The text a document is ranked by: a text as it is; an object's `text` field, or with rank_fields (Cohere v1) the
 * named fields in order as "field: value" lines, the YAML form Cohere recommends for structured documents.
 */
function textOf(document: Document, index: number, rankFields: readonly string[]): string {
  if (typeof document === 'string') return document;
  if (rankFields.length === 1 && rankFields[0] === 'text') {
    if (typeof document.text === 'string' && document.text !== '') return document.text;
    throw new HttpError(400, documentProblem(index), { param: 'documents' });
  }
  const missing = rankFields.find((field) => typeof document[field] !== 'string');
  if (missing !== undefined) {
    throw new HttpError(400, `'documents[${index}]' has no text field '${missing}', which rank_fields names`, { param: 'documents' });
  }
  return rankFields.map((field) => `${field}: ${document[field] as string}`).join('\n');
}

/** A document in a result: {text} for a text, an object as it was given. */
function documentOf(document: Document): Record<string, unknown> {
  return typeof document === 'string' ? { text: document } : document;
}
