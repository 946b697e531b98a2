import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requestPhases } from '../../encoder/request-phases.ts';
import type { RequestTracer, ServerSpan } from '../tracing/index.ts';
import { pathOf } from './errors.ts';

/** Probes and scrapes, every few seconds from every load balancer and Prometheus: not traced, they would drown the rest. */
const UNTRACED_ROUTES = new Set(['/health', '/ping', '/metrics']);

/**
 * One SERVER span per request (`serve --enable-otel`), named as OpenTelemetry's HTTP conventions say ("POST
 * /predict"), child of the caller's `traceparent`; it ends when the response has gone (or the connection was cut
 * first: an error). From the last hook before the handler on, the request's async context holds the span's phase
 * recorder, which the pipeline reports its tokenize, queue wait and onnxruntime run to (request-phases.ts).
 */
export function registerTracing(app: FastifyInstance, tracer: RequestTracer): void {
  const spans = new WeakMap<FastifyRequest, ServerSpan>();
  app.addHook('onRequest', (request, reply, done) => {
    const route = request.routeOptions.url;
    if (route !== undefined && UNTRACED_ROUTES.has(route)) return done();
    const header = (name: string) => {
      const value = request.headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const span = tracer.startRequest(route === undefined ? request.method : `${request.method} ${route}`, header, {
      'http.request.method': request.method,
      'url.path': pathOf(request.url),
      ...(route === undefined ? {} : { 'http.route': route }),
    });
    spans.set(request, span);
    reply.raw.once('close', () => {
      const status = reply.raw.statusCode;
      const cut = !reply.raw.writableFinished;
      span.end({ 'http.response.status_code': status }, cut ? 'the connection closed before the response was sent' : status >= 500 ? `HTTP ${status}` : undefined);
    });
    done();
  });
  app.addHook('preHandler', (request, reply, done) => {
    const span = spans.get(request);
    if (!span) return done();
    requestPhases.run(span.phases, done);
  });
}
