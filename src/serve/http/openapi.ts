import type { ModelType } from '../../encoder/config.ts';
import { InternalError } from '../../encoder/errors.ts';
import { MODEL_METADATA_SCHEMA, REQUEST_SCHEMAS, RESPONSE_SCHEMAS, type ModelMetadata } from '../../encoder/schemas.ts';
import { API_KEY_MESSAGES, OPEN_HTTP_ROUTES } from '../api-key.ts';
import type { ServedModelNames } from '../model-names.ts';
import type { ServerInfo } from '../server-info.ts';
import { DRAINING_MESSAGE } from './drain.ts';
import { bodyTooLargeMessage, INFINITY_PATHS, infinityError, invalidJsonMessage, isOpenAiPath, MCP_PATH, TEI_PATHS, teiError, unsupportedMediaTypeMessage } from './errors.ts';
import { predictExamples, type Example } from './examples.ts';
import { HostGuard } from './host-guard.ts';
import { MCP_PROTOCOL_VERSION, RUN_ENCODER_TOOL, jsonRpcErrorOf, toolResultOf, type McpServerFactory } from './mcp-server.ts';
import { fieldApiPaths, fieldApiSchemas } from './openapi-field-apis.ts';
import { addInfinityRerank, infinityPaths, infinitySchemas } from './openapi-infinity.ts';
import { addDefaultRoutes, teiPaths, teiSchemas } from './openapi-tei.ts';
import { toOpenApiSchema, type OpenApiSchema } from './openapi-schema.ts';

export type OpenApiDocument = { openapi: '3.0.3' } & Record<string, unknown>;

