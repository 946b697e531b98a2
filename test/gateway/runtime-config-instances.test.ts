import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAT_USAGE, FakeOpenAIServer } from '../fakes/openai-compatible.ts';
import { eventually, PROVIDER_CHAT_ROUTE, TEST_PRICING } from './helpers/gateway.ts';
import { manage, spawnGateway, type GatewayChild } from './helpers/gateway-process.ts';
import { startPostgres, type TestPostgres } from './helpers/postgres.ts';

// Two `gateway serve` processes on one PostgreSQL database: a route, a price or a provider changed through the API of
// one is what the other's next calls use, within a second.

const started = await startPostgres();
if (!started.server) console.warn(`skipping the runtime configuration instance tests: ${started.reason}`);
const postgres: TestPostgres | null = started.server;

let fake: FakeOpenAIServer;
let dir: string;
let first: GatewayChild;
let second: GatewayChild;
let key: string;
let keyId: string;

/** Bound of the issue: an edit on one instance is used by the other within a second. */
const WITHIN_MS = 1000;

beforeAll(async () => {
  if (!postgres) return;
  fake = await FakeOpenAIServer.start();
  dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-runtime-config-'));
  const databaseUrl = await postgres.createDatabase();
  const options = { databaseUrl, dir, providerUrl: fake.baseURL, config: ['models:', '  smart: [openai:gpt-fake]'] };
  first = await spawnGateway(options);
  second = await spawnGateway(options);
  const created = await manage(first.url, 'POST', '/v1/keys', { key_name: 'instances' });
  key = created.key;
  keyId = created.id;
}, 120_000);
afterAll(async () => {
  await first?.kill();
  await second?.kill();
  await fake?.close();
  await postgres?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A chat call on `gateway`; the model the fake provider was asked for. */
async function callModel(gateway: GatewayChild, model: string, requestId: string): Promise<string> {
  const before = fake.requestsTo(PROVIDER_CHAT_ROUTE).length;
  const response = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  });
  const text = await response.text();
  expect(response.status, text).toBe(200);
  const seen = fake.requestsTo(PROVIDER_CHAT_ROUTE).slice(before);
  return (seen.at(-1)!.body as { model: string }).model;
}

/** Calls `gateway` until `done` says the change is in use; the milliseconds from `since` to the first call that used it. */
async function untilUsed(since: number, call: (i: number) => Promise<boolean>): Promise<number> {
  for (let i = 0; Date.now() - since < 5 * WITHIN_MS; i++) {
    const at = Date.now();
    if (await call(i)) return at - since;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('the other instance never used the change');
}

describe.skipIf(!postgres)('runtime configuration shared by two gateway processes (PostgreSQL)', () => {
  it('a route edited on one instance is used by the next calls of the other within a second', async () => {
    expect(await callModel(second, 'smart', 'before-edit')).toBe('gpt-fake');
    await manage(first.url, 'PUT', '/v1/pricing/openai:gpt-other', { input_cost_per_million: 1, output_cost_per_million: 1 });
    await manage(first.url, 'PUT', '/v1/routes/smart', { targets: ['openai:gpt-other'] });
    const edited = Date.now();
    const lag = await untilUsed(edited, async (i) => (await callModel(second, 'smart', `after-edit-${i}`)) === 'gpt-other');
    expect(lag).toBeLessThan(WITHIN_MS);
    // and it stays in use: every later call goes to the new target
    for (let i = 0; i < 5; i++) expect(await callModel(second, 'smart', `settled-${i}`)).toBe('gpt-other');
    // the other instance's audit shows the change made on the first
    const audit = await manage(second.url, 'GET', '/v1/audit?kind=route&name=smart');
    expect(audit.data[0]).toMatchObject({ actor: 'master_key', action: 'update', after: { targets: [{ model: 'openai:gpt-other' }] } });
  });

  it('a price edited on one instance sets the cost of the other\'s next calls within a second', async () => {
    const dearer = { input_cost_per_million: 4000, output_cost_per_million: 8000 };
    const cost = (prices: typeof dearer) => (CHAT_USAGE.prompt_tokens * prices.input_cost_per_million + CHAT_USAGE.completion_tokens * prices.output_cost_per_million) / 1e6;
    await callModel(first, 'openai:gpt-fake', 'price-before');
    await manage(second.url, 'PUT', '/v1/pricing/openai:gpt-fake', dearer);
    const edited = Date.now();
    const calls: string[] = [];
    const lag = await untilUsed(edited, async (i) => {
      const requestId = `price-after-${i}`;
      calls.push(requestId);
      await callModel(first, 'openai:gpt-fake', requestId);
      const row = await eventually(async () => {
        const rows = (await manage(first.url, 'GET', `/v1/keys/${keyId}/usage?limit=1000`)).data as { request_id: string; cost: number; status: string }[];
        return rows.find((item) => item.request_id === requestId && item.status === 'success');
      }, `the usage row of ${requestId}`);
      return Math.abs(row.cost - cost(dearer)) < 1e-12;
    });
    expect(lag).toBeLessThan(WITHIN_MS);
    const rows = (await manage(first.url, 'GET', `/v1/keys/${keyId}/usage?limit=1000`)).data as { request_id: string; cost: number }[];
    expect(rows.find((row) => row.request_id === 'price-before')!.cost).toBeCloseTo(cost(TEST_PRICING), 12);
  });

  it('a provider added on one instance can be called on the other within a second; its key never comes back', async () => {
    const secret = 'gsk_instances_secret_0005';
    await manage(first.url, 'PUT', '/v1/pricing/groq:llama-fake', { input_cost_per_million: 1 });
    const put = await manage(first.url, 'PUT', '/v1/providers/groq', { api_key: secret, api_base: fake.baseURL });
    expect(JSON.stringify(put)).not.toContain(secret);
    const added = Date.now();
    const lag = await untilUsed(added, async (i) => {
      const response = await fetch(`${second.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'groq:llama-fake', messages: [{ role: 'user', content: `groq ${i}` }] }),
      });
      await response.text();
      return response.status === 200;
    });
    expect(lag).toBeLessThan(WITHIN_MS);
    expect(fake.requestsTo(PROVIDER_CHAT_ROUTE).at(-1)!.headers.authorization).toBe(`Bearer ${secret}`);
    expect(JSON.stringify(await manage(second.url, 'GET', '/v1/providers'))).not.toContain(secret);
    expect(JSON.stringify(await manage(second.url, 'GET', '/v1/audit?limit=1000'))).not.toContain(secret);
  });
});
