import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { ApiKeys, apiKeyDigest, generateApiKey, MAX_AUTHORIZATION_LENGTH } from '../../src/tools/auth.ts';
import type { ToolsError } from '../../src/tools/errors.ts';
import { isLoopbackHost as isLoopback } from '../../src/shared/host-names.ts';
import { startToolServer, ToolsConfigError } from '../../src/tools/index.ts';
import { EVERYTHING, MEMORY, NODE, OpenApiChecker, startHarness, type ToolsHarness } from './helpers.ts';

// Real MCP servers: @modelcontextprotocol/server-everything and @modelcontextprotocol/server-memory over stdio.

const ADMIN = generateApiKey();
const ECHO_ONLY = generateApiKey();
const LIMITED = generateApiKey();

let harness: ToolsHarness;
let api: OpenApiChecker;
let memoryDir: string;

beforeAll(async () => {
  memoryDir = mkdtempSync(path.join(tmpdir(), 'tools-auth-'));
  harness = await startHarness(
    `
servers:
  everything:
    command: ${NODE}
    args: [${EVERYTHING}, stdio]
  memory:
    command: ${NODE}
    args: [${MEMORY}]
    env: {MEMORY_FILE_PATH: "${memoryDir}/memory.jsonl"}
auth:
  keys:
    admin:
      sha256: ${apiKeyDigest(ADMIN)}
      servers: "*"
    echo-only:
      sha256: ${apiKeyDigest(ECHO_ONLY)}
      servers:
        everything: {tools: [echo], prompts: [], resources: []}
    limited:
      sha256: ${apiKeyDigest(LIMITED)}
      servers: [memory]
      requests_per_minute: 2
`,
  );
  await Promise.all(harness.upstreams.all().map((upstream) => upstream.waitConnected(60_000)));
  api = await OpenApiChecker.of(harness.app);
});

afterAll(async () => {
  await harness?.close();
  rmSync(memoryDir, { recursive: true, force: true });
});

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** Every API operation: documented template and a concrete request. */
const ROUTES: [method: 'GET' | 'POST', template: string, url: string][] = [
  ['GET', '/api/v1/health/servers', '/api/v1/health/servers'],
  ['GET', '/api/v1/health/servers/{name}', '/api/v1/health/servers/memory'],
  ['GET', '/api/v1/servers', '/api/v1/servers'],
  ['GET', '/api/v1/servers/{name}/tools', '/api/v1/servers/memory/tools'],
  ['POST', '/api/v1/servers/{server}/tools/{tool}', '/api/v1/servers/memory/tools/read_graph'],
  ['GET', '/api/v1/servers/{name}/prompts', '/api/v1/servers/everything/prompts'],
  ['POST', '/api/v1/servers/{name}/prompts/{promptName}', '/api/v1/servers/everything/prompts/simple-prompt'],
  ['GET', '/api/v1/servers/{name}/resources', '/api/v1/servers/everything/resources'],
  ['GET', '/api/v1/servers/{name}/resources/content', '/api/v1/servers/everything/resources/content?uri=demo%3A%2F%2Fresource%2Fstatic%2Fdocument%2Farchitecture.md'],
  ['GET', '/api/v1/servers/{name}/resources/templates', '/api/v1/servers/everything/resources/templates'],
];

