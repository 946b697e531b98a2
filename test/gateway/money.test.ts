import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sourceSqliteReader } from '../../src/cli/installed-files.ts';
import { callNanos, dollars, nanosOf } from '../../src/gateway/money.ts';
import { chatCompletionBody } from '../fakes/openai-compatible.ts';
import { eventually, PROVIDER_CHAT_ROUTE, startTestGateway, usageRecord, useBackends, useFakeProvider, type TestGateway } from './helpers/gateway.ts';

/**
 * Money at the documented bounds (docs/gateway.md, "Money"): a budget of $1e9 (1e18 nano-dollars, beyond 2^53) is
 * created, read back, held, spent, listed and summed exactly, on SQLite (with the analytics reader thread) and on
 * PostgreSQL; the dashboard's own calls answer 200.
 */
const backends = await useBackends();
const fake = await useFakeProvider();

/** $1 per output token, the most a price may be, and an input price with all nine decimals a price keeps. */
const PRICING = { input_cost_per_million: 0.123456789, output_cost_per_million: 1e6 };
/** A call's answer that costs $123,456,789 and a bit: 123,456,789 output tokens, 12 input tokens (1,481 nano-dollars). */
const COMPLETION_TOKENS = 123_456_789;
const CALL_NANOS = 123_456_789_000_000_000n + 1_481n;

it('dollars and nano-dollars: exact both ways, the nearest double at the edge', () => {
  expect(nanosOf(1e9)).toBe(1_000_000_000_000_000_000n);
  expect(nanosOf(0.1)).toBe(100_000_000n);
  expect(nanosOf(Number('123456789.123456789'))).toBe(123_456_789_123_456_791n); // the double's own digits
  expect(dollars(1_000_000_000_000_000_000n)).toBe(1e9);
  expect(dollars(CALL_NANOS)).toBe(Number('123456789.000001481'));
  expect(dollars(300_000_000n)).toBe(0.3);
  expect(dollars(2n ** 63n - 1n)).toBe(9223372036.854776);
  expect(callNanos({ model: 'm', ...PRICING, search_unit_cost_per_thousand: 0, updated_at: 0 }, 12, COMPLETION_TOKENS, 0)).toBe(CALL_NANOS);
  // the most a row can cost at the bounds: 2^31 - 1 tokens each way at $1e6 per million, as many search units at $1,000 per thousand
  const dearest = { model: 'm', input_cost_per_million: 1e6, output_cost_per_million: 1e6, search_unit_cost_per_thousand: 1000, updated_at: 0 };
  expect(callNanos(dearest, 2 ** 31 - 1, 2 ** 31 - 1, 2 ** 31 - 1)).toBe(3n * (2n ** 31n - 1n) * 1_000_000_000n);
  // holds round up, costs to the nearest
  expect(callNanos({ ...dearest, output_cost_per_million: 0, search_unit_cost_per_thousand: 0, input_cost_per_million: 0.0005 }, 1, 0, 0, 'ceil')).toBe(1n);
  expect(callNanos({ ...dearest, output_cost_per_million: 0, search_unit_cost_per_thousand: 0, input_cost_per_million: 0.0005 }, 1, 0, 0)).toBe(1n);
  expect(callNanos({ ...dearest, output_cost_per_million: 0, search_unit_cost_per_thousand: 0, input_cost_per_million: 0.0004 }, 1, 0, 0)).toBe(0n);
});

