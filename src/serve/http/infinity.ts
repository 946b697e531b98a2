import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { POOLED_MODEL_TYPES } from '../../encoder/config.ts';
import type { BatchingPredictor, Predictor } from '../../encoder/predictor.ts';
import type { SequenceClassificationResult } from '../../encoder/schemas.ts';
import type { ServedModelNames } from '../model-names.ts';
import { classScoresOf, labelledScores } from './class-scores.ts';
import { HttpError } from './errors.ts';
import { fieldApiBodyParser, orNull } from './field-api-body.ts';
import { sendJson } from './json-reply.ts';
import { requireServedModel } from './model-name.ts';
import { embeddingsAnswer, EMBEDDINGS_FIELD_MESSAGES, EMBEDDINGS_REQUEST_SCHEMA, modelObject, type EmbeddingsRequest } from './openai-embeddings.ts';
import { rankedByScore } from './rerank.ts';

/**
 * michaelfeil/infinity's routes at the root (its default, no --url-prefix), on the same pipeline and batches (design
 * decision 11): POST /embeddings, POST /rerank (when the body is Infinity's: `documents`; `texts` is TEI's),
 * POST /classify and GET /models, with Infinity's bodies, answers and error bodies (errors.ts, infinityError): a body it
 * cannot read is FastAPI's 422 `{"detail": [...]}`, a model that cannot do what is asked its 400 ModelNotDeployedError.
 * Fields Infinity ignores are refused here, as on the other field APIs (a typo must not pass silently).
 */

const nonEmptyText = { type: 'string', minLength: 1 } as const;
const modelName = orNull({ type: 'string', description: "Any name is taken as the served model (Infinity's default/not-specified too), unless the server runs with --strict-model-name." });

/** OpenAI's embeddings body, with Infinity's `dimensions: 0` (its default) for all components. */
export const INFINITY_EMBEDDINGS_REQUEST_SCHEMA = {
  ...EMBEDDINGS_REQUEST_SCHEMA,
  properties: {
    ...EMBEDDINGS_REQUEST_SCHEMA.properties,
    model: modelName,
    dimensions: orNull({ type: 'integer', minimum: 0, description: 'Keep the first n components, then scale to unit length (Matryoshka); 0 (the default): all.' }),
  },
} as const;

export const INFINITY_RERANK_REQUEST_SCHEMA = {
  type: 'object',
  required: ['query', 'documents'],
  additionalProperties: false,
  properties: {
    query: nonEmptyText,
    documents: { type: 'array', minItems: 1, items: nonEmptyText, description: 'The texts to score against the query.' },
    return_documents: orNull({ type: 'boolean', description: 'Include each document in its result; default false (document: null).' }),
    raw_scores: orNull({ type: 'boolean', description: "true: the model's logit; default false: its probability (sigmoid of a one-logit model)." }),
    model: modelName,
    top_n: orNull({ type: 'integer', minimum: 1, description: 'Return only the n best documents; default: all.' }),
  },
} as const;

export const INFINITY_CLASSIFY_REQUEST_SCHEMA = {
  type: 'object',
  required: ['input'],
  additionalProperties: false,
  properties: {
    input: { type: 'array', minItems: 1, items: nonEmptyText, description: 'The texts to classify, one list of label scores per text.' },
    model: modelName,
    raw_scores: orNull({ type: 'boolean', description: "true: each label's logit; default false: its softmax probability." }),
  },
} as const;

const parseEmbeddings = fieldApiBodyParser<EmbeddingsRequest>(INFINITY_EMBEDDINGS_REQUEST_SCHEMA, {
  ...EMBEDDINGS_FIELD_MESSAGES,
  dimensions: (value) => `'dimensions' must be an integer of at least 0, got ${JSON.stringify(value)}`,
});
const parseRerank = fieldApiBodyParser<{ query: string; documents: string[]; return_documents?: boolean; raw_scores?: boolean; model?: string; top_n?: number }>(
  INFINITY_RERANK_REQUEST_SCHEMA,
  { documents: () => "'documents' must be a non-empty list of non-empty texts" },
);
const parseClassify = fieldApiBodyParser<{ input: string[]; model?: string; raw_scores?: boolean }>(INFINITY_CLASSIFY_REQUEST_SCHEMA, {
  input: () => "'input' must be a non-empty list of non-empty texts",
});

/** What Infinity's /models says a model can do, by model type. */
function capabilitiesOf(predictor: Predictor): string[] {
  if (POOLED_MODEL_TYPES.includes(predictor.modelType)) return ['embed'];
  return predictor.modelType === 'sequence_classification' ? ['classify', 'rerank'] : [];
}

