import type { FastifyInstance } from 'fastify';
import { POOLED_MODEL_TYPES } from '../../encoder/config.ts';
import type { Predictor } from '../../encoder/predictor.ts';
import type { EmbedResult } from '../../encoder/schemas.ts';
import type { ServedModelNames } from '../model-names.ts';
import { float32Base64 } from './embedding-encodings.ts';
import { HttpError, JSON_TYPE } from './errors.ts';
import { fieldApiBodyParser, orNull, type FieldMessages } from './field-api-body.ts';
import { sendJson } from './json-reply.ts';
import { requireServedModel } from './model-name.ts';

/**
 * OpenAI's embeddings and models API (design decision 9), so that the OpenAI SDKs, LangChain, LlamaIndex and vector
 * databases call this server as they call OpenAI: POST /v1/embeddings, GET /v1/models and GET /v1/models/{id}. Errors
 * leave in OpenAI's shape (errors.ts). Requests join the same batches as /predict. Infinity's /embeddings takes the
 * same body, with `modality`.
 */

const nonEmptyText = { type: 'string', minLength: 1 } as const;
const tokenIds = { type: 'array', minItems: 1, items: { type: 'integer', minimum: 0 } } as const;

export const EMBEDDINGS_REQUEST_SCHEMA = {
  type: 'object',
  required: ['input'],
  additionalProperties: false,
  properties: {
    input: {
      description: 'A text, a list of texts, a list of token ids, or a list of lists of token ids (the model\'s own ids, used as they are).',
      oneOf: [nonEmptyText, { type: 'array', minItems: 1, items: nonEmptyText }, tokenIds, { type: 'array', minItems: 1, items: tokenIds }],
    },
    model: orNull({ type: 'string', description: 'Any name is taken as the served model (answered under its served name), unless the server runs with --strict-model-name.' }),
    encoding_format: orNull({ type: 'string', enum: ['float', 'base64'], description: 'base64: little-endian float32 bytes, as OpenAI.' }),
    dimensions: orNull({ type: 'integer', minimum: 1, description: 'Keep the first n components, then scale to unit length (Matryoshka).' }),
    user: orNull({ type: 'string', description: 'OpenAI: accepted and ignored.' }),
    modality: orNull({ type: 'string', enum: ['text'], description: "Infinity: 'text' (its default) only; this server embeds texts." }),
  },
} as const;

export interface EmbeddingsRequest {
  input: string | string[] | number[] | number[][];
  model?: string;
  encoding_format?: 'float' | 'base64';
  dimensions?: number;
}

/** The 400 messages of the embeddings body's fields (Infinity's /embeddings words them the same). */
export const EMBEDDINGS_FIELD_MESSAGES: FieldMessages = {
  input: inputProblem,
  encoding_format: () => "'encoding_format' must be 'float' or 'base64'",
  dimensions: (value) => `'dimensions' must be an integer of at least 1, got ${JSON.stringify(value)}`,
  modality: (value) => `'modality' ${JSON.stringify(value)} is not served: this server embeds texts only ('text')`,
};

const parseEmbeddingsRequest = fieldApiBodyParser<EmbeddingsRequest>(EMBEDDINGS_REQUEST_SCHEMA, EMBEDDINGS_FIELD_MESSAGES);

/** When the server started, as `created` of its one model (OpenAI gives the model's creation time). */
export const CREATED = Math.floor(Date.now() / 1000);

/** The one model of /v1/models, under its served name. */
export function modelObject(names: ServedModelNames) {
  return { id: names.served, object: 'model', created: CREATED, owned_by: 'encoder' };
}

export function registerOpenAiRoutes(app: FastifyInstance, predictor: Predictor, names: ServedModelNames): void {
  // one model, listed once under its served name (as TEI and vLLM list theirs), whatever names it also answers to
  app.get('/v1/models', (_request, reply) => reply.type(JSON_TYPE).send(JSON.stringify({ object: 'list', data: [modelObject(names)] })));
  app.get<{ Params: { model: string } }>('/v1/models/:model', (request, reply) => {
    requireServedModel(names, request.params.model);
    return reply.type(JSON_TYPE).send(JSON.stringify(modelObject(names)));
  });
  app.post('/v1/embeddings', async (request, reply) => {
    requireEmbeddingModel(predictor, '/v1/embeddings');
    const body = parseEmbeddingsRequest(request.body);
    requireServedModel(names, body.model);
    return sendJson(reply, await embeddingsAnswer(predictor, body, names.served));
  });
}

/** The embeddings of a parsed body, as OpenAI's response body (`model`: the served name). */
export async function embeddingsAnswer(predictor: Predictor, body: EmbeddingsRequest, served: string): Promise<object> {
  const inputs = typeof body.input === 'string' || typeof body.input[0] === 'number' ? [body.input as string | number[]] : (body.input as (string | number[])[]);
  const result = await predictor.embed({ inputs, dimensions: body.dimensions });
  return embeddingsResponse(result, body.encoding_format ?? 'float', served);
}

/** Embedding routes are served by embedding and sentence_embedding models; another model type answers 404 saying why. */
export function requireEmbeddingModel(predictor: Predictor, route: string): void {
  if (!POOLED_MODEL_TYPES.includes(predictor.modelType)) {
    throw new HttpError(404, `This server serves a ${predictor.modelType} model, which gives no embeddings; ${route} is served by embedding and sentence_embedding models`);
  }
}

/** What is wrong with `input`, naming the item at fault where one is. */
function inputProblem(input: unknown): string {
  const accepted = "'input' must be a non-empty text, a non-empty list of non-empty texts, a list of token ids, or a list of such lists";
  if (input === '') return "'input' is an empty string";
  if (!Array.isArray(input)) return accepted;
  if (input.length === 0) return "'input' is an empty list";
  const emptyText = input.indexOf('');
  if (emptyText >= 0) return `'input[${emptyText}]' is an empty string`;
  const emptyIds = input.findIndex((item) => Array.isArray(item) && item.length === 0);
  if (emptyIds >= 0) return `'input[${emptyIds}]' is an empty list of token ids`;
  return accepted;
}

/**
 * The response body. `float` writes each value as the shortest decimal that reads back as the same float32 (about 40%
 * fewer bytes and half the time of JSON.stringify of the numbers, src/shared/float32-json.ts); `base64` carries each
 * vector's float32 bytes, little-endian, as OpenAI does (embedding-encodings.ts). `model` is the served name.
 */
export function embeddingsResponse(result: EmbedResult, format: 'float' | 'base64', model: string): object {
  const data = result.vectors.map((vector, index) => ({ object: 'embedding', index, embedding: format === 'base64' ? float32Base64(vector) : vector }));
  return { object: 'list', data, model, usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens } };
}
