import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startFakeOpenAi, type FakeOpenAi } from './helpers/fake-openai.ts';
import { sqliteBackend, startTestGateway, type TestGateway } from './helpers/gateway.ts';

const backend = sqliteBackend();
let fake: FakeOpenAi;
let gateway: TestGateway;

beforeAll(async () => {
  fake = await startFakeOpenAi();
  gateway = await startTestGateway(await backend.newDatabaseUrl(), {
    providers: { openai: { api_key: 'sk-test', api_base: fake.url } },
    rateLimits: { requests_per_minute: 3 },
    upstreamTimeoutSeconds: 0.5,
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
  const started = Date.now();
  const error = await client.chat.completions.create({ model: 'openai:slow-5000', messages: [{ role: 'user', content: 'Hi' }] }).catch((e) => e);
  expect(error).toMatchObject({ status: 504, code: 'upstream_timeout', type: 'timeout_error' });
  expect(Date.now() - started).toBeLessThan(4000);
  const usage = (await gateway.call('GET', `/v1/keys/${key.id}/usage`)).json;
  expect(usage.data[0]).toMatchObject({ status: 'error', status_code: 504 });
});
