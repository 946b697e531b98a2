import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVERYTHING, NODE, OpenApiChecker, eventually, fixture, freePort, startHarness, type ToolsHarness } from './helpers.ts';

// A client that goes away before the answer cancels the call on the MCP server (MCP notifications/cancelled): the
// fixture counts-cancellations (the SDK's own server) reports the cancellations it saw, over stdio and Streamable
// HTTP; the real server-everything runs behind records-stdin, which shows what reached its stdin. The tool server
// listens on loopback here: a client that disconnects needs a real socket.

let harness: ToolsHarness;
let api: OpenApiChecker;
let base: string;
let httpFixture: ChildProcess | undefined;
let everythingHttp: ChildProcess | undefined;
let recorder: Server | undefined;
/** The JSON-RPC messages POSTed to server-everything over Streamable HTTP, with the status it answered. */
const posted: { message: JsonRpc; status: number }[] = [];
type JsonRpc = { id?: number; method?: string; params?: { name?: string; requestId?: number; reason?: string } };

/** A loopback proxy in front of a Streamable HTTP server that records the messages POSTed to it. */
function recordingProxy(target: number): Promise<number> {
  recorder = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      const upstream = httpRequest({ host: '127.0.0.1', port: target, path: request.url, method: request.method, headers: request.headers }, (answer) => {
        if (request.method === 'POST' && body.length > 0) {
          const parsed = JSON.parse(body.toString()) as JsonRpc | JsonRpc[];
          for (const message of [parsed].flat()) posted.push({ message, status: answer.statusCode ?? 0 });
        }
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      });
      upstream.on('error', () => response.destroy());
      response.on('close', () => upstream.destroy());
      upstream.end(body);
    });
  });
  return new Promise((resolve) => recorder!.listen(0, '127.0.0.1', () => resolve((recorder!.address() as { port: number }).port)));
}
let dir: string;
const stdinLog = () => path.join(dir, 'everything-stdin.jsonl');

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'tools-cancel-'));
  const port = await freePort();
  httpFixture = spawn(NODE, [fixture('counts-cancellations.ts'), '--http'], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  httpFixture.stderr!.on('data', (chunk) => (stderr += chunk));
  await eventually(() => expect(stderr).toContain('listening on port'), 60_000);
  const everythingPort = await freePort();
  everythingHttp = spawn(NODE, [EVERYTHING, 'streamableHttp'], { env: { ...process.env, PORT: String(everythingPort) }, stdio: ['ignore', 'ignore', 'pipe'] });
  let everythingStderr = '';
  everythingHttp.stderr!.on('data', (chunk) => (everythingStderr += chunk));
  await eventually(() => expect(everythingStderr).toContain('listening on port'), 60_000);
  const proxyPort = await recordingProxy(everythingPort);
  harness = await startHarness(`
defaults:
  timeouts: {request: 10m}
servers:
  counts:
    command: ${NODE}
    args: [${fixture('counts-cancellations.ts')}]
  counts-http:
    url: http://127.0.0.1:${port}/mcp
  everything:
    command: ${NODE}
    args: [${fixture('records-stdin.ts')}, ${stdinLog()}, ${NODE}, ${EVERYTHING}, stdio]
  everything-http:
    url: http://127.0.0.1:${proxyPort}/mcp
`);
  await Promise.all(harness.upstreams.all().map((upstream) => upstream.waitConnected(60_000)));
  api = await OpenApiChecker.of(harness.app);
  await harness.app.listen({ host: '127.0.0.1', port: 0 });
  const address = harness.app.server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});

