import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { apiKeyDigest, ApiKeys } from '../../src/tools/auth.ts';
import { parseToolsConfig, type ToolsConfig } from '../../src/tools/config.ts';
import { createToolsApp } from '../../src/tools/http/app.ts';
import { BrowserGuard } from '../../src/tools/http/browser-guard.ts';
import { Upstreams } from '../../src/tools/upstreams.ts';
import { OpenApiChecker } from './helpers.ts';

// The browser guard (src/tools/http/browser-guard.ts) rule by rule, and the JSON-only bodies of app.ts: which Host
// and Origin each listen address accepts, preflights for the origins of cors_allow_origins answered before the API key
// is asked for, 415 for every body that is not JSON, the security headers, a reload that changes the lists. Browsers
// themselves: browser.test.ts.

const KEY = 'etk_browser-guard-key';
const FRIEND = 'https://app.example:8443';

/** An app with no MCP server (the guard needs none) on `listenHost`, with the configuration `yaml`. */
async function appOf(yaml: string, listenHost?: string): Promise<{ app: FastifyInstance; config: { current: ToolsConfig } }> {
  const config = { current: parseToolsConfig(yaml, 'test.yaml') };
  const keys = config.current.auth ? new ApiKeys(config.current.auth.keys) : null;
  const app = await createToolsApp(new Upstreams(), {
    version: '0.0.0-test',
    swaggerUiFiles: installedSwaggerUiFile,
    keys: () => keys,
    listenHost,
    browserAccess: () => config.current,
  });
  return { app, config };
}

describe('Host', () => {
  const accepted = (guard: BrowserGuard, host: string) => guard.refusalOf(host, undefined) === null;

  it('on a loopback address: the loopback names, the address, allowed_hosts; nothing else', () => {
    const guard = new BrowserGuard({ listenHost: '127.0.0.1', access: () => ({ allowedHosts: ['tools.internal'] }) });
    for (const host of ['127.0.0.1:8090', 'localhost:8090', 'LOCALHOST', '[::1]:8090', '127.0.0.2', 'tools.internal:8090', 'TOOLS.internal']) expect(accepted(guard, host), host).toBe(true);
    for (const host of ['attacker.example', 'attacker.example:8090', '127.0.0.1.attacker.example', '10.0.0.5:8090', '[::2]', 'localhost.', '', 'a:b:c']) {
      expect(accepted(guard, host), host).toBe(false);
    }
    expect(guard.refusalOf('attacker.example', undefined)).toEqual({ code: 'host_not_allowed', detail: expect.stringContaining('"attacker.example" is not a name of this tool server') });
    // HTTP/1.0 sends no Host: no browser does that
    expect(guard.refusalOf(undefined, undefined)).toBeNull();
  });

  it('on a given address: that address; on every interface: any IP address, but a name only from allowed_hosts', () => {
    const given = new BrowserGuard({ listenHost: '192.168.1.10', access: () => ({}) });
    expect(accepted(given, '192.168.1.10:8090')).toBe(true);
    expect(accepted(given, '10.0.0.5:8090')).toBe(false);
    const v6 = new BrowserGuard({ listenHost: '[fd00::1]', access: () => ({}) });
    expect(accepted(v6, '[fd00::1]:8090')).toBe(true);
    for (const wildcard of ['0.0.0.0', '::']) {
      const every = new BrowserGuard({ listenHost: wildcard, access: () => ({ allowedHosts: ['tools.example.com'] }) });
      for (const host of ['10.0.0.5:8090', '203.0.113.7', '[2001:db8::1]:8090', 'localhost', 'tools.example.com']) expect(accepted(every, host), `${wildcard} ${host}`).toBe(true);
      for (const host of ['attacker.example', 'tools-service.default.svc:8090', '10.0.0.5.nip.io']) expect(accepted(every, host), `${wildcard} ${host}`).toBe(false);
    }
    const anything = new BrowserGuard({ listenHost: '0.0.0.0', access: () => ({ allowedHosts: ['*'] }) });
    expect(accepted(anything, 'tools-service.default.svc:8090')).toBe(true);
  });
});

