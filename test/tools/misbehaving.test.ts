import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseToolsConfig } from '../../src/tools/config.ts';
import { Upstream } from '../../src/tools/upstream.ts';
import { NODE, OpenApiChecker, eventually, fixture, freePort, isAlive, startHarness, type ToolsHarness } from './helpers.ts';

// Small MCP servers that misbehave on purpose (test/tools/fixtures/): every error row of docs/tools.md, restarts
// with backoff, timeouts and health transitions. Timeouts are short here; nothing assumes a fast machine beyond
// "a request that never gets an answer takes at least the request timeout".

let harness: ToolsHarness;
let api: OpenApiChecker;

const REQUEST_TIMEOUT_MS = 3000;

beforeAll(async () => {
  const closedPort = await freePort();
  harness = await startHarness(`
defaults:
  timeouts: {startup: 20s, request: ${REQUEST_TIMEOUT_MS}ms, healthInterval: 300ms, healthTimeout: 1s}
  # a loaded machine can stall pings of 1 s: only the servers that test it are restarted for missed pings
  restart: {initialDelay: 100ms, maxDelay: 2s, afterPingTimeouts: 0}
servers:
  exits:
    command: ${NODE}
    args: [${fixture('exits-after-calls.ts')}, --calls, "2"]
  hangs:
    command: ${NODE}
    args: [${fixture('hangs.ts')}]
    restart: {afterPingTimeouts: 0}
  stops-pinging:
    command: ${NODE}
    args: [${fixture('hangs.ts')}]
    restart: {afterPingTimeouts: 2}
  junk:
    command: ${NODE}
    args: [${fixture('junk-on-stdout.ts')}]
  floods:
    command: ${NODE}
    args: [${fixture('floods-stdout.ts')}]
    # writing and reading 10 MiB can outlast 3 s on a loaded machine; the session ends when the limit is passed
    timeouts: {request: 60s}
  noisy:
    command: ${NODE}
    args: [${fixture('noisy-stderr.ts')}]
  errors:
    command: ${NODE}
    args: [${fixture('answers-errors.ts')}]
    tools: [fail, is-error, strict, ghost]
  never-initializes:
    command: ${NODE}
    args: [${fixture('hangs.ts')}, --hang-initialize]
    timeouts: {startup: 1500ms}
    restart: {initialDelay: 60s}
  missing:
    command: /nonexistent/mcp-server
    # a request may land during an attempt, whose Retry-After is what this timeout leaves of it
    timeouts: {startup: 2s}
  down-http:
    url: http://127.0.0.1:${closedPort}/mcp
`);
  await Promise.all(['exits', 'hangs', 'stops-pinging', 'junk', 'floods', 'noisy', 'errors'].map((name) => harness.upstreams.get(name).waitConnected(60_000)));
  api = await OpenApiChecker.of(harness.app);
});

afterAll(async () => {
  await harness?.close();
});

async function call(method: 'GET' | 'POST', template: string, url: string, body?: string) {
  const response = await harness.app.inject({ method, url, payload: body, headers: body === undefined ? {} : { 'content-type': 'application/json' } });
  api.check(method, template, response);
  return response;
}
const CALL = '/api/v1/servers/{server}/tools/{tool}';
const HEALTH = '/api/v1/health/servers/{name}';
const health = async (name: string) => (await call('GET', HEALTH, `/api/v1/health/servers/${name}`)).json() as Record<string, string>;

