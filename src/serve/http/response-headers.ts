import type { FastifyInstance } from 'fastify';

/**
 * Headers on every HTTP response, errors included (docs/http-api.md, "Response headers"):
 *
 * - `X-Content-Type-Options: nosniff`: a browser takes each body as its declared type (JSON, text/plain), never as
 *   HTML or script guessed from what a request put in it.
 * - `Cache-Control: no-store`: model outputs (/predict, /v1/embeddings, /v1/rerank, MCP) are derived from what the
 *   client sent and must not be kept by a browser or a shared proxy; /health and /metrics are live state (a cached
 *   200 would hide a draining server from its probe); /model, /v1/models and /openapi.json describe the model behind
 *   this address, which the next deployment changes, and are small and rarely read. So one rule: nothing is stored.
 */
export const RESPONSE_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
};

/** The same headers as lines of a raw HTTP/1.1 response, for answers written on the socket (client errors). */
export const RESPONSE_HEADER_LINES = 'X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n';

/**
 * Sets RESPONSE_HEADERS on every request's reply before anything else runs. A URL fastify cannot route (bad
 * percent-encoding) skips the hooks: its frameworkErrors handler sets them itself.
 */
export function registerResponseHeaders(app: FastifyInstance): void {
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(RESPONSE_HEADERS);
    done();
  });
}
