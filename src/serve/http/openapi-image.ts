/**
 * The OpenAPI 3.0.3 document (GET /openapi.json) of an image classification model's server (image-app.ts): /predict
 * with base64 images, /predict/multipart as encoderfile 0.7's form, /model, /health, /livez, MCP at /mcp, /metrics
 * given metrics. The text models' document is openapi.ts; this one describes only what an image server answers.
 */
import { MCP_PATH } from './errors.ts';
import type { ImageModelType } from '../../encoder/config.ts';
import { IMAGE_METADATA_SCHEMA, IMAGE_OPTION_SCHEMAS, IMAGE_RESPONSE_SCHEMAS } from '../../encoder/image-schemas.ts';
import type { OpenApiDocument } from './openapi.ts';
import type { ServerInfo } from '../server-info.ts';

export interface ImageOpenApiOptions {
  metadata: { model_id: string; model_type: ImageModelType; id2label: Record<string, string> };
  serverInfo: ServerInfo;
  bodyLimitBytes: number;
  maxImageBytes: number;
  maxRequestInputs: number;
  metrics: boolean;
  apiKey: boolean;
}

const plainText = (description: string) => ({ description, content: { 'text/plain': { schema: { type: 'string' } } } });
const json = (description: string, schema: object) => ({ description, content: { 'application/json': { schema } } });

