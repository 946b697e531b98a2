import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVERYTHING, NODE, OpenApiChecker, eventually, fixture, freePort, startHarness, type ToolsHarness } from './helpers.ts';

// A Streamable HTTP server (the real @modelcontextprotocol/server-everything) that restarts: the new process does
// not know the tool server's session, or that dies during a call. Health pings are ten minutes apart here, so only
// the failed request, or the broken stream of a call, can make the tool server notice that the session is gone.

let port: number;
let httpServer: ChildProcess | undefined;
let forgetfulPort: number;
let forgetful: ChildProcess | undefined;
let harness: ToolsHarness;
let api: OpenApiChecker;

async function startEverythingHttp(): Promise<ChildProcess> {
  return startListening([EVERYTHING, 'streamableHttp'], port);
}

async function startListening(args: string[], listenPort: number): Promise<ChildProcess> {
  const child = spawn(NODE, args, { env: { ...process.env, PORT: String(listenPort) }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  await eventually(() => expect(stderr).toContain('listening on port'), 60_000);
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill();
  await exited;
}

beforeAll(async () => {
  port = await freePort();
  httpServer = await startEverythingHttp();
  forgetfulPort = await freePort();
  forgetful = await startListening([fixture('forgets-sessions-http.ts')], forgetfulPort);
  harness = await startHarness(`
servers:
  forgetful:
    url: http://127.0.0.1:${forgetfulPort}/mcp
    timeouts: {healthInterval: 10m}
    restart: {initialDelay: 100ms, maxDelay: 1s}
  remote:
    url: http://127.0.0.1:${port}/mcp
    timeouts: {healthInterval: 10m, request: 20s}
    restart: {initialDelay: 100ms, maxDelay: 1s}
`);
  await Promise.all(harness.upstreams.all().map((upstream) => upstream.waitConnected(60_000)));
  api = await OpenApiChecker.of(harness.app);
});

afterAll(async () => {
  await harness?.close();
  if (httpServer) await stop(httpServer);
  if (forgetful) await stop(forgetful);
});

const CALL = '/api/v1/servers/{server}/tools/{tool}';
async function echo(message: string) {
  const response = await harness.app.inject({ method: 'POST', url: '/api/v1/servers/remote/tools/echo', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ message }) });
  api.check('POST', CALL, response);
  return response;
}

describe('a Streamable HTTP server that restarts', () => {
  it('answers 503 (not 502) for the session it no longer knows, and the tool server reconnects at once', async () => {
    expect((await echo('before')).json()).toBe('Echo: before');
    await stop(httpServer!);
    httpServer = await startEverythingHttp();
    // Either this call finds that the server no longer knows the session, or the broken event stream of the old
    // session already made a ping find it: a 503 both ways, never the 502 of an error answer.
    const refused = await echo('old session');
    expect(refused.statusCode, refused.body).toBe(503);
    expect(refused.json().detail).toMatch(/no longer knows this session|not connected/);
    const after = await eventually(async () => {
      const response = await echo('new session');
      expect(response.statusCode, response.body).toBe(200);
      return response.json();
    }, 30_000);
    expect(after).toBe('Echo: new session');
  });

  it('answers 503 while the server is down, and its health says unreachable before any ping', async () => {
    await stop(httpServer!);
    const down = await echo('nobody there');
    expect(down.statusCode, down.body).toBe(503);
    const health = await harness.app.inject('/api/v1/health/servers/remote');
    expect(health.json()).toMatchObject({ status: 'unreachable' });
    httpServer = await startEverythingHttp();
    await eventually(async () => expect((await echo('back')).statusCode).toBe(200), 30_000);
  });

  it('answers 503 for a call under way when the server dies, not a 504 after the request timeout', async () => {
    await harness.upstreams.get('remote').waitConnected(60_000);
    const upstream = harness.upstreams.get('remote');
    // a real call that lasts 30 s, longer than the request timeout (20 s) that it would otherwise wait out
    const longCall = harness.app.inject({
      method: 'POST',
      url: '/api/v1/servers/remote/tools/trigger-long-running-operation',
      headers: { 'content-type': 'application/json' },
      payload: '{"duration": 30, "steps": 30}',
    });
    await eventually(() => expect(upstream.requestsUnderWay).toBe(1));
    // the call has reached the server once its first progress step has been sent: give it that second
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await stop(httpServer!);
    const response = await longCall;
    api.check('POST', CALL, response);
    expect(response.statusCode, response.body).toBe(503);
    httpServer = await startEverythingHttp();
    await eventually(async () => expect((await echo('back again')).statusCode).toBe(200), 30_000);
  });
});

describe('a Streamable HTTP server that forgets the session (MCP: 404 Session not found)', () => {
  it('answers 503 and starts a new session at once', async () => {
    const call = (tool: string, body: string) =>
      harness.app.inject({ method: 'POST', url: `/api/v1/servers/forgetful/tools/${tool}`, headers: { 'content-type': 'application/json' }, payload: body });
    const first = await call('echo', '{"message": "a"}');
    expect(first.statusCode, first.body).toBe(200);
    const session = /session ([\w-]+)/.exec(first.json() as string)![1];
    expect((await call('forget-sessions', '{}')).statusCode).toBe(200);
    const refused = await call('echo', '{"message": "b"}');
    api.check('POST', CALL, refused);
    expect(refused.statusCode, refused.body).toBe(503);
    expect(refused.json().detail).toContain('no longer knows this session');
    const again = await eventually(async () => {
      const response = await call('echo', '{"message": "c"}');
      expect(response.statusCode, response.body).toBe(200);
      return response.json() as string;
    }, 30_000);
    expect(/session ([\w-]+)/.exec(again)![1]).not.toBe(session);
  });
});
