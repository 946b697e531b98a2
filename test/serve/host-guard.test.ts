/**
 * Host and Origin (src/serve/http/host-guard.ts): a server on a loopback address without an API key answers only
 * loopback Host names (DNS rebinding), every server refuses foreign Origins (web pages), one rule below every route,
 * in the dialect of the path. Real requests to a tiny model served in-process on 127.0.0.1.
 */
import http from 'node:http';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKey } from '../../src/serve/api-key.ts';
import { createHttpApp } from '../../src/serve/http/app.ts';
import { HostGuard } from '../../src/serve/http/host-guard.ts';
import { hostNameOf, isLoopbackHost } from '../../src/shared/host-names.ts';
import { serverInfo } from '../../src/serve/server-info.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';
import { stubServingLimits } from '../helpers/predict-responses.ts';

const KEY = 'sk-host-guard_1';
const MCP_ACCEPT = 'application/json, text/event-stream';

interface Answer {
  status: number;
  type: string | undefined;
  body: string;
}

/** A request with exactly these headers (fetch cannot set Host); the body is JSON when given. */
function send(url: string, route: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
  const target = new URL(route, url);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: payload === undefined ? 'GET' : 'POST',
        headers: { ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }), ...headers },
        agent: false,
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode!, type: response.headers['content-type'], body: text }));
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

/** The three dialects: spec 2's /predict, OpenAI's /v1/embeddings, MCP's JSON-RPC. */
const ROUTES = [
  { route: '/predict', body: { inputs: ['a text'], normalize: true }, headers: {} },
  { route: '/v1/embeddings', body: { input: 'a text' }, headers: {} },
  { route: '/mcp', body: { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers: { accept: MCP_ACCEPT } },
] as const;

function expectRefusal(answer: Answer, route: string, message: RegExp): void {
  expect(answer.status, route).toBe(403);
  if (route === '/predict') {
    expect(answer.type).toBe('text/plain; charset=utf-8');
    expect(answer.body).toMatch(message);
  } else if (route === '/mcp') {
    const body = JSON.parse(answer.body) as { jsonrpc: string; error: { code: number; message: string }; id: null };
    expect(body).toMatchObject({ jsonrpc: '2.0', error: { code: -32000 }, id: null });
    expect(body.error.message).toMatch(message);
  } else {
    const body = JSON.parse(answer.body) as { error: { message: string; type: string; code: string } };
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'forbidden' });
    expect(body.error.message).toMatch(message);
  }
}

const FOREIGN_HOST = /^Forbidden: Host "rebound\.example:\d+" is not a name of this server; .*DNS rebinding/;
const FOREIGN_ORIGIN = /^Forbidden: requests from web pages \(Origin https:\/\/evil\.example\) are not accepted/;

