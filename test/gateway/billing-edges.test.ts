import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/gateway.ts';
import type { ChatCompletionChunk, Upstream } from '../../src/gateway/upstream.ts';
import { chatChunks, chatCompletionBody } from '../fakes/openai-compatible.ts';
import { MASTER_KEY, PROVIDER_CHAT_ROUTE, TEST_PRICING, eventually, testConfig, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

/**
 * Calls that end in unusual ways — the client leaving while the provider opens a stream, a provider that reports no
 * usage — still write one usage row, bill something and give their budget hold back.
 */
const backends = await useBackends();
const fake = await useFakeProvider();

const json = { 'x-hub-key': `Bearer ${MASTER_KEY}`, 'content-type': 'application/json' };
const messages = [{ role: 'user', content: 'Hi' }];

/** Sets up a user with a budget on a gateway; returns how to read the user's rows and the budget. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
async function budgetedUser(call: (method: string, path: string, body?: unknown) => Promise<{ json: any }>, userId: string) {
  await call('PUT', '/v1/pricing/openai:gpt-fake', TEST_PRICING);
  const budget = (await call('POST', '/v1/budgets', { max_budget: 100 })).json;
  await call('POST', '/v1/users', { user_id: userId, alias: userId, budget_id: budget.budget_id });
  return {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as above
    rows: async (): Promise<any[]> => (await call('GET', `/v1/users/${userId}/usage`)).json.data,
    budget: async () => (await call('GET', `/v1/budgets/${budget.budget_id}`)).json,
  };
}

describe.each(backends)('billing edges on $name', (backend) => {
  let gateway: TestGateway;
  const call = (method: string, path: string, body?: unknown) => gateway.call(method, path, body === undefined ? {} : { body });

  useTestGateway(backend, () => ({ providers: { openai: { api_key: 'sk-test', api_base: fake.baseURL } } }), (started) => {
    gateway = started;
  });

  it.skipIf(backend.skipReason)('a client that leaves while the provider opens the stream: the row says cancelled and the hold is given back', async () => {
    const user = await budgetedUser(call, 'leaves-early');
    fake.script(PROVIDER_CHAT_ROUTE, { delayMs: 1500, then: { sse: chatChunks('gpt-fake') } });
    const before = fake.requestsTo(PROVIDER_CHAT_ROUTE).length;
    const controller = new AbortController();
    const sent = fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ model: 'openai:gpt-fake', messages, stream: true, user: 'leaves-early' }),
      signal: controller.signal,
    }).catch((error: unknown) => error);
    await eventually(async () => (fake.requestsTo(PROVIDER_CHAT_ROUTE).length > before ? true : undefined), 'the provider call');
    controller.abort();
    await sent;
    const row = await eventually(async () => (await user.rows()).find((r: { status: string }) => r.status !== 'pending'), 'the usage row');
    expect(row).toMatchObject({ status: 'cancelled', status_code: 499 });
    expect((await user.budget()).reserved).toBe(0);
  });

  it.skipIf(backend.skipReason)('a client that leaves before a plain answer pays for the prompt the provider was sent, so aborting is no way around a budget', async () => {
    const user = await budgetedUser(call, 'aborts');
    fake.script(PROVIDER_CHAT_ROUTE, { delayMs: 1500, then: { json: chatCompletionBody('gpt-fake') } });
    const before = fake.requestsTo(PROVIDER_CHAT_ROUTE).length;
    const controller = new AbortController();
    const sent = fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'x'.repeat(4000) }], user: 'aborts' }),
      signal: controller.signal,
    }).catch((error: unknown) => error);
    await eventually(async () => (fake.requestsTo(PROVIDER_CHAT_ROUTE).length > before ? true : undefined), 'the provider call');
    controller.abort();
    await sent;
    const row = await eventually(async () => (await user.rows()).find((r: { status: string }) => r.status !== 'pending'), 'the usage row');
    expect(row).toMatchObject({ status: 'cancelled', status_code: 499, completion_tokens: 0 });
    expect(row.prompt_tokens).toBeGreaterThanOrEqual(1000);
    const budget = await user.budget();
    expect(budget.reserved).toBe(0);
    expect(budget.spend).toBeCloseTo(row.cost, 9);
    expect(row.cost).toBeGreaterThan(0);
  });

  it.skipIf(backend.skipReason)('a provider answer without usage is billed by estimate, as a stream without usage is, not free', async () => {
    const user = await budgetedUser(call, 'no-usage');
    const { usage: _usage, ...withoutUsage } = chatCompletionBody('gpt-fake', 'x'.repeat(400));
    fake.script(PROVIDER_CHAT_ROUTE, { json: withoutUsage });
    const response = await call('POST', '/v1/chat/completions', { model: 'openai:gpt-fake', messages, user: 'no-usage' });
    expect(response.status).toBe(200);
    const [row] = await user.rows();
    expect(row.status).toBe('success');
    expect(row.prompt_tokens).toBeGreaterThan(0);
    expect(row.completion_tokens).toBe(100);
    expect(row.cost).toBeGreaterThan(0);
    expect((await user.budget()).spend).toBeCloseTo(row.cost, 9);
  });

  it.skipIf(backend.skipReason)('token counts a provider reports that a column cannot hold (fractions, beyond 32 bits) are recorded as integers, not lost', async () => {
    const user = await budgetedUser(call, 'odd-counts');
    fake.script(PROVIDER_CHAT_ROUTE, { json: chatCompletionBody('gpt-fake', 'Hi', { usage: { prompt_tokens: 12.5, completion_tokens: 3e9, total_tokens: 3e9 + 12.5 } }) });
    const response = await call('POST', '/v1/chat/completions', { model: 'openai:gpt-fake', messages, user: 'odd-counts' });
    expect(response.status).toBe(200);
    const [row] = await user.rows();
    expect(row).toMatchObject({ status: 'success', prompt_tokens: 13, completion_tokens: 2 ** 31 - 1 });
    const budget = await user.budget();
    expect(budget.reserved).toBe(0);
    expect(budget.spend).toBeCloseTo(row.cost, 6);
  });
});

describe.each(backends)('a stream the provider opens just as the client leaves, on $name', (backend) => {
  let running: RunningGateway;
  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(running.url + path, { method, headers: json, body: body === undefined ? undefined : JSON.stringify(body) });
    return { json: await response.json() };
  };

  beforeAll(async () => {
    if (backend.skipReason) return;
    // The provider's first event arrives only after the client has gone (the signal is already aborted).
    const upstream = {
      providers: ['openai'],
      chatOutputLimitField: () => 'max_tokens',
      async chatStream(_provider: string, model: string, _body: Record<string, unknown>, signal: AbortSignal) {
        if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        return (async function* () {
          for (const chunk of chatChunks(model)) yield chunk as ChatCompletionChunk;
        })();
      },
    } as unknown as Upstream;
    running = await startGateway(testConfig(await backend.newDatabaseUrl(), { providers: { openai: {} } }), { version: 't', upstream });
  });
  afterAll(async () => {
    await running?.close();
  });

  it.skipIf(backend.skipReason)('still writes its row and gives the budget hold back', async () => {
    const user = await budgetedUser(call, 'racer');
    const controller = new AbortController();
    const sent = fetch(`${running.url}/v1/chat/completions`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ model: 'openai:gpt-fake', messages, stream: true, user: 'racer' }),
      signal: controller.signal,
    }).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 300));
    controller.abort();
    await sent;
    const row = await eventually(async () => (await user.rows()).find((r: { status: string }) => r.status !== 'pending'), 'the usage row');
    expect(row).toMatchObject({ status: 'cancelled', status_code: 499 });
    expect((await user.budget()).reserved).toBe(0);
  });
});
