import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  InitializeRequestSchema,
  ListToolsRequestSchema,
  type CallToolResult,
  type InitializeResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { ModelType } from '../../encoder/config.ts';
import { isEncoderError } from '../../encoder/errors.ts';
import type { Predictor } from '../../encoder/predictor.ts';
import { REQUEST_SCHEMAS, RESPONSE_SCHEMAS, type PredictResponse } from '../../encoder/schemas.ts';
import { stringifyJson, type JsonOf } from '../../shared/float32-json.ts';
import type { ServerInfo } from '../server-info.ts';

/** Spec 2: the one protocol version served. */
export const MCP_PROTOCOL_VERSION = '2025-06-18';

/** Spec 2: the one tool, for every model type. */
export const RUN_ENCODER_TOOL = 'run_encoder';

const TOOL_DESCRIPTIONS: Record<ModelType, string> = {
  embedding:
    'Computes one embedding vector per token of each input text (special tokens left out), with the token and its ' +
    'code-point span. normalize: true scales every vector to unit L2 length. One result per input, in order.',
  sentence_embedding:
    'Computes one embedding vector per input text (the token vectors pooled). normalize (default: the model\'s ' +
    'setting) scales every vector to unit L2 length. One result per input, in order.',
  sequence_classification:
    'Classifies each input text (or [text, text_pair] pair, tokenized together as cross-encoders read them): raw logits, softmax scores, the index of the highest score and its label when the ' +
    'model has labels. One result per input, in order.',
  token_classification:
    'Labels every token of each input text (IOB scheme: B- begins an entity, I- continues it, O is outside): the ' +
    'token and its code-point span, logits, softmax scores, the predicted label and its score. One result per input, in order.',
};

/** A JSON-RPC error as the SDK's Protocol sends it: `code`, `message` and `data` taken from the thrown object as they are. */
export class JsonRpcError extends Error {
  readonly code: number;
  readonly data: null = null;
  constructor(code: number, message: string) {
    super(message);
    this.name = 'JsonRpcError';
    this.code = code;
  }
}

/** Spec 2's error table for MCP: input errors are INVALID_REQUEST, everything else INTERNAL_ERROR, data null. */
export function jsonRpcErrorOf(error: unknown): JsonRpcError {
  if (error instanceof JsonRpcError) return error;
  if (isEncoderError(error)) {
    return new JsonRpcError(error.kind === 'input' ? ErrorCode.InvalidRequest : ErrorCode.InternalError, error.message);
  }
  return new JsonRpcError(ErrorCode.InternalError, `Internal error: ${error instanceof Error ? error.message : String(error)}`);
}

/**
 * The tool's result: the HTTP response as structured content, and as JSON text for clients that read only text.
 * The structured content is the text read back, so its numbers are the float32 values' shortest decimals, which the
 * SDK's own JSON.stringify prints as in the text.
 */
export function toolResultOf(response: PredictResponse | JsonOf<PredictResponse> | object): CallToolResult {
  const text = stringifyJson(response);
  return { content: [{ type: 'text', text }], structuredContent: JSON.parse(text) as Record<string, unknown> };
}

/** What the one tool runs, and how it is described: a text predictor's /predict (toolModelOf), or an image model's. */
export interface McpToolModel {
  /** `model_id` and `model_type` at least; in the initialize result's `_meta`. */
  metadata(): { model_id: string; model_type: string };
  description: string;
  inputSchema: object;
  outputSchema: object;
  /** The tool's arguments → its structured result; InputError for bad arguments. */
  run(args: Record<string, unknown>): Promise<object>;
}

/** A text predictor's tool: the arguments and result of POST /predict (src/encoder/schemas.ts). */
export function toolModelOf(predictor: Predictor): McpToolModel {
  const { modelType } = predictor;
  return {
    metadata: () => predictor.metadata(),
    description: TOOL_DESCRIPTIONS[modelType],
    inputSchema: REQUEST_SCHEMAS[modelType],
    outputSchema: RESPONSE_SCHEMAS[modelType],
    run: (args) => predictor.predict(args),
  };
}

/**
 * The MCP face of one model. The endpoint is stateless (a fresh transport per HTTP request, as the SDK requires
 * without sessions), so every request gets a fresh SDK `Server`; what does not change (tool, initialize result,
 * schema validator) is built once here. The low-level `Server` is used because the tool's schemas must be exactly
 * the JSON schemas of src/encoder/schemas.ts, and `McpServer.registerTool` takes zod shapes.
 */
export class McpServerFactory {
  readonly tool: Tool;
  readonly initializeResult: InitializeResult;
  readonly #model: McpToolModel;
  readonly #validator = new AjvJsonSchemaValidator();

  constructor(model: McpToolModel, info: ServerInfo) {
    this.#model = model;
    const { model_id: modelId, model_type: modelType } = model.metadata();
    this.tool = {
      name: RUN_ENCODER_TOOL,
      title: `Run ${modelId}`,
      description: model.description,
      inputSchema: objectSchema(model.inputSchema),
      outputSchema: objectSchema(model.outputSchema),
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    };
    const { node, onnxruntime, target } = info.build;
    this.initializeResult = {
      protocolVersion: MCP_PROTOCOL_VERSION,
      capabilities: { tools: {} },
      // Implementation has room for name, title and version only; the build details go in `_meta` (machine-readable)
      // and in the instructions (which clients show), since spec 2 leaves the rest of the server information open.
      serverInfo: { name: info.name, title: `encoder: ${modelId} (${modelType})`, version: info.version },
      instructions:
        `Runs the ${modelType} model "${modelId}" through one tool, ${RUN_ENCODER_TOOL}, whose arguments and result are ` +
        `those of POST /predict. Server: encoder ${info.version}, Node.js ${node}, onnxruntime ${onnxruntime}, target ${target}.`,
      _meta: { 'encoder/build': { ...info.build }, 'encoder/model': model.metadata() },
    };
  }

  /** A fresh SDK server for one HTTP request. */
  create(): Server {
    const server = new Server(
      { name: this.initializeResult.serverInfo.name, version: this.initializeResult.serverInfo.version },
      { capabilities: { tools: {} }, jsonSchemaValidator: this.#validator },
    );
    // The SDK answers initialize with the client's version when it knows it (e.g. 2025-11-25); spec 2 serves
    // 2025-06-18, which MCP's negotiation lets a server answer with to any client version.
    server.setRequestHandler(InitializeRequestSchema, () => this.initializeResult);
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [this.tool] }));
    server.setRequestHandler(CallToolRequestSchema, async (request) => {
      if (request.params.name !== RUN_ENCODER_TOOL) {
        throw new JsonRpcError(ErrorCode.InvalidParams, `Unknown tool "${request.params.name}"; the only tool is ${RUN_ENCODER_TOOL}`);
      }
      try {
        return toolResultOf(await this.#model.run(request.params.arguments ?? {}));
      } catch (error) {
        throw jsonRpcErrorOf(error);
      }
    });
    return server;
  }
}

/** A copy, so that nothing downstream can change the schemas that validate requests; typed as the SDK wants it. */
function objectSchema(schema: object): Tool['inputSchema'] {
  return structuredClone(schema) as Tool['inputSchema'];
}
