/**
 * The OpenAPI description of Infinity's routes (infinity.ts), for the model types they serve: GET /models (every model
 * type), POST /embeddings (embedding and sentence_embedding), POST /classify and Infinity's body on POST /rerank
 * (sequence_classification; the path is TEI's too, so its operation takes both bodies). Errors are Infinity's bodies
 * (errors.ts, infinityError). Schemas are JSON Schema, converted by the caller.
 */
import { POOLED_MODEL_TYPES } from '../../encoder/config.ts';
import type { ModelMetadata } from '../../encoder/schemas.ts';
import { bodyTooLargeMessage, infinityError, unsupportedMediaTypeMessage, type HttpFailure } from './errors.ts';
import { EMBEDDINGS_RESPONSE_SCHEMA } from './openapi-field-apis.ts';
import { INFINITY_CLASSIFY_REQUEST_SCHEMA, INFINITY_EMBEDDINGS_REQUEST_SCHEMA, INFINITY_RERANK_REQUEST_SCHEMA } from './infinity.ts';

const usage = { type: 'object', required: ['prompt_tokens', 'total_tokens'], properties: { prompt_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } } } as const;
/** What every Infinity answer carries besides its data. */
const envelope = {
  model: { type: 'string', description: 'The served model name.' },
  usage,
  id: { type: 'string', description: '`infinity-<uuid>`' },
  created: { type: 'integer', description: 'Unix time of the answer.' },
} as const;
const labelScores = { type: 'array', items: { type: 'object', required: ['score', 'label'], properties: { score: { type: 'number' }, label: { type: 'string' } } } } as const;

export const INFINITY_VALIDATION_ERROR_SCHEMA = {
  type: 'object',
  description: "FastAPI's 422: the body could not be read; loc names the field.",
  required: ['detail'],
  properties: {
    detail: {
      type: 'array',
      items: {
        type: 'object',
        required: ['loc', 'msg', 'type'],
        properties: { loc: { type: 'array', items: { type: 'string' } }, msg: { type: 'string' }, type: { type: 'string' } },
      },
    },
  },
} as const;

const INFINITY_ERROR_SCHEMA = {
  type: 'object',
  description: "Infinity's OpenAI-like error: the model cannot do what is asked (400), or failed (500).",
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['message', 'code'],
      properties: { message: { type: 'string' }, type: { type: ['string', 'null'] }, param: { type: ['string', 'null'] }, code: { type: 'integer' } },
    },
  },
} as const;

const INFINITY_HTTP_ERROR_SCHEMA = {
  type: 'object',
  description: "FastAPI's error body for a refusal of the HTTP exchange (401, 405, 413, 415, 503).",
  required: ['detail'],
  properties: { detail: { type: 'string' } },
} as const;