describe('Origin', () => {
  const guard = new BrowserGuard({ listenHost: '127.0.0.1', access: () => ({ corsAllowOrigins: [FRIEND] }) });

  it('accepts none, the server\'s own and the listed ones; refuses every other, another loopback port included', () => {
    expect(guard.refusalOf('127.0.0.1:8090', 'http://127.0.0.1:8090')).toBeNull();
    expect(guard.refusalOf('localhost:80', 'http://localhost')).toBeNull();
    expect(guard.refusalOf('127.0.0.1:8090', 'https://APP.example:8443')).toBeNull();
    // behind a proxy that ends TLS the page is https while the server is not: one host and port is one server
    const proxied = new BrowserGuard({ listenHost: '0.0.0.0', access: () => ({ allowedHosts: ['tools.example'] }) });
    expect(proxied.refusalOf('tools.example', 'https://tools.example')).toBeNull();
    expect(proxied.refusalOf('tools.example', 'https://tools.example:8443')).not.toBeNull();
    for (const origin of ['http://127.0.0.1:3000', 'http://localhost:8090', 'https://app.example', 'null', 'file://', 'not an origin']) {
      expect(guard.refusalOf('127.0.0.1:8090', origin), origin).toEqual({ code: 'origin_not_allowed', detail: expect.stringContaining('cors_allow_origins') });
    }
  });
});

describe('the guard in the app', () => {
  let keyed: FastifyInstance;
  let open: FastifyInstance;
  let openConfig: { current: ToolsConfig };
  let api: OpenApiChecker;

  beforeAll(async () => {
    keyed = (await appOf(`servers:\nauth:\n  keys:\n    admin: {sha256: ${apiKeyDigest(KEY)}, servers: "*"}\ncors_allow_origins: ["${FRIEND}/"]\n`, '0.0.0.0')).app;
    ({ app: open, config: openConfig } = await appOf('servers:\n', '127.0.0.1'));
    api = await OpenApiChecker.of(open);
  });
  afterAll(async () => {
    await keyed.close();
    await open.close();
  });

  it('answers a listed origin\'s preflight before asking for the key, and only that origin\'s', async () => {
    const preflight = await keyed.inject({
      method: 'OPTIONS',
      url: '/api/v1/servers/memory/tools/read_graph',
      headers: { host: '10.1.2.3:8090', origin: FRIEND, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers).toMatchObject({
      'access-control-allow-origin': FRIEND,
      'access-control-allow-methods': 'GET, POST, DELETE',
      'access-control-allow-headers': expect.stringContaining('authorization'),
      'access-control-max-age': '600',
      vary: expect.stringContaining('Origin'),
    });
    expect(preflight.headers['access-control-allow-credentials']).toBeUndefined();
    // the call itself still needs the key; its answer carries the CORS headers a page needs to read it
    const withoutKey = await keyed.inject({ method: 'GET', url: '/api/v1/servers', headers: { origin: FRIEND } });
    expect(withoutKey.statusCode).toBe(401);
    const call = await keyed.inject({ method: 'GET', url: '/api/v1/servers', headers: { origin: FRIEND, authorization: `Bearer ${KEY}` } });
    expect(call.statusCode).toBe(200);
    expect(call.headers['access-control-allow-origin']).toBe(FRIEND);
    expect(call.headers['access-control-expose-headers']).toContain('mcp-session-id');
    // another origin's preflight is refused outright: the browser then never sends the request
    const foreign = await keyed.inject({ method: 'OPTIONS', url: '/api/v1/servers', headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } });
    expect(foreign.statusCode).toBe(403);
    expect(foreign.headers['access-control-allow-origin']).toBeUndefined();
    expect(foreign.json()).toMatchObject({ code: 'origin_not_allowed' });
  });

  it('refuses before authentication: a foreign Host gets 403, not 401, on every route, existing or not', async () => {
    for (const url of ['/api/v1/servers', '/metrics', '/mcp', '/health', '/docs', '/no/such/route']) {
      const response = await keyed.inject({ method: 'GET', url, headers: { host: 'attacker.example' } });
      expect(response.statusCode, url).toBe(403);
      expect(response.json(), url).toMatchObject({ $schema: '/schemas/ErrorModel.json', status: 403, code: 'host_not_allowed', instance: url });
      expect(response.headers['x-content-type-options'], url).toBe('nosniff');
    }
  });

  it('takes JSON bodies only: 415 for text/plain, a form, a body without a type; JSON with a charset passes', async () => {
    const call = (headers: Record<string, string>, payload: string) => open.inject({ method: 'POST', url: '/api/v1/servers/none/tools/t', headers, payload });
    for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', undefined]) {
      const response = await call(type === undefined ? {} : { 'content-type': type }, '{"a": 1}');
      expect(response.statusCode, String(type)).toBe(415);
      expect(response.json(), String(type)).toMatchObject({ status: 415, code: 'unsupported_media_type', detail: expect.stringContaining('application/json') });
      api.check('POST', '/api/v1/servers/{server}/tools/{tool}', response);
    }
    // past the body check, the request meets the route: no server called "none"
    expect((await call({ 'content-type': 'application/json; charset=utf-8' }, '{"a": 1}')).statusCode).toBe(404);
    expect((await call({ 'content-type': 'Application/JSON' }, '')).statusCode).toBe(404);
    // no body, no type: nothing to refuse
    expect((await open.inject({ method: 'POST', url: '/api/v1/servers/none/tools/t' })).statusCode).toBe(404);
  });

  it('documents every refusal in the OpenAPI document', async () => {
    for (const [method, template, url] of [
      ['GET', '/api/v1/servers', '/api/v1/servers'],
      ['POST', '/api/v1/servers/{server}/tools/{tool}', '/api/v1/servers/a/tools/b'],
      ['GET', '/docs', '/docs'],
      ['GET', '/openapi.json', '/openapi.json'],
      ['GET', '/health', '/health'],
    ]) {
      const response = await open.inject({ method: method as 'GET' | 'POST', url, headers: { origin: 'http://127.0.0.1:1', 'content-type': 'application/json' }, payload: method === 'POST' ? '{}' : undefined });
      expect(response.statusCode, url).toBe(403);
      api.check(method, template, response);
    }
  });

  it('serves /docs with a Content-Security-Policy that forbids framing', async () => {
    const docs = await open.inject('/docs');
    expect(docs.statusCode).toBe(200);
    const csp = String(docs.headers['content-security-policy']);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/]+=*'/);
    expect(csp).not.toContain('unsafe-eval');
    expect(docs.headers).toMatchObject({ 'x-frame-options': 'DENY', 'x-content-type-options': 'nosniff' });
  });

  it('routes a trailing slash like the route without it', async () => {
    for (const url of ['/api/v1/servers/', '/health/', '/docs/', '/api/v1/health/servers/']) {
      expect((await open.inject(url)).statusCode, url).toBe(200);
    }
    expect((await open.inject('/api/v1/servers/')).json()).toEqual([]);
  });

  it('reads allowed_hosts and cors_allow_origins again after a reload', async () => {
    const before = await open.inject({ url: '/health', headers: { host: 'tools.lan:8090', origin: 'http://tools.lan:3000' } });
    expect(before.json()).toMatchObject({ code: 'host_not_allowed' });
    openConfig.current = parseToolsConfig('servers:\nallowed_hosts: [tools.lan]\ncors_allow_origins: ["http://tools.lan:3000"]\n', 'test.yaml');
    const after = await open.inject({ url: '/health', headers: { host: 'tools.lan:8090', origin: 'http://tools.lan:3000' } });
    expect(after.statusCode).toBe(200);
    expect(after.headers['access-control-allow-origin']).toBe('http://tools.lan:3000');
    openConfig.current = parseToolsConfig('servers:\n', 'test.yaml');
  });
});