describe('the rule', () => {
  it('knows the loopback names and literals', () => {
    for (const host of ['localhost', 'LOCALHOST', '127.0.0.1', '127.1.2.3', '::1', '[::1]', '::ffff:127.0.0.1']) expect(isLoopbackHost(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', '127.0.0.256', 'localhost.', 'localhost.evil.example', '127.0.0.1.evil.example', '::ffff:10.0.0.1']) {
      expect(isLoopbackHost(host), host).toBe(false);
    }
  });

  it('reads the host name of a Host header, and nothing of a malformed one', () => {
    expect(hostNameOf('Example.com:8080')).toBe('example.com');
    expect(hostNameOf('localhost')).toBe('localhost');
    expect(hostNameOf('[::1]:8080')).toBe('::1');
    expect(hostNameOf('[::1]')).toBe('::1');
    for (const bad of ['', ':8080', '[::1', '[::1]x', 'a:b:c', 'host:port']) expect(hostNameOf(bad), bad).toBeNull();
  });

  it('on a loopback address without a key: loopback Hosts and the listen address only; loopback Origins only', () => {
    const guard = new HostGuard({ listenHost: '127.0.0.2' });
    expect(guard.checksHost).toBe(true);
    for (const host of ['localhost:8080', '127.0.0.1:1', '[::1]:8080', '127.0.0.2:8080', undefined]) expect(guard.refusalOf(host, undefined), String(host)).toBeNull();
    for (const host of ['rebound.example', 'rebound.example:8080', '10.0.0.1:8080', 'a:b:c']) expect(guard.refusalOf(host, undefined)?.header, host).toBe('host');
    for (const origin of ['http://localhost:3000', 'https://127.0.0.1', 'http://[::1]:5173']) expect(guard.refusalOf('localhost', origin), origin).toBeNull();
    for (const origin of ['https://evil.example', 'null', 'file://', 'chrome-extension://abc', 'http://localhost.evil.example']) {
      expect(guard.refusalOf('localhost', origin)?.header, origin).toBe('origin');
    }
  });

  it('checks no Host with an API key, on a non-loopback address, or with --allowed-hosts "*"; still checks Origin', () => {
    for (const options of [{ listenHost: '127.0.0.1', apiKey: true }, { listenHost: '0.0.0.0' }, { listenHost: '::' }, { listenHost: '127.0.0.1', allowedHosts: ['*'] }, {}]) {
      const guard = new HostGuard(options);
      expect(guard.checksHost, JSON.stringify(options)).toBe(false);
      expect(guard.refusalOf('rebound.example', undefined)).toBeNull();
      expect(guard.refusalOf('rebound.example', 'https://evil.example')?.header).toBe('origin');
    }
  });

  it('adds the allowed hosts and origins; "*" accepts every origin', () => {
    const guard = new HostGuard({ listenHost: 'localhost', allowedHosts: ['Model.Internal', '[fd00::1]'], allowedOrigins: ['https://app.example/'] });
    expect(guard.refusalOf('model.internal:8080', undefined)).toBeNull();
    expect(guard.refusalOf('[fd00::1]:8080', undefined)).toBeNull();
    expect(guard.refusalOf('other.internal', undefined)?.header).toBe('host');
    expect(guard.refusalOf('localhost', 'https://APP.example')).toBeNull();
    expect(guard.refusalOf('localhost', 'https://app.example:8443')?.header).toBe('origin');
    expect(new HostGuard({ allowedOrigins: ['*'] }).refusalOf('localhost', 'https://evil.example')).toBeNull();
  });
});

describe('a server on 127.0.0.1 without an API key', () => {
  let encoder: InProcessEncoder;
  let url: string;
  let port: string;
  beforeAll(async () => {
    encoder = await serveInProcess(await generateTinyModel({ modelType: 'embedding' }), 'guarded', 'embedding');
    url = encoder.httpUrl;
    port = new URL(url).port;
  });
  afterAll(() => encoder?.close());

  it.each(ROUTES)('refuses a foreign Host on $route with 403 in its dialect', async ({ route, body, headers }) => {
    expectRefusal(await send(url, route, { ...headers, host: `rebound.example:${port}` }, body), route, FOREIGN_HOST);
  });

  it.each(ROUTES)('refuses a foreign Origin on $route with 403 in its dialect', async ({ route, body, headers }) => {
    expectRefusal(await send(url, route, { ...headers, origin: 'https://evil.example' }, body), route, FOREIGN_ORIGIN);
  });

  it.each(ROUTES)('answers $route for every loopback Host and loopback Origin', async ({ route, body, headers }) => {
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, 'localhost']) {
      for (const origin of [undefined, `http://localhost:${port}`, 'http://127.0.0.1:5173', 'https://[::1]']) {
        const answer = await send(url, route, { ...headers, host, ...(origin ? { origin } : {}) }, body);
        expect(answer.status, `${host} ${origin}`).toBe(200);
      }
    }
  });

  it('refuses before routing and before reading the body: a path that does not exist, a body never sent', async () => {
    expectRefusal(await send(url, '/nope', { host: `rebound.example:${port}` }), '/predict', FOREIGN_HOST);
    // 1 MiB announced and none sent: the 403 comes anyway (a route would wait for the body)
    const answer = await send(url, '/predict', { host: 'rebound.example', 'content-type': 'application/json', 'content-length': String(2 ** 20) });
    expect(answer.status).toBe(403);
  });

  it('refuses /health too: a rebound page learns nothing, not even that the server is up', async () => {
    expect((await send(url, '/health', { host: 'rebound.example' })).status).toBe(403);
    expect((await send(url, '/health', { host: `localhost:${port}` })).status).toBe(200);
  });
});

