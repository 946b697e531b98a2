import { randomUUID } from 'node:crypto';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Access } from '../auth.ts';
import { createAggregateServer } from '../mcp/aggregate-server.ts';
import { SessionRelay } from '../mcp/session-relay.ts';
import type { ApiOperation } from '../operations.ts';
import type { Upstreams } from '../upstreams.ts';
import { hijackWithHeaders } from './browser-guard.ts';

export const MCP_PATH = '/mcp';

interface Session {
  transport: StreamableHTTPServerTransport;
  server: Server;
  /** The key that opened the session: only it may use the session. */
  keyName: string | null;
  /** The key's permissions as of its last request (a reload may change them). */
  access: Access;
  lastSeen: number;
}

export interface McpSessionsOptions {
  version: string;
  observe?: (operation: ApiOperation, key: string | null, status: number, ms: number) => void;
  /** Sessions held at once; the oldest idle one is closed for a new one beyond it. Default 1000. */
  maxSessions?: number;
  /** A session without a request for this long is closed. Default 30 minutes. */
  idleMs?: number;
}

/**
 * /mcp: one MCP endpoint (Streamable HTTP, sessions) in front of every server a key may use. Each session has its own
 * aggregate server (src/tools/mcp/aggregate-server.ts) bound to the key that initialized it. `listsChanged` tells
 * every session's client (on its GET stream) that tools, prompts and resources may have changed.
 */
export class McpSessions {
  readonly #sessions = new Map<string, Session>();
  readonly #options: McpSessionsOptions;
  #upstreams: Upstreams | undefined;
  /** Where the servers' notifications and requests to their client go: give it to the Upstreams. */
  readonly relay = new SessionRelay();

  constructor(options: McpSessionsOptions) {
    this.#options = options;
  }

  /** The servers the sessions are in front of (set once they exist: their start reports to `listsChanged`). */
  watch(upstreams: Upstreams): void {
    this.#upstreams = upstreams;
    this.relay.watch(upstreams);
  }

  get size(): number {
    return this.#sessions.size;
  }

  /** Registers GET, POST and DELETE /mcp; `accessOf` is the access the request's key was given (authentication ran before). */
  register(app: FastifyInstance, accessOf: (request: FastifyRequest) => Access): void {
    app.route({ method: ['GET', 'POST', 'DELETE'], url: MCP_PATH, handler: (request, reply) => this.#handle(request, reply, accessOf(request)) });
  }

  listsChanged(): void {
    for (const session of this.#sessions.values()) {
      for (const send of [() => session.server.sendToolListChanged(), () => session.server.sendPromptListChanged(), () => session.server.sendResourceListChanged()]) {
        // a client without a GET stream open misses them, as MCP allows
        send().catch(() => {});
      }
    }
  }

  async close(): Promise<void> {
    const sessions = [...this.#sessions.values()];
    this.#sessions.clear();
    await Promise.all(sessions.map((session) => session.transport.close().catch(() => {})));
  }

  async #handle(request: FastifyRequest, reply: FastifyReply, access: Access): Promise<void> {
    // MCP asks servers to check Origin and Host against DNS rebinding: browser-guard.ts does, for every route, before this
    const id = request.headers['mcp-session-id'];
    if (typeof id === 'string') {
      const session = this.#sessions.get(id);
      if (!session) return jsonRpcError(reply, 404, 'Session not found', -32001);
      if (session.keyName !== access.keyName) return jsonRpcError(reply, 403, 'this session belongs to another API key');
      session.access = access;
      session.lastSeen = Date.now();
      hijackWithHeaders(reply);
      await session.transport.handleRequest(request.raw, reply.raw, request.body);
      return;
    }
    if (!this.#upstreams) throw new Error('McpSessions.watch was not called');
    if (request.method !== 'POST' || !isInitializeRequest(request.body)) {
      return jsonRpcError(reply, 400, 'Bad Request: no Mcp-Session-Id header; a session starts with an initialize request');
    }
    this.#makeRoom();
    const session: Partial<Session> = { keyName: access.keyName, access, lastSeen: Date.now() };
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      // each POST answers with an event stream (the SDK's default): what a server sends while answering a request
      // (progress, log messages, sampling and elicitation requests) goes on that request's stream, before its answer,
      // as it would from the server itself; plain JSON answers would have no room for it
      onsessioninitialized: (sessionId) => void this.#sessions.set(sessionId, session as Session),
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) this.#sessions.delete(transport.sessionId);
    };
    const server = createAggregateServer(this.#upstreams, { version: this.#options.version, access: () => session.access!, observe: this.#options.observe, relay: this.relay });
    Object.assign(session, { transport, server });
    await server.connect(transport);
    hijackWithHeaders(reply);
    await transport.handleRequest(request.raw, reply.raw, request.body);
  }

  /** Closes sessions idle too long, and the oldest idle one when the limit is reached. */
  #makeRoom(): void {
    const now = Date.now();
    const idleMs = this.#options.idleMs ?? 30 * 60_000;
    for (const [id, session] of this.#sessions) {
      if (now - session.lastSeen > idleMs) {
        this.#sessions.delete(id);
        void session.transport.close().catch(() => {});
      }
    }
    if (this.#sessions.size >= (this.#options.maxSessions ?? 1000)) {
      const [id, oldest] = [...this.#sessions].sort(([, a], [, b]) => a.lastSeen - b.lastSeen)[0];
      this.#sessions.delete(id);
      void oldest.transport.close().catch(() => {});
    }
  }
}

/** A JSON-RPC error body with an HTTP status, as the SDK's transport answers its own refusals. */
function jsonRpcError(reply: FastifyReply, status: number, message: string, code = -32000): FastifyReply {
  return reply.code(status).type('application/json').send(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}
