import { StringDecoder } from 'node:string_decoder';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { ServerConfig } from './config.ts';
import { ProcessGroupTransport } from './process-group.ts';

/** Longest stderr line logged at once; a longer one is logged in pieces of this size. */
const MAX_STDERR_LINE = 64 * 1024;

/**
 * The MCP SDK transport of one configured server: Streamable HTTP with its headers, or a stdio child (in a process
 * group of its own, src/tools/process-group.ts) whose stderr
 * is given to `stderrLine` line by line, as a terminal would show it: a carriage return redraws the line (progress
 * bars), and a line is passed on in MAX_STDERR_LINE pieces (unbounded, a server's endless line grew in memory and was
 * split again on every chunk).
 */
export function createUpstreamTransport(config: ServerConfig, stderrLine: (line: string) => void): Transport {
  if (config.transport === 'http') {
    return new StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers: config.headers } });
  }
  const parameters = { command: config.command, args: config.args, env: config.env, cwd: config.cwd };
  // Windows has no process groups: there the SDK's transport, which ends the server process alone
  const transport = process.platform === 'win32' ? new StdioClientTransport({ ...parameters, stderr: 'pipe' }) : new ProcessGroupTransport(parameters);
  let partial = '';
  const decoder = new StringDecoder('utf8');
  const stderr = transport.stderr as NodeJS.EventEmitter | null;
  stderr?.on('data', (chunk: Buffer) => {
    const lines = (partial + decoder.write(chunk)).split('\n');
    partial = lastRedraw(lines.pop() ?? '');
    for (const line of lines) stderrLine(lastRedraw(line.replace(/\r$/, '')));
    while (partial.length > MAX_STDERR_LINE) {
      stderrLine(`${partial.slice(0, MAX_STDERR_LINE)} …`);
      partial = partial.slice(MAX_STDERR_LINE);
    }
  });
  return transport;
}

/** The process id of a stdio transport's child, once started. */
export function pidOf(transport: Transport | undefined): number | undefined {
  return transport instanceof StdioClientTransport || transport instanceof ProcessGroupTransport ? (transport.pid ?? undefined) : undefined;
}

/** Ends a Streamable HTTP session on its server too, without waiting long for a server that is gone. */
export async function terminateHttpSession(transport: Transport | undefined): Promise<void> {
  if (!(transport instanceof StreamableHTTPClientTransport)) return;
  await Promise.race([transport.terminateSession().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
}

/**
 * The Streamable HTTP server refused the session: 404 is MCP's "session not found" (the client must start a new
 * one); some servers (server-everything among them) answer 400 "No valid session ID" instead.
 */
export function sessionRejected(error: unknown): boolean {
  if (!(error instanceof StreamableHTTPError)) return false;
  return error.code === 404 || (error.code === 400 && /session/i.test(error.message));
}

/** What is left of a line after its carriage returns: the text after the last one that something follows. */
function lastRedraw(line: string): string {
  const index = line.lastIndexOf('\r', line.length - 2);
  return index === -1 ? line : line.slice(index + 1);
}
