/**
 * The OpenAPI description of text-embeddings-inference's routes (tei.ts), for the model types they serve: /embed
 * (embedding and sentence_embedding), /embed_all (embedding), /rerank (sequence_classification), and /tokenize,
 * /decode and /info for every model type. Their errors are TEI's body, `{error, error_type}`. Schemas are JSON
 * Schema, converted by the caller.
 */
import { POOLED_MODEL_TYPES } from '../../encoder/config.ts';
import type { ModelMetadata } from '../../encoder/schemas.ts';
import { bodyTooLargeMessage, teiError, unsupportedMediaTypeMessage } from './errors.ts';
import {
  TEI_DECODE_REQUEST_SCHEMA,
  TEI_EMBED_ALL_REQUEST_SCHEMA,
  TEI_EMBED_REQUEST_SCHEMA,
  TEI_ERROR_STATUS,
  TEI_RERANK_REQUEST_SCHEMA,
  TEI_TOKENIZE_REQUEST_SCHEMA,
  isTeiReranker,
} from './tei.ts';

export const TEI_ERROR_SCHEMA = {
  type: 'object',
  description: "text-embeddings-inference's error body.",
  required: ['error', 'error_type'],
  properties: {
    error: { type: 'string' },
    error_type: { type: 'string', enum: Object.keys(TEI_ERROR_STATUS), description: 'Empty: 400; Validation, Tokenizer: 422; Backend: 424; Overloaded: 429; Unhealthy: 503 (other statuses: Validation).' },
  },
} as const;

const vector = { type: 'array', items: { type: 'number' } } as const;
const nullableInteger = { type: ['integer', 'null'], minimum: 0 } as const;
const labels = {
  type: 'object',
  required: ['id2label', 'label2id'],
  properties: { id2label: { type: 'object', additionalProperties: { type: 'string' } }, label2id: { type: 'object', additionalProperties: { type: 'integer' } } },
} as const;

export const TEI_INFO_SCHEMA = {
  type: 'object',
  required: ['model_id', 'model_dtype', 'served_model_name', 'model_type', 'max_input_length', 'max_batch_tokens', 'max_client_batch_size', 'auto_truncate', 'tokenization_workers', 'version'],
  properties: {
    model_id: { type: 'string' },
    model_sha: { type: ['string', 'null'], description: 'null: the model is packed in this executable, not fetched from a hub.' },
    model_dtype: { type: 'string', enum: ['float32', 'int8'] },
    served_model_name: { type: 'string' },
    model_type: {
      description: 'embedding with its pooling; reranker for a one-label sequence classifier; classifier for the other classifiers (token classification too).',
      oneOf: [
        { type: 'object', required: ['embedding'], properties: { embedding: { type: 'object', required: ['pooling'], properties: { pooling: { type: 'string' } } } } },
        { type: 'object', required: ['classifier'], properties: { classifier: labels } },
        { type: 'object', required: ['reranker'], properties: { reranker: labels } },
      ],
    },
    max_concurrent_requests: { ...nullableInteger, description: 'null: no such limit here.' },
    max_input_length: { type: 'integer', minimum: 1, description: "The model's length in tokens; longer inputs are truncated." },
    max_batch_tokens: { type: 'integer', minimum: 1, description: 'Largest padded size of one run (--max-batch-tokens).' },
    max_batch_requests: { ...nullableInteger, description: 'Most sequences per run; null: only max_batch_tokens bounds a run.' },
    max_client_batch_size: { type: 'integer', minimum: 1, description: 'Most inputs per request (--max-request-inputs).' },
    auto_truncate: { type: 'boolean', description: 'Always true: inputs longer than the model are truncated.' },
    tokenization_workers: { type: 'integer', minimum: 0, description: 'Threads that tokenize large requests.' },
    version: { type: 'string', description: "This server's version." },
    sha: { type: ['string', 'null'] },
    docker_label: { type: ['string', 'null'] },
  },
} as const;

