import type { Socket } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { resolveHeldTextsInJson } from '../../encoder/large-texts.ts';
import type { Predictor } from '../../encoder/predictor.ts';
import { API_KEY_MESSAGES, OPEN_HTTP_ROUTES, type ApiKey } from '../api-key.ts';
import type { ServerMetrics } from '../metrics/server-metrics.ts';
import { ServedModelNames } from '../model-names.ts';
import type { ServerInfo } from '../server-info.ts';
import { BodyBudget } from './body-budget.ts';
import { HttpDrain } from './drain.ts';
import { registerCohereEmbedRoutes } from './cohere-embed.ts';
import { HttpError, httpFailureOf, invalidJsonMessage, pathOf, PLAIN_TEXT, sendFailure } from './errors.ts';
import { HostGuard, type HostGuardOptions } from './host-guard.ts';
import { readJsonBody } from './json-body.ts';
import { registerMcpRoute } from './mcp-route.ts';
import type { McpServerFactory } from './mcp-server.ts';
import { DEFAULT_BODY_BUFFER_FACTOR, DEFAULT_REQUEST_TIMEOUT_MS, httpTimeoutOptions } from './network-limits.ts';
import { registerOpenAiRoutes } from './openai-embeddings.ts';
import { registerRerankRoutes } from './rerank.ts';
import { registerInfinityRoutes } from './infinity.ts';
import { registerTeiRoutes } from './tei.ts';
import { registerResponseHeaders, RESPONSE_HEADER_LINES, RESPONSE_HEADERS } from './response-headers.ts';
import { registerModelRoutes } from './routes.ts';
import { registerTracing } from './tracing-hooks.ts';
import type { RequestTracer } from '../tracing/index.ts';

export interface HttpAppOptions {
  /** Largest request body accepted; a larger one gets 413. */
  bodyLimitBytes: number;
  serverInfo: ServerInfo;
  /** fastify's pino logger on stdout; default off. */
  logger?: boolean;
  /** Where requests are counted, served at GET /metrics; without it there is no /metrics. */
  metrics?: ServerMetrics;
  /** The key every route but /health and /metrics requires (`Authorization: Bearer <key>`); none: all are open. */
  apiKey?: ApiKey;
  /** Longest a client may take to send a whole request (headers and body) before a 408; default 30 s. */
  requestTimeoutMs?: number;
  /** Most bytes of request bodies held at once while they arrive, all connections together; default 16 x bodyLimitBytes. */
  bodyBufferLimitBytes?: number;
  /** The budget itself (it takes precedence over bodyBufferLimitBytes), for a caller that watches it. */
  bodyBudget?: BodyBudget;
  /** Host and Origin checks (host-guard.ts): the listen address and what else is allowed. */
  hostGuard?: Omit<HostGuardOptions, 'apiKey'>;
  /** Readiness and requests in flight, for a graceful shutdown; one is made when not given. */
  drain?: HttpDrain;
  /** Traces every request but /health and /metrics (`serve --enable-otel`). */
  tracer?: RequestTracer;
  /** Serve HTTPS with this certificate and key (`serve --cert-file --key-file`); the caller swaps them on a reload (setSecureContext). */
  tls?: { cert: Buffer; key: Buffer };
  /** The model's names on the field's APIs (`serve --served-model-name`, `--strict-model-name`); default: any name, answered as its id. */
  modelNames?: ServedModelNames;
}

/**
 * The HTTP front end of one predictor: /health, /model, /openapi.json, /predict, MCP at /mcp, the field's APIs
 * (/v1/embeddings, /v1/models, /v1/embed, /v2/embed, /v1/rerank, /v2/rerank), text-embeddings-inference's routes
 * (/embed, /embed_all, /rerank, /tokenize, /decode, /info, and its classification bodies on /predict), Infinity's
 * (/embeddings, /rerank with `documents`, /classify, /models) and, given metrics, /metrics. Returned
 * ready but not listening; the caller calls `listen` and `close`.
 * Every error leaves as text/plain (JSON-RPC on /mcp, OpenAI's error body under /v1 and /v2), never as fastify's
 * JSON error bodies.
 */
