import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ProgressNotificationSchema,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { startToolServer, type RunningToolServer } from '../../src/tools/index.ts';
import { EVERYTHING, NODE, eventually, fixture } from './helpers.ts';

// One scripted session of the official MCP SDK client with @modelcontextprotocol/server-everything, run directly
// (stdio) and through the tool server's /mcp: the transcripts — results, notifications, the server's requests to the
// client and the client's answers — must be the same apart from names (/mcp prefixes them with the server's).

const dir = mkdtempSync(path.join(tmpdir(), 'tools-transcript-'));
const configFile = path.join(dir, 'tools.yaml');
let server: RunningToolServer;
let url: URL;
const logs: string[] = [];
const clients: Client[] = [];

beforeAll(async () => {
  writeFileSync(
    configFile,
    `servers:\n  everything:\n    command: ${NODE}\n    args: [${EVERYTHING}, stdio]\n  asker:\n    command: ${NODE}\n    args: [${fixture('asks-then-cancels.ts')}]\n`,
  );
  server = await startToolServer({ configFile, host: '127.0.0.1', port: 0, version: '0.0.0-test', swaggerUiFiles: installedSwaggerUiFile, log: (line) => logs.push(line) });
  await server.upstreams.firstAttemptsSettled();
  url = new URL(`${server.url}/mcp`);
});

afterAll(async () => {
  await Promise.all(clients.map((client) => client.close().catch(() => {})));
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

type Entry = unknown[];

/**
 * A client with every capability the tool server's own client offers servers (so that server-everything registers
 * the same tools for both), recording into `transcript` what the server sends it and how it answers.
 */
function recordingClient(transcript: Entry[], unname: (name: string) => string): Client {
  const client = new Client({ name: 'transcript', version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: {} } });
  client.setRequestHandler(CreateMessageRequestSchema, (request) => {
    transcript.push(['sampling/createMessage', request.params]);
    const { content } = request.params.messages[0];
    const text = !Array.isArray(content) && content.type === 'text' ? content.text : '?';
    return { model: 'test-model', role: 'assistant', content: { type: 'text', text: `sampled: ${text}` } };
  });
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    transcript.push(['elicitation/create', request.params.message]);
    return { action: 'accept', content: { name: 'Ada' } };
  });
  client.setRequestHandler(ListRootsRequestSchema, () => {
    transcript.push(['roots/list']);
    return { roots: [{ uri: 'file:///srv/project', name: 'project' }] };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, ({ params }) => {
    const logger = params.logger === undefined ? undefined : unname(params.logger);
    transcript.push(['log', params.level, logger === '' ? undefined : logger, params.data]);
  });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, ({ params }) => {
    // server-everything repeats its updates every 5 s: one entry per URI in a row
    const last = transcript.at(-1);
    if (!(last?.[0] === 'updated' && last[1] === params.uri)) transcript.push(['updated', params.uri]);
  });
  // progress as it arrives, under the token the script sent (the SDK's `onprogress` drops one read with the answer)
  client.setNotificationHandler(ProgressNotificationSchema, ({ params }) => void transcript.push(['progress', params.progressToken, params.progress, params.total]));
  for (const schema of [ToolListChangedNotificationSchema, PromptListChangedNotificationSchema, ResourceListChangedNotificationSchema]) {
    client.setNotificationHandler(schema, (notification) => void transcript.push([notification.method]));
  }
  return client;
}

/** The scripted session: every feature server-everything shows, as one client uses them. */
async function script(client: Client, transcript: Entry[], name: (tool: string) => string, unname: (name: string) => string): Promise<void> {
  const call = async (tool: string, args: Record<string, unknown> = {}, progressToken?: string) => {
    const result = (await client.callTool({ name: name(tool), arguments: args, ...(progressToken ? { _meta: { progressToken } } : {}) })) as CallToolResult;
    transcript.push(['result', tool, result]);
  };
  const tools = (await client.listTools()).tools
    .filter((tool) => name(unname(tool.name)) === tool.name)
    .map((tool) => ({ ...tool, name: unname(tool.name) }))
    .sort((a, b) => a.name.localeCompare(b.name));
  transcript.push(['tools', tools]);
  await client.setLoggingLevel('info');
  await call('echo', { message: 'hello' });
  await call('trigger-long-running-operation', { duration: 0.4, steps: 4 }, 'steps');
  await call('trigger-sampling-request', { prompt: 'a haiku', maxTokens: 20 });
  await call('trigger-elicitation-request');
  await call('get-sum', { a: 'not a number' });
  const resources = (await client.listResources()).resources;
  transcript.push(['resources', resources.map((resource) => ({ ...resource, name: unname(resource.name) }))]);
  const uri = resources[0].uri;
  transcript.push(['read', await client.readResource({ uri })]);
  await client.subscribeResource({ uri });
  transcript.push(['subscribed', uri]);
  await call('toggle-subscriber-updates');
  await client.unsubscribeResource({ uri });
  transcript.push(['unsubscribed', uri]);
  await call('toggle-subscriber-updates');
  // above the acknowledgement's level (info): no log message for these
  await client.setLoggingLevel('error');
  await client.subscribeResource({ uri });
  await client.unsubscribeResource({ uri });
  transcript.push(['quiet subscription', uri]);
  const prompt = await client.getPrompt({ name: name('simple-prompt') });
  transcript.push(['prompt', prompt]);
}

