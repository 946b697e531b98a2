/**
 * The OpenAPI description of the field's APIs this server speaks (design decision 9): OpenAI's /v1/models and, by model
 * type, /v1/embeddings (embedding and sentence_embedding models) or /v1/rerank and /v2/rerank (sequence
 * classification, Cohere's shape). Their errors are OpenAI's body. Schemas are JSON Schema, converted by the caller.
 */
import { POOLED_MODEL_TYPES } from '../../encoder/config.ts';
import type { ModelMetadata } from '../../encoder/schemas.ts';
import { bodyTooLargeMessage, unsupportedMediaTypeMessage } from './errors.ts';
import { EMBEDDINGS_REQUEST_SCHEMA } from './openai-embeddings.ts';
import { RERANK_REQUEST_SCHEMA } from './rerank.ts';

const nullableString = { type: ['string', 'null'] } as const;

export const OPENAI_ERROR_SCHEMA = {
  type: 'object',
  description: "OpenAI's error body, which OpenAI-compatible clients read and show.",
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['message', 'type', 'param', 'code'],
      properties: {
        message: { type: 'string' },
        type: { type: 'string', enum: ['invalid_request_error', 'server_error'] },
        param: { ...nullableString, description: 'The request field at fault, when one is.' },
        code: { ...nullableString, description: 'model_not_found for another model name; otherwise null.' },
      },
    },
  },
} as const;

const usageSchema = {
  type: 'object',
  required: ['prompt_tokens', 'total_tokens'],
  properties: { prompt_tokens: { type: 'integer', minimum: 0 }, total_tokens: { type: 'integer', minimum: 0 } },
} as const;

export const EMBEDDINGS_RESPONSE_SCHEMA = {
  type: 'object',
  required: ['object', 'data', 'model', 'usage'],
  properties: {
    object: { type: 'string', enum: ['list'] },
    data: {
      type: 'array',
      items: {
        type: 'object',
        required: ['object', 'index', 'embedding'],
        properties: {
          object: { type: 'string', enum: ['embedding'] },
          index: { type: 'integer', minimum: 0 },
          embedding: {
            oneOf: [
              { type: 'array', items: { type: 'number' } },
              { type: 'string', description: 'encoding_format base64: the float32 values, little-endian, in base64.' },
            ],
          },
        },
      },
    },
    model: { type: 'string' },
    usage: usageSchema,
  },
} as const;

export const MODEL_SCHEMA = {
  type: 'object',
  required: ['id', 'object', 'created', 'owned_by'],
  properties: {
    id: { type: 'string' },
    object: { type: 'string', enum: ['model'] },
    created: { type: 'integer', description: 'When the server started (Unix seconds).' },
    owned_by: { type: 'string' },
  },
} as const;

export const MODEL_LIST_SCHEMA = {
  type: 'object',
  required: ['object', 'data'],
  properties: { object: { type: 'string', enum: ['list'] }, data: { type: 'array', items: MODEL_SCHEMA } },
} as const;

export const RERANK_RESPONSE_SCHEMA = {
  type: 'object',
  required: ['id', 'results', 'model', 'usage'],
  properties: {
    id: { type: 'string' },
    results: {
      type: 'array',
      description: 'Best first; top_n of them when given.',
      items: {
        type: 'object',
        required: ['index', 'relevance_score'],
        properties: {
          index: { type: 'integer', minimum: 0, description: 'Position of the document in the request.' },
          relevance_score: { type: 'number', minimum: 0, maximum: 1 },
          document: { type: 'object', required: ['text'], properties: { text: { type: 'string' } } },
        },
      },
    },
    model: { type: 'string' },
    usage: usageSchema,
    meta: { type: 'object', description: "Cohere's billed units: one search unit per request." },
  },
} as const;

/** The JSON schemas the paths below refer to, by component name. */
export function fieldApiSchemas(metadata: ModelMetadata): Record<string, object> {
  const schemas: Record<string, object> = { OpenAiError: OPENAI_ERROR_SCHEMA, Model: MODEL_SCHEMA, ModelList: MODEL_LIST_SCHEMA };
  if (POOLED_MODEL_TYPES.includes(metadata.model_type)) {
    Object.assign(schemas, { EmbeddingsRequest: EMBEDDINGS_REQUEST_SCHEMA, EmbeddingsResponse: EMBEDDINGS_RESPONSE_SCHEMA });
  }
  if (metadata.model_type === 'sequence_classification') {
    Object.assign(schemas, { RerankRequest: RERANK_REQUEST_SCHEMA, RerankResponse: RERANK_RESPONSE_SCHEMA });
  }
  return schemas;
}

