import type { ServerOptions } from 'node:http';

/**
 * How long a client has to send one whole request, headers and body (`serve --request-timeout`); then it is
 * answered 408 and its connection closed. 30 s: a JSON body of the 8 MiB limit needs ~2.3 Mbit/s to make it, and
 * text-embeddings-inference's clients (and OpenAI's) send far less; a slow or stalled client (one byte every 10 s)
 * held its connection and its bytes for ≥ 150 s before. Time spent on the answer (queueing, inference) is not
 * counted: the clock stops when the request has arrived.
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/** Bodies being received may hold this many times `--body-limit` at once (`--body-buffer-limit`'s default): 128 MiB by default. */
export const DEFAULT_BODY_BUFFER_FACTOR = 16;

/**
 * fastify's and Node's options for a request timeout of `requestTimeoutMs`: Node's requestTimeout (whole request)
 * and headersTimeout (the same: a client stalled in its headers is cut like one stalled in its body), checked four
 * times per timeout but at most once a second (Node checks every 30 s by default, which would let a 2 s timeout run
 * 32 s). keepAliveTimeout stays fastify's 72 s (longer than the 60 s idle timeout of common load balancers, so that
 * they close first). No socket inactivity timeout (fastify's connectionTimeout): it would also cut a request whose
 * inference takes longer, during which the socket is silent.
 */
export function httpTimeoutOptions(requestTimeoutMs: number): { requestTimeout: number; http: ServerOptions } {
  const connectionsCheckingInterval = Math.max(10, Math.min(1000, Math.floor(requestTimeoutMs / 4)));
  return {
    requestTimeout: requestTimeoutMs,
    http: { requestTimeout: requestTimeoutMs, headersTimeout: requestTimeoutMs, connectionsCheckingInterval },
  };
}