describe('a server on 127.0.0.1 with an API key', () => {
  let encoder: InProcessEncoder;
  let url: string;
  beforeAll(async () => {
    encoder = await serveInProcess(await generateTinyModel({ modelType: 'embedding' }), 'keyed', 'embedding', { apiKey: new ApiKey(KEY) });
    url = encoder.httpUrl;
  });
  afterAll(() => encoder?.close());

  it.each(ROUTES)('answers $route under any Host name (no page can send the key), still refuses a foreign Origin', async ({ route, body, headers }) => {
    const keyed = { ...headers, authorization: `Bearer ${KEY}` };
    expect((await send(url, route, { ...keyed, host: 'model.example.com' }, body)).status).toBe(200);
    expectRefusal(await send(url, route, { ...keyed, origin: 'https://evil.example' }, body), route, FOREIGN_ORIGIN);
  });

  it('refuses a foreign Origin before the key is checked: 403, not 401', async () => {
    expect((await send(url, '/predict', { origin: 'https://evil.example' }, {})).status).toBe(403);
    expect((await send(url, '/predict', {}, {})).status).toBe(401);
  });
});

describe('options', () => {
  const apps: FastifyInstance[] = [];
  afterAll(() => Promise.all(apps.map((app) => app.close())));

  it('a server listening on 0.0.0.0 checks no Host (its names are unknown to it), still Origin', async () => {
    // the policy of a 0.0.0.0 server, listening on loopback for the test
    const stub = {
      modelId: 'm',
      modelType: 'embedding' as const,
      metadata: () => ({ model_id: 'm', model_type: 'embedding' as const }),
      predict: () => Promise.resolve({ results: [], model_id: 'm' }),
      embed: () => Promise.reject(new Error('unused')),
      rerank: () => Promise.reject(new Error('unused')),
      tokenize: () => Promise.reject(new Error('unused')),
      decode: () => Promise.reject(new Error('unused')),
      servingLimits: stubServingLimits,
    };
    const app = await createHttpApp(stub, { bodyLimitBytes: 1024, serverInfo: serverInfo({ target: 't' }), hostGuard: { listenHost: '0.0.0.0' } });
    apps.push(app);
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    expect((await send(url, '/predict', { host: 'my-model.default.svc.cluster.local:8080' }, { inputs: ['x'] })).status).toBe(200);
    expectRefusal(await send(url, '/predict', { origin: 'https://evil.example' }, { inputs: ['x'] }), '/predict', FOREIGN_ORIGIN);
  });

  it('--allowed-hosts and --allowed-origins add names and origins to a loopback server', async () => {
    const encoder = await serveInProcess(await generateTinyModel({ modelType: 'embedding' }), 'allowed', 'embedding', {
      http: { allowedHosts: ['model.internal'], allowedOrigins: ['https://app.example'] },
    });
    try {
      const body = { inputs: ['x'], normalize: true };
      expect((await send(encoder.httpUrl, '/predict', { host: 'model.internal:8080', origin: 'https://app.example' }, body)).status).toBe(200);
      expect((await send(encoder.httpUrl, '/predict', { host: 'other.internal' }, body)).status).toBe(403);
      expect((await send(encoder.httpUrl, '/predict', { origin: 'https://app.example:8443' }, body)).status).toBe(403);
    } finally {
      await encoder.close();
    }
  });
});