describe('configuration of allowed_hosts and cors_allow_origins', () => {
  it('normalizes what it reads', () => {
    const config = parseToolsConfig('servers:\nallowed_hosts: [Tools.LAN, "[fd00::1]", "*"]\ncors_allow_origins: ["HTTPS://App.Example:443/", "http://localhost:3000"]\n', 'x.yaml');
    expect(config.allowedHosts).toEqual(['tools.lan', 'fd00::1', '*']);
    expect(config.corsAllowOrigins).toEqual(['https://app.example', 'http://localhost:3000']);
    expect(parseToolsConfig('servers:\n', 'x.yaml')).not.toHaveProperty('allowedHosts');
  });

  it('says what is wrong with an entry', () => {
    const problems = (yaml: string) => {
      try {
        parseToolsConfig(`servers:\n${yaml}`, 'x.yaml');
        return '';
      } catch (error) {
        return (error as Error).message;
      }
    };
    expect(problems('allowed_hosts: ["tools.lan:8090"]\n')).toContain('/allowed_hosts/0: "tools.lan:8090" is not a host name or IP address (no scheme, no port), nor "*"');
    expect(problems('allowed_hosts: ["http://tools.lan"]\n')).toContain('/allowed_hosts/0:');
    expect(problems('cors_allow_origins: ["https://app.example/path"]\n')).toContain('/cors_allow_origins/0: "https://app.example/path" is not an origin');
    expect(problems('cors_allow_origins: ["*"]\n')).toContain('/cors_allow_origins/0: "*" is not an origin');
    expect(problems('cors_allow_origins: ["https://user@app.example"]\n')).toContain('/cors_allow_origins/0:');
    expect(problems('cors_allow_origins: ["https://exa mple.com"]\n')).toContain('/cors_allow_origins/0:');
  });
});
