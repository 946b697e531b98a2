import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FakeOpenAIServer, chatChunks, chatCompletionBody } from '../fakes/openai-compatible.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import { openStore } from '../../src/gateway/storage/index.ts';
import { MASTER_KEY, PROVIDER_CHAT_ROUTE, sqliteBackend, startTestGateway, testConfig, type TestGateway } from './helpers/gateway.ts';

const backend = sqliteBackend();
let fake: FakeOpenAIServer;
let gateway: TestGateway;

beforeAll(async () => {
  fake = await FakeOpenAIServer.start();
  gateway = await startTestGateway(await backend.newDatabaseUrl(), {
    providers: { openai: { api_key: 'sk-test', api_base: fake.baseURL } },
    rateLimits: { requests_per_minute: 3 },
    upstreamTimeoutSeconds: 0.5,
    requirePricing: false, // unpriced fake models: this file is about limits and stops
  });
});
afterAll(async () => {
  await gateway?.close();
  await fake?.close();
  await backend.close();
});

it('the configured rate limit answers 429 with Retry-After per key, and other keys are not affected', async () => {
  const [first, second] = await Promise.all(
    ['limited', 'other'].map(async (name) => (await gateway.call('POST', '/v1/keys', { body: { key_name: name } })).json.key as string),
  );
  const client = (key: string) => new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  const ask = (key: string) => client(key).chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] });
  for (let i = 0; i < 3; i++) await ask(first);
  const refused = await ask(first).catch((e) => e);
  expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
  expect(refused).toMatchObject({ status: 429, code: 'rate_limit_exceeded' });
  const retryAfter = Number(refused.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  await expect(ask(second)).resolves.toBeDefined();
  const metrics = (await gateway.call('GET', '/metrics', { key: null })).json as string;
  expect(metrics).toMatch(/gateway_rate_limited_total 1\b/);
});

it('a provider that does not answer within upstream_timeout_seconds is a 504, recorded as such', async () => {
  const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'patient' } })).json;
  const client = new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  fake.script(PROVIDER_CHAT_ROUTE, { delayMs: 5000, then: { json: chatCompletionBody('gpt-fake') } });
  const started = Date.now();
  const error = await client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] }).catch((e) => e);
  expect(error).toMatchObject({ status: 504, code: 'upstream_timeout', type: 'timeout_error' });
  expect(Date.now() - started).toBeLessThan(4000);
  const usage = (await gateway.call('GET', `/v1/keys/${key.id}/usage`)).json;
  expect(usage.data[0]).toMatchObject({ status: 'error', status_code: 504 });
});

it('closing the gateway lets a call in flight on a keep-alive connection finish, then closes without waiting for the grace period', async () => {
  const url = await backend.newDatabaseUrl();
  // a grace period longer than the test: closing must not wait for it
  const own = await startGateway(testConfig(url, { providers: { openai: { api_key: 'sk-test', api_base: fake.baseURL } }, requirePricing: false }), { version: 't', closeGraceMs: 120_000 });
  const client = new OpenAI({ apiKey: MASTER_KEY, baseURL: `${own.url}/v1`, maxRetries: 0 }); // keep-alive connections
  await fetch(`${own.url}/v1/users`, { method: 'POST', headers: { 'x-hub-key': `Bearer ${MASTER_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ user_id: 'k', alias: 'K' }) });
  fake.script(PROVIDER_CHAT_ROUTE, { delayMs: 500, then: { json: chatCompletionBody('gpt-fake') } });
  const call = client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], user: 'k' });
  await new Promise((resolve) => setTimeout(resolve, 200));
  const started = Date.now();
  await own.close();
  expect(Date.now() - started).toBeLessThan(30_000); // before: the answered connection stayed open, so close waited for the grace
  expect((await call).choices[0].message.content).toBeTruthy();
});

it('closing the gateway cuts a stream that does not end within the grace period, and still records it', async () => {
  const url = await backend.newDatabaseUrl();
  const own = await startGateway(testConfig(url, { providers: { openai: { api_key: 'sk-test', api_base: fake.baseURL } }, requirePricing: false }), { version: 't', closeGraceMs: 300 });
  await fetch(`${own.url}/v1/users`, { method: 'POST', headers: { 'x-hub-key': `Bearer ${MASTER_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ user_id: 'u', alias: 'U' }) });
  // The role chunk and "Hello", then the provider says nothing more.
  fake.script(PROVIDER_CHAT_ROUTE, { sse: chatChunks('gpt-fake').slice(0, 2), hold: true });
  const response = await fetch(`${own.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'x-hub-key': `Bearer ${MASTER_KEY}`, 'content-type': 'application/json', 'x-request-id': 'stuck-stream' },
    body: JSON.stringify({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], stream: true, user: 'u' }),
  });
  const reader = response.body!.getReader();
  await reader.read();
  const started = Date.now();
  await own.close();
  expect(Date.now() - started).toBeLessThan(10_000);
  // The connection was cut: the body ends with an error (or, at best, ends).
  const rest = await reader.read().catch((error: unknown) => error);
  expect(rest instanceof Error || (rest as { done: boolean }).done).toBe(true);
  const store = openStore(url);
  try {
    const rows = await store.driver.all('SELECT status FROM usage WHERE request_id = ?', ['stuck-stream']);
    expect(rows.map((row) => row.status)).toEqual(['cancelled']);
  } finally {
    await store.close();
  }
});

it('a tokens-per-minute limit refuses a key once its finished calls used the minute\'s tokens (SQLite: counted in the process)', async () => {
  const tokens = await startTestGateway(await backend.newDatabaseUrl(), {
    providers: { openai: { api_key: 'sk-test', api_base: fake.baseURL } },
    rateLimits: { tokens_per_minute: 30 },
    requirePricing: false,
  });
  try {
    const key = (await tokens.call('POST', '/v1/keys', { body: { key_name: 'tokens' } })).json.key as string;
    const ask = () => tokens.call('POST', '/v1/chat/completions', { key, body: { model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] } });
    // 18 tokens per answer of the fake: two calls start under 30, the third does not
    expect((await ask()).status).toBe(200);
    expect((await ask()).status).toBe(200);
    const refused = await ask();
    expect(refused.status).toBe(429);
    expect(refused.json.error).toMatchObject({ code: 'rate_limit_exceeded', message: expect.stringContaining('30 tokens per minute') });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  } finally {
    await tokens.close();
  }
});