export async function createHttpApp(predictor: Predictor, options: HttpAppOptions): Promise<FastifyInstance> {
  const { bodyLimitBytes } = options;
  const modelNames = options.modelNames ?? new ServedModelNames(predictor.modelId);
  const app = createHttpShell(options, predictor.parseJson ? (bytes: Uint8Array) => predictor.parseJson!(bytes) : undefined);

  // The MCP SDK (and zod) and the OpenAPI document are the slowest parts of start-up to load and build, and most
  // servers are never asked for them: both load at their first request.
  const mcp = once(async (): Promise<McpServerFactory> => {
    const { McpServerFactory, toolModelOf } = await import('./mcp-server.ts');
    return new McpServerFactory(toolModelOf(predictor), options.serverInfo);
  });
  const openApiJson = once(async () => {
    const { openApiDocument } = await import('./openapi.ts');
    return JSON.stringify(openApiDocument({ metadata: predictor.metadata(), serverInfo: options.serverInfo, bodyLimitBytes, mcp: await mcp(), metrics: options.metrics !== undefined, apiKey: options.apiKey !== undefined, modelNames }));
  });
  registerModelRoutes(app, predictor, modelNames, openApiJson);
  registerOpenAiRoutes(app, predictor, modelNames);
  registerCohereEmbedRoutes(app, predictor, modelNames);
  registerRerankRoutes(app, predictor, modelNames);
  registerTeiRoutes(app, predictor, modelNames, options.serverInfo);
  registerInfinityRoutes(app, predictor, modelNames);
  registerMcpRoute(app, mcp);
  return finishHttpApp(app, options);
}

/**
 * What every model's HTTP app has below its routes (createHttpApp, and image-app.ts for image models): JSON bodies
 * only (a route adds other parsers in its own scope), text/plain errors, tracing, response headers, the drain, Host
 * and Origin checks, the API key, 404 and 405. `parseLargeJson`: where large JSON bodies are parsed (a thread).
 */
export function createHttpShell(options: HttpAppOptions, parseLargeJson?: (bytes: Uint8Array) => Promise<unknown>): FastifyInstance {
  const { bodyLimitBytes } = options;
  const bodyBudget = options.bodyBudget ?? new BodyBudget(options.bodyBufferLimitBytes ?? DEFAULT_BODY_BUFFER_FACTOR * bodyLimitBytes);
  // fastify types an HTTPS app apart; it is the same app with an https.Server
  const app = Fastify({
    ...(options.tls ? { https: options.tls } : {}),
    logger: options.logger ?? false,
    bodyLimit: bodyLimitBytes,
    ...httpTimeoutOptions(options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS),
    // Requests that arrive on open connections while closing are served (with Connection: close) rather than
    // refused with fastify's JSON 503, so that a shutdown finishes the work it was given.
    return503OnClosing: false,
    clientErrorHandler: sendClientError,
    frameworkErrors: (error, request, reply) => {
      reply.headers(RESPONSE_HEADERS); // no hook runs for a URL that cannot be routed
      sendFailure(request, reply, httpFailureOf(error, { bodyLimitBytes, contentType: request.headers['content-type'] }));
    },
  });

  // Only JSON bodies: fastify's text/plain parser would hand a string to /predict, which should be a 415.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', (request, payload, done) => {
    readJsonBody(payload, request.headers['content-length'], bodyLimitBytes, bodyBudget, parseLargeJson).then(
      (value) => done(null, value),
      (error: unknown) =>
        // JSON.parse says where and what: "Invalid JSON body: Expected ',' or '}' after property value in JSON at position 12 …"
        done(error instanceof SyntaxError ? new HttpError(400, invalidJsonMessage(error.message)) : (error as Error), undefined),
    );
  });

  app.setErrorHandler((error, request, reply) => {
    const failure = httpFailureOf(error, { bodyLimitBytes, contentType: request.headers['content-type'] });
    if (failure.status >= 500) request.log.error({ err: error }, failure.message);
    else request.log.info({ status: failure.status }, failure.message);
    return sendFailure(request, reply, failure);
  });

  // Below every route, in this order: the trace of the request, the headers of every response, readiness and
  // requests in flight, Host and Origin (403), then the API key (401).
  if (options.tracer) registerTracing(app, options.tracer);
  registerResponseHeaders(app);
  // an answer that quotes a request's large text (return_documents, texts, metadata, a message) gets the text, not
  // its stand-in (large-texts.ts); free when no text is held
  app.addHook('onSend', async (_request, _reply, payload) => (typeof payload === 'string' ? resolveHeldTextsInJson(payload) : payload));
  (options.drain ?? new HttpDrain()).register(app);
  new HostGuard({ ...options.hostGuard, apiKey: options.apiKey !== undefined }).register(app);
  if (options.apiKey) requireApiKey(app, options.apiKey);

  // 405 with Allow for a path that exists under another method, 404 for any other path.
  const methodsByPath = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    const methods = methodsByPath.get(route.url) ?? new Set<string>();
    for (const method of [route.method].flat()) methods.add(method);
    methodsByPath.set(route.url, methods);
  });
  app.setNotFoundHandler((request, reply) => {
    const path = pathOf(request.url);
    const allowed = methodsByPath.get(path);
    if (!allowed) return sendFailure(request, reply, { status: 404, message: `Not Found: ${request.method} ${path}` });
    const allow = [...allowed].sort().join(', ');
    reply.header('allow', allow);
    return sendFailure(request, reply, { status: 405, message: `Method Not Allowed: ${request.method} ${path}; allowed: ${allow}` });
  });
  return app;
}

