import type { ErrorObject, ValidateFunction } from 'ajv';
import { compileBuiltInSchema } from '../../shared/built-in-schema.ts';
import type { FastifyInstance } from 'fastify';
import { POOLED_MODEL_TYPES } from '../../encoder/config.ts';
import type { Predictor } from '../../encoder/predict-pipeline.ts';
import type { EmbedResult } from '../../encoder/schemas.ts';
import { HttpError, JSON_TYPE } from './errors.ts';
import { sendJson } from './json-reply.ts';

/**
 * OpenAI's embeddings and models API (design decision 9), so that the OpenAI SDKs, LangChain, LlamaIndex and vector
 * databases call this server as they call OpenAI: POST /v1/embeddings, GET /v1/models and GET /v1/models/{id}. Errors
 * leave in OpenAI's shape (errors.ts). Requests join the same batches as /predict.
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
    model: { type: 'string', description: 'Optional; when given it must be the served model.' },
    encoding_format: { type: 'string', enum: ['float', 'base64'], description: 'base64: little-endian float32 bytes, as OpenAI.' },
    dimensions: { type: 'integer', minimum: 1, description: 'Keep the first n components, then scale to unit length (Matryoshka).' },
    user: { type: 'string', description: 'Accepted and ignored.' },
  },
} as const;

interface EmbeddingsRequest {
  input: string | string[] | number[] | number[][];
  model?: string;
  encoding_format?: 'float' | 'base64';
  dimensions?: number;
  user?: string;
}

/** Compiled on the first request, not at start-up (a server of another model type never needs it). */
let validateEmbeddingsRequest: ValidateFunction<EmbeddingsRequest> | undefined;

/** When the server started, as `created` of its one model (OpenAI gives the model's creation time). */
const CREATED = Math.floor(Date.now() / 1000);

export function registerOpenAiRoutes(app: FastifyInstance, predictor: Predictor): void {
  const model = () => ({ id: predictor.modelId, object: 'model', created: CREATED, owned_by: 'encoder' });
  app.get('/v1/models', (_request, reply) => reply.type(JSON_TYPE).send(JSON.stringify({ object: 'list', data: [model()] })));
  app.get<{ Params: { model: string } }>('/v1/models/:model', (request, reply) => {
    requireServedModel(predictor, request.params.model);
    return reply.type(JSON_TYPE).send(JSON.stringify(model()));
  });
  app.post('/v1/embeddings', async (request, reply) => {
    if (!POOLED_MODEL_TYPES.includes(predictor.modelType)) {
      throw new HttpError(404, `This server serves a ${predictor.modelType} model, which gives no embeddings; /v1/embeddings is served by embedding and sentence_embedding models`);
    }
    const body = parseEmbeddingsRequest(request.body);
    if (body.model !== undefined) requireServedModel(predictor, body.model);
    const inputs = typeof body.input === 'string' || typeof body.input[0] === 'number' ? [body.input as string | number[]] : (body.input as (string | number[])[]);
    const result = await predictor.embed({ inputs, dimensions: body.dimensions });
    return sendJson(reply, embeddingsResponse(result, body.encoding_format ?? 'float'));
  });
}

/** A `model` other than the served one is OpenAI's 404 model_not_found. */
function requireServedModel(predictor: Predictor, name: string): void {
  if (name !== predictor.modelId) {
    throw new HttpError(404, `The model '${name}' does not exist; this server serves '${predictor.modelId}'`, { param: 'model', code: 'model_not_found' });
  }
}

function parseEmbeddingsRequest(body: unknown): EmbeddingsRequest {
  const validate = (validateEmbeddingsRequest ??= compileBuiltInSchema<EmbeddingsRequest>(EMBEDDINGS_REQUEST_SCHEMA, { allErrors: false }));
  if (validate(body)) return body;
  const error = validate.errors?.[0];
  throw new HttpError(400, describeError(error, body), { param: paramOf(error) });
}

function paramOf(error: ErrorObject | undefined): string | undefined {
  if (!error) return undefined;
  if (error.keyword === 'additionalProperties') return (error.params as { additionalProperty: string }).additionalProperty;
  if (error.keyword === 'required') return (error.params as { missingProperty: string }).missingProperty;
  return error.instancePath.split('/')[1] || undefined;
}

function describeError(error: ErrorObject | undefined, body: unknown): string {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return 'The request body must be a JSON object';
  if (!error) return 'The request does not match the embeddings request schema';
  const field = paramOf(error);
  if (error.keyword === 'additionalProperties') return `Unrecognized request argument supplied: ${field}`;
  if (error.keyword === 'required') return `Missing required parameter: '${field}'`;
  if (field === 'input') return inputProblem((body as { input: unknown }).input);
  if (field === 'encoding_format') return "'encoding_format' must be 'float' or 'base64'";
  if (field === 'dimensions') return `'dimensions' must be an integer of at least 1, got ${JSON.stringify((body as { dimensions: unknown }).dimensions)}`;
  return `'${field}' ${error.message ?? 'is invalid'}`;
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
 * vector's float32 bytes, little-endian, as OpenAI does (every target this program builds for is little-endian, so the
 * array's own bytes are those).
 */
function embeddingsResponse(result: EmbedResult, format: 'float' | 'base64'): object {
  const data = result.vectors.map((vector, index) => ({
    object: 'embedding',
    index,
    embedding: format === 'base64' ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64') : vector,
  }));
  return { object: 'list', data, model: result.model_id, usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens } };
}
