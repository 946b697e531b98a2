import type { FastifyReply, FastifyRequest } from 'fastify';
import { InputError, isEncoderError } from '../../encoder/errors.ts';

/** The path of the MCP endpoint: its errors are JSON-RPC objects, every other path's are text/plain. */
export const MCP_PATH = '/mcp';

export const PLAIN_TEXT = 'text/plain; charset=utf-8';
export const JSON_TYPE = 'application/json; charset=utf-8';

/** A failure of the HTTP exchange itself (body, media type, method, an OpenAI-style field), not of the model. */
export class HttpError extends Error {
  readonly statusCode: number;
  readonly param: string | null;
  readonly code: string | null;
  constructor(statusCode: number, message: string, details: { param?: string; code?: string } = {}) {
    super(message);
    this.name = 'HttpError';
    this.statusCode = statusCode;
    this.param = details.param ?? null;
    this.code = details.code ?? null;
  }
}

/** The body of a 400 for a body that does not parse; `reason` is JSON.parse's own message. */
export function invalidJsonMessage(reason: string): string {
  return `Invalid JSON body: ${reason}`;
}

export function bodyTooLargeMessage(bodyLimitBytes: number): string {
  return `Request body is too large: the limit is ${bodyLimitBytes} bytes`;
}

export function unsupportedMediaTypeMessage(contentType: string | undefined): string {
  return `Unsupported Media Type: ${contentType ? `"${contentType}"` : 'a body without Content-Type'}; send application/json`;
}

export interface HttpFailure {
  status: number;
  message: string;
  /** The request field at fault, for OpenAI-style error bodies. */
  param?: string | null;
  /** A machine-readable code for OpenAI-style error bodies (e.g. model_not_found). */
  code?: string | null;
}

/**
 * Spec 2's error table for HTTP (InputError 422, InternalError and ConfigError 500) plus the HTTP layer's own
 * failures, each with the text the client reads. Fastify's own errors are reworded so that none of its JSON
 * error bodies reaches a client.
 */
export function httpFailureOf(error: unknown, context: { bodyLimitBytes: number; contentType: string | undefined }): HttpFailure {
  if (isEncoderError(error)) {
    return error instanceof InputError ? { status: 422, message: error.message, param: error.field } : { status: 500, message: error.message };
  }
  if (error instanceof HttpError) return { status: error.statusCode, message: error.message, param: error.param, code: error.code };
  const code = (error as { code?: unknown } | null)?.code;
  switch (code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, message: bodyTooLargeMessage(context.bodyLimitBytes) };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { status: 415, message: unsupportedMediaTypeMessage(context.contentType) };
  }
  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  const message = error instanceof Error ? error.message : String(error);
  if (typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500) return { status: statusCode, message };
  return { status: 500, message: `Internal error: ${message}` };
}

/** JSON-RPC error codes for failures that happen before a JSON-RPC message reaches the MCP server. */
function jsonRpcCodeOf(status: number): number {
  if (status === 400) return -32700; // Parse error: the body is not JSON
  if (status === 413) return -32600; // Invalid Request
  if (status >= 500) return -32603; // Internal error
  return -32000; // what the SDK's Streamable HTTP transport uses for its own HTTP-level refusals (405, 406, 415)
}

/** The paths that speak the field's APIs (OpenAI embeddings and models, Cohere rerank): their errors are OpenAI's shape. */
export function isOpenAiPath(path: string): boolean {
  return path.startsWith('/v1/') || path.startsWith('/v2/');
}

/** text-embeddings-inference's own routes: their errors are TEI's body (tei.ts). */
export const TEI_PATHS: ReadonlySet<string> = new Set(['/embed', '/embed_all', '/rerank', '/tokenize', '/decode', '/info']);

/** Infinity's own routes: their errors are Infinity's bodies (infinity.ts). `/rerank` is TEI's unless its body is Infinity's. */
export const INFINITY_PATHS: ReadonlySet<string> = new Set(['/embeddings', '/classify', '/models']);

/** The peers whose error bodies a request may be answered in, beside spec 2's text/plain. */
export type ErrorDialect = 'tei' | 'infinity';

const requestDialects = new WeakMap<FastifyRequest, ErrorDialect>();

/**
 * Where two APIs share a path (`/predict`: spec 2's and TEI's; `/rerank`: TEI's and Infinity's), the route tells, once
 * it has seen the body's shape, whose error bodies the request's failures take; the path decides otherwise.
 */
export function answerErrorsAs(request: FastifyRequest, dialect: ErrorDialect): void {
  requestDialects.set(request, dialect);
}

function dialectOf(request: FastifyRequest, path: string): ErrorDialect | null {
  return requestDialects.get(request) ?? (TEI_PATHS.has(path) ? 'tei' : INFINITY_PATHS.has(path) ? 'infinity' : null);
}