/** Infinity's 400 for a route the model type does not serve (its ModelNotDeployedError). */
function requireCapability(predictor: Predictor, names: ServedModelNames, capability: string): void {
  if (capabilitiesOf(predictor).includes(capability)) return;
  throw new HttpError(
    400,
    `ModelNotDeployedError: model=\`${names.served}\` does not support \`${capability}\`: this server serves a ${predictor.modelType} model, which can do ${JSON.stringify(capabilitiesOf(predictor))}`,
    { code: 'model_not_deployed' },
  );
}

/** Infinity's 400 for a model name the server does not answer to (--strict-model-name). */
function requireModel(names: ServedModelNames, model: string | undefined): void {
  try {
    requireServedModel(names, model);
  } catch (error) {
    if (error instanceof HttpError) throw new HttpError(400, `Invalid model: ${error.message}`, { code: 'model_not_found', param: 'model' });
    throw error;
  }
}

/** What every Infinity answer carries besides its data. */
function envelope(promptTokens: number) {
  return { usage: { prompt_tokens: promptTokens, total_tokens: promptTokens }, id: `infinity-${randomUUID()}`, created: Math.floor(Date.now() / 1000) };
}

/** Whether a POST /rerank body is Infinity's (and Cohere's): `documents`, where TEI's has `texts`. */
export function isInfinityRerankBody(body: unknown): boolean {
  return body !== null && typeof body === 'object' && 'documents' in body && !('texts' in body);
}

/** Infinity's /rerank answer: results best first, each with its document (a text) or null. */
export async function infinityRerank(body: unknown, predictor: Predictor, names: ServedModelNames): Promise<object> {
  const request = parseRerank(body);
  requireModel(names, request.model);
  requireCapability(predictor, names, 'rerank');
  const { scores, promptTokens } = await predictor.rerank({ query: request.query, documents: request.documents, raw: request.raw_scores });
  const results = rankedByScore(scores, request.top_n).map(({ index, score }) => ({
    relevance_score: score,
    index,
    document: request.return_documents === true ? request.documents[index] : null,
  }));
  return { object: 'rerank', results, model: names.served, ...envelope(promptTokens) };
}

export function registerInfinityRoutes(app: FastifyInstance, predictor: Predictor, names: ServedModelNames): void {
  app.get('/models', (_request, reply) => {
    const stats = 'batchingStats' in predictor ? (predictor as BatchingPredictor).batchingStats() : null;
    const limits = predictor.servingLimits();
    const model = {
      ...modelObject(names),
      // Infinity's client accepts only its own name here
      owned_by: 'infinity',
      stats: {
        // no bounded queue here, so no fraction of one to report
        queue_fraction: 0,
        queue_absolute: stats?.queuedSequences ?? 0,
        results_pending: stats?.runsInFlight ?? 0,
        batch_size: limits.maxBatchSequences ?? limits.maxRequestInputs,
      },
      backend: 'onnxruntime',
      capabilities: capabilitiesOf(predictor),
    };
    return sendJson(reply, { data: [model], object: 'list' });
  });

  app.post('/embeddings', async (request: FastifyRequest, reply: FastifyReply) => {
    const body = parseEmbeddings(request.body);
    requireModel(names, body.model);
    requireCapability(predictor, names, 'embed');
    const answer = (await embeddingsAnswer(predictor, { ...body, dimensions: body.dimensions || undefined }, names.served)) as { usage: { prompt_tokens: number } };
    return sendJson(reply, { ...answer, ...envelope(answer.usage.prompt_tokens) });
  });

  app.post('/classify', async (request: FastifyRequest, reply: FastifyReply) => {
    const body = parseClassify(request.body);
    requireModel(names, body.model);
    requireCapability(predictor, names, 'classify');
    // usage counts the texts' own tokens, as Infinity does (special tokens left out)
    const [response, tokens] = await Promise.all([predictor.predict({ inputs: body.input }), predictor.tokenize({ inputs: body.input, addSpecialTokens: false })]);
    const id2label = predictor.metadata().id2label;
    const data = (response.results as SequenceClassificationResult[]).map((result) => labelledScores(classScoresOf(result, body.raw_scores === true), id2label));
    const promptTokens = tokens.reduce((sum, spans) => sum + spans.length, 0);
    return sendJson(reply, { object: 'classify', data, model: names.served, ...envelope(promptTokens) });
  });
}