describe('authentication', () => {
  it('answers 401 problem details with a Bearer challenge on every route without a key', async () => {
    for (const [method, template, url] of ROUTES) {
      const response = await harness.app.inject({ method, url, ...(method === 'POST' ? { payload: '{}', headers: { 'content-type': 'application/json' } } : {}) });
      api.check(method, template, response);
      expect(response.statusCode, url).toBe(401);
      expect(response.headers['www-authenticate']).toBe('Bearer realm="encoder tools"');
      expect(response.json().detail).toContain('requires an API key');
    }
    // routes that do not exist say 401 too: nothing can be probed without a key
    expect((await harness.app.inject('/api/v1/nothing-here')).statusCode).toBe(401);
  });

  it('keeps /health, /openapi.json, /docs and the schemas open', async () => {
    for (const url of ['/health', '/openapi.json', '/docs', '/docs/swagger-ui.css', '/schemas/ServerHealth.json']) {
      expect((await harness.app.inject(url)).statusCode, url).toBe(200);
    }
    const document = (await harness.app.inject('/openapi.json')).json();
    expect(document.components.securitySchemes.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(document.security).toEqual([{ apiKey: [] }]);
    expect(document.paths['/health'].get.security).toEqual([]);
  });

  it('refuses malformed, oversize and unknown keys, never repeating them', async () => {
    const cases: [string, RegExp][] = [
      [`Basic ${Buffer.from(`user:${ADMIN}`).toString('base64')}`, /malformed/],
      ['Bearer', /malformed/],
      ['Bearer two words', /malformed/],
      [`Bearer ${ADMIN}\u0000`, /malformed/],
      [`Bearer ${'a'.repeat(MAX_AUTHORIZATION_LENGTH)}`, /malformed/],
      [`Bearer ${generateApiKey()}`, /unknown API key/],
      [`Bearer ${ADMIN.slice(0, -1)}`, /unknown API key/],
    ];
    for (const [authorization, detail] of cases) {
      const response = await harness.app.inject({ url: '/api/v1/servers', headers: { authorization } });
      expect(response.statusCode, authorization.slice(0, 40)).toBe(401);
      expect(response.json().detail).toMatch(detail);
      expect(response.body).not.toContain(authorization.split(' ')[1]?.slice(0, 20) || '\u0001');
    }
  });

  it('refuses a key in the query string even beside a valid header, and does not echo it', async () => {
    for (const parameter of ['api_key', 'key', 'access_token', 'Token']) {
      const response = await harness.app.inject({ url: `/api/v1/servers?${parameter}=${ADMIN}`, headers: bearer(ADMIN) });
      expect(response.statusCode).toBe(401);
      expect(response.json().detail).toContain('never in the URL');
      expect(response.body).not.toContain(ADMIN);
    }
  });

  it('lets a key with every server use everything', async () => {
    const servers = await harness.app.inject({ url: '/api/v1/servers', headers: bearer(ADMIN) });
    expect(servers.json()).toEqual(['everything', 'memory']);
    const call = await harness.app.inject({ method: 'POST', url: '/api/v1/servers/everything/tools/echo', headers: bearer(ADMIN), payload: { message: 'hi' } });
    expect(call.statusCode).toBe(200);
    expect(call.json()).toBe('Echo: hi');
  });
});

describe('per-key permissions', () => {
  it('lists for a key only what it may use', async () => {
    const get = (url: string) => harness.app.inject({ url, headers: bearer(ECHO_ONLY) });
    expect((await get('/api/v1/servers')).json()).toEqual(['everything']);
    expect((await get('/api/v1/health/servers')).json().servers.map((server: { name: string }) => server.name)).toEqual(['everything']);
    const tools = await get('/api/v1/servers/everything/tools');
    api.check('GET', '/api/v1/servers/{name}/tools', tools);
    expect(tools.json().tools.map((tool: { name: string }) => tool.name)).toEqual(['echo']);
    // the admin key sees the server's other tools, prompts, resources and templates
    const all = await harness.app.inject({ url: '/api/v1/servers/everything/tools', headers: bearer(ADMIN) });
    expect(all.json().tools.length).toBeGreaterThan(3);
    expect((await get('/api/v1/servers/everything/prompts')).json().prompts).toEqual([]);
    expect((await get('/api/v1/servers/everything/resources')).json().resources).toEqual([]);
    expect((await get('/api/v1/servers/everything/resources/templates')).json().templates).toEqual([]);
    const adminTemplates = await harness.app.inject({ url: '/api/v1/servers/everything/resources/templates', headers: bearer(ADMIN) });
    expect(adminTemplates.json().templates.length).toBeGreaterThan(0);
  });

  it('answers 403 for anything else, on every route', async () => {
    const forbidden: [method: 'GET' | 'POST', template: string, url: string, detail: string][] = [
      ['GET', '/api/v1/health/servers/{name}', '/api/v1/health/servers/memory', 'may not use server "memory"'],
      ['GET', '/api/v1/servers/{name}/tools', '/api/v1/servers/memory/tools', 'may not use server "memory"'],
      ['POST', '/api/v1/servers/{server}/tools/{tool}', '/api/v1/servers/memory/tools/read_graph', 'may not use server "memory"'],
      ['POST', '/api/v1/servers/{server}/tools/{tool}', '/api/v1/servers/everything/tools/get-sum', 'may not use tool "get-sum"'],
      ['POST', '/api/v1/servers/{name}/prompts/{promptName}', '/api/v1/servers/everything/prompts/simple-prompt', 'may not use prompt "simple-prompt"'],
      ['GET', '/api/v1/servers/{name}/resources/content', ROUTES[8][2], 'may not use resource "demo://resource/static/document/architecture.md"'],
      ['GET', '/api/v1/servers/{name}/resources', '/api/v1/servers/memory/resources', 'may not use server "memory"'],
      // a server that does not exist is not revealed to a key that could not use it anyway
      ['GET', '/api/v1/servers/{name}/tools', '/api/v1/servers/nope/tools', 'may not use server "nope"'],
    ];
    for (const [method, template, url, detail] of forbidden) {
      const response = await harness.app.inject({ method, url, headers: { ...bearer(ECHO_ONLY), 'content-type': 'application/json' }, ...(method === 'POST' ? { payload: '{"a":1,"b":2}' } : {}) });
      api.check(method, template, response);
      expect(response.statusCode, url).toBe(403);
      expect(response.json().detail).toBe(`key "echo-only" ${detail}${detail.startsWith('may not use server') ? '' : ' of server "everything"'}`);
    }
    const allowed = await harness.app.inject({ method: 'POST', url: '/api/v1/servers/everything/tools/echo', headers: bearer(ECHO_ONLY), payload: { message: 'ok' } });
    expect(allowed.statusCode).toBe(200);
  });

  it('limits a key to its requests per minute with 429 and Retry-After, leaving other keys alone', async () => {
    const get = () => harness.app.inject({ url: '/api/v1/servers', headers: bearer(LIMITED) });
    expect((await get()).statusCode).toBe(200);
    expect((await get()).json()).toEqual(['memory']);
    const limited = await get();
    api.check('GET', '/api/v1/servers', limited);
    expect(limited.statusCode).toBe(429);
    expect(limited.json().detail).toBe('key "limited" is over its 2 requests per minute');
    const seconds = Number(limited.headers['retry-after']);
    expect(seconds).toBeGreaterThanOrEqual(25);
    expect(seconds).toBeLessThanOrEqual(30);
    expect((await harness.app.inject({ url: '/api/v1/servers', headers: bearer(ADMIN) })).statusCode).toBe(200);
  });

  it('links $schema relative to the server whatever Host the client sends', async () => {
    // (a Host that is no name of this server is refused outright: browser.test.ts)
    const response = await harness.app.inject({ url: '/api/v1/health/servers', headers: { ...bearer(ADMIN), host: '127.0.0.2:9999', 'x-forwarded-host': 'attacker.example' } });
    expect(response.json().$schema).toBe('/schemas/ServersHealthResponse.json');
    expect(response.body).not.toMatch(/attacker|9999/);
    const problem = await harness.app.inject({ url: '/api/v1/servers/nope/tools', headers: { ...bearer(ADMIN), host: '127.0.0.2:9999' } });
    expect(problem.json().$schema).toBe('/schemas/ErrorModel.json');
  });
});

describe('request budget', () => {
  it('refills continuously and survives a reload with the same limit', () => {
    let now = 0;
    const key = { name: 'k', sha256: apiKeyDigest('secret'), servers: '*' as const, requestsPerMinute: 60 };
    const keys = new ApiKeys([key], () => now);
    for (let i = 0; i < 60; i++) keys.authenticate('Bearer secret', {});
    const over = (() => {
      try {
        keys.authenticate('Bearer secret', {});
      } catch (error) {
        return error as ToolsError;
      }
    })();
    expect(over?.kind).toBe('rate_limited');
    expect(over?.retryAfterMs).toBe(1000);
    keys.replace([key]);
    expect(() => keys.authenticate('Bearer secret', {})).toThrow(/requests per minute/);
    now += 1000;
    expect(keys.authenticate('Bearer secret', {}).keyName).toBe('k');
    // a new limit starts a new budget
    keys.replace([{ ...key, requestsPerMinute: 120 }]);
    expect(keys.authenticate('Bearer secret', {}).keyName).toBe('k');
  });
});

describe('where a server without keys may listen', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tools-auth-listen-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const options = (configFile: string) => ({ configFile, version: '0.0.0-test', swaggerUiFiles: installedSwaggerUiFile });

  it('knows loopback addresses', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', 'localhost']) expect(isLoopback(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '', '192.168.1.10', '127.0.0.1.example.com']) expect(isLoopback(host), host).toBe(false);
  });

  it('listens on 127.0.0.1 by default, refuses another address without --no-auth, warns with it', async () => {
    const file = path.join(dir, 'open.yaml');
    writeFileSync(file, 'servers: {}\n');
    const local = await startToolServer({ ...options(file), port: 0 });
    expect(local.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await local.close();

    await expect(startToolServer({ ...options(file), host: '0.0.0.0', port: 0 })).rejects.toThrow(ToolsConfigError);
    await expect(startToolServer({ ...options(file), host: '0.0.0.0', port: 0 })).rejects.toThrow(/refusing to serve 0\.0\.0\.0:0 without authentication.*--no-auth/s);
    const logs: string[] = [];
    const exposed = await startToolServer({ ...options(file), host: '0.0.0.0', port: 0, noAuth: true, log: (line) => logs.push(line) });
    expect(logs.join('\n')).toContain('warning: --no-auth: anyone who can reach 0.0.0.0:0 can list and call every tool');
    await exposed.close();
  });

  it('with keys: listens on every interface by default, refuses --no-auth, and a reload may not drop the keys', async () => {
    const file = path.join(dir, 'keys.yaml');
    const key = generateApiKey();
    const withKeys = `servers: {}\nauth:\n  keys:\n    ops: {sha256: ${apiKeyDigest(key)}, servers: "*"}\n`;
    writeFileSync(file, withKeys);
    await expect(startToolServer({ ...options(file), port: 0, noAuth: true })).rejects.toThrow(/has auth\.keys, and --no-auth/);
    const server = await startToolServer({ ...options(file), port: 0 });
    try {
      expect(server.url).toMatch(/^http:\/\/0\.0\.0\.0:\d+$/);
      const port = new URL(server.url).port;
      const ask = (headers: Record<string, string> = {}) => fetch(`http://127.0.0.1:${port}/api/v1/servers`, { headers }).then((response) => response.status);
      expect(await ask()).toBe(401);
      expect(await ask(bearer(key))).toBe(200);

      writeFileSync(file, 'servers: {}\n');
      expect(() => server.reload()).toThrow(/refusing to serve 0\.0\.0\.0/);
      expect(await ask()).toBe(401); // the running keys stay

      const second = generateApiKey();
      writeFileSync(file, `${withKeys}    ci: {sha256: ${apiKeyDigest(second)}, servers: "*"}\n`);
      server.reload();
      expect(await ask(bearer(second))).toBe(200);
      expect(await ask(bearer(key))).toBe(200);
    } finally {
      await server.close();
    }
  });
});