const TOKEN_SCHEMA = {
  type: 'object',
  required: ['id', 'text', 'special', 'start', 'stop'],
  properties: {
    id: { type: 'integer', minimum: 0 },
    text: { type: 'string', description: "The text's own piece; a special token's text is the token." },
    special: { type: 'boolean' },
    start: { ...nullableInteger, description: 'UTF-8 byte offset of the piece in the text, as TEI gives it; null for a special token.' },
    stop: { ...nullableInteger, description: 'UTF-8 byte offset of its end.' },
  },
} as const;

/** The JSON schemas the paths below refer to, by component name. */
export function teiSchemas(metadata: ModelMetadata): Record<string, object> {
  const schemas: Record<string, object> = {
    TeiError: TEI_ERROR_SCHEMA,
    TeiInfo: TEI_INFO_SCHEMA,
    TeiTokenizeRequest: TEI_TOKENIZE_REQUEST_SCHEMA,
    TeiTokenizeResponse: { type: 'array', items: { type: 'array', items: TOKEN_SCHEMA } },
    TeiDecodeRequest: TEI_DECODE_REQUEST_SCHEMA,
    TeiDecodeResponse: { type: 'array', items: { type: 'string' } },
  };
  if (POOLED_MODEL_TYPES.includes(metadata.model_type)) {
    Object.assign(schemas, { TeiEmbedRequest: TEI_EMBED_REQUEST_SCHEMA, TeiEmbedResponse: { type: 'array', items: vector } });
  }
  if (metadata.model_type === 'embedding') {
    Object.assign(schemas, { TeiEmbedAllRequest: TEI_EMBED_ALL_REQUEST_SCHEMA, TeiEmbedAllResponse: { type: 'array', items: { type: 'array', items: vector } } });
  }
  if (metadata.model_type === 'sequence_classification') {
    Object.assign(schemas, {
      TeiRerankRequest: TEI_RERANK_REQUEST_SCHEMA,
      TeiRerankResponse: {
        type: 'array',
        items: { type: 'object', required: ['index', 'score'], properties: { index: { type: 'integer', minimum: 0 }, text: { type: 'string' }, score: { type: 'number' } } },
      },
    });
  }
  return schemas;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const example = (summary: string, value: unknown) => ({ summary, value });
const json = (description: string, schema: object, examples: Record<string, { summary: string; value: unknown }>) => ({
  description,
  content: { 'application/json': { schema, examples } },
});
/** The body the server sends for a failure of this status and message (errors.ts, teiError). */
const body = (status: number, message: string, code?: string) => JSON.parse(teiError({ status, message, code }).body) as object;
const errorResponse = (description: string, examples: Record<string, { summary: string; value: unknown }>) => json(description, ref('TeiError'), examples);

/** The TEI paths this model type serves. */
export function teiPaths(metadata: ModelMetadata, bodyLimitBytes: number, badJsonMessage: string): Record<string, object> {
  const transport = {
    413: errorResponse(`The body is larger than the server's limit (${bodyLimitBytes} bytes).`, { too_large: example('Too large', body(413, bodyTooLargeMessage(bodyLimitBytes))) }),
    415: errorResponse('The body is not application/json.', { media_type: example('A text body', body(415, unsupportedMediaTypeMessage('text/plain'))) }),
  };
  const badJson = example('A trailing comma', body(400, badJsonMessage));
  const empty = (field: string) => example('An empty batch', body(400, `\`${field}\` cannot be empty`, 'Empty'));
  const tooMany = example('More inputs than max_client_batch_size (GET /info)', body(422, 'batch size 2049 > maximum allowed batch size 2048', 'Validation'));
  const backend = errorResponse('The model failed on valid input (onnxruntime, the transform).', {
    failed: example('A failing transform', body(500, 'lp_normalize: p must be a number > 0, got 0')),
  });
  const operation = (operationId: string, summary: string, description: string, request: string, requestExamples: object, response: string, responseExamples: object, errors: object) => ({
    post: {
      operationId,
      summary,
      description,
      requestBody: { required: true, ...json('The request, as TEI takes it.', ref(request), requestExamples as Record<string, { summary: string; value: unknown }>) },
      responses: { 200: json('The answer, as TEI gives it.', ref(response), responseExamples as Record<string, { summary: string; value: unknown }>), ...errors, ...transport },
    },
  });
  const lenient = "truncate is accepted (inputs are always truncated to the model's length), truncation_direction must be Right, prompt_name null.";
  const paths: Record<string, object> = {
    '/info': {
      get: {
        operationId: 'teiInfo',
        summary: "text-embeddings-inference's /info: the model and the limits requests are held to",
        responses: {
          200: json("TEI's info object, filled with this server's values.", ref('TeiInfo'), {
            info: example('A sentence embedding model', {
              model_id: metadata.model_id,
              model_sha: null,
              model_dtype: 'float32',
              served_model_name: metadata.model_id,
              model_type: { embedding: { pooling: 'mean' } },
              max_concurrent_requests: null,
              max_input_length: 512,
              max_batch_tokens: 16384,
              max_batch_requests: null,
              max_client_batch_size: 2048,
              auto_truncate: true,
              tokenization_workers: 1,
              version: '0.1.0',
              sha: null,
              docker_label: null,
            }),
          }),
        },
      },
    },
    '/tokenize': operation(
      'teiTokenize',
      "text-embeddings-inference's /tokenize: each text's tokens, not truncated",
      'Token offsets are UTF-8 byte offsets into the text, as TEI gives them; special tokens have none. prompt_name must be null.',
      'TeiTokenizeRequest',
      { one: example("TEI's example", { inputs: 'test' }), many: example('Two texts, without special tokens', { inputs: ['héllo', 'world'], add_special_tokens: false }) },
      'TeiTokenizeResponse',
      {
        one: example('[CLS] test [SEP] (bert-base-uncased)', [[
          { id: 101, text: '[CLS]', special: true, start: null, stop: null },
          { id: 3231, text: 'test', special: false, start: 0, stop: 4 },
          { id: 102, text: '[SEP]', special: true, start: null, stop: null },
        ]]),
      },
      {
        400: errorResponse('An empty batch, or a body that is not JSON.', { empty: empty('inputs'), bad_json: badJson }),
        422: errorResponse('A field TEI would refuse, an unsupported option, or too many inputs.', {
          too_many: tooMany,
          prompt_name: example('A prompt name', body(422, '`prompt_name` is set to "query" but this server has no prompts', 'Validation')),
        }),
      },
    ),
    '/decode': operation(
      'teiDecode',
      "text-embeddings-inference's /decode: token ids back to text",
      'skip_special_tokens (default true) leaves special tokens out. An id outside the vocabulary is a 422.',
      'TeiDecodeRequest',
      { one: example('The ids of [CLS] test [SEP]', { ids: [101, 3231, 102] }), many: example('Two lists, special tokens kept', { ids: [[101, 3231, 102], [101, 102]], skip_special_tokens: false }) },
      'TeiDecodeResponse',
      { one: example('One text', ['test']) },
      {
        400: errorResponse("A body that is not JSON (`ids: []` is one empty list, decoded to '', as in TEI).", { bad_json: badJson }),
        422: errorResponse('An id outside the vocabulary, or too many lists.', {
          unknown_id: example('An unknown id', body(422, 'Invalid input: ids[0]: token id 10000000 is not in the vocabulary')),
          too_many: tooMany,
        }),
      },
    ),
  };
  if (POOLED_MODEL_TYPES.includes(metadata.model_type)) {
    paths['/embed'] = operation(
      'teiEmbed',
      "text-embeddings-inference's /embed: one pooled vector per input",
      `normalize (default true) scales each vector to unit length; dimensions keeps the first n components. ${lenient}`,
      'TeiEmbedRequest',
      { one: example("TEI's example", { inputs: 'What is Deep Learning?' }), many: example('Two texts, 16 dimensions, not normalised', { inputs: ['Today is a nice day', 'I like you'], normalize: false, dimensions: 16 }) },
      'TeiEmbedResponse',
      { one: example('One vector (shortened here)', [[0.0477, 0.1115, -0.0912]]) },
      {
        400: errorResponse('An empty batch, or a body that is not JSON.', { empty: empty('inputs'), bad_json: badJson }),
        422: errorResponse('A field TEI would refuse, an unsupported option, or too many inputs.', {
          too_many: tooMany,
          direction: example('truncation_direction Left', body(422, '`truncation_direction` "Left" is not supported: inputs are truncated at their end (\'Right\')', 'Validation')),
        }),
        424: backend,
      },
    );
  }
  if (metadata.model_type === 'embedding') {
    paths['/embed_all'] = operation(
      'teiEmbedAll',
      "text-embeddings-inference's /embed_all: every token's vector",
      `The token vectors as the model gives them (not normalised), special tokens included. ${lenient}`,
      'TeiEmbedAllRequest',
      { one: example("TEI's example", { inputs: 'What is Deep Learning?' }) },
      'TeiEmbedAllResponse',
      { one: example('Three tokens (shortened here)', [[[0.0477, 0.1115], [-0.1475, 0.0046], [0.2103, -0.0912]]]) },
      {
        400: errorResponse('An empty batch, or a body that is not JSON.', { empty: empty('inputs'), bad_json: badJson }),
        422: errorResponse('A field TEI would refuse, an unsupported option, or too many inputs.', { too_many: tooMany }),
        424: backend,
      },
    );
  }
  if (metadata.model_type === 'sequence_classification') {
    paths['/rerank'] = operation(
      'teiRerank',
      "text-embeddings-inference's /rerank: texts scored against a query, best first",
      `Scores are probabilities (the sigmoid of a one-logit model, else the rerank label's softmax probability), or with raw_scores the logits. ${lenient}`,
      'TeiRerankRequest',
      {
        example: example("TEI's example, with the texts", { query: 'What is Deep Learning?', texts: ['Deep Learning is not...', 'Deep learning is...'], return_text: true }),
      },
      'TeiRerankResponse',
      { example: example('Best first', [{ index: 1, text: 'Deep learning is...', score: 0.9731 }, { index: 0, text: 'Deep Learning is not...', score: 0.0208 }]) },
      {
        400: errorResponse('An empty batch, or a body that is not JSON.', { empty: empty('texts'), bad_json: badJson }),
        422: errorResponse('A field TEI would refuse, an unsupported option, or too many texts.', { too_many: tooMany }),
        424: backend,
      },
    );
  }
  return paths;
}

/**
 * TEI's default route, POST /, and SageMaker's POST /invocations (routes.ts): the operation of the route of the model's
 * kind (/embed, /rerank or /predict), which they answer as it does; and GET /ping, SageMaker's health check, as /health.
 * Called once the other paths are complete (the Infinity body of /rerank included).
 */
export function addDefaultRoutes(paths: Record<string, object>, metadata: ModelMetadata): void {
  const target = POOLED_MODEL_TYPES.includes(metadata.model_type) ? '/embed' : isTeiReranker(metadata) ? '/rerank' : '/predict';
  const of = (path: string, method: 'get' | 'post') => (paths[path] as Record<string, { operationId: string; summary: string }>)[method];
  for (const [path, operationId, caller] of [
    ['/', 'teiDefault', "text-embeddings-inference's default route (where the Hugging Face inference clients send an endpoint's requests)"],
    ['/invocations', 'sagemakerInvocations', "SageMaker's inference route, as text-embeddings-inference answers it"],
  ] as const) {
    paths[path] = { post: { ...structuredClone(of(target, 'post')), operationId, summary: `${caller}: ${target}'s request and answer` } };
  }
  paths['/ping'] = { get: { ...structuredClone(of('/health', 'get')), operationId: 'ping', summary: "SageMaker's health check: /health's answer (readiness)" } };
}
