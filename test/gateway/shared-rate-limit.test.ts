import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from '../fakes/openai-compatible.ts';
import { postgresBackend, startTestGateway, type TestGateway } from './helpers/gateway.ts';

// Two gateway instances on one PostgreSQL database share the requests-per-minute limit: 40 concurrent calls of one
// key, split over both, give exactly the limit's worth of answers and 429 for the rest.

const backend = await postgresBackend();
let fake: FakeOpenAIServer;
let first: TestGateway;
let second: TestGateway;
const LIMIT = 10;

beforeAll(async () => {
  if (backend.skipReason) return;
  fake = await FakeOpenAIServer.start();
  const url = await backend.newDatabaseUrl();
  // Unpriced fake models: this file is about rate limits (require_pricing: fail-closed.test.ts).
  const config = { providers: { openai: { api_key: 'sk-test', api_base: fake.baseURL } }, rateLimits: { requests_per_minute: LIMIT }, requirePricing: false };
  first = await startTestGateway(url, config);
  second = await startTestGateway(url, config);
});
afterAll(async () => {
  await second?.close();
  await first?.close();
  await fake?.close();
  await backend.close();
});

describe.skipIf(backend.skipReason)('a rate limit shared across instances (PostgreSQL)', () => {
  it('40 concurrent calls over two instances: exactly 10 answered, 30 refused with 429 and Retry-After', async () => {
    const key = (await first.call('POST', '/v1/keys', { body: { key_name: 'shared' } })).json.key as string;
    // the windows are aligned to the minute: start well inside one so that all 40 calls land in it
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 40_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 100));
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (i % 2 === 0 ? first : second).call('POST', '/v1/chat/completions', { key, body: { model: 'openai:gpt-fake', messages: [{ role: 'user', content: `call ${i}` }] } }),
      ),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(LIMIT);
    expect(statuses.filter((status) => status === 429)).toHaveLength(40 - LIMIT);
    const refused = answers.find((answer) => answer.status === 429)!;
    expect(refused.json.error.code).toBe('rate_limit_exceeded');
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // both instances answered some of the ten: the count is shared, not per instance
    const answeredBy = answers.map((answer, i) => (answer.status === 200 ? i % 2 : -1)).filter((side) => side >= 0);
    expect(new Set(answeredBy).size).toBe(2);
    // another key has its own count
    const other = (await second.call('POST', '/v1/keys', { body: { key_name: 'other' } })).json.key as string;
    expect((await first.call('POST', '/v1/chat/completions', { key: other, body: { model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'hi' }] } })).status).toBe(200);
  });

  it('keeps windows in one row per key and minute, and forgets old ones', async () => {
    const store = first.store;
    expect(await store.rateWindows.count('k', 0, { requests: 2, tokens: 100 })).toEqual({ counted: true, requests: 1, tokens: 0 });
    expect(await store.rateWindows.count('k', 0, { requests: 2, tokens: 100 })).toEqual({ counted: true, requests: 2, tokens: 0 });
    expect(await store.rateWindows.count('k', 0, { requests: 2, tokens: 100 })).toEqual({ counted: false, requests: 2, tokens: 0 });
    expect((await store.rateWindows.count('k', 60_000, { requests: 2, tokens: 100 })).counted).toBe(true);
    expect((await store.driver.all("SELECT requests FROM rate_limit_windows WHERE subject = 'k' ORDER BY window_start")).map((row) => Number(row.requests))).toEqual([2, 1]);
    await store.rateWindows.forget(60_000);
    expect((await store.driver.all("SELECT window_start FROM rate_limit_windows WHERE subject = 'k'")).map((row) => Number(row.window_start))).toEqual([60_000]);
  });

  it('refuses a key whose minute has used its tokens, on every instance', async () => {
    const url = await backend.newDatabaseUrl();
    const config = { providers: { openai: { api_key: 'sk-test', api_base: fake.baseURL } }, rateLimits: { tokens_per_minute: 30 }, requirePricing: false };
    const [a, b] = [await startTestGateway(url, config), await startTestGateway(url, config)];
    try {
      const created = (await a.call('POST', '/v1/keys', { body: { key_name: 'tokens' } })).json;
      const intoMinute = Date.now() % 60_000;
      if (intoMinute > 45_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 100));
      const ask = (on: TestGateway) => on.call('POST', '/v1/chat/completions', { key: created.key, body: { model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'hi' }] } });
      const tokensSoFar = async () => Number((await a.store.driver.all('SELECT tokens FROM rate_limit_windows WHERE subject = ?', [created.id]))[0]?.tokens ?? 0);
      // each answer of the fake uses 18 tokens (12 prompt, 6 completion): two calls start under 30, the third does not
      expect((await ask(a)).status).toBe(200);
      await eventually(async () => expect(await tokensSoFar()).toBe(18));
      expect((await ask(b)).status).toBe(200);
      await eventually(async () => expect(await tokensSoFar()).toBe(36));
      const refused = await ask(a);
      expect(refused.status).toBe(429);
      expect(refused.json.error.message).toMatch(/^Rate limit exceeded: 30 tokens per minute; retry in \d+ s$/);
      expect((await ask(b)).status).toBe(429);
    } finally {
      await b.close();
      await a.close();
    }
  });
});

async function eventually(check: () => Promise<void>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}
