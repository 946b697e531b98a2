import type { FastifyInstance, FastifyRequest } from 'fastify';
import { MCP_PATH } from './errors.ts';
import type { McpServerFactory } from './mcp-server.ts';

/**
 * POST /mcp: MCP over Streamable HTTP, stateless. Each request gets a fresh transport and server (no session id,
 * so no GET stream and no DELETE: those methods get 405, which the transport's spec allows and the SDK's client
 * expects). Responses are plain JSON rather than an SSE stream: the one tool sends no notifications, so a stream
 * would only add framing. The body was parsed by fastify (same JSON parser, body limit and error dialect as every
 * route) and is handed to the transport as it is.
 */
export function registerMcpRoute(app: FastifyInstance, servers: () => Promise<McpServerFactory>): void {
  app.post(MCP_PATH, async (request, reply) => {
    // MCP requires servers to check Origin against DNS rebinding: host-guard.ts does, for every path, before this.
    const [factory, { WebStandardStreamableHTTPServerTransport }] = await Promise.all([
      servers(),
      import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'),
    ]);
    const server = factory.create();
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    // The transport reports the refusals it answers itself (406, 415, bad JSON-RPC); they are the client's problem.
    transport.onerror = (error) => request.log.info({ err: error }, 'MCP request refused');
    await server.connect(transport);
    try {
      // In JSON response mode the Response is complete (its body a string) once handleRequest resolves.
      const response = await transport.handleRequest(webRequestOf(request), { parsedBody: request.body });
      return reply.send(response);
    } finally {
      await server.close();
    }
  });
}

/** The transport reads only the method, URL and headers; the body travels as `parsedBody`. */
function webRequestOf(request: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else if (value !== undefined) headers.set(name, value);
  }
  return new Request(new URL(request.url, 'http://localhost'), { method: request.method, headers });
}
