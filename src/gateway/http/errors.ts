import type { FastifyReply, FastifyRequest } from 'fastify';
import { GatewayError } from '../errors.ts';

/**
 * Any error to the GatewayError the client sees. Fastify's own (body, media type) are reworded into the OpenAI
 * error shape; anything else is a gateway bug and a 500 `api_error` whose detail goes to the log only.
 */
export function gatewayErrorOf(error: unknown, bodyLimit: number): GatewayError {
  if (error instanceof GatewayError) return error;
  const e = error as { code?: unknown; statusCode?: unknown; message?: string };
  switch (e?.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new GatewayError(413, 'invalid_request_error', 'body_too_large', `Request body is too large: the limit is ${bodyLimit} bytes`);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new GatewayError(415, 'invalid_request_error', 'unsupported_media_type', 'Unsupported Media Type: send the body as application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new GatewayError(400, 'invalid_request_error', 'invalid_json', 'The body is empty; send a JSON object');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new GatewayError(400, 'invalid_request_error', 'invalid_json', `Invalid JSON body: ${e.message ?? ''}`);
  }
  if (error instanceof SyntaxError) return new GatewayError(400, 'invalid_request_error', 'invalid_json', `Invalid JSON body: ${error.message}`);
  if (typeof e?.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return new GatewayError(e.statusCode, 'invalid_request_error', 'invalid_request', e.message ?? 'Bad request');
  }
  return new GatewayError(500, 'api_error', 'internal_error', 'Internal error in the gateway; the request id in the logs has the details');
}

/** The Anthropic SDK reads `{"type":"error","error":{"type","message"}}`; the extra field keeps the OpenAI shape. */
const ANTHROPIC_PATH = '/v1/messages';

export function sendGatewayError(request: FastifyRequest, reply: FastifyReply, error: GatewayError): FastifyReply {
  if (error.retryAfter !== null) reply.header('retry-after', String(error.retryAfter));
  reply.headers(error.headers);
  const body = request.url.startsWith(ANTHROPIC_PATH) ? { type: 'error', ...error.body() } : error.body();
  return reply.code(error.status).type('application/json; charset=utf-8').send(body);
}
