// The gateway's fetch for the provider SDKs (src/gateway/node-fetch.ts) answers whole bodies with a BufferedResponse
// (src/gateway/buffered-response.ts): what the SDKs read of it must be what a web Response from the global fetch gives.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeFetch } from '../../src/gateway/node-fetch.ts';
import { ForwardProxy } from '../fakes/forward-proxy.ts';
import { selfSignedCertificate } from '../helpers/certificates.ts';

const BOM = '\uFEFF';
let server: Server;
let base: string;
const nodeFetch = createNodeFetch();

beforeAll(async () => {
  server = createServer((request, response) => {
    const path = request.url ?? '/';
    if (path === '/json') {
      response.setHeader('content-type', 'application/json; charset=utf-8');
      response.setHeader('x-request-id', 'req_1');
      response.setHeader('set-cookie', ['a=1', 'b=2']);
      response.setHeader('X-Upper', 'Value');
      response.end(JSON.stringify({ text: 'héllo ☃', n: 1 }));
    } else if (path === '/bom') {
      response.setHeader('content-type', 'application/json');
      response.end(`${BOM}{"ok":true}`);
    } else if (path === '/error') {
      response.writeHead(429, 'Too Many', { 'retry-after': '7', 'content-type': 'application/json' });
      response.end('{"error":{"message":"slow down"}}');
    } else if (path === '/invalid-utf8') {
      response.end(Buffer.from([0x61, 0xff, 0x62]));
    } else if (path === '/chunked') {
      response.write('{"parts":[');
      setTimeout(() => response.end('1,2]}'), 5);
    } else if (path === '/echo') {
      response.setHeader('content-type', 'application/json');
      request.resume().on('end', () => response.end(JSON.stringify({ method: request.method, url: request.url, rawHeaders: request.rawHeaders })));
    } else if (path === '/empty') {
      response.writeHead(204).end();
    } else {
      response.writeHead(404).end('no');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** Everything a caller can read of a response without its body, in a comparable form. */
const shape = (response: Response) => ({
  status: response.status,
  ok: response.ok,
  statusText: response.statusText,
  redirected: response.redirected,
  entries: [...response.headers.entries()].filter(([name]) => !['date', 'connection', 'keep-alive'].includes(name)),
  keys: [...response.headers.keys()].filter((name) => !['date', 'connection', 'keep-alive'].includes(name)),
  setCookie: response.headers.getSetCookie(),
  contentType: response.headers.get('Content-Type'),
  upper: response.headers.get('x-upper'),
  hasUpper: response.headers.has('X-UPPER'),
  missing: response.headers.get('x-missing'),
});

describe('answers read whole are what a web Response gives', () => {
  it.each(['/json', '/error', '/chunked', '/missing'])('%s: status, headers in order, set-cookie, text', async (path) => {
    const [mine, web] = [await nodeFetch(`${base}${path}`), await fetch(`${base}${path}`)];
    expect(shape(mine)).toEqual(shape(web));
    expect(await mine.text()).toBe(await web.text());
  });

  it('json() parses, a byte order mark is dropped, invalid UTF-8 becomes U+FFFD, as Response does', async () => {
    expect(await (await nodeFetch(`${base}/json`)).json()).toEqual({ text: 'héllo ☃', n: 1 });
    expect(await (await nodeFetch(`${base}/bom`)).json()).toEqual(await (await fetch(`${base}/bom`)).json());
    expect(await (await nodeFetch(`${base}/bom`)).text()).toBe('{"ok":true}');
    expect(await (await nodeFetch(`${base}/invalid-utf8`)).text()).toBe(await (await fetch(`${base}/invalid-utf8`)).text());
  });

  it('a body is read once; bodyUsed says so; clone() before reading gives a second copy', async () => {
    const response = await nodeFetch(`${base}/json`);
    const copy = response.clone();
    expect(response.bodyUsed).toBe(false);
    await response.text();
    expect(response.bodyUsed).toBe(true);
    await expect(response.text()).rejects.toBeInstanceOf(TypeError);
    await expect(response.json()).rejects.toBeInstanceOf(TypeError);
    expect(() => response.clone()).toThrow(TypeError);
    expect(await copy.json()).toEqual({ text: 'héllo ☃', n: 1 });
  });

  it('what it does not offer itself comes from a web Response: body stream, arrayBuffer, blob', async () => {
    const streamed = await nodeFetch(`${base}/json`);
    const reader = streamed.body!.getReader();
    const chunks: Uint8Array[] = [];
    for (let read = await reader.read(); !read.done; read = await reader.read()) chunks.push(read.value);
    expect(JSON.parse(Buffer.concat(chunks).toString('utf8'))).toEqual({ text: 'héllo ☃', n: 1 });
    expect(streamed.bodyUsed).toBe(true);
    await expect(streamed.text()).rejects.toBeInstanceOf(TypeError);

    expect(Buffer.from(await (await nodeFetch(`${base}/bom`)).arrayBuffer()).subarray(0, 3)).toEqual(Buffer.from([0xef, 0xbb, 0xbf]));
    const blob = await (await nodeFetch(`${base}/json`)).blob();
    expect(blob.type).toBe((await (await fetch(`${base}/json`)).blob()).type);
    expect(JSON.parse(await blob.text())).toEqual({ text: 'héllo ☃', n: 1 });
  });

  it('the headers copy into a Headers, and forEach visits each pair in order', async () => {
    const response = await nodeFetch(`${base}/error`);
    const copied = new Headers(response.headers);
    expect(copied.get('retry-after')).toBe('7');
    const seen: string[] = [];
    response.headers.forEach((value, name) => seen.push(`${name}=${value}`));
    expect(seen).toEqual([...response.headers].map(([name, value]) => `${name}=${value}`));
    expect(seen).toContain('retry-after=7');
  });

  it('204 is a web Response with no body', async () => {
    const response = await nodeFetch(`${base}/empty`);
    expect(response).toBeInstanceOf(Response);
    expect(response.status).toBe(204);
    expect(response.body).toBeNull();
  });
});

describe('what it sends', () => {
  const sent = async (response: Response) => (await response.json()) as { method: string; url: string; rawHeaders: string[] };
  const pairs = (raw: string[]) => Array.from({ length: raw.length / 2 }, (_, i) => [raw[2 * i]!, raw[2 * i + 1]!]);

  it('Host as the global fetch sends it (once), each header once in lower case, the body’s length, a kept-alive connection', async () => {
    const body = JSON.stringify({ text: 'héllo' });
    const init = { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Mixed': 'v', 'content-type': 'application/json' }, body };
    const ours = await sent(await nodeFetch(`${base}/echo`, init));
    const theirs = await sent(await fetch(`${base}/echo`, init));
    expect([ours.method, ours.url]).toEqual(['POST', '/echo']);
    const headers = pairs(ours.rawHeaders);
    expect(headers.filter(([name]) => name.toLowerCase() === 'host').map(([, value]) => value)).toEqual([new URL(base).host]);
    expect(pairs(theirs.rawHeaders).find(([name]) => name.toLowerCase() === 'host')![1]).toBe(new URL(base).host);
    expect(headers).toEqual(
      expect.arrayContaining([
        ['content-type', 'application/json'],
        ['x-mixed', 'v'],
        ['content-length', String(Buffer.byteLength(body))],
        ['Connection', 'keep-alive'],
      ]),
    );
    expect(headers.filter(([name]) => name === 'content-type')).toHaveLength(1);
    // a Headers and a list of pairs arrive the same way
    for (const given of [new Headers({ 'X-Mixed': 'v' }), [['X-Mixed', 'v']] as [string, string][]]) {
      expect(pairs((await sent(await nodeFetch(`${base}/echo`, { headers: given }))).rawHeaders)).toContainEqual(['x-mixed', 'v']);
    }
  });

  it('a Host given by the caller is the one sent', async () => {
    const ours = await sent(await nodeFetch(`${base}/echo`, { headers: { Host: 'provider.example' } }));
    expect(pairs(ours.rawHeaders).filter(([name]) => name.toLowerCase() === 'host').map(([, value]) => value)).toEqual(['provider.example']);
  });

  it('an address with credentials is refused as the global fetch refuses it', async () => {
    const address = base.replace('http://', 'http://user:secret@');
    const theirs = await fetch(`${address}/echo`).catch((error: unknown) => error);
    const ours = await nodeFetch(`${address}/echo`).catch((error: unknown) => error);
    expect(theirs).toBeInstanceOf(TypeError);
    expect(ours).toBeInstanceOf(TypeError);
    expect((ours as Error).message).toBe((theirs as Error).message);
  });
});

describe('over https (real providers are)', () => {
  // Two throwaway certificates: only the first is trusted, and only by this test file's process.
  const dir = mkdtempSync(path.join(tmpdir(), 'node-fetch-tls-'));
  const servers: https.Server[] = [];
  let connections = 0;
  const listen = async (credentials: { key: Buffer; cert: Buffer }) => {
    const server = https.createServer(credentials, (request, response) => {
      response.setHeader('content-type', 'application/json');
      request.resume().on('end', () => response.end(JSON.stringify({ method: request.method, url: request.url, host: request.headers.host, length: request.headers['content-length'] })));
    });
    server.on('secureConnection', () => connections++);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };
  let trusted: string;
  let untrusted: string;

  beforeAll(async () => {
    const ours = selfSignedCertificate(dir, 'trusted');
    tls.setDefaultCACertificates([...tls.getCACertificates('default'), ours.cert.toString()]);
    trusted = await listen(ours);
    untrusted = await listen(selfSignedCertificate(dir, 'untrusted'));
  });
  afterAll(async () => {
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('posts and reads the answer, with Host and length, over one kept-alive connection', async () => {
    const body = JSON.stringify({ n: 1 });
    const before = connections;
    for (let i = 0; i < 3; i++) {
      const response = await nodeFetch(`${trusted}/v1/chat/completions?x=1`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ method: 'POST', url: '/v1/chat/completions?x=1', host: new URL(trusted).host, length: String(body.length) });
    }
    expect(connections - before).toBe(1);
  });

  it('through HTTPS_PROXY: a CONNECT tunnel, the certificate still checked end to end', async () => {
    const proxy = await ForwardProxy.start();
    try {
      const proxied = createNodeFetch({ proxyEnv: { HTTPS_PROXY: proxy.url } });
      const response = await proxied(`${trusted}/v1/models`);
      expect(await response.json()).toMatchObject({ method: 'GET', url: '/v1/models', host: new URL(trusted).host });
      expect(proxy.requests).toEqual([`CONNECT ${new URL(trusted).host}`]);
      const failure = (await proxied(`${untrusted}/v1/models`).catch((error: unknown) => error)) as NodeJS.ErrnoException;
      expect(failure.code).toBe('DEPTH_ZERO_SELF_SIGNED_CERT');
    } finally {
      await proxy.close();
    }
  });

  it('a certificate nobody vouches for fails the call with TLS’s reason, as the global fetch does', async () => {
    const ours = (await nodeFetch(`${untrusted}/v1/models`).catch((error: unknown) => error)) as NodeJS.ErrnoException;
    const theirs = (await fetch(`${untrusted}/v1/models`).catch((error: unknown) => error)) as Error & { cause?: NodeJS.ErrnoException };
    expect(ours).toBeInstanceOf(Error);
    expect(ours.code).toBe('DEPTH_ZERO_SELF_SIGNED_CERT');
    expect(theirs.cause?.code).toBe(ours.code);
  });
});

describe('through a proxy (a company network)', () => {
  let proxy: ForwardProxy;
  beforeAll(async () => {
    proxy = await ForwardProxy.start();
  });
  afterAll(() => proxy.close());

  it('HTTP_PROXY: the request goes to the proxy in absolute form, the answer comes back unchanged', async () => {
    proxy.requests.length = 0;
    const proxied = createNodeFetch({ proxyEnv: { HTTP_PROXY: proxy.url } });
    const response = await proxied(`${base}/json`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ text: 'héllo ☃', n: 1 });
    expect(proxy.requests).toEqual([`GET ${base}/json`]);
  });

  it('NO_PROXY names the hosts that are called directly', async () => {
    proxy.requests.length = 0;
    const proxied = createNodeFetch({ proxyEnv: { HTTP_PROXY: proxy.url, NO_PROXY: '127.0.0.1' } });
    expect((await proxied(`${base}/json`)).status).toBe(200);
    expect(proxy.requests).toEqual([]);
  });

  it('by default only when Node’s own switch is on (NODE_USE_ENV_PROXY=1), as for its global fetch', async () => {
    const saved = { HTTP_PROXY: process.env.HTTP_PROXY, NODE_USE_ENV_PROXY: process.env.NODE_USE_ENV_PROXY };
    try {
      process.env.HTTP_PROXY = proxy.url;
      proxy.requests.length = 0;
      delete process.env.NODE_USE_ENV_PROXY;
      expect((await createNodeFetch()(`${base}/json`)).status).toBe(200);
      expect(proxy.requests).toEqual([]);
      process.env.NODE_USE_ENV_PROXY = '1';
      expect((await createNodeFetch()(`${base}/json`)).status).toBe(200);
      expect(proxy.requests).toEqual([`GET ${base}/json`]);
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});
