import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';

/**
 * What went wrong with a request to a tool server, in terms of the tool server API (docs/tools.md, "Errors");
 * the HTTP front end maps each kind to its status code.
 */
export type ToolsErrorKind =
  | 'bad_request' // the API's caller sent something unusable
  | 'unauthorized' // no API key, a malformed or unknown one, or one in the URL
  | 'not_found' // no such server, tool, prompt or resource
  | 'forbidden' // a tool outside the server's allow-list, or outside what the caller's key may use
  | 'rate_limited' // the caller's key is over its requests per minute
  | 'not_implemented' // the MCP server does not offer this kind of request
  | 'upstream' // the MCP server answered with an error (or a tool result with isError)
  | 'unavailable' // the MCP server is not connected (starting, restarting, exited)
  | 'timeout' // no answer within the request timeout
  | 'cancelled'; // the caller went away first (the MCP server was sent a cancellation); nobody reads the answer

/** The HTTP status of each kind of failure (docs/tools.md, "Errors"); metrics and the audit log use it for /mcp too. */
export const STATUS_OF_KIND: Record<ToolsErrorKind, number> = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  rate_limited: 429,
  not_implemented: 501,
  upstream: 502,
  unavailable: 503,
  timeout: 504,
  // nginx's "client closed request": logged only, the client is gone
  cancelled: 499,
};

export class ToolsError extends Error {
  readonly kind: ToolsErrorKind;
  /** For `unavailable`: milliseconds until the server's next start attempt is due (0: one is under way); for
   * `rate_limited`: until the key may make its next request. */
  retryAfterMs?: number;
  constructor(kind: ToolsErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ToolsError';
    this.kind = kind;
  }
}

/** MCP's "resource not found" (spec 2025-06-18, resources); not in the SDK's ErrorCode. */
export const RESOURCE_NOT_FOUND = -32002;

/** An McpError's message without the SDK's "MCP error <code>: " prefix: the server's own message. */
export function mcpMessageOf(error: McpError): string {
  return error.message.replace(/^MCP error -?\d+: /, '');
}

/** Any failure of a request to an MCP server, as a ToolsError that names the server. */
export function toolsErrorOf(error: unknown, server: string, what: string): ToolsError {
  if (error instanceof ToolsError) return error;
  if (error instanceof McpError) {
    const message = mcpMessageOf(error);
    switch (error.code) {
      case ErrorCode.RequestTimeout:
        return new ToolsError('timeout', `${what} on server "${server}" timed out: ${message}`, { cause: error });
      case ErrorCode.InvalidParams:
        // The server says the request itself is wrong (missing or invalid arguments, a bad cursor): the caller's
        // to fix, and not worth a retry as a 502 would suggest.
        return new ToolsError('bad_request', `server "${server}" rejected the parameters of ${what}: ${message}`, { cause: error });
      case ErrorCode.MethodNotFound:
        return new ToolsError('not_implemented', `server "${server}" does not implement ${what}: ${message}`, { cause: error });
      case ErrorCode.ConnectionClosed:
        return new ToolsError('unavailable', `server "${server}" closed the connection during ${what}: ${message}`, { cause: error });
      case RESOURCE_NOT_FOUND:
        return new ToolsError('not_found', `server "${server}": ${message}`, { cause: error });
      default:
        return new ToolsError('upstream', `server "${server}" answered ${what} with an error: ${message}`, { cause: error });
    }
  }
  const message = error instanceof Error ? error.message : String(error);
  if (/not connected|fetch failed|ECONNREFUSED|ECONNRESET|EPIPE|socket hang up/i.test(`${message} ${String((error as { cause?: unknown })?.cause ?? '')}`)) {
    return new ToolsError('unavailable', `server "${server}" is not connected: ${message}`, { cause: error });
  }
  return new ToolsError('upstream', `${what} on server "${server}" failed: ${message}`, { cause: error });
}
