import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { chatCompletionBody, type RecordedRequest } from '../fakes/openai-compatible.ts';
import { PROVIDER_CHAT_ROUTE, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

/**
 * Issue 31: a budget of $0.10, 50 concurrent calls through the real `openai` client, a provider that would bill 2,000
 * output tokens at $10 per million ($0.02 a call). The hold must cover what a call may cost: the gateway sends the
 * output tokens it reserved as the provider's limit. A provider that ignores the limit is charged in full, its rows
 * flagged, and the key refused until it is back under budget.
 */
const backends = await useBackends();
const fake = await useFakeProvider();

const BUDGET = 0.1;
const OUTPUT_PRICE = 10; // dollars per million output tokens
const WOULD_BILL = 2000; // output tokens the provider produces when nothing stops it
const CALLS = 50;
const RESERVE = 1024; // reserve_output_tokens

/** The output limit a chat request carried (either OpenAI field), or null. */
function limitOf(request: RecordedRequest): number | null {
  const body = request.body as { max_tokens?: number; max_completion_tokens?: number };
  return body.max_completion_tokens ?? body.max_tokens ?? null;
}

/** Answers after 30 ms (so the 50 calls are in flight together), billing up to 2,000 output tokens. */
function provider(honoursLimit: boolean) {
  fake.handle(PROVIDER_CHAT_ROUTE, (request) => {
    const limit = limitOf(request);
    const completion = honoursLimit && limit !== null ? Math.min(limit, WOULD_BILL) : WOULD_BILL;
    return { delayMs: 30, then: { json: chatCompletionBody('bill-2000', 'x', { usage: { prompt_tokens: 5, completion_tokens: completion, total_tokens: 5 + completion } }) } };
  });
}

describe.each(backends)('budget holds on $name', (backend) => {
  let gateway: TestGateway;

  useTestGateway(
    backend,
    () => ({
      providers: { openai: { api_key: 'sk-test', api_base: fake.baseURL }, groq: { api_key: 'gsk-test', api_base: fake.baseURL } },
      pricing: {
        'openai:bill-2000': { input_cost_per_million: 0, output_cost_per_million: OUTPUT_PRICE },
        'groq:bill-2000': { input_cost_per_million: 0, output_cost_per_million: OUTPUT_PRICE },
      },
      reserveOutputTokens: RESERVE,
    }),
    (started) => {
      gateway = started;
    },
  );

  async function budgetedClient(name: string) {
    const budget = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: BUDGET } })).json;
    const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: name, budget_id: budget.budget_id } })).json;
    return { budget, key, client: new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 }) };
  }

  async function fire(client: OpenAI, extra: { max_tokens?: number }) {
    const sentBefore = fake.requestsTo(PROVIDER_CHAT_ROUTE).length;
    const results = await Promise.allSettled(
      Array.from({ length: CALLS }, () => client.chat.completions.create({ model: 'openai:bill-2000', messages: [{ role: 'user', content: 'Hi' }], ...extra })),
    );
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason);
    expect(refused.every((e) => e.status === 403 && e.code === 'budget_exceeded'), JSON.stringify(refused.find((e) => e.code !== 'budget_exceeded')?.message)).toBe(true);
    return { ok: CALLS - refused.length, sent: fake.requestsTo(PROVIDER_CHAT_ROUTE).slice(sentBefore) };
  }

  it.skipIf(backend.skipReason)('without max_tokens the reserved output is sent as the limit and the spend stays within the budget', async () => {
    provider(true);
    const { budget, key, client } = await budgetedClient('no-limit');
    const { ok, sent } = await fire(client, {});
    expect(ok).toBeGreaterThanOrEqual(1);
    expect(sent).toHaveLength(ok);
    // openai takes max_completion_tokens (Hub's dialect for it); the limit is what the hold was sized for
    expect(sent.every((request) => (request.body as Record<string, unknown>).max_completion_tokens === RESERVE)).toBe(true);
    const after = (await gateway.call('GET', `/v1/budgets/${budget.budget_id}`)).json;
    expect(after.reserved).toBe(0);
    expect(after.spend).toBeCloseTo((ok * RESERVE * OUTPUT_PRICE) / 1e6, 9);
    expect(after.spend).toBeLessThanOrEqual(BUDGET);
    // the refused calls have their rows too (status refused)
    const rows = ((await gateway.call('GET', `/v1/keys/${key.id}/usage?limit=100`)).json.data as { overshoot: number; status: string }[]).filter((row) => row.status !== 'refused');
    expect(rows).toHaveLength(ok);
    expect(rows.every((row) => row.overshoot === 0)).toBe(true);
  });

  it.skipIf(backend.skipReason)('a provider that ignores max_tokens is charged in full, its rows flagged, and the key refused while over budget', async () => {
    provider(false);
    const { budget, key, client } = await budgetedClient('ignored-limit');
    const { ok, sent } = await fire(client, { max_tokens: 10 });
    expect(ok).toBeGreaterThanOrEqual(1);
    // the client's own limit is what the provider was sent, and what the hold was sized for
    expect(sent.every((request) => limitOf(request) === 10)).toBe(true);
    const rows = ((await gateway.call('GET', `/v1/keys/${key.id}/usage?limit=100`)).json.data as { cost: number; overshoot: number; status: string }[]).filter((row) => row.status !== 'refused');
    expect(rows).toHaveLength(ok);
    const fullCost = (WOULD_BILL * OUTPUT_PRICE) / 1e6;
    const hold = (10 * OUTPUT_PRICE) / 1e6; // the prompt is free at this price
    for (const row of rows) {
      expect(row.cost).toBeCloseTo(fullCost, 9);
      expect(row.overshoot).toBeCloseTo(fullCost - hold, 9);
    }
    const after = (await gateway.call('GET', `/v1/budgets/${budget.budget_id}`)).json;
    expect(after.reserved).toBe(0);
    expect(after.spend).toBeCloseTo(ok * fullCost, 9);
    // The documented bound: the budget, plus each admitted call's overshoot (at most one per call in flight).
    const overshoot = rows.reduce((sum, row) => sum + row.overshoot, 0);
    expect(after.spend - overshoot).toBeLessThanOrEqual(BUDGET + 1e-12);
    expect(after.spend).toBeGreaterThan(BUDGET);
    // Over budget: the next call is refused before the provider sees it, until the budget is raised.
    const sentBefore = fake.requestsTo(PROVIDER_CHAT_ROUTE).length;
    const next = await client.chat.completions.create({ model: 'openai:bill-2000', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1 }).catch((e) => e);
    expect(next).toMatchObject({ status: 403, code: 'budget_exceeded' });
    expect(fake.requestsTo(PROVIDER_CHAT_ROUTE).length).toBe(sentBefore);
    await gateway.call('PATCH', `/v1/budgets/${budget.budget_id}`, { body: { max_budget: after.spend + 0.01 } });
    await expect(client.chat.completions.create({ model: 'openai:bill-2000', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10 })).resolves.toBeDefined();
    const metrics = (await gateway.call('GET', '/metrics', { key: null })).json as string;
    expect(metrics).toMatch(/gateway_budget_overshoots_total\{provider="openai",model="bill-2000"\} [1-9]/);
  });

  it.skipIf(backend.skipReason)('the limit goes under the field each API and provider reads; a call without a budget is forwarded as sent', async () => {
    fake.reset();
    const { client } = await budgetedClient('fields');
    const body = (route: string) => fake.requestsTo(route).at(-1)!.body as Record<string, unknown>;
    // a stream; a provider that reads max_tokens (Hub's dialect for groq); null limits count as none
    const stream = await client.chat.completions.create({ model: 'openai:bill-2000', messages: [{ role: 'user', content: 'Hi' }], stream: true });
    for await (const _chunk of stream);
    expect(body(PROVIDER_CHAT_ROUTE)).toMatchObject({ max_completion_tokens: RESERVE });
    await client.chat.completions.create({ model: 'groq:bill-2000', messages: [{ role: 'user', content: 'Hi' }], max_tokens: null });
    expect(body(PROVIDER_CHAT_ROUTE)).toMatchObject({ max_tokens: RESERVE });
    expect(body(PROVIDER_CHAT_ROUTE)).not.toHaveProperty('max_completion_tokens');
    await client.responses.create({ model: 'openai:bill-2000', input: 'Hi' });
    expect(body('POST /v1/responses')).toMatchObject({ max_output_tokens: RESERVE });
    await client.responses.create({ model: 'openai:bill-2000', input: 'Hi', max_output_tokens: 20 });
    expect(body('POST /v1/responses')).toMatchObject({ max_output_tokens: 20 });
    // no budget, no hold to protect: the client's request is not changed
    const free = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'no-budget' } })).json;
    await new OpenAI({ apiKey: free.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 }).chat.completions.create({ model: 'openai:bill-2000', messages: [{ role: 'user', content: 'Hi' }] });
    expect(body(PROVIDER_CHAT_ROUTE)).not.toHaveProperty('max_completion_tokens');
    expect(body(PROVIDER_CHAT_ROUTE)).not.toHaveProperty('max_tokens');
  });
});
