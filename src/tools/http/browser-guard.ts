import cors from '@fastify/cors';
import { isIP } from 'node:net';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { hostNameOf, isLoopbackHost, normalizeOrigin, unbracket } from '../../shared/host-names.ts';
import { sendProblem } from './problem.ts';

/**
 * No web page reaches a tool (docs/tools.md, "Browsers"): one guard in front of every route — the API, /mcp, /docs,
 * /openapi.json, /metrics, /health, and routes that do not exist — before authentication and before a body is read.
 *
 * - **Host**: DNS rebinding points a name the attacker owns at this server; the victim's browser then sends
 *   `Host: attacker.example`, with no Origin on a simple GET. Accepted: the loopback names (localhost, 127.0.0.0/8,
 *   [::1]), the address the server listens on, the names of `allowed_hosts` (`"*"`: every Host). A server listening
 *   on every interface (0.0.0.0, ::) also accepts any IP address: a page whose address is an IP literal is that
 *   address's own origin, so no rebinding is involved, and behind NAT or a port mapping the address clients use is not
 *   one of this machine's. Names (a DNS name, a Kubernetes Service) go into `allowed_hosts`.
 * - **Origin**: a browser sends it with every cross-origin request and every POST. Accepted: none (curl, SDKs), the
 *   server's own origin (the /docs page's "Try it out"), and the origins of `cors_allow_origins`, which are also
 *   answered CORS headers and preflights (@fastify/cors). Every other origin — another port of localhost included,
 *   and `null` (sandboxed frames, file: pages) — is refused, preflights too, so the browser never sends the request.
 *
 * The body check (JSON only: a "simple" text/plain or form POST gets 415) is app.ts's content-type parser.
 */
export interface BrowserAccess {
  /** Host names accepted beside the listen address and the loopback names; `*`: every Host. */
  allowedHosts?: readonly string[];
  /** Origins whose pages may call the API (CORS). */
  corsAllowOrigins?: readonly string[];
}

export interface BrowserGuardOptions {
  /** The address the server listens on; absent (tests that inject requests): the loopback names only. */
  listenHost?: string;
  /** The configuration's lists, read at every request (a reload may change them). */
  access: () => BrowserAccess;
}

/** A refusal: the problem's extension member `code` and its detail. */
export interface BrowserRefusal {
  code: 'host_not_allowed' | 'origin_not_allowed';
  detail: string;
}

/** Headers a page listed in cors_allow_origins may send, and read in the answer. */
const CORS_REQUEST_HEADERS = ['authorization', 'content-type', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id'];
const CORS_RESPONSE_HEADERS = ['mcp-session-id', 'retry-after', 'www-authenticate'];
/** How long a browser may keep a preflight's answer, in seconds. */
const PREFLIGHT_MAX_AGE = 600;

const ANY_INTERFACE = new Set(['0.0.0.0', '::', '']);

export class BrowserGuard {
  readonly #listenHost: string | undefined;
  readonly #anyInterface: boolean;
  readonly #access: () => BrowserAccess;

  constructor(options: BrowserGuardOptions) {
    this.#listenHost = options.listenHost === undefined ? undefined : unbracket(options.listenHost.toLowerCase());
    this.#anyInterface = this.#listenHost !== undefined && ANY_INTERFACE.has(this.#listenHost);
    this.#access = options.access;
  }

  /** Why a request with these headers is refused, or null. A request without Host (HTTP/1.0) is no browser's. */
  refusalOf(host: string | undefined, origin: string | undefined): BrowserRefusal | null {
    if (host !== undefined && !this.#acceptsHost(host)) {
      return {
        code: 'host_not_allowed',
        detail:
          `Host ${JSON.stringify(host.slice(0, 256))} is not a name of this tool server: it answers the address it listens on, ` +
          'localhost, 127.0.0.1 and [::1], and the names listed in allowed_hosts (a guard against DNS rebinding)',
      };
    }
    if (origin !== undefined && !this.#acceptsOrigin(origin, host)) {
      return {
        code: 'origin_not_allowed',
        detail:
          `requests from web pages of another origin (Origin ${JSON.stringify(origin.slice(0, 256))}) are refused; ` +
          'cors_allow_origins lists the origins that may call this tool server',
      };
    }
    return null;
  }

  /** Whether a page of this origin may call the API (CORS headers, preflights). */
  isListedOrigin(origin: string): boolean {
    return this.#access().corsAllowOrigins?.includes(normalizeOrigin(origin)) ?? false;
  }

  #acceptsHost(header: string): boolean {
    const name = hostNameOf(header);
    if (name === null) return false;
    if (isLoopbackHost(name) || name === this.#listenHost || (this.#anyInterface && isIP(name) !== 0)) return true;
    const allowed = this.#access().allowedHosts;
    return allowed !== undefined && (allowed.includes(name) || allowed.includes('*'));
  }

  #acceptsOrigin(origin: string, host: string | undefined): boolean {
    if (this.isListedOrigin(origin)) return true;
    // the server's own pages (/docs): the origin names the Host the request was sent to (accepted above)
    if (host === undefined || !URL.canParse(origin)) return false;
    const url = new URL(origin);
    const own = `${url.protocol}//${host}`;
    return (url.protocol === 'http:' || url.protocol === 'https:') && URL.canParse(own) && url.host === new URL(own).host;
  }

  /**
   * Adds the guard to every request (an onRequest hook, the first), then CORS for the listed origins. Call before
   * any other hook: a refused request must meet no authentication, no route, no body parsing.
   */
  async register(app: FastifyInstance): Promise<void> {
    app.addHook('onRequest', (request, reply, done) => {
      reply.header('x-content-type-options', 'nosniff');
      const refusal = this.refusalOf(request.headers.host, request.headers.origin);
      if (refusal === null) return done();
      sendProblem(request, reply, { status: 403, detail: refusal.detail, code: refusal.code });
    });
    // Only origins that passed the guard get here: a listed one is answered CORS headers (and its preflight, before
    // authentication: a browser sends no Authorization with a preflight), the server's own gets none (it needs none).
    await app.register(cors, {
      origin: (origin, callback) => callback(null, origin !== undefined && this.isListedOrigin(origin)),
      methods: ['GET', 'POST', 'DELETE'],
      allowedHeaders: CORS_REQUEST_HEADERS,
      exposedHeaders: CORS_RESPONSE_HEADERS,
      maxAge: PREFLIGHT_MAX_AGE,
    });
  }
}

/**
 * Hands the response to a route that writes it itself (/mcp's transport) with the headers hooks have set on the
 * reply (CORS, nosniff): fastify writes those only for the replies it sends.
 */
export function hijackWithHeaders(reply: FastifyReply): void {
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined) reply.raw.setHeader(name, value);
  }
  reply.hijack();
}
