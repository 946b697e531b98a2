import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { apiKeyDigest, generateApiKey, startToolServer, type RunningToolServer } from '../../src/tools/index.ts';
import { EVERYTHING, MEMORY, NODE, eventually } from './helpers.ts';

// /mcp: one MCP endpoint for every server a key may use, used through the official MCP SDK client, in front of
// @modelcontextprotocol/server-everything and @modelcontextprotocol/server-memory.

const dir = mkdtempSync(path.join(tmpdir(), 'tools-mcp-'));
const configFile = path.join(dir, 'tools.yaml');
const ADMIN = generateApiKey();
const ECHO_ONLY = generateApiKey();
const LIMITED = generateApiKey();
const servers = (withMemory: boolean) => `
servers:
  everything:
    command: ${NODE}
    args: [${EVERYTHING}, stdio]
${withMemory ? `  memory:\n    command: ${NODE}\n    args: [${MEMORY}]\n    env: {MEMORY_FILE_PATH: "${dir}/memory.jsonl"}\n` : ''}auth:
  keys:
    admin: {sha256: ${apiKeyDigest(ADMIN)}, servers: "*"}
    echo-only:
      sha256: ${apiKeyDigest(ECHO_ONLY)}
      servers: {everything: {tools: [echo], prompts: [], resources: []}}
    limited: {sha256: ${apiKeyDigest(LIMITED)}, servers: "*", requests_per_minute: 4}
`;

let server: RunningToolServer;
let port: string;
const logs: string[] = [];
const clients: Client[] = [];

async function connect(key: string): Promise<Client> {
  const client = new Client({ name: 'test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } });
  await client.connect(transport);
  clients.push(client);
  return client;
}

beforeAll(async () => {
  writeFileSync(configFile, servers(false));
  server = await startToolServer({ configFile, host: '127.0.0.1', port: 0, version: '0.0.0-test', swaggerUiFiles: installedSwaggerUiFile, log: (line) => logs.push(line) });
  await server.upstreams.firstAttemptsSettled();
  port = new URL(server.url).port;
});

afterAll(async () => {
  await Promise.all(clients.map((client) => client.close().catch(() => {})));
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('/mcp', () => {
  it('lists every server\'s tools and prompts namespaced server__name, and calls them', async () => {
    const client = await connect(ADMIN);
    const tools = (await client.listTools()).tools.map((tool) => tool.name);
    expect(tools).toContain('everything__echo');
    expect(tools).toContain('everything__get-sum');
    expect(tools.every((name) => name.startsWith('everything__'))).toBe(true);
    const result = (await client.callTool({ name: 'everything__echo', arguments: { message: 'through one endpoint' } })) as CallToolResult;
    expect(result.content).toEqual([{ type: 'text', text: 'Echo: through one endpoint' }]);
    const prompts = (await client.listPrompts()).prompts.map((prompt) => prompt.name);
    expect(prompts.length).toBeGreaterThan(0);
    expect(prompts.every((name) => name.startsWith('everything__'))).toBe(true);
    const resources = (await client.listResources()).resources;
    expect(resources.length).toBeGreaterThan(0);
    const read = await client.readResource({ uri: resources[0].uri });
    expect(read.contents[0].uri).toBe(resources[0].uri);
  });

  it('passes errors through: an unknown tool, a server\'s own error, invalid arguments', async () => {
    const client = await connect(ADMIN);
    await expect(client.callTool({ name: 'everything__nope', arguments: {} })).rejects.toThrow(/has no tool "nope"/);
    await expect(client.callTool({ name: 'nowhere__echo', arguments: {} })).rejects.toThrow(/no tool "nowhere__echo"/);
    const invalid = (await client.callTool({ name: 'everything__get-sum', arguments: { a: 'x' } })) as CallToolResult;
    expect(invalid.isError).toBe(true);
  });

  it('shows a key only what it may use, and refuses the rest', async () => {
    const client = await connect(ECHO_ONLY);
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['everything__echo']);
    expect((await client.listPrompts()).prompts).toEqual([]);
    expect((await client.listResources()).resources).toEqual([]);
    await expect(client.callTool({ name: 'everything__get-sum', arguments: { a: 1, b: 2 } })).rejects.toThrow(/may not use tool "get-sum"/);
    const ok = (await client.callTool({ name: 'everything__echo', arguments: { message: 'hi' } })) as CallToolResult;
    expect(ok.content).toEqual([{ type: 'text', text: 'Echo: hi' }]);
  });

  it('requires a key, and a session stays with the key that opened it', async () => {
    const anonymous = new Client({ name: 'test', version: '1.0.0' });
    await expect(anonymous.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)))).rejects.toThrow(/401/);
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
    const opened = await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(initialize),
    });
    expect(opened.status).toBe(200);
    const session = opened.headers.get('mcp-session-id')!;
    expect(session).toBeTruthy();
    await opened.body?.cancel();
    const stolen = await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ECHO_ONLY}`, 'mcp-session-id': session, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    expect(stolen.status).toBe(403);
    const unknown = await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'mcp-session-id': 'no-such-session', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    expect(unknown.status).toBe(404);
    const fromPage = await fetch(`http://127.0.0.1:${port}/mcp`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}`, origin: 'https://evil.example', 'content-type': 'application/json' }, body: JSON.stringify(initialize) });
    expect(fromPage.status).toBe(403);
  });

  it('counts MCP requests against the key\'s requests per minute: 429 with Retry-After', async () => {
    // initialize, notifications/initialized and the GET stream (opened in the background) are three requests of four
    const client = await connect(LIMITED);
    await expect(
      (async () => {
        for (let i = 0; i < 3; i++) await client.listTools();
      })(),
    ).rejects.toThrow(/429/);
    const raw = await fetch(`http://127.0.0.1:${port}/mcp`, { method: 'POST', headers: { authorization: `Bearer ${LIMITED}`, 'content-type': 'application/json' }, body: '{}' });
    expect(raw.status).toBe(429);
    expect(Number(raw.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it('cancels a long-running call on the server when the client cancels it', async () => {
    const client = await connect(ADMIN);
    const controller = new AbortController();
    const started = Date.now();
    const call = client.callTool({ name: 'everything__trigger-long-running-operation', arguments: { duration: 30, steps: 30 } }, undefined, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('enough')), 500);
    await expect(call).rejects.toThrow(/enough/);
    expect(Date.now() - started).toBeLessThan(10_000);
    await eventually(() => expect(logs.join('\n')).toMatch(/\[everything\] request to server "everything" cancelled/));
  });

  it('tells clients that the lists changed when a reload adds a server', async () => {
    const client = await connect(ADMIN);
    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      changed++;
    });
    // the client opens its GET stream after initialize; give it a moment before the reload
    await new Promise((resolve) => setTimeout(resolve, 300));
    writeFileSync(configFile, servers(true));
    server.reload();
    await eventually(() => expect(changed).toBeGreaterThan(0), 60_000);
    await eventually(async () => expect((await client.listTools()).tools.map((tool) => tool.name)).toContain('memory__read_graph'), 60_000);
    const graph = (await client.callTool({ name: 'memory__read_graph', arguments: {} })) as CallToolResult;
    expect(graph.isError).toBeFalsy();
  });
});
