import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVERYTHING, NODE, OpenApiChecker, eventually, freePort, startHarness, type ToolsHarness } from './helpers.ts';

// A Streamable HTTP server (the real @modelcontextprotocol/server-everything) that restarts: the new process does
// not know the tool server's session. Health pings are ten minutes apart here, so only the failed request itself
// can notice that the session is gone.

let port: number;
let httpServer: ChildProcess | undefined;
let harness: ToolsHarness;
let api: OpenApiChecker;

async function startEverythingHttp(): Promise<ChildProcess> {
  const child = spawn(NODE, [EVERYTHING, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
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
  harness = await startHarness(`
servers:
  remote:
    url: http://127.0.0.1:${port}/mcp
    timeouts: {healthInterval: 10m}
    restart: {initialDelay: 100ms, maxDelay: 1s}
`);
  await harness.upstreams.get('remote').waitConnected(60_000);
  api = await OpenApiChecker.of(harness.app);
});

afterAll(async () => {
  await harness?.close();
  if (httpServer) await stop(httpServer);
});

const CALL = '/api/v1/servers/{server}/tools/{tool}';
async function echo(message: string) {
  const response = await harness.app.inject({ method: 'POST', url: '/api/v1/servers/remote/tools/echo', payload: JSON.stringify({ message }) });
  api.check('POST', CALL, response);
  return response;
}

describe('a Streamable HTTP server that restarts', () => {
  it('answers 503 (not 502) for the session it no longer knows, and the tool server reconnects at once', async () => {
    expect((await echo('before')).json()).toBe('Echo: before');
    await stop(httpServer!);
    httpServer = await startEverythingHttp();
    const refused = await echo('old session');
    expect(refused.statusCode, refused.body).toBe(503);
    expect(refused.json().detail).toContain('session');
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
});