/** An illustrative unit vector of `length` components. */
function unitVector(length: number): number[] {
  const raw = Array.from({ length }, (_, i) => Math.sin(i * 1.3 + 0.4));
  const norm = Math.hypot(...raw);
  return raw.map((value) => value / norm);
}

/** What encoding_format base64 sends: the float32 values, little-endian, in base64. */
function float32Base64(values: number[]): string {
  const bytes = Buffer.alloc(values.length * 4);
  values.forEach((value, i) => bytes.writeFloatLE(value, i * 4));
  return bytes.toString('base64');
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const example = (summary: string, value: unknown) => ({ summary, value });
const json = (description: string, schema: object, examples: Record<string, { summary: string; value: unknown }>) => ({
  description,
  content: { 'application/json': { schema, examples } },
});
const openAiError = (message: string, param: string | null = null, code: string | null = null, type = 'invalid_request_error') => ({
  error: { message, type, param, code },
});
const errorResponse = (description: string, summary: string, body: object) => json(description, ref('OpenAiError'), { error: example(summary, body) });

/** The paths of the field's APIs this model type serves. */
export function fieldApiPaths(metadata: ModelMetadata, bodyLimitBytes: number, badJsonMessage: string): Record<string, object> {
  const id = metadata.model_id;
  const model = { id, object: 'model', created: 1764000000, owned_by: 'encoder' };
  const notThisModel = openAiError(`The model 'text-embedding-3-small' does not exist; this server serves '${id}'`, 'model', 'model_not_found');
  const transportErrors = {
    413: errorResponse(`The body is larger than the server's limit (${bodyLimitBytes} bytes).`, 'Too large', openAiError(bodyTooLargeMessage(bodyLimitBytes))),
    415: errorResponse('The body is not application/json.', 'A text body', openAiError(unsupportedMediaTypeMessage('text/plain'))),
    500: errorResponse('The model or its transform failed on valid input.', 'A failing transform', openAiError('lp_normalize: p must be a number > 0, got 0', null, null, 'server_error')),
  };
  const badJson = openAiError(badJsonMessage);
  const paths: Record<string, object> = {
    '/v1/models': {
      get: {
        operationId: 'listModels',
        summary: 'OpenAI-compatible: the one model this server serves',
        responses: { 200: json('The served model.', ref('ModelList'), { this_model: example('This model', { object: 'list', data: [model] }) }) },
      },
    },
    '/v1/models/{model}': {
      get: {
        operationId: 'retrieveModel',
        summary: 'OpenAI-compatible: the served model by name',
        description: 'Only the served model exists here: any other name is a 404 with code model_not_found.',
        parameters: [{ name: 'model', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          200: json('The served model.', ref('Model'), { this_model: example('This model', model) }),
          404: errorResponse('Another name than the served model.', 'Another model', notThisModel),
        },
      },
    },
  };
  if (POOLED_MODEL_TYPES.includes(metadata.model_type)) {
    paths['/v1/embeddings'] = {
      post: {
        operationId: 'createEmbeddings',
        summary: `OpenAI-compatible embeddings: one ${metadata.pooling ?? 'mean'}-pooled vector per input`,
        description:
          'Requests join the same batches as /predict. Vectors are unit length when the model normalises (GET /model), ' +
          'and always with dimensions (the first n components, re-normalised); encoding_format base64 sends the float32 ' +
          "values little-endian. Texts are truncated to the model's length; token ids are the model's own, used as they " +
          "are (special tokens included by the caller) and never truncated: more than the model's length is a 400. " +
          'model is optional; another name than the served model is a 404.',
        requestBody: {
          required: true,
          ...json('Texts or token ids, and options.', ref('EmbeddingsRequest'), {
            texts: example('Two texts', { input: ['hello world', 'good morning'], model: id }),
            shorter: example('16 dimensions, base64', { input: 'hello world', dimensions: 16, encoding_format: 'base64' }),
            token_ids: example('Token ids (bert-base-uncased: [CLS] hello world [SEP])', { input: [101, 7592, 2088, 102] }),
          }),
        },
        responses: {
          200: json('One vector per input, in order, with the tokens counted.', ref('EmbeddingsResponse'), {
            texts: example('Two texts (vectors shortened here)', {
              object: 'list',
              data: [
                { object: 'embedding', index: 0, embedding: [0.0477, 0.1115, -0.0912] },
                { object: 'embedding', index: 1, embedding: [-0.1475, 0.0046, 0.2103] },
              ],
              model: id,
              usage: { prompt_tokens: 8, total_tokens: 8 },
            }),
            shorter: example('16 dimensions as base64: 64 bytes, 16 little-endian float32 values of a unit vector', {
              object: 'list',
              data: [{ object: 'embedding', index: 0, embedding: float32Base64(unitVector(16)) }],
              model: id,
              usage: { prompt_tokens: 4, total_tokens: 4 },
            }),
            token_ids: example('Token ids: one vector (shortened here)', {
              object: 'list',
              data: [{ object: 'embedding', index: 0, embedding: [0.0477, 0.1115, -0.0912] }],
              model: id,
              usage: { prompt_tokens: 4, total_tokens: 4 },
            }),
          }),
          400: json('The body is not JSON, or a field is wrong: the message and param name it.', ref('OpenAiError'), {
            bad_json: example('A trailing comma', badJson),
            missing_input: example('A /predict body: OpenAI calls the field input', openAiError("Missing required parameter: 'input'", 'input')),
            empty: example('An empty input', openAiError("'input' is an empty string", 'input')),
            dimensions: example('More dimensions than the model has', openAiError("dimensions 1024 is more than the model's 384", 'dimensions')),
            unknown_token: example('A token id outside the vocabulary', openAiError("input[0][1]: token id 99999999 is not in the model's vocabulary", 'input')),
            too_many_ids: example(
              "More token ids than the model's maximum length (they are never truncated)",
              openAiError("input[0] holds 600 token ids, more than the model's 512", 'input'),
            ),
            too_many_tokens: example(
              'More tokens than serve --max-request-tokens',
              openAiError('the request holds 20001 tokens, more than the limit of 16384 tokens per request; send fewer or shorter inputs', 'input'),
            ),
          }),
          404: errorResponse('`model` names another model.', 'Another model', notThisModel),
          ...transportErrors,
        },
      },
    };
  }
  if (metadata.model_type === 'sequence_classification') {
    const rerank = (operationId: string, summary: string) => ({
      post: {
        operationId,
        summary,
        description:
          'Each document is scored with the query as a text pair: the sigmoid of a one-logit model, or the softmax ' +
          'probability of the rerank label (configuration rerank_label; default the last label). Results come best ' +
          'first. model is optional; another name than the served model is a 404.',
        requestBody: {
          required: true,
          ...json('A query and the documents to rank.', ref('RerankRequest'), {
            documents: example('Three documents, the best two with their text', {
              query: 'what is the capital of france',
              documents: ['paris is the capital of france', 'the cat sat on the mat', 'france borders spain'],
              top_n: 2,
              return_documents: true,
            }),
          }),
        },
        responses: {
          200: json('The documents best first.', ref('RerankResponse'), {
            documents: example('The best two', {
              id: '6f1c8e2a-4b7d-4f0e-9c3a-2d5e8b1a7c90',
              results: [
                { index: 0, relevance_score: 0.9731, document: { text: 'paris is the capital of france' } },
                { index: 2, relevance_score: 0.4208, document: { text: 'france borders spain' } },
              ],
              model: id,
              usage: { prompt_tokens: 41, total_tokens: 41 },
              meta: { billed_units: { search_units: 1 } },
            }),
          }),
          400: json('The body is not JSON, or a field is wrong: the message and param name it.', ref('OpenAiError'), {
            bad_json: example('A trailing comma', badJson),
            missing_query: example('No query', openAiError("Missing required parameter: 'query'", 'query')),
            no_documents: example('No documents', openAiError("'documents' must be a non-empty list of texts", 'documents')),
            empty_document: example('An empty document', openAiError("'documents[1]' must be a non-empty text or an object with a non-empty text field", 'documents')),
            top_n: example('top_n of 0', openAiError("'top_n' must be an integer of at least 1", 'top_n')),
          }),
          404: errorResponse('`model` names another model.', 'Another model', openAiError(`The model 'rerank-v3.5' does not exist; this server serves '${id}'`, 'model', 'model_not_found')),
          ...transportErrors,
        },
      },
    });
    paths['/v1/rerank'] = rerank('rerank', 'Rerank documents against a query (Cohere v1 and Infinity shape)');
    paths['/v2/rerank'] = rerank('rerankV2', 'The same, at the path of the Cohere v2 client');
  }
  return paths;
}
