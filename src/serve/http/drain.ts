import type { FastifyInstance } from 'fastify';
import { sendFailure } from './errors.ts';

/**
 * The readiness routes, 200 while serving and 503 from the moment the server starts draining: spec 2's `GET /health`,
 * and `GET /ping`, the health check SageMaker sends a container (text-embeddings-inference answers it as /health).
 */
export const READINESS_ROUTES: ReadonlySet<string> = new Set(['/health', '/ping']);

export const DRAINING_MESSAGE = 'Service Unavailable: the server is shutting down';

/**
 * The HTTP side of a graceful shutdown as Kubernetes expects it (docs/http-api.md, "Shutdown"): once `start()` is
 * called, the readiness routes answer 503 so that the readiness probe takes the pod out of its Services, while every
 * other request is still served, each response with `Connection: close` so that clients open their next connection
 * elsewhere. Counts the requests in flight (GET /metrics: encoder_http_requests_in_flight).
 */
export class HttpDrain {
  #draining = false;
  #inFlight = 0;

  /** Requests received and not yet answered (or abandoned), the one asking included. */
  get inFlight(): number {
    return this.#inFlight;
  }

  get draining(): boolean {
    return this.#draining;
  }

  start(): void {
    this.#draining = true;
  }

  /** Counts every request, refused ones included, and answers /health 503 while draining; first of the hooks. */
  register(app: FastifyInstance): void {
    app.addHook('onRequest', (request, reply, done) => {
      this.#inFlight += 1;
      // 'close' comes once per response: after it is sent, or when the connection is cut before
      reply.raw.once('close', () => {
        this.#inFlight -= 1;
      });
      if (!this.#draining) return done();
      reply.header('connection', 'close');
      if (!READINESS_ROUTES.has(request.routeOptions.url ?? '')) return done();
      sendFailure(request, reply, { status: 503, message: DRAINING_MESSAGE });
    });
  }
}