const COMPONENT_PREFIX: Record<ModelType, string> = {
  embedding: 'Embedding',
  sentence_embedding: 'SentenceEmbedding',
  sequence_classification: 'SequenceClassification',
  token_classification: 'TokenClassification',
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const plainText = (description: string, examples: Record<string, Example<string>>) => ({
  description,
  content: { 'text/plain': { schema: { type: 'string' }, examples } },
});
const json = (description: string, schema: object, examples?: Record<string, Example<unknown>>) => ({
  description,
  content: { 'application/json': { schema, ...(examples ? { examples } : {}) } },
});
const one = (summary: string, value: string): Record<string, Example<string>> => ({ example: { summary, value } });

/**
 * The OpenAPI 3.0 description of this server: exactly this model type's request and response schemas (converted
 * from src/encoder/schemas.ts, the one source), every path with every status it can answer, examples that the
 * tests check against the schemas the document gives for them.
 */
export function openApiDocument(options: {
  metadata: ModelMetadata;
  serverInfo: ServerInfo;
  bodyLimitBytes: number;
  mcp: McpServerFactory;
  /** Whether GET /metrics is served. */
  metrics: boolean;
  /** Whether an API key is required (`serve --api-key`). */
  apiKey: boolean;
  /** The names the field APIs answer to (`serve --served-model-name`, `--strict-model-name`). */
  modelNames: ServedModelNames;
}): OpenApiDocument {
  const { metadata, serverInfo, bodyLimitBytes, mcp } = options;
  const modelType = metadata.model_type;
  const request = `${COMPONENT_PREFIX[modelType]}Request`;
  const response = `${COMPONENT_PREFIX[modelType]}Response`;
  const predict = predictExamples(metadata);
  const { node, onnxruntime, target } = serverInfo.build;

  const badJson = invalidJsonMessage(jsonParseErrorOf('{"inputs": ["hello",]}'));
  const tooLarge = bodyTooLargeMessage(bodyLimitBytes);
  const wrongMediaType = unsupportedMediaTypeMessage('text/plain');
  const internalError = new InternalError('lp_normalize: p must be a number > 0, got 0').message;
  const mcpError = (code: number, message: string) => ({ jsonrpc: '2.0', error: { code, message, data: null }, id: null });

  const document = {
    openapi: '3.0.3' as const,
    info: {
      title: serverInfo.name,
      version: serverInfo.version,
      description:
        `Serves the ${modelType} model "${metadata.model_id}" over HTTP, with MCP at ${MCP_PATH}. ` +
        `Built with Node.js ${node} and onnxruntime ${onnxruntime} for ${target}. ` +
        'Errors are text/plain messages (JSON-RPC error objects on /mcp, OpenAI error bodies under /v1 and /v2); a path that exists answers other methods ' +
        'with 405 and an Allow header, any other path with 404. Any path answers 403 to a request from a web page of a foreign Origin (and, on a ' +
        'loopback address without an API key, to a foreign Host name), 408 to a request not received within the request timeout, and 503 to a body ' +
        'that would take the bodies being received past the server\'s buffer.',
      'x-build': { ...serverInfo.build },
    },
    paths: {
      '/health': {
        get: {
          operationId: 'health',
          summary: 'Readiness: the JSON string "OK!"; 503 once the server is shutting down',
          responses: {
            200: json('The server is up and takes requests.', { type: 'string', enum: ['OK!'] }, { ok: { summary: 'Up', value: 'OK!' } }),
            503: plainText('The server received SIGTERM or SIGINT: it still serves what arrives during its grace, but should be sent nothing new.', one('Shutting down', DRAINING_MESSAGE)),
          },
        },
      },
      '/livez': {
        get: {
          operationId: 'liveness',
          summary: 'Liveness: the JSON string "OK!" while the process answers at all, during a drain too',
          responses: {
            200: json('The process is alive (it may be draining: readiness is /health).', { type: 'string', enum: ['OK!'] }, { ok: { summary: 'Alive', value: 'OK!' } }),
          },
        },
      },
      '/model': {
        get: {
          operationId: 'model',
          summary: 'The model served: id, type and, for classification models, its labels',
          responses: { 200: json('Model metadata.', ref('ModelMetadata'), { this_model: { summary: 'This model', value: metadata } }) },
        },
      },
      '/openapi.json': {
        get: {
          operationId: 'openapi',
          summary: 'This document',
          responses: { 200: json('The OpenAPI 3.0 document of this server.', { type: 'object' }) },
        },
      },
      ...(options.metrics ? { '/metrics': metricsPath(metadata.model_id) } : {}),
      '/predict': {
        post: {
          operationId: 'predict',
          summary: `Run the ${modelType} model on a list of texts: one result per text, in order`,
          description: `${predictDescription(metadata)} ${PREDICT_LENIENCY}`,
          requestBody: { required: true, ...json('The texts and options.', ref(request), predict.requests) },
          responses: {
            200: json('One result per input, in input order.', ref(response), predict.responses),
            400: plainText('The body is not valid JSON.', one('A trailing comma', badJson)),
            413: plainText(`The body is larger than the server's limit (${bodyLimitBytes} bytes).`, one('Too large', tooLarge)),
            415: plainText('The body is not application/json.', one('A text body', wrongMediaType)),
            422: plainText(
              'The body does not match the request schema: the message says which field and why.',
              predict.inputErrors,
            ),
            500: plainText('The model, its transform or its configuration failed on valid input.', one('A failing transform', internalError)),
          },
        },
      },
      [MCP_PATH]: {
        post: {
          operationId: 'mcp',
          summary: `MCP ${MCP_PROTOCOL_VERSION} over Streamable HTTP (stateless, JSON responses): the one tool ${RUN_ENCODER_TOOL}`,
          description:
            'A JSON-RPC message per POST; the client must accept application/json and text/event-stream. Tool errors ' +
            'are JSON-RPC errors with data null: invalid arguments -32600 (INVALID_REQUEST), model failures -32603 ' +
            '(INTERNAL_ERROR). No session id is issued.',
          requestBody: {
            required: true,
            ...json('A JSON-RPC request, notification or response.', ref('JsonRpcMessage'), mcpRequestExamples(predict)),
          },
          responses: {
            200: json('The JSON-RPC response to the request.', ref('JsonRpcResponse'), mcpResponseExamples(predict, mcp)),
            202: { description: 'A notification or response was accepted; no body.' },
            400: json('The body is not JSON, or not a JSON-RPC message.', ref('JsonRpcErrorResponse'), {
              bad_json: { summary: 'A trailing comma', value: mcpError(-32700, badJson) },
            }),
            403: json('The request comes from a web page of a foreign origin, or names a foreign Host: refused against DNS rebinding.', ref('JsonRpcErrorResponse'), {
              web_page: {
                summary: 'A browser request',
                value: mcpError(-32000, new HostGuard().refusalOf('localhost', 'http://example.com')!.message),
              },
            }),
            406: json('The Accept header lacks application/json or text/event-stream.', ref('JsonRpcErrorResponse'), {
              not_acceptable: {
                summary: 'Accept: application/json only',
                value: mcpError(-32000, 'Not Acceptable: Client must accept both application/json and text/event-stream'),
              },
            }),
            413: json(`The body is larger than the server's limit (${bodyLimitBytes} bytes).`, ref('JsonRpcErrorResponse'), {
              too_large: { summary: 'Too large', value: mcpError(-32600, tooLarge) },
            }),
            415: json('The body is not application/json.', ref('JsonRpcErrorResponse'), {
              media_type: { summary: 'A text body', value: mcpError(-32000, wrongMediaType) },
            }),
          },
        },
        get: mcpNotAllowed('get', 'No server-initiated SSE stream: the endpoint is stateless.', mcpError),
        delete: mcpNotAllowed('delete', 'No sessions to end: the endpoint is stateless.', mcpError),
      },
      ...fieldApiPaths(metadata, bodyLimitBytes, badJson, options.modelNames),
      ...teiPaths(metadata, bodyLimitBytes, badJson),
      ...infinityPaths(metadata, bodyLimitBytes, badJson),
    },
    components: {
      schemas: {
        [request]: toOpenApiSchema(REQUEST_SCHEMAS[modelType]),
        [response]: toOpenApiSchema(RESPONSE_SCHEMAS[modelType]),
        ModelMetadata: toOpenApiSchema(MODEL_METADATA_SCHEMA),
        ...Object.fromEntries(Object.entries(fieldApiSchemas(metadata)).map(([name, schema]) => [name, toOpenApiSchema(schema)])),
        ...Object.fromEntries(Object.entries(teiSchemas(metadata)).map(([name, schema]) => [name, toOpenApiSchema(schema)])),
        ...Object.fromEntries(Object.entries(infinitySchemas(metadata)).map(([name, schema]) => [name, toOpenApiSchema(schema)])),
        ...JSON_RPC_SCHEMAS,
      },
    },
  };
  addInfinityRerank(document.paths, metadata);
  addDefaultRoutes(document.paths, metadata);
  if (options.apiKey) requireBearer(document.paths, document.components, mcpError);
  return document;
}

/**
 * With an API key: the bearer scheme, required by every operation but /health's and /metrics', each with its 401 in
 * the dialect of its path.
 */
function requireBearer(paths: Record<string, object>, components: Record<string, object>, mcpError: (code: number, message: string) => object): void {
  const description = 'No API key, or another key than the server\'s (`serve --api-key`); the WWW-Authenticate header says Bearer.';
  const unauthorized = (path: string) => {
    if (path === MCP_PATH) {
      return json(description, ref('JsonRpcErrorResponse'), { missing: { summary: 'No key', value: mcpError(-32000, API_KEY_MESSAGES.missing) } });
    }
    if (isOpenAiPath(path)) {
      const body = (message: string) => ({ error: { message, type: 'invalid_request_error', param: null, code: 'invalid_api_key' } });
      return json(description, ref('OpenAiError'), {
        missing: { summary: 'No key', value: body(API_KEY_MESSAGES.missing) },
        invalid: { summary: 'Another key', value: body(API_KEY_MESSAGES.invalid) },
      });
    }
    if (TEI_PATHS.has(path) || INFINITY_PATHS.has(path)) {
      const infinity = INFINITY_PATHS.has(path);
      const body = (message: string) => JSON.parse((infinity ? infinityError : teiError)({ status: 401, message }).body) as object;
      return json(description, ref(infinity ? 'InfinityHttpError' : 'TeiError'), {
        missing: { summary: 'No key', value: body(API_KEY_MESSAGES.missing) },
        invalid: { summary: 'Another key', value: body(API_KEY_MESSAGES.invalid) },
      });
    }
    return plainText(description, { missing: { summary: 'No key', value: API_KEY_MESSAGES.missing }, invalid: { summary: 'Another key', value: API_KEY_MESSAGES.invalid } });
  };
  for (const [path, item] of Object.entries(paths)) {
    if (OPEN_HTTP_ROUTES.has(path)) continue;
    for (const operation of Object.values(item) as { security?: object[]; responses: Record<string, object> }[]) {
      operation.security = [{ apiKey: [] }];
      operation.responses[401] = unauthorized(path);
    }
  }
  components.securitySchemes = { apiKey: { type: 'http', scheme: 'bearer', description: 'The key given to `serve --api-key` (or ENCODER_API_KEY).' } };
}

/** What /predict takes beyond the schema (src/serve/http/predict-body.ts). */
const PREDICT_LENIENCY =
  'An optional field given as null counts as not given. Text-embeddings-inference options are accepted where they ask for what ' +
  "this server does: truncate (inputs are always truncated to the model's length), truncation_direction Right, prompt_name null, raw_scores (ignored).";

/** What /predict does for this model type beyond spec 2's one result per text. */
function predictDescription(metadata: ModelMetadata): string {
  switch (metadata.model_type) {
    case 'embedding':
      return 'One vector per token of each text, with its token and span; normalize: true scales each to unit length (default false, as encoderfile).';
    case 'sentence_embedding':
      return (
        `One vector per text: its token vectors ${metadata.pooling ?? 'mean'}-pooled (as sentence-transformers pools them). ` +
        `Without normalize the model's setting applies (here ${String(metadata.normalize ?? true)}, GET /model).`
      );
    case 'sequence_classification':
      return (
        'Logits, softmax scores and the predicted class of each text. An item [text, text_pair] is tokenized as a pair, as a cross-encoder reads a query and a document. ' +
        "A text-embeddings-inference body that this schema refuses (inputs one text, or a batch with a [text] item) is answered as TEI's /predict: " +
        "each text's labels with their scores, best first (raw_scores: the logits), errors in TEI's body."
      );
    case 'token_classification':
      return 'Logits, softmax scores and the predicted label of every token of each text, with its token and span.';
  }
}

function mcpNotAllowed(method: string, description: string, mcpError: (code: number, message: string) => unknown) {
  return {
    operationId: `mcp_${method}`,
    summary: 'Not offered (405)',
    responses: {
      405: {
        description,
        headers: { Allow: { schema: { type: 'string', enum: ['POST'] } } },
        content: {
          'application/json': {
            schema: ref('JsonRpcErrorResponse'),
            examples: { not_allowed: { summary: 'Method Not Allowed', value: mcpError(-32000, `Method Not Allowed: ${method.toUpperCase()} ${MCP_PATH}; allowed: POST`) } },
          },
        },
      },
    },
  };
}

function mcpRequestExamples(predict: ReturnType<typeof predictExamples>): Record<string, Example<unknown>> {
  return {
    initialize: {
      summary: 'Initialize',
      value: {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: MCP_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'example-client', version: '1.0.0' } },
      },
    },
    tools_list: { summary: 'List the tools', value: { jsonrpc: '2.0', id: 2, method: 'tools/list' } },
    tools_call: {
      summary: `Call ${RUN_ENCODER_TOOL} with the arguments of POST /predict`,
      value: { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: RUN_ENCODER_TOOL, arguments: predict.requests.two_texts.value } },
    },
  };
}

