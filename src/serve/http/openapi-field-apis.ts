/**
 * The OpenAPI description of the field's APIs this server speaks (design decision 9): OpenAI's /v1/models and, by model
 * type, /v1/embeddings and Cohere's /v1/embed and /v2/embed (embedding and sentence_embedding models) or /v1/rerank
 * and /v2/rerank (sequence classification, Cohere's shape). Their errors are OpenAI's body. Schemas are JSON Schema,
 * converted by the caller.
 */
import { POOLED_MODEL_TYPES } from '../../encoder/config.ts';
import type { ModelMetadata } from '../../encoder/schemas.ts';
import type { ServedModelNames } from '../model-names.ts';
import { COHERE_EMBED_REQUEST_SCHEMA, SERVED_EMBEDDING_TYPES } from './cohere-embed.ts';
import { binaryOf, ubinaryOf } from './embedding-encodings.ts';
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
          document: { type: 'object', description: 'With return_documents: {text} for a text, an object document as it was given.' },
        },
      },
    },
    model: { type: 'string' },
    usage: usageSchema,
    meta: { type: 'object', description: "Cohere's billed units: one search unit per request." },
  },
} as const;

const floats = { type: 'array', items: { type: 'number' } } as const;
const bytes = (minimum: number, maximum: number) => ({ type: 'array', items: { type: 'array', items: { type: 'integer', minimum, maximum } } }) as const;

export const COHERE_EMBED_RESPONSE_SCHEMA = {
  type: 'object',
  required: ['id', 'embeddings', 'texts', 'meta', 'response_type'],
  properties: {
    id: { type: 'string' },
    embeddings: {
      description:
        'embeddings_by_type: one list per type asked for, one entry per text, in order. /v1/embed without embedding_types (embeddings_floats): the float vectors.',
      oneOf: [
        {
          type: 'object',
          additionalProperties: false,
          properties: {
            float: { type: 'array', items: floats },
            base64: { type: 'array', items: { type: 'string', description: 'The float32 values, little-endian, in base64.' } },
            binary: { ...bytes(-128, 127), description: 'Sign bits, 8 per byte (first component in the highest bit), as signed bytes (ubinary - 128).' },
            ubinary: { ...bytes(0, 255), description: 'Sign bits, 8 per byte (first component in the highest bit).' },
          },
        },
        { type: 'array', items: floats },
      ],
    },
    texts: { type: 'array', items: { type: 'string' }, description: 'The texts embedded (inputs: each one\'s text parts joined by newlines).' },
    meta: {
      type: 'object',
      required: ['api_version', 'billed_units'],
      properties: {
        api_version: { type: 'object', required: ['version'], properties: { version: { type: 'string', enum: ['1', '2'] } } },
        billed_units: { type: 'object', required: ['input_tokens'], properties: { input_tokens: { type: 'integer', minimum: 0, description: 'Tokens of the texts, special tokens included.' } } },
      },
    },
    response_type: { type: 'string', enum: ['embeddings_by_type', 'embeddings_floats'] },
  },
} as const;

