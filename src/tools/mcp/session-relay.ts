import { getSupportedElicitationModes } from '@modelcontextprotocol/sdk/client/index.js';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CreateMessageResultSchema,
  CreateMessageResultWithToolsSchema,
  ElicitResultSchema,
  ErrorCode,
  ListRootsResultSchema,
  LoggingLevelSchema,
  McpError,
  type LoggingLevel,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type { Access } from '../auth.ts';
import type { Upstream } from '../upstream.ts';
import type { RelayedNotification, RelayedRequest, UpstreamRelay } from '../upstream-relay.ts';
import type { Upstreams } from '../upstreams.ts';

/** What the SDK gives a request handler of a /mcp session: its cancellation, `_meta`, and its way back to the client. */
export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** Between a server's name and one of its tools, prompts or loggers: `memory__read_graph`. */
export const NAMESPACE_SEPARATOR = '__';

const SEVERITY = new Map(LoggingLevelSchema.options.map((level, index) => [level, index]));

/** One /mcp session as the relay sees it. */
export interface RelaySession {
  readonly server: Server;
  /** What the session's key may use now. */
  readonly access: Access;
  /** The least severe log level the client asked for (logging/setLevel); every level before it asks. */
  level?: LoggingLevel;
  /** The session's requests under way, by upstream server, latest last. */
  readonly underway: Map<string, Extra[]>;
}

/**
 * Between the servers' one MCP session each and the many sessions of /mcp: a server's notifications go to the
 * sessions they concern, its requests (sampling, elicitation, roots) to the one session that can answer them, and the
 * state a session sets on a shared server (resource subscriptions, log level) is counted across sessions.
 *
 * - Logging messages go to every session whose key may use the server, filtered by the session's level, the logger
 *   named `server__logger`; the server itself is asked for the most verbose level any session asked for.
 * - resources/updated goes to the sessions subscribed to that URI on that server; the server is subscribed while at
 *   least one session is, and again after it restarts.
 * - list_changed goes to every session whose key may use the server.
 * - A notification for a session with a request under way on that server is sent as part of that request (on its
 *   stream, in order with its answer), else on the session's own stream.
 * - A server's request is answered by the session that has a request under way on that server and offers the
 *   capability; with none, or several sessions, the server gets an error (its one session cannot tell whose it is).
 */
export class SessionRelay implements UpstreamRelay {
  readonly #sessions = new Set<RelaySession>();
  /** server → URI → the sessions subscribed to it */
  readonly #subscriptions = new Map<string, Map<string, Set<RelaySession>>>();
  /** server → the most verbose level asked of it */
  readonly #levels = new Map<string, LoggingLevel>();
  #upstreams: Upstreams | undefined;

  watch(upstreams: Upstreams): void {
    this.#upstreams = upstreams;
  }

  attach(server: Server, access: Access): RelaySession {
    const session: RelaySession = { server, access, underway: new Map() };
    this.#sessions.add(session);
    return session;
  }

  /** The session ended: its subscriptions end with it. */
  detach(session: RelaySession): void {
    this.#sessions.delete(session);
    for (const [server, byUri] of this.#subscriptions) {
      for (const [uri, sessions] of byUri) {
        if (sessions.delete(session) && sessions.size === 0) void this.#unsubscribeUpstream(server, byUri, uri);
      }
    }
  }

  /** Runs a request of `session` to server `name`, known as under way meanwhile (to route what the server sends). */
  async underway<T>(session: RelaySession, name: string, extra: Extra, run: () => Promise<T>): Promise<T> {
    let list = session.underway.get(name);
    if (!list) session.underway.set(name, (list = []));
    list.push(extra);
    try {
      return await run();
    } finally {
      list.splice(list.indexOf(extra), 1);
      if (list.length === 0) session.underway.delete(name);
    }
  }

  async subscribe(session: RelaySession, upstream: Upstream, uri: string, extra: Extra): Promise<void> {
    let byUri = this.#subscriptions.get(upstream.name);
    if (!byUri) this.#subscriptions.set(upstream.name, (byUri = new Map()));
    let sessions = byUri.get(uri);
    if (!sessions) byUri.set(uri, (sessions = new Set()));
    const first = sessions.size === 0;
    sessions.add(session);
    if (!first) return;
    try {
      await this.underway(session, upstream.name, extra, () => upstream.subscribeResource(uri, { signal: extra.signal, meta: extra._meta }));
    } catch (error) {
      sessions.delete(session);
      if (sessions.size === 0) byUri.delete(uri);
      throw error;
    }
  }