describe.each(backends)('money at max_budget 1e9 on $name', (backend) => {
  let gateway: TestGateway;
  let budgetId: string;
  let key: { id: string; key: string };
  let client: OpenAI;

  beforeAll(async () => {
    if (backend.skipReason) return;
    gateway = await startTestGateway(
      await backend.newDatabaseUrl(),
      { providers: { openai: { api_key: 'sk-test', api_base: fake.baseURL } }, pricing: { 'openai:fake-1': PRICING } },
      // SQLite's analytics are read on the reader thread, as `gateway serve` does
      { sqliteReader: sourceSqliteReader() },
    );
  });
  afterAll(() => gateway?.close());

  it.skipIf(backend.skipReason)('a $1e9 budget is created, read back and listed exactly', async () => {
    const created = await gateway.call('POST', '/v1/budgets', { body: { max_budget: 1e9 } });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ max_budget: 1e9, spend: 0, reserved: 0, remaining: 1e9 });
    budgetId = created.json.budget_id;
    expect((await gateway.store.budgets.get(budgetId))!.max_budget_nanos).toBe(1_000_000_000_000_000_000n);
    const read = await gateway.call('GET', `/v1/budgets/${budgetId}`);
    expect(read.status).toBe(200);
    expect(read.json).toMatchObject({ max_budget: 1e9, spend: 0, remaining: 1e9 });
    // the dashboard's sign-in asks this list
    const list = await gateway.call('GET', '/v1/budgets');
    expect(list.status).toBe(200);
    expect(list.json.data).toEqual([expect.objectContaining({ budget_id: budgetId, max_budget: 1e9 })]);
    const patched = await gateway.call('PATCH', `/v1/budgets/${budgetId}`, { body: { max_budget: 999_999_999.99999 } });
    expect(patched.json.max_budget).toBe(999_999_999.99999);
    expect((await gateway.store.budgets.get(budgetId))!.max_budget_nanos).toBe(999_999_999_999_989_986n); // the double's digits
    expect((await gateway.call('PATCH', `/v1/budgets/${budgetId}`, { body: { max_budget: 1e9 } })).json.max_budget).toBe(1e9);
  });

  it.skipIf(backend.skipReason)('a hold beyond 2^53 nano-dollars is taken and shown exactly while the call runs, then the spend is exact', async () => {
    await gateway.call('POST', '/v1/users', { body: { user_id: 'rich', alias: 'Rich' } });
    key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'rich', user_id: 'rich', budget_id: budgetId } })).json;
    client = new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    // 200,000,000 output tokens at $1 each: a hold of $2e8 (+ the prompt estimate), held while the provider thinks
    fake.script(PROVIDER_CHAT_ROUTE, {
      delayMs: 400,
      then: { json: chatCompletionBody('fake-1', 'rich', { usage: { prompt_tokens: 12, completion_tokens: COMPLETION_TOKENS, total_tokens: 12 + COMPLETION_TOKENS } }) },
    });
    const call = client.chat.completions.create({ model: 'openai:fake-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 200_000_000 });
    const held = await eventually(async () => {
      const budget = await gateway.store.budgets.get(budgetId);
      return budget && budget.reserved_nanos > 0n ? budget : undefined;
    }, 'the hold');
    const prompt = BigInt(Math.ceil(JSON.stringify([{ role: 'user', content: 'hi' }]).length / 4));
    const hold = 200_000_000n * 1_000_000_000n + (prompt * 123_456_789n + 999_999n) / 1_000_000n;
    expect(held.reserved_nanos).toBe(hold);
    expect((await gateway.call('GET', `/v1/budgets/${budgetId}`)).json.reserved).toBe(dollars(hold));
    await call;
    const after = (await gateway.store.budgets.get(budgetId))!;
    expect(after).toMatchObject({ reserved_nanos: 0n, spend_nanos: CALL_NANOS });
    const read = await gateway.call('GET', `/v1/budgets/${budgetId}`);
    expect(read.json).toMatchObject({ spend: dollars(CALL_NANOS), reserved: 0, remaining: dollars(1_000_000_000_000_000_000n - CALL_NANOS) });
    expect(read.json.spend).toBe(123_456_789.00000148);
  });

  it.skipIf(backend.skipReason)('usage rows, key and user usage, summary, series and CSV carry the exact cost; the dashboard calls answer 200', async () => {
    const [row] = await gateway.store.usage.page({ key_id: key.id }, undefined, 10);
    expect(row.cost_nanos).toBe(CALL_NANOS);
    const cost = dollars(CALL_NANOS);
    expect((await gateway.call('GET', `/v1/usage?key_id=${key.id}`)).json.data[0].cost).toBe(cost);
    expect((await gateway.call('GET', `/v1/keys/${key.id}/usage`)).json.totals.cost).toBe(cost);
    expect((await gateway.call('GET', '/v1/users/rich/usage')).json.totals.cost).toBe(cost);
    const summary = await gateway.call('GET', '/v1/usage/summary');
    expect(summary.status).toBe(200);
    expect(summary.json.totals.cost).toBe(cost);
    expect(summary.json.by_model).toEqual([expect.objectContaining({ model: 'openai:fake-1', cost })]);
    const series = await gateway.call('GET', '/v1/usage/series?interval=day');
    expect(series.json.data.reduce((sum: number, bucket: { cost: number }) => sum + bucket.cost, 0)).toBe(cost);
    const csv = await gateway.call('GET', '/v1/usage.csv');
    expect(String(csv.json)).toContain(`,${cost},success,200,`);
    // what the dashboard's sign-in and pages ask
    for (const path of ['/v1/budgets', '/v1/keys', '/v1/users', '/v1/pricing', '/v1/usage?limit=100', `/v1/usage/summary?since=${new Date(Date.now() - 86_400_000).toISOString()}`]) {
      expect((await gateway.call('GET', path)).status, path).toBe(200);
    }
  });

  it.skipIf(backend.skipReason)('with the budget spent past its limit, the next call is refused (403), not a 500', async () => {
    // A $1e9 answer on top: the budget is over (spend is not capped), and still reads back exactly.
    fake.script(PROVIDER_CHAT_ROUTE, { json: chatCompletionBody('fake-1', 'rich', { usage: { prompt_tokens: 0, completion_tokens: 1_000_000_000, total_tokens: 1_000_000_000 } }) });
    await client.chat.completions.create({ model: 'openai:fake-1', messages: [{ role: 'user', content: 'more' }], max_tokens: 10 });
    const spend = CALL_NANOS + 1_000_000_000_000_000_000n;
    expect((await gateway.store.budgets.get(budgetId))!.spend_nanos).toBe(spend);
    const read = await gateway.call('GET', `/v1/budgets/${budgetId}`);
    expect(read.json).toMatchObject({ spend: dollars(spend), remaining: 0 });
    const refused = await client.chat.completions.create({ model: 'openai:fake-1', messages: [{ role: 'user', content: 'again' }] }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 403, code: 'budget_exceeded' });
  });

  it.skipIf(backend.skipReason)('analytics sum rows whose total passes 2^63 nano-dollars exactly (one SUM would overflow)', async () => {
    // the most a row can cost (6.4e18), three times: 1.9e19 in all
    const most = 3n * (2n ** 31n - 1n) * 1_000_000_000n;
    const at = Date.UTC(2030, 0, 1);
    await gateway.call('POST', '/v1/users', { body: { user_id: 'whale', alias: 'Whale' } });
    await gateway.store.usage.record(
      [1, 2, 3].map((i) => usageRecord(`usage_big_${i}`, { created_at: at + i, user_id: 'whale', provider: 'openai', model: 'dear', cost_nanos: most })),
      [],
    );
    const range = { since: at, until: at + 1000 };
    const { totals, groups } = await gateway.store.usage.summarize(range);
    expect(totals.cost_nanos).toBe(3n * most);
    expect(groups.model).toEqual([expect.objectContaining({ group: 'openai:dear', cost_nanos: 3n * most })]);
    const query = `since=${new Date(range.since).toISOString()}&until=${new Date(range.until).toISOString()}`;
    const summary = await gateway.call('GET', `/v1/usage/summary?${query}`);
    expect(summary.status).toBe(200);
    expect(summary.json.totals.cost).toBe(dollars(3n * most));
    expect((await gateway.call('GET', `/v1/usage/series?${query}&interval=hour`)).json.data[0].cost).toBe(dollars(3n * most));
    expect((await gateway.call('GET', '/v1/users/whale/usage')).json.totals.cost).toBe(dollars(3n * most));
  });
});