describe('a server that is down answers 503, and its health says unreachable', () => {
  it('a command that does not exist: retried with exponential backoff', async () => {
    const response = await call('POST', CALL, '/api/v1/servers/missing/tools/anything', '{}');
    expect(response.statusCode).toBe(503);
    expect(response.json().detail).toContain('ENOENT');
    // the next attempt is at most maxDelay (2 s) away, or an attempt under way ends within its 2 s start-up timeout
    expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(response.headers['retry-after'])).toBeLessThanOrEqual(2);
    expect(await health('missing')).toMatchObject({ status: 'unreachable', lastChecked: expect.any(String) });
    expect((await health('missing')).lastSuccessful).toBeUndefined();
    const delays = await eventually(() => {
      const found = harness.logs.filter((line) => line.startsWith('[missing]')).map((line) => Number(/retrying in (\d+) ms/.exec(line)?.[1]));
      expect(found.length).toBeGreaterThanOrEqual(4);
      return found;
    });
    expect(delays.slice(0, 4)).toEqual([100, 200, 400, 800]);
  });

  it('a Streamable HTTP server that is not listening', async () => {
    for (const url of ['/api/v1/servers/down-http/tools', '/api/v1/servers/down-http/resources']) {
      const response = await harness.app.inject(url);
      expect(response.statusCode).toBe(503);
    }
    await eventually(async () => expect((await health('down-http')).status).toBe('unreachable'));
  });

  it('a server that never answers initialize: unknown at first, then unreachable after the start-up timeout', async () => {
    // Its first start-up attempt lasts 1.5 s, and the next attempt is a minute later.
    const first = await health('never-initializes');
    expect(['unknown', 'unreachable']).toContain(first.status);
    await eventually(async () => expect((await health('never-initializes')).status).toBe('unreachable'));
    const response = await call('GET', '/api/v1/servers/{name}/tools', '/api/v1/servers/never-initializes/tools');
    expect(response.statusCode).toBe(503);
    expect(response.json().detail).toContain('no answer to initialize within 1500 ms');
  });
});

describe('Retry-After of a 503', () => {
  it('says when the next start attempt is due, in whole seconds rounded up; during an attempt, what its start-up timeout leaves', async () => {
    const started = Date.now();
    const own = await startHarness(`
servers:
  later:
    command: /nonexistent/mcp-server
    restart: {initialDelay: 90s, maxDelay: 2m}
  starting:
    command: ${NODE}
    args: [${fixture('hangs.ts')}, --hang-initialize]
    timeouts: {startup: 10m}
`);
    try {
      await own.upstreams.get('later').firstAttemptSettled();
      const response = await own.app.inject({ method: 'POST', url: '/api/v1/servers/later/tools/anything', headers: { 'content-type': 'application/json' }, payload: '{}' });
      api.check('POST', CALL, response);
      expect(response.statusCode).toBe(503);
      const seconds = Number(response.headers['retry-after']);
      expect(Number.isInteger(seconds)).toBe(true);
      // the attempt is due 90 s after the failure, which came after `started`
      expect(seconds).toBeLessThanOrEqual(90);
      expect(seconds).toBeGreaterThanOrEqual(90 - Math.floor((Date.now() - started) / 1000) - 1);
      for (const url of ['/api/v1/servers/later/prompts', '/api/v1/servers/later/resources/content?uri=x']) {
        const other = await own.app.inject(url);
        expect(other.statusCode).toBe(503);
        expect(Number(other.headers['retry-after'])).toBeGreaterThan(1);
      }
      // an attempt under way (initialize not answered yet, startup 10m): it may take the rest of those 10 minutes
      expect(own.upstreams.get('starting').state).toBe('connecting');
      const starting = await own.app.inject('/api/v1/servers/starting/tools');
      api.check('GET', '/api/v1/servers/{name}/tools', starting);
      expect(starting.statusCode).toBe(503);
      const left = Number(starting.headers['retry-after']);
      expect(left).toBeLessThanOrEqual(600);
      expect(left).toBeGreaterThanOrEqual(600 - Math.ceil((Date.now() - started) / 1000) - 1);
      // other errors carry none
      const notFound = await own.app.inject('/api/v1/servers/nope/tools');
      expect(notFound.statusCode).toBe(404);
      expect(notFound.headers['retry-after']).toBeUndefined();
    } finally {
      await own.close();
    }
  });

  it('is documented on every 503 of the OpenAPI document', () => {
    const paths = api.document.paths as Record<string, Record<string, { responses: Record<string, { headers?: Record<string, unknown> }> }>>;
    const documented = Object.values(paths).flatMap((path) => Object.values(path)).filter((operation) => operation.responses['503']);
    expect(documented.length).toBeGreaterThanOrEqual(7);
    for (const operation of documented) {
      expect(operation.responses['503'].headers?.['Retry-After']).toMatchObject({ required: true, schema: { type: 'integer', minimum: 1 } });
    }
  });
});