/** Connects, lets the server's start-up talk (its roots request, its list of conditional tools) end, then runs the script. */
async function run(transport: StdioClientTransport | StreamableHTTPClientTransport, name: (tool: string) => string, unname: (name: string) => string) {
  const transcript: Entry[] = [];
  const client = recordingClient(transcript, unname);
  clients.push(client);
  await client.connect(transport);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const startUp = transcript.splice(0);
  await script(client, transcript, name, unname);
  await client.close();
  return { startUp, transcript };
}

describe('/mcp is a faithful proxy', () => {
  it('gives the same transcript as server-everything directly, names apart', async () => {
    const direct = await run(
      new StdioClientTransport({ command: NODE, args: [EVERYTHING, 'stdio'], stderr: 'ignore' }),
      (tool) => tool,
      (name) => name,
    );
    const proxied = await run(
      new StreamableHTTPClientTransport(url),
      (tool) => `everything__${tool}`,
      (name) => name.replace(/^everything(__|$)/, ''),
    );
    // what the script must have seen, so that equal transcripts mean something
    const kinds = direct.transcript.map((entry) => entry[0]);
    expect(kinds.filter((kind) => kind === 'progress')).toHaveLength(4);
    expect(kinds).toContain('sampling/createMessage');
    expect(kinds).toContain('elicitation/create');
    expect(kinds).toContain('updated');
    expect(direct.transcript.filter((entry) => entry[0] === 'log').map((entry) => entry[3])).toEqual([
      expect.stringMatching(/^Received Subscribe Resource request for URI: demo:/),
      expect.stringMatching(/^Received Unsubscribe Resource request: demo:/),
    ]);
    const sampled = direct.transcript.find((entry) => entry[0] === 'result' && entry[1] === 'trigger-sampling-request') as [string, string, CallToolResult];
    expect(JSON.stringify(sampled[2].content)).toContain('sampled: Resource trigger-sampling-request context: a haiku');
    expect(proxied.transcript).toEqual(direct.transcript);
    // start-up differs by nature: the tool server's session with server-everything began before this client came
    expect(direct.startUp.map((entry) => entry[0])).toContain('roots/list');
    expect(proxied.startUp).toEqual([]);
  });

  it('asks the client with a call under way for roots, and refuses server requests that no session can answer', async () => {
    const transcript: Entry[] = [];
    const client = recordingClient(transcript, (name) => name);
    clients.push(client);
    await client.connect(new StreamableHTTPClientTransport(url));
    const roots = (await client.callTool({ name: 'everything__get-roots-list', arguments: {} })) as CallToolResult;
    expect(transcript.map((entry) => entry[0])).toContain('roots/list');
    expect(JSON.stringify(roots.content)).toContain('file:///srv/project');
    // the REST API has no client to ask: the server's sampling request is refused, and says why
    const rest = await server.app.inject({ method: 'POST', url: '/api/v1/servers/everything/tools/trigger-sampling-request', payload: { prompt: 'x' } });
    expect(rest.statusCode).toBe(502);
    expect(rest.json().detail).toMatch(/no client of \/mcp has a request under way on server "everything"/);
  });

  it('refuses a server request when two sessions have calls under way on that server', async () => {
    const busy = recordingClient([], (name) => name);
    const asking = recordingClient([], (name) => name);
    clients.push(busy, asking);
    await busy.connect(new StreamableHTTPClientTransport(url));
    await asking.connect(new StreamableHTTPClientTransport(url));
    const long = busy.callTool({ name: 'everything__trigger-long-running-operation', arguments: { duration: 2, steps: 2 } });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const refused = (await asking.callTool({ name: 'everything__trigger-sampling-request', arguments: { prompt: 'whose?' } })) as CallToolResult;
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toMatch(/2 clients of \/mcp have requests under way on server \\"everything\\"/);
    await long;
  });

  it('relays the server\'s cancellation of its request to the client', async () => {
    let aborted: unknown;
    const client = new Client({ name: 'slow', version: '1.0.0' }, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, (_request, extra) => {
      return new Promise((_resolve, reject) => {
        extra.signal.addEventListener('abort', () => {
          aborted = extra.signal.reason;
          reject(new Error('abandoned'));
        });
      });
    });
    clients.push(client);
    await client.connect(new StreamableHTTPClientTransport(url));
    const result = (await client.callTool({ name: 'asker__ask', arguments: { waitMs: 300 } })) as CallToolResult;
    expect(JSON.stringify(result.content)).toMatch(/gave up/);
    await eventually(() => expect(aborted).toBeDefined());
  });

  it('relays a client\'s cancellation to the server, and the progress before it', async () => {
    const client = new Client({ name: 'impatient', version: '1.0.0' });
    clients.push(client);
    await client.connect(new StreamableHTTPClientTransport(url));
    const controller = new AbortController();
    const progress: number[] = [];
    const call = client.callTool({ name: 'everything__trigger-long-running-operation', arguments: { duration: 20, steps: 40 } }, undefined, {
      signal: controller.signal,
      onprogress: (update) => {
        progress.push(update.progress);
        if (progress.length === 2) controller.abort(new Error('seen enough'));
      },
    });
    await expect(call).rejects.toThrow(/seen enough/);
    expect(progress).toEqual([1, 2]);
    await eventually(() => expect(logs.join('\n')).toMatch(/\[everything\] request to server "everything" cancelled/));
  });
});
