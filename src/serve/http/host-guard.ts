import type { FastifyInstance } from 'fastify';
import { hostNameOf, isLoopbackHost, normalizeOrigin, unbracket } from '../../shared/host-names.ts';
import { sendFailure } from './errors.ts';

/**
 * Who may talk to the HTTP front end, judged by the `Host` and `Origin` headers (docs/http-api.md, "Host and Origin").
 *
 * - **Origin** (every server): a browser sends it with every cross-origin request, and with every POST. No web page
 *   can use this server legitimately (it serves no pages and sends no CORS headers), so a request with a foreign
 *   Origin is a page that should not be here: refused. An absent Origin (curl, SDKs, probes) and an http(s) loopback
 *   origin (a page of a local tool) are accepted. MCP asks every server to check Origin; here /mcp is one path of the
 *   rule, not a rule of its own.
 * - **Host** (a server on a loopback address without an API key): DNS rebinding points a name the attacker owns at
 *   127.0.0.1, and the victim's browser then sends `Host: attacker.example` to this server, with no Origin on a
 *   simple GET. Such a server answers only the loopback names (localhost, 127.0.0.0/8, [::1]) and the address it
 *   listens on. A server listening on 0.0.0.0 or a public address does not know the names it is reached by (a
 *   Service, an ingress, a pod IP), so it checks no Host; nor does one with an API key, which no page can send.
 */
export interface HostGuardOptions {
  /** The address HTTP listens on; a loopback one turns the Host check on, unless `apiKey`. Absent: no Host check. */
  listenHost?: string;
  /** The server requires an API key: no Host check (a page cannot send the key). */
  apiKey?: boolean;
  /** More Host names accepted (without port, e.g. a name of this machine); `*` turns the Host check off. */
  allowedHosts?: readonly string[];
  /** More origins accepted, exactly (`https://app.example:8443`); `*` accepts every origin. */
  allowedOrigins?: readonly string[];
}

/** The refusal of a request, or null when the guard lets it through. */
export type HostGuardRefusal = { header: 'host' | 'origin'; message: string } | null;

/** How many accepted Host header values a guard remembers. */
const ACCEPTED_HOSTS_KEPT = 64;

export class HostGuard {
  /** Whether Host headers are checked (a loopback listen address, no API key, no `--allowed-hosts '*'`). */
  readonly checksHost: boolean;
  readonly #hosts: Set<string>;
  readonly #anyOrigin: boolean;
  readonly #origins: Set<string>;
  /**
   * Host header values already accepted, exactly as sent: a client sends the same one on every request, and parsing
   * it again (two regular expressions) was ~2% of a lone query's work on the event loop (docs/benchmarks.md,
   * "Query latency at the limit"). Bounded; refused values are not kept.
   */
  readonly #acceptedHosts = new Set<string>();

  constructor(options: HostGuardOptions = {}) {
    const allowedHosts = (options.allowedHosts ?? []).map((host) => unbracket(host.trim().toLowerCase()));
    this.checksHost = options.listenHost !== undefined && isLoopbackHost(options.listenHost) && !options.apiKey && !allowedHosts.includes('*');
    this.#hosts = new Set([...allowedHosts, ...(options.listenHost === undefined ? [] : [unbracket(options.listenHost.toLowerCase())])]);
    const allowedOrigins = (options.allowedOrigins ?? []).map(normalizeOrigin);
    this.#anyOrigin = allowedOrigins.includes('*');
    this.#origins = new Set(allowedOrigins);
  }

  /** Why a request with these headers is refused, or null. A request without Host (HTTP/1.0) is not a browser's: let through. */
  refusalOf(host: string | undefined, origin: string | undefined): HostGuardRefusal {
    if (origin !== undefined && !this.#acceptsOrigin(origin)) {
      return {
        header: 'origin',
        message: `Forbidden: requests from web pages (Origin ${origin}) are not accepted; only loopback origins are (--allowed-origins adds others)`,
      };
    }
    if (this.checksHost && host !== undefined && !this.#acceptsHost(host)) {
      return {
        header: 'host',
        message:
          `Forbidden: Host "${host}" is not a name of this server; on a loopback address without an API key it answers only ` +
          'localhost, 127.0.0.1 and [::1] (against DNS rebinding; --allowed-hosts adds names)',
      };
    }
    return null;
  }

  #acceptsHost(header: string): boolean {
    if (this.#acceptedHosts.has(header)) return true;
    const name = hostNameOf(header);
    const accepted = name !== null && (isLoopbackHost(name) || this.#hosts.has(name));
    if (accepted && this.#acceptedHosts.size < ACCEPTED_HOSTS_KEPT) this.#acceptedHosts.add(header);
    return accepted;
  }

  #acceptsOrigin(origin: string): boolean {
    if (this.#anyOrigin || this.#origins.has(normalizeOrigin(origin))) return true;
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false; // "null" (sandboxed frames, file: pages) and anything else that is no origin
    }
    return (url.protocol === 'http:' || url.protocol === 'https:') && isLoopbackHost(url.hostname);
  }

  /** Adds the check to every request, before its body is read and before the API key's, whatever the route (or none). */
  register(app: FastifyInstance): void {
    app.addHook('onRequest', (request, reply, done) => {
      const refusal = this.refusalOf(request.headers.host, request.headers.origin);
      if (refusal === null) return done();
      request.log.info({ host: request.headers.host, origin: request.headers.origin }, refusal.message);
      sendFailure(request, reply, { status: 403, message: refusal.message, code: 'forbidden' });
    });
  }
}