function mcpResponseExamples(predict: ReturnType<typeof predictExamples>, mcp: McpServerFactory): Record<string, Example<unknown>> {
  const { code, message, data } = jsonRpcErrorOf(predict.inputError);
  return {
    initialize: { summary: 'The initialize result', value: { jsonrpc: '2.0', id: 1, result: mcp.initializeResult } },
    tools_list: { summary: 'The one tool', value: { jsonrpc: '2.0', id: 2, result: { tools: [mcp.tool] } } },
    tools_call: {
      summary: 'The response of POST /predict, as structured content and as JSON text',
      value: { jsonrpc: '2.0', id: 3, result: toolResultOf(predict.responses.two_texts.value) },
    },
    tools_call_invalid: {
      summary: 'Invalid arguments: INVALID_REQUEST with the message of a 422',
      value: { jsonrpc: '2.0', id: 4, error: { code, message, data } },
    },
  };
}

function metricsPath(modelId: string) {
  const example = `# HELP encoder_http_requests_total HTTP requests answered (MCP at /mcp included), by route, method and status code
# TYPE encoder_http_requests_total counter
encoder_http_requests_total{route="/predict",method="POST",status="200"} 42
`;
  return {
    get: {
      operationId: 'metrics',
      summary: `Prometheus metrics: requests by route and status, onnxruntime runs, batch sizes, queue waits, the process (${modelId})`,
      responses: {
        200: {
          description: 'The Prometheus text exposition format, version 0.0.4 (docs/http-api.md lists the metrics).',
          content: { 'text/plain; version=0.0.4; charset=utf-8': { schema: { type: 'string' }, examples: one('Part of a scrape', example) } },
        },
      },
    },
  };
}

