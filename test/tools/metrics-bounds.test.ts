import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { apiKeyDigest, startToolServer, type RunningToolServer } from '../../src/tools/index.ts';
import { sample } from '../helpers/prometheus-text.ts';
import { EVERYTHING, NODE, eventually } from './helpers.ts';

// Metric labels are bounded (src/tools/metrics.ts): a server is named only when configured, a tool only when its
// server listed it, and a request refused before authentication names neither. 1,000 distinct made-up names — with
// no key, a wrong key, a valid key, a foreign Host, and through /mcp — leave the number of series unchanged.

const dir = mkdtempSync(path.join(tmpdir(), 'tools-metrics-bounds-'));
const configFile = path.join(dir, 'tools.yaml');
const ADMIN = 'etk_metrics-bounds-admin';
const NAMES = 1000;
const yaml = (env: string) =>
  `servers:\n  everything: {command: ${NODE}, args: [${EVERYTHING}]${env}}\n` + `auth:\n  keys:\n    admin: {sha256: ${apiKeyDigest(ADMIN)}, servers: "*"}\n`;

let server: RunningToolServer;

beforeAll(async () => {
  writeFileSync(configFile, yaml(''));
  server = await startToolServer({ configFile, host: '127.0.0.1', port: 0, version: '0.0.0-test', swaggerUiFiles: installedSwaggerUiFile });
  await server.upstreams.firstAttemptsSettled();
}, 60_000);

afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

const metrics = async () => {
  const response = await server.app.inject({ url: '/metrics', headers: { authorization: `Bearer ${ADMIN}` } });
  expect(response.statusCode).toBe(200);
  return response.body;
};
const seriesOf = (text: string) => text.split('\n').filter((line) => line !== '' && !line.startsWith('#'));

/** A tool call through the API as each kind of client sends it; `name` is the made-up part. */
const CLIENTS: Record<string, (name: string) => { url: string; headers: Record<string, string> }> = {
  'no key': (name) => ({ url: `/api/v1/servers/everything/tools/${name}`, headers: {} }),
  'a wrong key': (name) => ({ url: `/api/v1/servers/${name}/tools/${name}`, headers: { authorization: 'Bearer etk_not-a-key' } }),
  'a valid key, a made-up tool': (name) => ({ url: `/api/v1/servers/everything/tools/${name}`, headers: { authorization: `Bearer ${ADMIN}` } }),
  'a valid key, a made-up server': (name) => ({ url: `/api/v1/servers/${name}/tools/echo`, headers: { authorization: `Bearer ${ADMIN}` } }),
  'a foreign Host': (name) => ({ url: `/api/v1/servers/${name}/tools/${name}`, headers: { authorization: `Bearer ${ADMIN}`, host: `${name}.example` } }),
};
const EXPECTED_STATUS: Record<string, number> = {
  'no key': 401,
  'a wrong key': 401,
  'a valid key, a made-up tool': 404,
  'a valid key, a made-up server': 404,
  'a foreign Host': 403,
};

describe('metric labels', () => {
  it('do not grow with the names clients make up', async () => {
    const mcp = new Client({ name: 'metrics-bounds', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${ADMIN}` } } }));
    const send = async (name: string) => {
      for (const [client, request] of Object.entries(CLIENTS)) {
        const { url, headers } = request(name);
        const response = await server.app.inject({ method: 'POST', url, headers: { ...headers, 'content-type': 'application/json' }, payload: '{}' });
        expect(response.statusCode, `${client} ${name}`).toBe(EXPECTED_STATUS[client]);
      }
      for (const tool of [`everything__${name}`, `${name}__tool`]) {
        await expect(mcp.callTool({ name: tool, arguments: {} })).rejects.toThrow(/-32602/);
      }
    };
    // a real call first (its tool is listed, so it is named), then one made-up name of each kind: the series that
    // every later one adds to ("other", "", each status) exist from here on
    await mcp.listTools();
    const echo = await server.app.inject({ method: 'POST', url: '/api/v1/servers/everything/tools/echo', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, payload: '{"message": "m"}' });
    expect(echo.statusCode).toBe(200);
    await send('warm-up');
    await metrics(); // reading them is a request too
    const before = seriesOf(await metrics());

    for (let i = 0; i < NAMES; i++) await send(`made-up-${i}`);

    const text = await metrics();
    expect(seriesOf(text).length).toBe(before.length);
    expect(text).not.toMatch(/made-up|warm-up|\.example/);
    // the requests are all counted, under names the configuration chose
    expect(sample(text, 'tools_tool_calls_total{server="everything",tool="echo",status="200"}')).toBe(1);
    // a made-up tool of a configured server, through the API and through /mcp
    expect(sample(text, 'tools_tool_calls_total{server="everything",tool="other",status="404"}')).toBe(2 * (NAMES + 1));
    expect(sample(text, 'tools_tool_calls_total{server="other",tool="other",status="404"}')).toBe(NAMES + 1);
    expect(sample(text, 'tools_tool_calls_total{server="",tool="other",status="401"}')).toBe(2 * (NAMES + 1));
    expect(sample(text, 'tools_tool_calls_total{server="",tool="other",status="403"}')).toBe(NAMES + 1);
    await mcp.close();
  }, 300_000);

  it('count the restart a reload makes (a changed entry) in tools_server_restarts_total', async () => {
    expect(sample(await metrics(), 'tools_server_restarts_total{server="everything"}')).toBe(0);
    writeFileSync(configFile, yaml(', env: {CHANGED: "1"}'));
    expect(server.reload()).toMatchObject({ restarted: ['everything'] });
    await server.upstreams.get('everything').waitConnected(30_000);
    await eventually(async () => expect(sample(await metrics(), 'tools_server_restarts_total{server="everything"}')).toBe(1));
  });
});