/** The JSON schemas the paths below refer to, by component name. */
export function fieldApiSchemas(metadata: ModelMetadata): Record<string, object> {
  const schemas: Record<string, object> = { OpenAiError: OPENAI_ERROR_SCHEMA, Model: MODEL_SCHEMA, ModelList: MODEL_LIST_SCHEMA };
  if (POOLED_MODEL_TYPES.includes(metadata.model_type)) {
    Object.assign(schemas, {
      EmbeddingsRequest: EMBEDDINGS_REQUEST_SCHEMA,
      EmbeddingsResponse: EMBEDDINGS_RESPONSE_SCHEMA,
      CohereEmbedRequest: COHERE_EMBED_REQUEST_SCHEMA,
      CohereEmbedResponse: COHERE_EMBED_RESPONSE_SCHEMA,
    });
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

/** An illustrative vector as the float32 values a response carries. */
const float32Of = (values: number[]) => Float32Array.from(values);

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

/**
 * The paths of the field's APIs this model type serves. Their `model` is any name unless the server is strict about
 * names (`names`): only then is another name a 404, and documented as one.
 */
export function fieldApiPaths(metadata: ModelMetadata, bodyLimitBytes: number, badJsonMessage: string, names: ServedModelNames): Record<string, object> {
  const id = names.served;
  const model = { id, object: 'model', created: 1764000000, owned_by: 'encoder' };
  const otherModel = (name: string) => openAiError(`The model '${name}' does not exist; ${names.describe()}`, 'model', 'model_not_found');
  const notThisModel = otherModel('text-embedding-3-small');
  /** The 404 for another model name, on a server strict about names; nothing otherwise. */
  const modelNotFound = (description: string, body: object) => (names.strict ? { 404: errorResponse(description, 'Another model', body) } : {});
  const modelRule = names.strict
    ? `model is optional; a name other than ${names.names.map((name) => `'${name}'`).join(', ')} is a 404 (--strict-model-name).`
    : `model is optional and any name is taken as this model, answered as '${id}'.`;
  const transportErrors = {
    413: errorResponse(`The body is larger than the server's limit (${bodyLimitBytes} bytes).`, 'Too large', openAiError(bodyTooLargeMessage(bodyLimitBytes))),
    415: errorResponse('The body is not application/json.', 'A text body', openAiError(unsupportedMediaTypeMessage('text/plain'))),
    500: errorResponse('The model or its transform failed on valid input.', 'A failing transform', openAiError('lp_normalize: p must be a number > 0, got 0', null, null, 'server_error')),
  };
  const badJson = openAiError(badJsonMessage);

  /** Cohere's embed at /v{version}/embed: the same body; v1 without embedding_types answers the float vectors. */
  const cohereEmbed = (version: 1 | 2) => {
    const meta = (input_tokens: number) => ({ api_version: { version: String(version) }, billed_units: { input_tokens } });
    const short = float32Of(unitVector(16));
    const requests = {
      texts: example('Two texts, as floats', { model: id, texts: ['hello world', 'good morning'], input_type: 'search_document', embedding_types: ['float'] }),
      by_type: example('16 dimensions, as floats, base64 and packed sign bits', {
        texts: ['hello world'],
        input_type: 'search_query',
        embedding_types: ['float', 'base64', 'ubinary', 'binary'],
        output_dimension: 16,
      }),
      // Cohere v1 has no inputs, and answers the vectors themselves without embedding_types
      ...(version === 2
        ? { inputs: example("Cohere v2's inputs: text parts", { inputs: [{ content: [{ type: 'text', text: 'hello world' }] }], input_type: 'classification' }) }
        : { floats: example('Cohere v1 without embedding_types', { texts: ['hello world'] }) }),
    };
    const responses = {
      texts: example('Two texts (vectors shortened here)', {
        id: '5807ee2e-0cda-445a-9ec8-864c60a06606',
        embeddings: { float: [[0.0477, 0.1115, -0.0912], [-0.1475, 0.0046, 0.2103]] },
        texts: ['hello world', 'good morning'],
        meta: meta(8),
        response_type: 'embeddings_by_type',
      }),
      by_type: example('The same 16 values of a unit vector, four ways (ubinary: 2 bytes, binary: those minus 128)', {
        id: 'b0e5c5e4-8a3b-4a8e-9f55-1d2a3c4b5d6e',
        embeddings: { float: [Array.from(short)], base64: [float32Base64(Array.from(short))], ubinary: [ubinaryOf(short)], binary: [binaryOf(short)] },
        texts: ['hello world'],
        meta: meta(4),
        response_type: 'embeddings_by_type',
      }),
      ...(version === 2
        ? {
            inputs: example('One vector (shortened here)', {
              id: '2f1d4c8e-7b6a-4e5d-8c9b-0a1b2c3d4e5f',
              embeddings: { float: [[0.0477, 0.1115, -0.0912]] },
              texts: ['hello world'],
              meta: meta(4),
              response_type: 'embeddings_by_type',
            }),
          }
        : {
            floats: example('The vectors themselves (shortened here)', {
              id: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
              embeddings: [[0.0477, 0.1115, -0.0912]],
              texts: ['hello world'],
              meta: meta(4),
              response_type: 'embeddings_floats',
            }),
          }),
    };
    const served = SERVED_EMBEDDING_TYPES.join(', ');
    return {
      post: {
        operationId: version === 2 ? 'embedV2' : 'embed',
        summary: `Cohere-compatible embeddings (the cohere-ai client's ${version === 2 ? 'CohereClientV2' : 'CohereClient'}.embed): one ${metadata.pooling ?? 'mean'}-pooled vector per text`,
        description:
          `Requests join the same batches as /predict. embedding_types: ${served} (int8 and uint8 are not served: their scale is defined for ` +
          "Cohere's own models only); default float. output_dimension keeps the first n components, re-normalised. input_type, " +
          "max_tokens and priority are accepted and ignored; texts are truncated at their end to the model's length (truncate END, " +
          'or NONE, which truncates too). ' +
          modelRule +
          (version === 1 ? ' Without embedding_types the answer is embeddings_floats, as Cohere v1 answers.' : ''),
        requestBody: { required: true, ...json('Texts (or inputs) and options.', ref('CohereEmbedRequest'), requests) },
        responses: {
          200: json('The vectors of each type asked for, one per text, in order, with the tokens counted.', ref('CohereEmbedResponse'), responses),
          400: json('The body is not JSON, or a field is wrong: the message and param name it.', ref('OpenAiError'), {
            bad_json: example('A trailing comma', badJson),
            missing_texts: example('Neither texts nor inputs', openAiError("Missing required parameter: 'texts'", 'texts')),
            empty_texts: example('No texts', openAiError("'texts' must be a non-empty list of texts", 'texts')),
            int8: example('An embedding type not served', openAiError(`'embedding_types' "int8" is not supported; supported: ${served}`, 'embedding_types')),
            images: example('Images', openAiError("'images' is not supported: this server embeds texts; send texts", 'images')),
            truncate_start: example(
              'truncate START',
              openAiError(`'truncate' "START" is not supported: texts are truncated at their end ('END'; 'NONE' is accepted)`, 'truncate'),
            ),
          }),
          ...modelNotFound('`model` names another model.', otherModel('embed-v4.0')),
          ...transportErrors,
        },
      },
    };
  };

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
        description: names.strict
          ? 'The served model under any of its names; any other name is a 404 with code model_not_found (--strict-model-name).'
          : 'The served model, whatever the name asked for (one model is served).',
        parameters: [{ name: 'model', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          200: json('The served model.', ref('Model'), { this_model: example('This model', model) }),
          ...modelNotFound('Another name than the served model.', notThisModel),
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
          modelRule +
          " user (OpenAI) is ignored; modality (Infinity) must be 'text'; null is taken as not given.",
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
            modality: example("Infinity's image modality", openAiError('\'modality\' "image" is not served: this server embeds texts only (\'text\')', 'modality')),
          }),
          ...modelNotFound('`model` names another model.', notThisModel),
          ...transportErrors,
        },
      },
    };
    paths['/v2/embed'] = cohereEmbed(2);
    paths['/v1/embed'] = cohereEmbed(1);
  }
  if (metadata.model_type === 'sequence_classification') {
    const rerank = (operationId: string, summary: string) => ({
      post: {
        operationId,
        summary,
        description:
          'Each document is scored with the query as a text pair: the sigmoid of a one-logit model, or the softmax ' +
          'probability of the rerank label (configuration rerank_label; default the last label). Results come best ' +
          'first. ' +
          modelRule +
          " Cohere's max_tokens_per_doc, max_chunks_per_doc and priority, and TEI's truncate, are accepted and ignored (documents are truncated to " +
          "the model's length with the query); raw_scores (Infinity, TEI) true scores with the model's logit; rank_fields (Cohere v1) ranks object documents by the named fields.",
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
            raw_scores: example('raw_scores that is not a boolean', openAiError("'raw_scores' must be true or false", 'raw_scores')),
          }),
          ...modelNotFound('`model` names another model.', otherModel('rerank-v3.5')),
          ...transportErrors,
        },
      },
    });
    paths['/v1/rerank'] = rerank('rerank', 'Rerank documents against a query (Cohere v1 and Infinity shape)');
    paths['/v2/rerank'] = rerank('rerankV2', 'The same, at the path of the Cohere v2 client');
  }
  return paths;
}