/** The routes every app ends with (/metrics, given metrics), then ready: routes are fixed from here. */
export async function finishHttpApp(app: FastifyInstance, options: Pick<HttpAppOptions, 'metrics'>): Promise<FastifyInstance> {
  if (options.metrics) registerMetrics(app, options.metrics);
  await app.ready();
  return app;
}

/**
 * Answers 401 before the body is read to a request without the key, in the dialect of its path (text/plain, OpenAI's
 * error body under /v1 and /v2, JSON-RPC on /mcp). A path no route matches needs the key too: which paths exist is
 * not said to a client without it.
 */
function requireApiKey(app: FastifyInstance, apiKey: ApiKey): void {
  app.addHook('onRequest', (request, reply, done) => {
    const refusal = OPEN_HTTP_ROUTES.has(request.routeOptions.url ?? '') ? null : apiKey.refusalOf(request.headers.authorization);
    if (refusal === null) return done();
    reply.header('www-authenticate', refusal === 'missing' ? 'Bearer' : 'Bearer error="invalid_token"');
    sendFailure(request, reply, { status: 401, message: API_KEY_MESSAGES[refusal], code: 'invalid_api_key' });
  });
}

/** Counts every response by route (a path no route matches: "unmatched", so that scans cannot grow the label set). */
function registerMetrics(app: FastifyInstance, metrics: ServerMetrics): void {
  app.addHook('onResponse', (request, reply, done) => {
    metrics.httpRequest(request.routeOptions.url ?? 'unmatched', request.method, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
  app.get('/metrics', async (_request, reply) => {
    const { contentType, text } = await metrics.exposition();
    return reply.type(contentType).send(text);
  });
}

/** `make` on the first call; the same promise afterwards (a failure is retried at the next call). */
export function once<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => {
    made ??= make().catch((error: unknown) => {
      made = undefined;
      throw error;
    });
    return made;
  };
}

/** Requests that are not HTTP at all (bad framing, huge headers, timeouts): fastify would write a JSON body. */
function sendClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, body] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request Timeout: the request was not received in time']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large: the request headers exceed the limit']
        : [400, 'Bad Request: the request is not valid HTTP/1.1'];
  if (socket.writable) {
    const reason = body.slice(0, body.indexOf(':'));
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: ${PLAIN_TEXT}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${RESPONSE_HEADER_LINES}Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}