  /** Ends the session's subscription to `uri`; false when it had none. */
  async unsubscribe(session: RelaySession, uri: string, extra: Extra): Promise<boolean> {
    for (const [server, byUri] of this.#subscriptions) {
      const sessions = byUri.get(uri);
      if (!sessions?.delete(session)) continue;
      if (sessions.size === 0) await this.underway(session, server, extra, () => this.#unsubscribeUpstream(server, byUri, uri));
      return true;
    }
    return false;
  }

  /** logging/setLevel of one session: its own filter, and the servers it may use asked for at least that much. */
  async setLevel(session: RelaySession, level: LoggingLevel, servers: Upstream[]): Promise<void> {
    session.level = level;
    await Promise.allSettled(
      servers.map(async (upstream) => {
        const current = this.#levels.get(upstream.name);
        if (!upstream.capabilities?.logging || (current !== undefined && SEVERITY.get(current)! <= SEVERITY.get(level)!)) return;
        this.#levels.set(upstream.name, level);
        await upstream.setLoggingLevel(level);
      }),
    );
  }

  notification(server: string, notification: RelayedNotification): void {
    for (const session of this.#sessions) {
      if (!session.access.allowsServer(server)) continue;
      if (notification.method === 'notifications/message') {
        const { level, logger } = notification.params;
        if (session.level !== undefined && SEVERITY.get(level)! < SEVERITY.get(session.level)!) continue;
        const named = logger === undefined ? server : `${server}${NAMESPACE_SEPARATOR}${logger}`;
        this.#send(session, server, { ...notification, params: { ...notification.params, logger: named } });
      } else if (notification.method === 'notifications/resources/updated') {
        const subscribed = this.#subscriptions.get(server)?.get(notification.params.uri)?.has(session);
        if (subscribed && session.access.allowsResource(server, notification.params.uri)) this.#send(session, server, notification);
      } else {
        this.#send(session, server, notification);
      }
    }
  }

  async request(server: string, request: RelayedRequest, signal: AbortSignal): Promise<Record<string, unknown>> {
    const waiting = [...this.#sessions].filter((session) => session.underway.has(server) && session.access.allowsServer(server));
    const able = waiting.filter((session) => offers(session.server, request));
    if (able.length !== 1) {
      const why =
        able.length > 1
          ? `${able.length} clients of /mcp have requests under way on server "${server}": the tool server cannot tell which one ${request.method} is for`
          : waiting.length > 0
            ? `the client of /mcp whose request is under way on server "${server}" does not offer ${describe(request)}`
            : `no client of /mcp has a request under way on server "${server}" to answer ${request.method} (the REST API cannot answer it)`;
      throw new McpError(able.length > 1 ? ErrorCode.InternalError : ErrorCode.MethodNotFound, why);
    }
    const extra = able[0].underway.get(server)!.at(-1)!;
    const timeout = this.#upstream(server)?.config.timeouts.request;
    return extra.sendRequest(request, resultSchemaOf(request), { signal, timeout });
  }

  connected(server: string): void {
    const upstream = this.#upstream(server);
    if (!upstream) return;
    const level = this.#levels.get(server);
    if (level !== undefined) void upstream.setLoggingLevel(level).catch(() => {});
    for (const uri of this.#subscriptions.get(server)?.keys() ?? []) void upstream.subscribeResource(uri).catch(() => {});
  }

  /** The running server called `name` (a reload may have removed it). */
  #upstream(name: string): Upstream | undefined {
    return this.#upstreams?.all().find((upstream) => upstream.name === name);
  }

  /** As part of the session's latest request under way on `server` when there is one (in order with its answer). */
  #send(session: RelaySession, server: string, notification: RelayedNotification): void {
    const alone = () => session.server.notification(notification).catch(() => {});
    const extra = session.underway.get(server)?.at(-1);
    if (extra) extra.sendNotification(notification).catch(alone);
    else void alone();
  }

  async #unsubscribeUpstream(server: string, byUri: Map<string, Set<RelaySession>>, uri: string): Promise<void> {
    byUri.delete(uri);
    const upstream = this.#upstream(server);
    // a server that is down has no subscription left to end
    await upstream?.unsubscribeResource(uri).catch(() => {});
  }
}

function offers(server: Server, request: RelayedRequest): boolean {
  const capabilities = server.getClientCapabilities();
  if (request.method === 'sampling/createMessage') return capabilities?.sampling !== undefined && (!request.params.tools || capabilities.sampling.tools !== undefined);
  if (request.method === 'roots/list') return capabilities?.roots !== undefined;
  const modes = getSupportedElicitationModes(capabilities?.elicitation);
  return request.params.mode === 'url' ? modes.supportsUrlMode : modes.supportsFormMode;
}

function describe(request: RelayedRequest): string {
  if (request.method === 'sampling/createMessage') return 'sampling';
  if (request.method === 'roots/list') return 'roots';
  return `${request.params.mode ?? 'form'} elicitation`;
}

function resultSchemaOf(request: RelayedRequest) {
  if (request.method === 'sampling/createMessage') return request.params.tools ? CreateMessageResultWithToolsSchema : CreateMessageResultSchema;
  if (request.method === 'roots/list') return ListRootsResultSchema;
  return ElicitResultSchema;
}
