import { randomUUID } from 'node:crypto';
import cors from '@fastify/cors';
import Fastify, { type FastifyInstance } from 'fastify';
import { AuthThrottle } from '../auth-throttle.ts';
import { BUDGET_WARNING_HEADER } from '../budget-warning.ts';
import { GatewayError } from '../errors.ts';
import type { FrontDoorSettings } from '../front-door-settings.ts';
import type { GatewayContext } from './context.ts';
import { gatewayErrorOf, sendGatewayError } from './errors.ts';
import type { DashboardFiles } from '../dashboard/files.ts';
import { clientErrorHandler, limitConnections, registerFrontDoor, routeNotFound } from './front-door.ts';
import { registerDashboardRoutes } from './dashboard-routes.ts';
import { registerManagementRoutes } from './management-routes.ts';
import { registerUsageRoutes } from './usage-routes.ts';
import { registerModelRoutes } from './model-routes.ts';
import { gatewayOpenApi } from './openapi.ts';

export interface GatewayAppOptions {
  /** fastify's pino logger (JSON lines on stdout, or on `stream`); false in tests. */
  logger?: boolean | { level: string; stream?: NodeJS.WritableStream };
  /** Timeouts, connection and body bounds, the failed-credential throttle. */
  frontDoor: FrontDoorSettings;
  version: string;
  /** The dashboard's files, served at /dashboard/; absent: no dashboard. */
  dashboard?: DashboardFiles;
  /** Origins whose pages may call the API from a browser ("*": any); empty or absent: no CORS headers at all. */
  corsAllowOrigins?: string[];
  /** Set by the gateway's `close` when shutdown begins: /health/readiness answers 503 from then on. */
  lifecycle?: { shuttingDown: boolean };
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** How long readiness waits for the database's answer to `SELECT 1` before it says not ready. */
const READINESS_TIMEOUT_MS = 2000;

/** How often node looks for requests past their timeout: a slow body is cut at most this late. */
const TIMEOUT_CHECK_MS = 1000;

/**
 * The gateway's HTTP front end: authentication before the body is read (front-door.ts), OpenAI-shaped errors
 * everywhere, request ids, metrics, health, the OpenAPI document. Returned ready, not listening.
 */
export async function createGatewayApp(context: GatewayContext, options: GatewayAppOptions): Promise<FastifyInstance> {
  const settings = options.frontDoor;
  const bodyLimit = settings.bodyLimitBytes;
  const requestTimeout = settings.requestTimeoutSeconds * 1000;
  const app = Fastify({
    logger:
      options.logger === false || options.logger === undefined
        ? false
        : {
            level: options.logger === true ? 'info' : options.logger.level,
            ...(options.logger !== true && options.logger.stream ? { stream: options.logger.stream } : {}),
            // The default serializers log no headers; these paths are belt and braces for anyone who adds them.
            redact: ['req.headers.authorization', 'req.headers["x-hub-key"]', 'req.headers["x-api-key"]'],
          },
    bodyLimit,
    // The whole request must arrive within requestTimeout, its headers within headersTimeout; no idle timeout on the
    // socket (connectionTimeout), since an answer may wait for a provider up to upstream_timeout_seconds.
    requestTimeout,
    http: { requestTimeout, headersTimeout: settings.headersTimeoutSeconds * 1000, connectionsCheckingInterval: Math.min(TIMEOUT_CHECK_MS, requestTimeout) },
    clientErrorHandler,
    trustProxy: settings.trustProxy,
    requestIdHeader: false,
    genReqId: (request) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    return503OnClosing: false,
    frameworkErrors: (error, request, reply) => {
      sendGatewayError(request, reply, gatewayErrorOf(error, request.routeOptions.bodyLimit ?? bodyLimit));
    },
  });
  limitConnections(app.server, settings, context.metrics);

  // JSON bodies only: anything else is a 415, not a string handed to a route.
  app.removeContentTypeParser('text/plain');

  const origins = options.corsAllowOrigins ?? [];
  if (origins.length > 0) {
    // Credentials travel in headers (Authorization, x-hub-key, x-api-key), never in cookies: no allowCredentials. A
    // preflight's request headers are allowed as asked (the SDKs add their own, such as x-stainless-*).
    await app.register(cors, {
      origin: origins.includes('*') ? '*' : origins,
      methods: ['GET', 'POST', 'PATCH', 'DELETE'],
      exposedHeaders: [
        'x-request-id',
        'retry-after',
        'x-token-count-estimate',
        BUDGET_WARNING_HEADER,
        ...['limit', 'remaining', 'reset'].flatMap((part) => [`x-ratelimit-${part}-requests`, `x-ratelimit-${part}-tokens`]),
      ],
      maxAge: 600,
    });
  }

  // Callback-style hooks: they run on every request, and an async hook costs a promise each time.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    // Many clients send Content-Type: application/json on every request; on a DELETE without a body fastify would
    // parse the empty body and refuse it (400) instead of deleting.
    const headers = request.headers;
    if (request.method === 'DELETE' && headers['transfer-encoding'] === undefined && (headers['content-length'] ?? '0') === '0') delete headers['content-type'];
    done();
  });
  registerFrontDoor(app, context, settings, settings.authThrottle ? new AuthThrottle(settings.authThrottle) : null);
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    context.metrics.requests.inc({ route, method: request.method, status: String(reply.statusCode) });
    context.metrics.latency.observe({ route, method: request.method }, reply.elapsedTime / 1000);
    done();
  });

  app.setErrorHandler((error, request, reply) => {
    const failure = gatewayErrorOf(error, request.routeOptions.bodyLimit ?? bodyLimit);
    if (failure.status === 401 || failure.code === 'too_many_auth_failures') context.metrics.authFailures.inc({ reason: failure.code });
    // A GatewayError's message is written for clients (provider keys stripped); its cause may quote a provider's
    // raw answer, so only unexpected errors are logged whole.
    if (error instanceof GatewayError) request.log[failure.status >= 500 ? 'warn' : 'info']({ status: failure.status, code: failure.code }, failure.message);
    else if (failure.status >= 500) request.log.error({ err: error, code: failure.code }, failure.message);
    else request.log.info({ status: failure.status, code: failure.code }, failure.message);
    return sendGatewayError(request, reply, failure);
  });

  // Unknown routes are answered in onRequest (front-door.ts); this serves what reaches the handler all the same.
  app.setNotFoundHandler((request, reply) => sendGatewayError(request, reply, routeNotFound(request)));

  const open = { config: { credential: 'none' } } as const;
  // /health and /health/liveness: the process answers. /health/readiness: it should be sent traffic — the database
  // answers a cheap query within READINESS_TIMEOUT_MS, and the gateway is not shutting down.
  const lifecycle = options.lifecycle ?? { shuttingDown: false };
  app.addHook('preClose', (done) => {
    lifecycle.shuttingDown = true;
    done();
  });
  app.get('/health', open, async () => ({ status: 'ok' }));
  app.get('/health/liveness', open, async () => ({ status: 'ok' }));
  app.get('/health/readiness', open, async (_request, reply) => {
    const unready = (code: string, message: string) => {
      reply.header('retry-after', '5');
      return reply.code(503).send(new GatewayError(503, 'api_error', code, message).body());
    };
    if (lifecycle.shuttingDown) return unready('shutting_down', 'The gateway is shutting down');
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        context.store.ping(),
        new Promise((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${READINESS_TIMEOUT_MS} ms`)), READINESS_TIMEOUT_MS);
        }),
      ]);
    } catch (error) {
      return unready('database_unavailable', `The database is not reachable: ${(error as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
    if (lifecycle.shuttingDown) return unready('shutting_down', 'The gateway is shutting down');
    return { status: 'ok', database: context.store.dialect };
  });
  app.get('/metrics', open, async (_request, reply) => {
    reply.type(context.metrics.registry.contentType);
    return context.metrics.registry.metrics();
  });
  const openApiJson = JSON.stringify(gatewayOpenApi(options.version));
  app.get('/openapi.json', open, async (_request, reply) => reply.type('application/json; charset=utf-8').send(openApiJson));

  registerManagementRoutes(app, context, settings.managementBodyLimitBytes);
  registerUsageRoutes(app, context, settings.managementBodyLimitBytes);
  registerModelRoutes(app, context);
  if (options.dashboard) registerDashboardRoutes(app, options.dashboard);
  await app.ready();
  return app;
}