/** The JSON schemas the paths below refer to, by component name. */
export function infinitySchemas(metadata: ModelMetadata): Record<string, object> {
  const schemas: Record<string, object> = {
    InfinityValidationError: INFINITY_VALIDATION_ERROR_SCHEMA,
    InfinityError: INFINITY_ERROR_SCHEMA,
    InfinityHttpError: INFINITY_HTTP_ERROR_SCHEMA,
    InfinityModels: {
      type: 'object',
      required: ['data', 'object'],
      properties: {
        object: { type: 'string', enum: ['list'] },
        data: {
          type: 'array',
          items: {
            type: 'object',
            required: ['id', 'stats', 'object', 'owned_by', 'created', 'backend', 'capabilities'],
            properties: {
              id: { type: 'string' },
              object: { type: 'string', enum: ['model'] },
              owned_by: { type: 'string', enum: ['infinity'], description: "Infinity's client accepts only this value." },
              created: { type: 'integer' },
              backend: { type: 'string', enum: ['onnxruntime'] },
              capabilities: { type: 'array', items: { type: 'string', enum: ['embed', 'classify', 'rerank'] } },
              stats: {
                type: 'object',
                properties: {
                  queue_fraction: { type: 'number', description: 'Always 0: there is no bounded queue here.' },
                  queue_absolute: { type: 'integer', description: 'Sequences waiting for a run.' },
                  results_pending: { type: 'integer', description: 'Runs going.' },
                  batch_size: { type: 'integer', description: 'Most sequences per run (else most inputs per request).' },
                },
              },
            },
          },
        },
      },
    },
  };
  if (POOLED_MODEL_TYPES.includes(metadata.model_type)) {
    Object.assign(schemas, {
      InfinityEmbeddingsRequest: INFINITY_EMBEDDINGS_REQUEST_SCHEMA,
      // OpenAI's answer, with Infinity's id and created
      InfinityEmbeddingsResponse: {
        ...EMBEDDINGS_RESPONSE_SCHEMA,
        required: [...EMBEDDINGS_RESPONSE_SCHEMA.required, 'id', 'created'],
        properties: { ...EMBEDDINGS_RESPONSE_SCHEMA.properties, id: envelope.id, created: envelope.created },
      },
    });
  }
  if (metadata.model_type === 'sequence_classification') {
    Object.assign(schemas, {
      InfinityRerankRequest: INFINITY_RERANK_REQUEST_SCHEMA,
      InfinityRerankResponse: {
        type: 'object',
        required: ['object', 'results', 'model', 'usage', 'id', 'created'],
        properties: {
          object: { type: 'string', enum: ['rerank'] },
          results: {
            type: 'array',
            items: {
              type: 'object',
              required: ['relevance_score', 'index', 'document'],
              properties: { relevance_score: { type: 'number' }, index: { type: 'integer' }, document: { type: ['string', 'null'], description: 'With return_documents; else null.' } },
            },
          },
          ...envelope,
        },
      },
      InfinityClassifyRequest: INFINITY_CLASSIFY_REQUEST_SCHEMA,
      InfinityClassifyResponse: {
        type: 'object',
        required: ['object', 'data', 'model', 'usage', 'id', 'created'],
        properties: { object: { type: 'string', enum: ['classify'] }, data: { type: 'array', items: labelScores, description: "Per text, every label's score, best first." }, ...envelope },
      },
    });
  }
  return schemas;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const example = (summary: string, value: unknown) => ({ summary, value });
type Examples = Record<string, { summary: string; value: unknown }>;
const json = (description: string, schema: object, examples: Examples) => ({ description, content: { 'application/json': { schema, examples } } });
/** The body the server sends for this failure (errors.ts, infinityError). */
const body = (failure: HttpFailure) => JSON.parse(infinityError(failure).body) as object;
const invalid = (field: string, message: string) => body({ status: 400, message, param: field });

/** The Infinity paths this model type serves; `/rerank` is left to addInfinityRerank (the path is TEI's too). */
export function infinityPaths(metadata: ModelMetadata, bodyLimitBytes: number, badJsonMessage: string): Record<string, object> {
  const id = metadata.model_id;
  const transport = {
    413: json(`The body is larger than the server's limit (${bodyLimitBytes} bytes).`, ref('InfinityHttpError'), { too_large: example('Too large', body({ status: 413, message: bodyTooLargeMessage(bodyLimitBytes) })) }),
    415: json('The body is not application/json.', ref('InfinityHttpError'), { media_type: example('A text body', body({ status: 415, message: unsupportedMediaTypeMessage('text/plain') })) }),
  };
  const badJson = example('A trailing comma', body({ status: 400, message: badJsonMessage }));
  const notDeployed = (capability: string) => ({
    400: json("The model cannot do this (Infinity's ModelNotDeployedError), or --strict-model-name and another model name.", ref('InfinityError'), {
      other_model: example('Another model name, with --strict-model-name', body({ status: 400, message: `Invalid model: The model 'other' does not exist; this server serves '${id}'`, code: 'model_not_found' })),
    }),
    500: json(`The model failed on valid input (${capability}).`, ref('InfinityError'), { failed: example('A failing transform', body({ status: 500, message: 'lp_normalize: p must be a number > 0, got 0' })) }),
  });
  const operation = (operationId: string, summary: string, description: string, request: string, requestExamples: Examples, response: string, responseExamples: Examples, invalidExamples: Examples, capability: string) => ({
    post: {
      operationId,
      summary,
      description,
      requestBody: { required: true, ...json('The request, as Infinity takes it.', ref(request), requestExamples) },
      responses: {
        200: json('The answer, as Infinity gives it.', ref(response), responseExamples),
        ...notDeployed(capability),
        422: json("A body Infinity cannot read (FastAPI's validation error).", ref('InfinityValidationError'), { ...invalidExamples, bad_json: badJson }),
        ...transport,
      },
    },
  });
  const answer = (fields: object) => ({ ...fields, model: id, usage: { prompt_tokens: 7, total_tokens: 7 }, id: 'infinity-6f1c8e2a-4b7d-4f0e-9c3a-2d5e8b1a7c90', created: 1767225600 });
  const paths: Record<string, object> = {
    '/models': {
      get: {
        operationId: 'infinityModels',
        summary: "Infinity's /models: the served model and what it can do",
        responses: {
          200: json("Infinity's model list (owned_by is 'infinity', which Infinity's client requires).", ref('InfinityModels'), {
            models: example('A sentence embedding model', {
              data: [{ id, object: 'model', owned_by: 'infinity', created: 1767225600, backend: 'onnxruntime', capabilities: ['embed'], stats: { queue_fraction: 0, queue_absolute: 0, results_pending: 0, batch_size: 2048 } }],
              object: 'list',
            }),
          }),
        },
      },
    },
  };
  if (POOLED_MODEL_TYPES.includes(metadata.model_type)) {
    paths['/embeddings'] = operation(
      'infinityEmbeddings',
      "Infinity's /embeddings: one pooled vector per text (OpenAI's shape, at the root)",
      "OpenAI's embeddings body and answer, with Infinity's id and created; dimensions 0 (Infinity's default) keeps every component; modality must be text. Any model name is this model unless --strict-model-name.",
      'InfinityEmbeddingsRequest',
      { example: example("Infinity's example", { model: 'openai/clip-vit-base-patch32', input: ['Two cute cats.'] }) },
      'InfinityEmbeddingsResponse',
      { example: example('One vector (shortened here)', answer({ object: 'list', data: [{ object: 'embedding', embedding: [0.0477, 0.1115, -0.0912], index: 0 }] })) },
      {
        missing_input: example('No input', invalid('input', "Missing required parameter: 'input'")),
        empty_input: example('An empty list', invalid('input', "'input' is an empty list")),
      },
      'embed',
    );
  }
  if (metadata.model_type === 'sequence_classification') {
    paths['/classify'] = operation(
      'infinityClassify',
      "Infinity's /classify: every label's score for each text",
      "Per text, every label with its softmax probability (raw_scores: the logits), best first; a model without labels names them LABEL_<i>. usage counts the texts' own tokens.",
      'InfinityClassifyRequest',
      { example: example("Infinity's example", { model: 'SamLowe/roberta-base-go_emotions', input: ['I am not having a great day.'] }) },
      'InfinityClassifyResponse',
      { example: example('Two labels', answer({ object: 'classify', data: [[{ score: 0.7311, label: 'negative' }, { score: 0.2689, label: 'positive' }]] })) },
      {
        a_text: example('A text instead of a list', invalid('input', "'input' must be a non-empty list of non-empty texts")),
        missing_input: example('No input', invalid('input', "Missing required parameter: 'input'")),
      },
      'classify',
    );
  }
  return paths;
}

/**
 * Infinity's body on POST /rerank, added to TEI's operation there: the request is either, told apart by `documents`
 * (Infinity's) or `texts` (TEI's); so are the answer and the errors.
 */
export function addInfinityRerank(paths: Record<string, object>, metadata: ModelMetadata): void {
  const operation = (paths['/rerank'] as { post?: { description: string; requestBody: { content: Record<string, { schema: object; examples: Examples }> }; responses: Record<string, { content: Record<string, { schema: object; examples: Examples }> }> } } | undefined)?.post;
  if (operation === undefined) return;
  operation.description +=
    " Infinity's body (documents instead of texts: query, documents, return_documents, raw_scores, top_n, model) gets Infinity's answer, " +
    "{object: rerank, results: [{relevance_score, index, document}], model, usage, id, created}, and Infinity's errors (FastAPI's 422 detail).";
  const alternative = (content: { schema: object; examples: Examples }, schema: string, examples: Examples) => {
    content.schema = { oneOf: [content.schema, ref(schema)] };
    Object.assign(content.examples, examples);
  };
  const request = { query: 'Where is Munich?', documents: ['Munich is in Germany.', 'The sky is blue.'], return_documents: true };
  alternative(operation.requestBody.content['application/json'], 'InfinityRerankRequest', { infinity: example("Infinity's example, with the documents", { model: 'mixedbread-ai/mxbai-rerank-xsmall-v1', ...request }) });
  alternative(operation.responses[200].content['application/json'], 'InfinityRerankResponse', {
    infinity: example("Infinity's answer", {
      object: 'rerank',
      results: [{ relevance_score: 0.9731, index: 0, document: 'Munich is in Germany.' }, { relevance_score: 0.0208, index: 1, document: 'The sky is blue.' }],
      model: metadata.model_id,
      usage: { prompt_tokens: 19, total_tokens: 19 },
      id: 'infinity-6f1c8e2a-4b7d-4f0e-9c3a-2d5e8b1a7c90',
      created: 1767225600,
    }),
  });
  alternative(operation.responses[422].content['application/json'], 'InfinityValidationError', {
    infinity_no_documents: example("Infinity's body without documents", invalid('documents', "'documents' must be a non-empty list of non-empty texts")),
  });
}
