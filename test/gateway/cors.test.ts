import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/gateway/config.ts';
import { GatewayConfigError } from '../../src/gateway/errors.ts';
import { DEFAULT_COMPLETION_TEXT, FakeOpenAIServer } from '../fakes/openai-compatible.ts';
import { browserSkipReason, launchChromium } from './helpers/browser.ts';
import { sqliteBackend, startTestGateway, type TestGateway } from './helpers/gateway.ts';

// cors_allow_origins: the pages of the origins it names may call the API from a browser. Headless Chromium enforces
// CORS for real: a page of an allowed origin reads the answer; a page of another origin, or any page without the
// setting, cannot. The headers themselves (preflight, errors, "*") are checked with fetch, the setting's validation
// with parseConfigText.

const backend = sqliteBackend();
let fake: FakeOpenAIServer;
let site: Server;
/** The page's origin: localhost, while the gateways listen on 127.0.0.1 (another origin). */
let pageOrigin: string;
const gateways: Record<'allowing' | 'elsewhere' | 'closed' | 'any', TestGateway> = {} as never;
const keys: Record<string, string> = {};

beforeAll(async () => {
  fake = await FakeOpenAIServer.start();
  site = createServer((_request, response) => response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title>'));
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  pageOrigin = `http://localhost:${(site.address() as AddressInfo).port}`;
  const origins = { allowing: [pageOrigin], elsewhere: ['https://other.example'], closed: [], any: ['*'] };
  for (const [name, corsAllowOrigins] of Object.entries(origins) as [keyof typeof gateways, string[]][]) {
    gateways[name] = await startTestGateway(await backend.newDatabaseUrl(), {
      providers: { openai: { api_key: 'sk-provider', api_base: fake.baseURL } },
      corsAllowOrigins,
      requirePricing: false, // unpriced fake models: this file is about CORS
    });
    keys[name] = (await gateways[name].call('POST', '/v1/keys', { body: { key_name: 'browser app' } })).json.key;
  }
});
afterAll(async () => {
  for (const gateway of Object.values(gateways)) await gateway.close();
  await new Promise((resolve) => site?.close(resolve));
  await fake?.close();
  await backend.close();
});

const chatBody = JSON.stringify({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] });

describe('in a browser', () => {
  const skipReason = browserSkipReason();
  let browser: Browser;
  let page: Page;
  beforeAll(async () => {
    if (skipReason) return;
    browser = await launchChromium();
    page = await browser.newPage();
    await page.goto(pageOrigin);
  });
  afterAll(async () => {
    await browser?.close();
  });

  /** What the page's own fetch gets: the answer, or the error a browser gives when CORS does not allow it. */
  const callFromPage = (gateway: TestGateway, key: string) =>
    page.evaluate(
      async ({ url, key, body }) => {
        try {
          // x-stainless-os: a header of the openai SDK's own, as it sends in a browser
          const response = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-stainless-os': 'Unknown' }, body });
          const json = (await response.json()) as { choices?: { message: { content: string } }[] };
          return { status: response.status, requestId: response.headers.get('x-request-id'), content: json.choices?.[0]?.message.content ?? null };
        } catch (error) {
          return { error: String(error) };
        }
      },
      { url: gateway.url, key, body: chatBody },
    );

  it.skipIf(skipReason)('a page of an allowed origin calls chat completions and reads the answer and its request id', async () => {
    const outcome = await callFromPage(gateways.allowing, keys.allowing!);
    expect(outcome).toMatchObject({ status: 200, content: DEFAULT_COMPLETION_TEXT });
    expect((outcome as { requestId: string }).requestId).toMatch(/\S/);
  });

  it.skipIf(skipReason)('a page of any other origin cannot read it, nor any page without cors_allow_origins', async () => {
    for (const name of ['elsewhere', 'closed'] as const) {
      expect(await callFromPage(gateways[name], keys[name]!)).toEqual({ error: 'TypeError: Failed to fetch' });
    }
  });
});

describe('the headers', () => {
  const preflight = (gateway: TestGateway, origin: string) =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,x-stainless-os' },
    });

  it('a preflight of an allowed origin: 204, the methods, the headers as asked, cached 10 minutes, no credentials', async () => {
    const response = await preflight(gateways.allowing, pageOrigin);
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe(pageOrigin);
    expect(response.headers.get('access-control-allow-methods')).toBe('GET, POST, PATCH, DELETE');
    expect(response.headers.get('access-control-allow-headers')).toBe('authorization,content-type,x-stainless-os');
    expect(response.headers.get('access-control-max-age')).toBe('600');
    expect(response.headers.get('access-control-allow-credentials')).toBeNull();
    expect(response.headers.get('vary')).toMatch(/origin/i);
  });

  it('errors carry the header too, so a page can read why (401 here); the request id and Retry-After are exposed', async () => {
    const response = await fetch(`${gateways.allowing.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { origin: pageOrigin, authorization: 'Bearer gw-not-a-key', 'content-type': 'application/json' },
      body: chatBody,
    });
    expect(response.status).toBe(401);
    expect(response.headers.get('access-control-allow-origin')).toBe(pageOrigin);
    expect(response.headers.get('access-control-expose-headers')).toBe(
      'x-request-id, retry-after, x-token-count-estimate, x-budget-warning, x-ratelimit-limit-requests, x-ratelimit-limit-tokens, x-ratelimit-remaining-requests, x-ratelimit-remaining-tokens, x-ratelimit-reset-requests, x-ratelimit-reset-tokens',
    );
  });

  it('another origin gets no Access-Control-Allow-Origin; without the setting nobody does and a preflight is 404', async () => {
    expect((await preflight(gateways.allowing, 'https://evil.example')).headers.get('access-control-allow-origin')).toBeNull();
    const health = await fetch(`${gateways.allowing.url}/health`, { headers: { origin: 'https://evil.example' } });
    expect(health.headers.get('access-control-allow-origin')).toBeNull();
    const closed = await preflight(gateways.closed, pageOrigin);
    expect(closed.status).toBe(404);
    expect(closed.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('"*" allows every origin', async () => {
    expect((await preflight(gateways.any, 'https://anyone.example')).headers.get('access-control-allow-origin')).toBe('*');
  });
});

describe('the setting', () => {
  const parse = (origins: string) => () => parseConfigText(`cors_allow_origins: ${origins}\n`, 'gateway.yaml', {});

  it('takes origins and "*"', () => {
    expect(parse('["https://app.example.com", "http://localhost:5173", "*"]')().cors_allow_origins).toEqual(['https://app.example.com', 'http://localhost:5173', '*']);
  });

  it.each([
    ['a path', '["https://app.example.com/"]'],
    ['no scheme', '["app.example.com"]'],
    ['another scheme', '["ftp://app.example.com"]'],
    ['a pattern', '["https://*.example.com"]'],
  ])('refuses %s, naming the entry', (_what, origins) => {
    expect(parse(origins)).toThrow(GatewayConfigError);
    expect(parse(origins)).toThrow(/cors_allow_origins\.0: an origin is "\*" or scheme:\/\/host\[:port\]/);
  });
});
