import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { apiKeyDigest, generateApiKey, startToolServer, type RunningToolServer } from '../../src/tools/index.ts';
import { sample } from '../helpers/prometheus-text.ts';
import { EVERYTHING, NODE, eventually, fixture } from './helpers.ts';

// GET /metrics (Prometheus) and the audit log of a running tool server in front of server-everything and a
// fixture server that exits after two calls (so it restarts).

const dir = mkdtempSync(path.join(tmpdir(), 'tools-observability-'));
const configFile = path.join(dir, 'tools.yaml');
const auditFile = path.join(dir, 'audit.jsonl');
const ADMIN = generateApiKey();
const ECHO_ONLY = generateApiKey();
const config = (audit: string) => `
servers:
  everything:
    command: ${NODE}
    args: [${EVERYTHING}, stdio]
  flaky:
    command: ${NODE}
    args: [${fixture('exits-after-calls.ts')}, --calls, "2"]
    restart: {initialDelay: 50ms}
auth:
  keys:
    admin: {sha256: ${apiKeyDigest(ADMIN)}, servers: "*"}
    echo-only:
      sha256: ${apiKeyDigest(ECHO_ONLY)}
      servers: {everything: {tools: [echo]}}
audit:
${audit}
`;

let server: RunningToolServer;
let base: string;

beforeAll(async () => {
  writeFileSync(configFile, config('  file: audit.jsonl'));
  server = await startToolServer({ configFile, host: '127.0.0.1', port: 0, version: '0.0.0-test', swaggerUiFiles: installedSwaggerUiFile });
  await server.upstreams.firstAttemptsSettled();
  base = server.url;
});

afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

const call = (key: string, url: string, body?: unknown) =>
  fetch(`${base}${url}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

describe('GET /metrics', () => {
  it('counts requests and tool calls by server, tool and status, with latency, restarts and health', async () => {
    expect((await call(ADMIN, '/api/v1/servers/everything/tools/echo', { message: 'one' })).status).toBe(200);
    expect((await call(ADMIN, '/api/v1/servers/everything/tools/echo', { message: 'two' })).status).toBe(200);
    expect((await call(ECHO_ONLY, '/api/v1/servers/everything/tools/get-sum', { a: 1, b: 2 })).status).toBe(403);
    // two calls answered, the third ends the process (503), and a new session answers again
    for (const message of ['a', 'b']) expect((await call(ADMIN, '/api/v1/servers/flaky/tools/echo', { message })).status).toBe(200);
    expect((await call(ADMIN, '/api/v1/servers/flaky/tools/echo', { message: 'c' })).status).toBe(503);
    let unavailable = 1;
    await eventually(async () => {
      const status = (await call(ADMIN, '/api/v1/servers/flaky/tools/echo', { message: 'd' })).status;
      if (status === 503) unavailable++;
      expect(status).toBe(200);
    });

    const response = await call(ADMIN, '/metrics');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = await response.text();
    expect(sample(text, 'tools_tool_calls_total{server="everything",tool="echo",status="200"}')).toBe(2);
    expect(sample(text, 'tools_tool_calls_total{server="everything",tool="get-sum",status="403"}')).toBe(1);
    expect(sample(text, 'tools_tool_calls_total{server="flaky",tool="echo",status="503"}')).toBe(unavailable);
    expect(sample(text, 'tools_tool_calls_total{server="flaky",tool="echo",status="200"}')).toBe(3);
    expect(sample(text, 'tools_requests_total{server="everything",operation="call_tool",status="200"}')).toBe(2);
    expect(sample(text, 'tools_request_duration_seconds_count{server="everything",operation="call_tool"}')).toBe(3);
    expect(sample(text, 'tools_server_restarts_total{server="flaky"}')).toBe(1);
    expect(sample(text, 'tools_server_restarts_total{server="everything"}')).toBe(0);
    expect(sample(text, 'tools_server_health{server="everything",status="ok"}')).toBe(1);
    expect(sample(text, 'tools_server_health{server="everything",status="unreachable"}')).toBe(0);
  });

  it('is readable only with a key for every server', async () => {
    expect((await fetch(`${base}/metrics`)).status).toBe(401);
    const restricted = await call(ECHO_ONLY, '/metrics');
    expect(restricted.status).toBe(403);
    expect(((await restricted.json()) as { detail: string }).detail).toContain('may not read /metrics');
  });
});

describe('audit log', () => {
  it('writes one JSON line per request: key name, server, operation, name, status, duration; never a key', async () => {
    await call(ECHO_ONLY, '/api/v1/servers/everything/tools/echo', { message: 'secret argument' });
    await call(ECHO_ONLY, '/api/v1/servers/everything/resources/content?uri=demo%3A%2F%2Fresource%2Fstatic%2Fdocument%2Farchitecture.md');
    await fetch(`${base}/api/v1/servers?api_key=${ADMIN}`, { headers: { authorization: `Bearer ${ADMIN}` } });
    await fetch(`${base}/api/v1/servers`, { headers: { authorization: 'Bearer not-a-key' } });
    // a line is written once its answer has gone out: the last ones may come a moment after the client has them
    const entries = await eventually(() => {
      const all = readFileSync(auditFile, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(all.filter((entry) => entry.operation === 'list_servers' && entry.status === 401)).toHaveLength(2);
      return all;
    });
    const echo = entries.find((entry) => entry.key === 'echo-only' && entry.operation === 'call_tool' && entry.status === 200)!;
    expect(echo).toMatchObject({ server: 'everything', name: 'echo' });
    expect(Object.keys(echo).sort()).toEqual(['duration_ms', 'key', 'name', 'operation', 'server', 'status', 'time']);
    expect(echo.duration_ms).toBeGreaterThan(0);
    expect(Date.parse(echo.time as string)).toBeGreaterThan(Date.now() - 60_000);
    // the key names no resources of the server, so it has all of them
    expect(entries.find((entry) => entry.operation === 'read_resource')).toMatchObject({
      key: 'echo-only',
      name: 'demo://resource/static/document/architecture.md',
      status: 200,
    });
    expect(entries.filter((entry) => entry.status === 401).every((entry) => entry.key === null)).toBe(true);
    const whole = readFileSync(auditFile, 'utf8');
    for (const secret of [ADMIN, ECHO_ONLY, 'not-a-key', 'Bearer', 'secret argument']) expect(whole).not.toContain(secret);
  });

  it('writes arguments only with include_arguments, picked up by a reload', async () => {
    writeFileSync(configFile, config('  file: audit.jsonl\n  include_arguments: true'));
    server.reload();
    await call(ADMIN, '/api/v1/servers/everything/tools/echo', { message: 'now recorded' });
    const last = await eventually(() => {
      const line = readFileSync(auditFile, 'utf8').trim().split('\n').at(-1)!;
      expect(line).toContain('now recorded');
      return JSON.parse(line) as Record<string, unknown>;
    });
    expect(last).toMatchObject({ key: 'admin', operation: 'call_tool', arguments: { message: 'now recorded' } });
  });
});