afterAll(async () => {
  await harness?.close();
  httpFixture?.kill();
  everythingHttp?.kill();
  recorder?.closeAllConnections();
  recorder?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const CALL = '/api/v1/servers/{server}/tools/{tool}';

/** Starts a POST over a real connection; `abandon` closes the connection before the answer. */
function startPost(url: string, body: string) {
  let settled = false;
  const req = httpRequest(`${base}${url}`, { method: 'POST', headers: { 'content-type': 'application/json' } });
  const answered = new Promise<string>((resolve, reject) => {
    req.on('response', (response) => {
      let text = '';
      response.on('data', (chunk) => (text += chunk));
      response.on('end', () => resolve(text));
    });
    req.on('error', (error) => (settled ? resolve('') : reject(error)));
  });
  req.end(body);
  return {
    answered,
    abandon() {
      settled = true;
      req.destroy();
    },
  };
}

async function seen(server: string): Promise<{ started: number; cancelled: number; reasons: string[] }> {
  const response = await harness.app.inject({ method: 'POST', url: `/api/v1/servers/${server}/tools/cancellations`, headers: { 'content-type': 'application/json' }, payload: '{}' });
  api.check('POST', CALL, response);
  expect(response.statusCode, response.body).toBe(200);
  return JSON.parse(response.json() as string);
}

describe('a client that goes away before the answer', () => {
  for (const server of ['counts', 'counts-http']) {
    it(`cancels the call on the MCP server (${server === 'counts' ? 'stdio' : 'Streamable HTTP'}), which records no health error`, async () => {
      const upstream = harness.upstreams.get(server);
      const before = await seen(server);
      const call = startPost(`/api/v1/servers/${server}/tools/wait`, '{"seconds": 600}');
      // the server has started the call
      await eventually(async () => expect((await seen(server)).started).toBe(before.started + 1));
      call.abandon();
      const after = await eventually(async () => {
        const value = await seen(server);
        expect(value.cancelled).toBe(before.cancelled + 1);
        return value;
      });
      expect(after.reasons.at(-1)).toMatch(/client closed the connection/);
      await eventually(() => expect(harness.logs).toContain(`[${server}] request to server "${server}" cancelled: the client closed the connection before the answer`));
      await eventually(() => expect(upstream.requestsUnderWay).toBe(0));
      expect(upstream.state).toBe('connected');
      await eventually(async () => expect((await harness.app.inject(`/api/v1/health/servers/${server}`)).json()).toMatchObject({ status: 'ok' }));
      expect(upstream.health().detail).toBeUndefined();
      // an answered call is not cancelled
      const answered = await fetch(`${base}/api/v1/servers/${server}/tools/wait`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"seconds": 0}' });
      expect(await answered.json()).toBe('waited');
      expect((await seen(server)).cancelled).toBe(before.cancelled + 1);
    });
  }

  it('cancels server-everything\'s trigger-long-running-operation (stdio): the cancellation reaches the server', async () => {
    const upstream = harness.upstreams.get('everything');
    // the tool list is fetched after connecting; wait for it, so that the call below goes straight to the server
    expect((await harness.app.inject('/api/v1/servers/everything/tools?detail=minimal')).statusCode).toBe(200);
    const messages = () =>
      readFileSync(stdinLog(), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { id?: number; method?: string; params?: { name?: string; requestId?: number; reason?: string } });
    const call = startPost('/api/v1/servers/everything/tools/trigger-long-running-operation', '{"duration": 600, "steps": 2}');
    const request = await eventually(() => {
      const found = messages().find((message) => message.method === 'tools/call' && message.params?.name === 'trigger-long-running-operation');
      expect(found).toBeDefined();
      return found!;
    });
    call.abandon();
    const cancelled = await eventually(() => {
      const found = messages().find((message) => message.method === 'notifications/cancelled');
      expect(found).toBeDefined();
      return found!;
    });
    expect(cancelled.params).toMatchObject({ requestId: request.id, reason: expect.stringMatching(/client closed the connection/) });
    await eventually(() => expect(upstream.requestsUnderWay).toBe(0));
    expect(upstream.state).toBe('connected');
    expect(upstream.health().status).not.toBe('unreachable');
    // the server goes on answering
    const echo = await fetch(`${base}/api/v1/servers/everything/tools/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"message": "still here"}' });
    expect(await echo.json()).toBe('Echo: still here');
  });

  it('cancels server-everything\'s trigger-long-running-operation (Streamable HTTP): the server accepts the cancellation', async () => {
    const upstream = harness.upstreams.get('everything-http');
    expect((await harness.app.inject('/api/v1/servers/everything-http/tools?detail=minimal')).statusCode).toBe(200);
    const call = startPost('/api/v1/servers/everything-http/tools/trigger-long-running-operation', '{"duration": 600, "steps": 2}');
    const request = await eventually(() => {
      const found = posted.find(({ message }) => message.method === 'tools/call' && message.params?.name === 'trigger-long-running-operation');
      expect(found).toBeDefined();
      return found!.message;
    });
    call.abandon();
    const cancelled = await eventually(() => {
      const found = posted.find(({ message }) => message.method === 'notifications/cancelled');
      expect(found).toBeDefined();
      return found!;
    });
    expect(cancelled.message.params).toMatchObject({ requestId: request.id, reason: expect.stringMatching(/client closed the connection/) });
    // MCP over Streamable HTTP: 202 Accepted is the server taking the notification
    expect(cancelled.status).toBe(202);
    await eventually(() => expect(upstream.requestsUnderWay).toBe(0));
    expect(upstream.state).toBe('connected');
    const echo = await fetch(`${base}/api/v1/servers/everything-http/tools/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"message": "still here"}' });
    expect(await echo.json()).toBe('Echo: still here');
  });
});