const TEI_TYPES = new Set(['Unhealthy', 'Backend', 'Overloaded', 'Validation', 'Tokenizer', 'Empty']);

/**
 * TEI's error body, `{error, error_type}`, with TEI's statuses: an input error is its 422 Validation ("Input
 * validation error: …"), a failure of the model its 424 Backend, a shutdown its 503 Unhealthy; a route's own TEI
 * type (HttpError's code) is kept as it is.
 */
export function teiError(failure: HttpFailure): { status: number; body: string } {
  const typed = failure.code !== null && failure.code !== undefined && TEI_TYPES.has(failure.code) ? failure.code : null;
  const status = typed === null && failure.status >= 500 && failure.status !== 503 ? 424 : failure.status;
  const type = typed ?? (status === 424 ? 'Backend' : status === 503 ? 'Unhealthy' : status === 429 ? 'Overloaded' : 'Validation');
  const message = failure.message.replace(/^Invalid input: /, 'Input validation error: ');
  return { status, body: JSON.stringify({ error: message, error_type: type }) };
}

/** The HttpError codes of the failures Infinity answers in its OpenAI-like 400 body (ModelNotDeployedError, an unknown model). */
const INFINITY_MODEL_CODES = new Set(['model_not_deployed', 'model_not_found']);

/**
 * Infinity's error bodies: a request it cannot read is FastAPI's 422 `{"detail": [{type, loc, msg}]}`; a model that
 * cannot do what is asked is its 400 `{"error": {message, type, param, code: 400}}`, as is a failure of the model (500,
 * `InternalServerError: …`); FastAPI's own refusals (401, 404, 405, 413, 415, 503) are `{"detail": "<message>"}`.
 */
export function infinityError(failure: HttpFailure): { status: number; body: string } {
  const message = failure.message.replace(/^Invalid input: /, '');
  const openAiLike = (status: number, text: string) => ({ status, body: JSON.stringify({ error: { message: text, type: null, param: null, code: status } }) });
  if (failure.code && INFINITY_MODEL_CODES.has(failure.code)) return openAiLike(400, message);
  if (failure.status >= 500 && failure.status !== 503) return openAiLike(failure.status, `InternalServerError: ${message}`);
  if (failure.status === 400 || failure.status === 422) {
    const type = /^Missing required parameter/.test(message)
      ? 'missing'
      : /^Unrecognized request argument/.test(message)
        ? 'extra_forbidden'
        : /^Invalid JSON body/.test(message)
          ? 'json_invalid'
          : 'value_error';
    return { status: 422, body: JSON.stringify({ detail: [{ type, loc: failure.param ? ['body', failure.param] : ['body'], msg: message }] }) };
  }
  return { status: failure.status, body: JSON.stringify({ detail: message }) };
}

/**
 * OpenAI's error body, `{error: {message, type, param, code}}`, which OpenAI-compatible clients read and show. An input
 * error is a 400 there (OpenAI's status for a request it refuses), not spec 2's 422.
 */
function openAiError(failure: HttpFailure): { status: number; body: string } {
  const status = failure.status === 422 ? 400 : failure.status;
  const type = status >= 500 ? 'server_error' : 'invalid_request_error';
  const message = failure.message.replace(/^Invalid input: /, '');
  return { status, body: JSON.stringify({ error: { message, type, param: failure.param ?? null, code: failure.code ?? null } }) };
}

/**
 * Sends a failure in the dialect of the path: a JSON-RPC error object on /mcp, OpenAI's error body under /v1 and /v2,
 * TEI's on TEI's routes (TEI_PATHS), Infinity's on Infinity's (INFINITY_PATHS), or the one its route chose for a path
 * two APIs share (answerErrorsAs); spec 2's text/plain elsewhere.
 */
export function sendFailure(request: FastifyRequest, reply: FastifyReply, failure: HttpFailure): FastifyReply {
  const path = pathOf(request.url);
  if (path === MCP_PATH) {
    const body = { jsonrpc: '2.0', error: { code: jsonRpcCodeOf(failure.status), message: failure.message, data: null }, id: null };
    return reply.code(failure.status).type(JSON_TYPE).send(JSON.stringify(body));
  }
  const dialect = dialectOf(request, path);
  if (dialect !== null || isOpenAiPath(path)) {
    const { status, body } = dialect === 'tei' ? teiError(failure) : dialect === 'infinity' ? infinityError(failure) : openAiError(failure);
    return reply.code(status).type(JSON_TYPE).send(body);
  }
  return reply.code(failure.status).type(PLAIN_TEXT).send(failure.message);
}

/** The path of a request URL, without its query. */
export function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}