export function imageOpenApiDocument(options: ImageOpenApiOptions): OpenApiDocument {
  const { metadata, bodyLimitBytes, maxImageBytes, maxRequestInputs } = options;
  const modelType = metadata.model_type as ImageModelType;
  const embedding = modelType === 'image_embedding';
  // each model type's option beside the images, and its response
  const option = IMAGE_OPTION_SCHEMAS[modelType];
  const response = IMAGE_RESPONSE_SCHEMAS[modelType];
  const echoed = IMAGE_METADATA_SCHEMA;
  const imageErrors = plainText(
    'An image (named `inputs[i]` or `files[i]`) is empty, corrupt, truncated, not a PNG, JPEG, WebP or GIF, larger than ' +
      `${maxImageBytes} bytes or declares too many pixels; or a field is wrong (more than ${maxRequestInputs} images, top_k, payload).`,
  );
  const common = {
    413: plainText(`The body is larger than the server's limit (${bodyLimitBytes} bytes).`),
    500: plainText('The model failed on valid input.'),
  };
  const health = (operationId: string, summary: string) => ({ get: { operationId, summary, security: [], responses: { 200: json('"OK!"', { type: 'string' }) } } });
  const paths: Record<string, object> = {
    '/health': health('health', 'Readiness: 503 while shutting down'),
    '/ping': health('ping', "SageMaker's health check: /health's answer (readiness)"),
    '/livez': health('livez', 'Liveness: 200 also while shutting down'),
    '/model': {
      get: {
        operationId: 'model',
        summary: 'The model served: id, type and labels',
        responses: {
          200: json('Model metadata.', {
            type: 'object',
            required: ['model_id', 'model_type', 'id2label'],
            properties: { model_id: { type: 'string' }, model_type: { type: 'string', enum: [metadata.model_type] }, id2label: { type: 'object', additionalProperties: { type: 'string' } } },
            example: metadata,
          }),
        },
      },
    },
    '/openapi.json': { get: { operationId: 'openapi', summary: 'This document', responses: { 200: json('The OpenAPI 3.0 document of this server.', { type: 'object' }) } } },
    '/predict': {
      post: {
        operationId: 'predict',
        summary: `Classify images sent in JSON, each in base64 or as a data URL (data:image/png;base64,…)`,
        requestBody: {
          required: true,
          ...json('The images and options.', {
            type: 'object',
            required: ['inputs'],
            additionalProperties: false,
            properties: {
              inputs: { type: 'array', minItems: 1, maxItems: maxRequestInputs, items: { type: 'string', description: 'Base64 bytes, or a data URL.' } },
              ...option,
              metadata: echoed,
            },
          }),
        },
        responses: { 200: json('One result per image, in order.', response), 400: plainText('The body is not valid JSON.'), 415: plainText('The body is not application/json.'), 422: imageErrors, ...common },
      },
    },
    '/predict/multipart': {
      post: {
        operationId: 'predictMultipart',
        summary: "Classify images sent as files, in mozilla-ai/encoderfile 0.7's form: a JSON part `payload`, a part `files` per image",
        requestBody: {
          required: true,
          content: {
            'multipart/form-data': {
              schema: {
                type: 'object',
                required: ['payload', 'files'],
                properties: {
                  payload: {
                    type: 'object',
                    description: `{${Object.keys(option).map((key) => `"${key}"`).join(', ')}, "metadata"}, or a flat object of strings (the metadata, as encoderfile reads it); {} for none.`,
                    properties: { ...option, metadata: echoed },
                  },
                  files: { type: 'array', items: { type: 'string', format: 'binary' }, description: 'One part per image, in order.' },
                },
              },
              encoding: { payload: { contentType: 'application/json' } },
            },
          },
        },
        responses: {
          200: json('One result per image, in order.', response),
          400: plainText('The body is not a readable multipart/form-data body.'),
          415: plainText('The body is not multipart/form-data.'),
          422: imageErrors,
          ...common,
        },
      },
    },
    [MCP_PATH]: {
      post: {
        operationId: 'mcp',
        summary: 'MCP over Streamable HTTP (stateless, JSON responses): the one tool run_encoder, taking image content blocks',
        requestBody: { required: true, ...json('A JSON-RPC message.', { type: 'object' }) },
        responses: { 200: json('The JSON-RPC response.', { type: 'object' }), 202: { description: 'A notification was accepted; no body.' } },
      },
    },
  };
  if (embedding) {
    paths['/v1/embeddings'] = {
      post: {
        operationId: 'embeddings',
        summary: "OpenAI's embeddings API: each input an image in base64 or a data URL",
        requestBody: {
          required: true,
          ...json('The images and options.', {
            type: 'object',
            required: ['input'],
            properties: {
              input: { oneOf: [{ type: 'string' }, { type: 'array', minItems: 1, maxItems: maxRequestInputs, items: { type: 'string' } }] },
              model: { type: 'string', nullable: true },
              encoding_format: { type: 'string', enum: ['float', 'base64'], nullable: true },
              dimensions: { type: 'integer', minimum: 1, nullable: true },
              user: { type: 'string', nullable: true },
            },
          }),
        },
        responses: {
          200: json("OpenAI's list of embeddings; usage counts 0 tokens (images have none).", { type: 'object', required: ['object', 'data', 'model', 'usage'] }),
          400: json("OpenAI's error body: a bad field or image, named.", { type: 'object', required: ['error'] }),
          404: json("OpenAI's error body: a model name not served (--strict-model-name).", { type: 'object', required: ['error'] }),
        },
      },
    };
  }
  if (!embedding) {
    const labels = (IMAGE_RESPONSE_SCHEMAS.image_classification.properties.results.items as { properties: { labels: object } }).properties.labels;
    for (const [path, operationId, caller] of [
      ['/', 'imageClassificationRaw', 'The Hugging Face inference clients’ image classification (their endpoint calls)'],
      ['/invocations', 'sagemakerInvocations', "SageMaker's inference route"],
    ] as const) {
      paths[path] = {
        post: {
          operationId,
          summary: `${caller}: one image's bytes as the body, its labels best first`,
          requestBody: { required: true, content: { 'image/*': { schema: { type: 'string', format: 'binary' } }, 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } },
          responses: {
            200: json("The image's labels with softmax scores, best first (the Hugging Face image classification task's answer).", labels),
            413: plainText(`The image is larger than ${maxImageBytes} bytes.`),
            415: plainText('The body is not an image type or application/octet-stream.'),
            422: plainText('The body is empty, corrupt, truncated, not a PNG, JPEG, WebP or GIF, or declares too many pixels (named `image[0]`).'),
            500: common[500],
          },
        },
      };
    }
  }
  if (options.metrics) {
    paths['/metrics'] = { get: { operationId: 'metrics', summary: 'Prometheus metrics', security: [], responses: { 200: { description: 'Prometheus text format.', content: { 'text/plain': { schema: { type: 'string' } } } } } } };
  }
  return {
    openapi: '3.0.3',
    info: { title: `${metadata.model_id} (${metadata.model_type})`, version: options.serverInfo.version, description: 'An image classification model served by encoder (docs/image-models.md).' },
    paths,
    ...(options.apiKey
      ? {
          security: [{ apiKey: [] }],
          components: { securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'The key given to `serve --api-key` (or ENCODER_API_KEY).' } } },
        }
      : {}),
  };
}