function jsonParseErrorOf(text: string): string {
  try {
    JSON.parse(text);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`example of invalid JSON parses: ${text}`);
}

/** Loose JSON-RPC 2.0 shapes: the MCP schema itself is the protocol's, not this server's. */
const JSON_RPC_SCHEMAS: Record<string, OpenApiSchema> = {
  JsonRpcMessage: {
    type: 'object',
    description: 'A JSON-RPC 2.0 message of MCP: a request (id, method, params), a notification (method, params) or a response.',
    required: ['jsonrpc'],
    properties: {
      jsonrpc: { type: 'string', enum: ['2.0'] },
      id: { description: 'A string or an integer; absent in a notification.' },
      method: { type: 'string' },
      params: { type: 'object' },
      result: { type: 'object' },
      error: { $ref: '#/components/schemas/JsonRpcError' },
    },
  },
  JsonRpcResponse: {
    type: 'object',
    description: 'A JSON-RPC 2.0 response: result, or error.',
    required: ['jsonrpc', 'id'],
    properties: {
      jsonrpc: { type: 'string', enum: ['2.0'] },
      id: { description: 'The id of the request answered.' },
      result: { type: 'object' },
      error: { $ref: '#/components/schemas/JsonRpcError' },
    },
  },
  JsonRpcErrorResponse: {
    type: 'object',
    description: 'A JSON-RPC 2.0 error response to a message that failed before it reached the MCP server.',
    required: ['jsonrpc', 'error', 'id'],
    properties: {
      jsonrpc: { type: 'string', enum: ['2.0'] },
      error: { $ref: '#/components/schemas/JsonRpcError' },
      id: { description: 'null: no request id was read.' },
    },
  },
  JsonRpcError: {
    type: 'object',
    required: ['code', 'message'],
    properties: {
      code: {
        type: 'integer',
        description: '-32600 INVALID_REQUEST, -32603 INTERNAL_ERROR, -32602 unknown tool, -32700 parse error, -32000 refused by the transport.',
      },
      message: { type: 'string' },
      data: { description: 'Always null in errors of this server.' },
    },
  },
};
