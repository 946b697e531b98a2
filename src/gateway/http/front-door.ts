import { STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../auth.ts';
import { clientOf, type AuthThrottle } from '../auth-throttle.ts';
import { GatewayError, invalidRequest } from '../errors.ts';
import type { FrontDoorSettings } from '../front-door-settings.ts';
import type { GatewayMetrics } from '../metrics.ts';
import type { GatewayContext } from './context.ts';

/**
 * Who may call a route: anyone (`none`), the master key holder (`master`, the default, so a route that forgets to say
 * is closed), or either credential (`any`). Every route takes the key in X-Hub-Key, Authorization or x-api-key (auth.ts).
 */
type Credential = 'none' | 'master' | 'any';

declare module 'fastify' {
  interface FastifyContextConfig {
    credential?: Credential;
  }
  interface FastifyRequest {
    /** Who sent the request, set before its body is read; null on routes without a credential. */
    principal: Principal | null;
  }
}

/** Every API answer: none may be kept by a cache (key creation and rotation carry secrets) or sniffed as another type. */
const API_HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };

/** The principal the front door authenticated for this request (only on routes that take a credential). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error(`${request.method} ${request.url} has no principal: its route must take a credential`);
  return request.principal;
}

/** Connections whose request was answered while its body is still arriving: a timeout closes them without a 408. */
const answeredSockets = new WeakSet<Socket>();

/** What is read and dropped of a refused request's body at most; past it the connection is left to stall, then closed. */
const DISCARD_LIMIT_BYTES = 64 * 2 ** 10;
/** How long a refused request's connection stays open after DISCARD_LIMIT_BYTES, for the client to read the answer. */
const LINGER_MS = 2000;

/**
 * Reads and drops what is left of a refused request's body, so that the client can read the answer and reuse the
 * connection. Nothing is kept. Past `limit` bytes (at most DISCARD_LIMIT_BYTES: reading 16 MiB bodies for nothing
 * costs the process garbage collections that every other request waits for) reading stops, and the connection is
 * closed LINGER_MS later: closing at once, with the client's data unread, makes the kernel reset the connection, and
 * clients that were still sending then report the reset instead of the answer they had been sent. The request
 * timeout bounds a slow sender.
 */
function discardBody(raw: IncomingMessage, limit: number): void {
  if (raw.complete) return;
  const socket = raw.socket;
  answeredSockets.add(socket);
  raw.once('end', () => answeredSockets.delete(socket));
  const cap = Math.min(limit, DISCARD_LIMIT_BYTES);
  let received = 0;
  const drop = (chunk: Buffer) => {
    received += chunk.length;
    if (received <= cap) return;
    raw.off('data', drop);
    raw.pause();
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
  };
  raw.on('data', drop);
  raw.resume();
}