describe('a stdio server that exits is restarted', () => {
  it('answers its calls, 503 for the call it exits on, then a new process answers', async () => {
    const first = (await call('POST', CALL, '/api/v1/servers/exits/tools/echo', '{"message": "one"}')).json() as string;
    expect(first).toMatch(/^one \(call 1 of pid \d+\)$/);
    const pid = /pid (\d+)/.exec(first)![1];
    expect((await call('POST', CALL, '/api/v1/servers/exits/tools/echo', '{"message": "two"}')).json()).toContain('call 2');
    const exiting = await call('POST', CALL, '/api/v1/servers/exits/tools/echo', '{"message": "three"}');
    expect(exiting.statusCode).toBe(503);
    expect(exiting.headers['retry-after']).toBe('1');
    const again = await eventually(async () => {
      const response = await call('POST', CALL, '/api/v1/servers/exits/tools/echo', '{"message": "four"}');
      expect(response.statusCode).toBe(200);
      return response.json() as string;
    });
    expect(again).toMatch(/^four \(call 1 of pid \d+\)$/);
    expect(/pid (\d+)/.exec(again)![1]).not.toBe(pid);
    expect(harness.logs.some((line) => line.startsWith('[exits]') && line.includes('retrying in'))).toBe(true);
  });
});

describe('a server that hangs', () => {
  it('answers 504 after the request timeout, while other servers keep answering', async () => {
    const started = Date.now();
    const hanging = call('POST', CALL, '/api/v1/servers/hangs/tools/hang', '{}');
    const meanwhile = await call('POST', CALL, '/api/v1/servers/junk/tools/echo', '{"message": "still here"}');
    expect(meanwhile.json()).toBe('still here');
    const response = await hanging;
    expect(response.statusCode).toBe(504);
    expect(response.json().detail).toContain('timed out');
    expect(Date.now() - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
  });

  it('health goes ok → timeout when pings are not answered, and back to ok (restart.afterPingTimeouts: 0 keeps the session)', async () => {
    await eventually(async () => expect((await health('hangs')).status).toBe('ok'));
    await call('POST', CALL, '/api/v1/servers/hangs/tools/stop-answering-pings', '{}');
    const timedOut = await eventually(async () => {
      const value = await health('hangs');
      expect(value.status).toBe('timeout');
      return value;
    });
    expect(timedOut.latency).toBeUndefined();
    expect(Date.parse(timedOut.lastChecked)).toBeGreaterThan(Date.parse(timedOut.lastSuccessful));
    await call('POST', CALL, '/api/v1/servers/hangs/tools/answer-pings', '{}');
    await eventually(async () => expect((await health('hangs')).status).toBe('ok'));
  });
});

describe('a server that stops answering pings', () => {
  it('is restarted after restart.afterPingTimeouts timeouts in a row, and calls answer again', async () => {
    const upstream = harness.upstreams.get('stops-pinging');
    await eventually(async () => expect((await health('stops-pinging')).status).toBe('ok'));
    const pid = upstream.pid!;
    expect(pid).toEqual(expect.any(Number));
    expect((await call('POST', CALL, '/api/v1/servers/stops-pinging/tools/stop-answering-pings', '{}')).json()).toBe('pings ignored');
    // each timeout is logged; the second in a row ends the session, and a new process starts through the backoff
    await eventually(() => expect(upstream.pid).not.toBe(pid));
    await eventually(async () => expect((await health('stops-pinging')).status).toBe('ok'));
    const lines = harness.logs.filter((line) => line.startsWith('[stops-pinging]'));
    expect(lines.some((line) => line.includes('ping 1 of 2 in a row not answered within 1000 ms'))).toBe(true);
    expect(lines.some((line) => line.includes('no answer to 2 pings in a row') && line.includes('retrying in'))).toBe(true);
    const answered = await eventually(async () => {
      const response = await call('POST', CALL, '/api/v1/servers/stops-pinging/tools/answer-pings', '{}');
      expect(response.statusCode, response.body).toBe(200);
      return response.json();
    });
    expect(answered).toBe('pings answered');
    await eventually(() => expect(isAlive(pid), "the old process is gone").toBe(false));
  });
});

describe('a server that writes junk on stdout', () => {
  it('still answers, stays healthy and is not restarted', async () => {
    const pid = harness.upstreams.get('junk').pid;
    for (const message of ['a', 'b', 'c']) {
      expect((await call('POST', CALL, '/api/v1/servers/junk/tools/echo', JSON.stringify({ message }))).json()).toBe(message);
    }
    await eventually(async () => expect(await health('junk')).toMatchObject({ status: 'ok' }));
    expect(harness.upstreams.get('junk').pid).toBe(pid);
    // The junk did reach the client: its lines were reported and skipped.
    expect(harness.logs.some((line) => line.startsWith('[junk] MCP transport error'))).toBe(true);
  });
});

describe('a server that floods stdout', () => {
  it('ends the session past the SDK\'s 10 MiB message limit: 503 saying why, then a new process answers', async () => {
    const before = (await call('POST', CALL, '/api/v1/servers/floods/tools/echo', '{"message": "a"}')).json() as string;
    const flooded = await call('POST', CALL, '/api/v1/servers/floods/tools/flood', '{}');
    expect(flooded.statusCode).toBe(503);
    expect(flooded.json().detail).toContain('exceeded maximum size');
    const after = await eventually(async () => {
      const response = await call('POST', CALL, '/api/v1/servers/floods/tools/echo', '{"message": "b"}');
      expect(response.statusCode).toBe(200);
      return response.json() as string;
    });
    expect(/pid (\d+)/.exec(after)![1]).not.toBe(/pid (\d+)/.exec(before)![1]);
  });
});

describe('a server that writes progress bars and endless lines on stderr', () => {
  it('logs what a terminal would show: the last redraw of a line, and a long line in pieces of at most 64 KiB', async () => {
    await eventually(() => expect(harness.logs).toContain('[noisy] noisy-stderr: ready'));
    const lines = harness.logs.filter((line) => line.startsWith('[noisy] '));
    expect(lines).toContain('[noisy] downloading model: done');
    expect(lines.filter((line) => line.includes('downloading model'))).toHaveLength(1);
    const long = lines.filter((line) => line.includes('zzzz'));
    expect(long.length).toBeGreaterThan(0);
    for (const line of long) expect(line.length).toBeLessThanOrEqual(64 * 1024 + 100);
    expect(long.join('').replaceAll(/[^z]/g, '')).toHaveLength(2 ** 20);
    expect((await call('POST', CALL, '/api/v1/servers/noisy/tools/echo', '{"message": "still fine"}')).json()).toBe('still fine');
  });
});

describe('a server that answers errors', () => {
  it('an MCP error of a tool call: 502 with the server message', async () => {
    const response = await call('POST', CALL, '/api/v1/servers/errors/tools/fail', '{}');
    expect(response.statusCode).toBe(502);
    expect(response.json()).toMatchObject({ title: 'Bad Gateway', status: 502, detail: expect.stringContaining('the database is on fire') });
  });

  it('a tool result with isError: 502 with its text', async () => {
    const response = await call('POST', CALL, '/api/v1/servers/errors/tools/is-error', '{}');
    expect(response.statusCode).toBe(502);
    expect(response.json().detail).toContain('quota exceeded for today');
  });

  it('invalid params (-32602) of a tool call: 400 with the server message, the caller has to change its request', async () => {
    const response = await call('POST', CALL, '/api/v1/servers/errors/tools/strict', '{"count": "three"}');
    expect(response.statusCode).toBe(400);
    expect(response.json().detail).toContain('count must be a number');
    expect((await call('POST', CALL, '/api/v1/servers/errors/tools/strict', '{"count": 3}')).statusCode).toBe(200);
  });

  it('a tool outside the allow-list: 403, listed or not; an allowed tool the server lacks: 404', async () => {
    expect((await call('POST', CALL, '/api/v1/servers/errors/tools/secret', '{}')).statusCode).toBe(403);
    const tools = (await call('GET', '/api/v1/servers/{name}/tools', '/api/v1/servers/errors/tools?detail=minimal')).json();
    expect(tools.tools.map((tool: { name: string }) => tool.name)).toEqual(['fail', 'is-error', 'strict']);
    expect((await call('POST', CALL, '/api/v1/servers/errors/tools/ghost', '{}')).statusCode).toBe(404);
  });

  it('method not found: 501', async () => {
    const response = await call('GET', '/api/v1/servers/{name}/prompts', '/api/v1/servers/errors/prompts');
    expect(response.statusCode).toBe(501);
    expect(response.json().detail).toContain('prompts are switched off');
  });

  it('resource not found (-32002): 404; another error reading a resource: 502', async () => {
    const template = '/api/v1/servers/{name}/resources/content';
    const missing = await call('GET', template, '/api/v1/servers/errors/resources/content?uri=fixture%3A%2F%2Fmissing');
    expect(missing.statusCode).toBe(404);
    expect(missing.json().detail).toContain('fixture://missing');
    const broken = await call('GET', template, '/api/v1/servers/errors/resources/content?uri=fixture%3A%2F%2Fbroken');
    expect(broken.statusCode).toBe(502);
    expect(broken.json().detail).toContain('disk read error');
  });

  it('health stays ok', async () => {
    await eventually(async () => expect((await health('errors')).status).toBe('ok'));
  });
});

describe('restart backoff', () => {
  it('starts over at initialDelay once a session has stayed up for maxDelay', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tools-backoff-'));
    const yaml = `servers:
  flaky:
    command: ${NODE}
    args: [${fixture('exits-after-calls.ts')}, --calls, "0", --fail-starts, "2", --starts-file, ${path.join(dir, 'starts')}]
    restart: {initialDelay: 100ms, maxDelay: 1s}
`;
    const logs: string[] = [];
    const upstream = new Upstream(parseToolsConfig(yaml, 'test.yaml').servers[0], { log: (line) => logs.push(line) });
    try {
      upstream.start();
      await upstream.waitConnected(60_000);
      const delays = () => logs.map((line) => Number(/retrying in (\d+) ms/.exec(line)?.[1])).filter((delay) => delay > 0);
      // two failed starts: 100 ms, then 200 ms
      expect(delays()).toEqual([100, 200]);
      // up for longer than maxDelay (a wait that only needs the machine not to be fast), then the process exits
      await new Promise((resolve) => setTimeout(resolve, 1200));
      await expect(upstream.callTool('echo', { message: 'exit now' })).rejects.toMatchObject({ kind: 'unavailable' });
      await eventually(() => expect(delays()).toHaveLength(3));
      expect(delays()[2]).toBe(100);
    } finally {
      await upstream.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a transport that cannot be made', () => {
  it('is a failed start retried with backoff, not an exception that ends the process', async () => {
    const [config] = parseToolsConfig('servers:\n  odd: {url: "http://127.0.0.1:1/mcp", restart: {initialDelay: 1m}}\n', 'test.yaml').servers;
    // past validation (e.g. a configuration made in code): a URL no parser takes
    const upstream = new Upstream({ ...config, url: 'http://exa mple.com/mcp' } as typeof config);
    upstream.start();
    await upstream.firstAttemptSettled();
    expect(upstream.state).toBe('backoff');
    expect(upstream.lastFailure).toContain('Invalid URL');
    await upstream.close();
  });
});

describe('stopping', () => {
  it('closes a server that is still starting: its process does not outlive close()', async () => {
    const [config] = parseToolsConfig(`servers:\n  slow: {command: ${NODE}, args: [${fixture('hangs.ts')}, --hang-initialize]}\n`, 'test.yaml').servers;
    const upstream = new Upstream(config);
    upstream.start();
    const pid = await eventually(() => {
      expect(upstream.pid).toEqual(expect.any(Number));
      return upstream.pid!;
    });
    expect(upstream.state).toBe('connecting');
    await upstream.close();
    await eventually(() => expect(isAlive(pid)).toBe(false));
    expect(upstream.state).toBe('stopped');
  });
});