/** Whether JSON text nests arrays and objects deeper than `max`: one pass, no recursion, strings skipped. */
export function jsonNestsDeeper(text: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // a string: find its closing quote, one not escaped by an odd run of backslashes
      for (i = text.indexOf('"', i + 1); i !== -1; i = text.indexOf('"', i + 1)) {
        let slashes = 0;
        while (text.charCodeAt(i - 1 - slashes) === 0x5c) slashes++;
        if (slashes % 2 === 0) break;
      }
      if (i === -1) return false; // unterminated: JSON.parse refuses it
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/**
 * The front door, before any route runs: the API headers, the JSON parser with its nesting bound, and authentication in
 * `onRequest` — before the body is read, so a request without a valid key costs the gateway its headers only. A
 * refused request's body is discarded unread (discardBody). Clients that keep sending invalid credentials meet the
 * throttle (429 with Retry-After).
 */
export function registerFrontDoor(app: FastifyInstance, context: GatewayContext, settings: FrontDoorSettings, throttle: AuthThrottle | null): void {
  const jsonParser = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body: string, done) => {
    if (jsonNestsDeeper(body, settings.maxJsonDepth)) {
      done(invalidRequest(`The JSON body nests arrays and objects deeper than ${settings.maxJsonDepth} levels`, null, 'json_too_deep'), undefined);
      return;
    }
    jsonParser(request, body, done);
  });

  app.decorateRequest('principal', null);
  // Callback style: it runs on every request, and an async hook costs a promise each time.
  app.addHook('onRequest', (request, reply, done) => {
    reply.headers(API_HEADERS);
    const config = request.routeOptions.config;
    // CORS preflights (OPTIONS) carry no credential by design.
    const credential = config.credential ?? (request.method === 'OPTIONS' ? 'none' : 'master');
    const refuse = (error: GatewayError) => {
      discardBody(request.raw, request.routeOptions.bodyLimit ?? settings.bodyLimitBytes);
      // A model call refused for its credential is a refused usage row (capped per minute: no key, no user).
      if (credential === 'any' && request.method === 'POST' && (error.status === 401 || error.code === 'too_many_auth_failures')) {
        // the endpoint as usage rows name it: /v1/chat/completions → chat.completions, /v2/rerank → rerank
        void context.ledger.recordRefusal({ requestId: request.id, error, endpoint: request.url.split('?')[0].replace(/^\/v\d\//, '').replaceAll('/', '.') });
      }
      done(error);
    };
    // Answered here: fastify would read and parse the body of an unknown route before its not-found handler runs.
    if (request.is404) return refuse(routeNotFound(request));
    if (credential === 'none') return done();
    const wait = throttle?.retryAfter(request.ip) ?? 0;
    if (wait > 0) return refuse(tooManyFailures(wait));
    context.authenticator.authenticate(request.headers).then(
      (principal) => {
        if (credential === 'master' && principal.kind !== 'master') return refuse(masterKeyRequired());
        request.principal = principal;
        done();
      },
      (error: unknown) => {
        if (error instanceof GatewayError && error.code === 'invalid_api_key') throttle?.fail(request.ip);
        refuse(error instanceof GatewayError ? error : new GatewayError(500, 'api_error', 'internal_error', 'Internal error in the gateway', { cause: error }));
      },
    );
  });
}

export const routeNotFound = (request: FastifyRequest) =>
  new GatewayError(404, 'not_found_error', 'route_not_found', `No route ${request.method} ${request.url.split('?')[0]}`);

const masterKeyRequired = () =>
  new GatewayError(403, 'permission_error', 'master_key_required', 'This operation requires the master key; virtual keys can only make model calls');

const tooManyFailures = (seconds: number) =>
  new GatewayError(429, 'rate_limit_error', 'too_many_auth_failures', `Too many invalid credentials from this address; try again in ${seconds} s`, {
    retryAfter: seconds,
  });

/**
 * Bounds the open connections: `maxConnections` in all (node closes more as they arrive, so the process keeps file
 * descriptors for its providers and database) and `maxConnectionsPerClient` per client address (clientOf), so that one
 * client holding connections open cannot lock everyone else out — health probes included.
 */
export function limitConnections(server: Server, settings: Pick<FrontDoorSettings, 'maxConnections' | 'maxConnectionsPerClient'>, metrics: GatewayMetrics): void {
  server.maxConnections = settings.maxConnections;
  server.on('drop', () => metrics.connectionsRefused.inc({ reason: 'max_connections' }));
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const client = clientOf(socket.remoteAddress ?? '');
    const count = open.get(client) ?? 0;
    if (count >= settings.maxConnectionsPerClient) {
      metrics.connectionsRefused.inc({ reason: 'max_connections_per_client' });
      socket.destroy();
      return;
    }
    open.set(client, count + 1);
    socket.once('close', () => {
      const left = (open.get(client) ?? 1) - 1;
      if (left === 0) open.delete(client);
      else open.set(client, left);
    });
  });
}

/**
 * Answers what node refuses before there is a request (a request or headers timeout, oversized headers, a malformed
 * request) in the gateway's error shape, unless the request was already answered (a refused request whose body was
 * still being discarded), and closes the connection.
 */
export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'request_timeout', 'The request (headers and body) did not arrive within the request timeout']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'headers_too_large', 'The request headers are too large']
        : [400, 'malformed_request', 'Malformed HTTP request'];
  if (socket.writable && !answeredSockets.has(socket)) {
    const body = JSON.stringify(new GatewayError(status, status === 408 ? 'timeout_error' : 'invalid_request_error', code, message).body());
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
        `cache-control: no-store\r\nconnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
