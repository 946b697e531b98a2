import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { ANONYMOUS_REFUSAL_ROWS_PER_MINUTE, CallLedger } from '../../src/gateway/ledger.ts';
import { GatewayError } from '../../src/gateway/errors.ts';
import { GatewayMetrics } from '../../src/gateway/metrics.ts';
import { openStore } from '../../src/gateway/storage/index.ts';
import { UsageRecorder } from '../../src/gateway/usage-recorder.ts';
import { TEST_PRICING, eventually, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

/** Every refusal leaves a usage row (status refused, the error's status and code), and analytics count them. */
const backends = await useBackends();
const fake = await useFakeProvider();

const RPM = 3;

describe.each(backends)('refusals on $name', (backend) => {
  let gateway: TestGateway;
  useTestGateway(
    backend,
    () => ({
      providers: { openai: { api_key: 'sk-test', api_base: fake.baseURL } },
      pricing: { 'openai:gpt-fake': TEST_PRICING },
      rateLimits: { requests_per_minute: RPM },
    }),
    (started) => {
      gateway = started;
    },
  );
  const newKey = async (fields: Record<string, unknown>) => (await gateway.call('POST', '/v1/keys', { body: { key_name: 'refused', ...fields } })).json;
  const chat = (key: string, requestId: string) =>
    new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0 }).chat.completions.create(
      { model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5 },
      { headers: { 'x-request-id': requestId } },
    );
  const rowsOf = async (keyId: string) => (await gateway.call('GET', `/v1/usage?key_id=${keyId}&limit=1000`)).json.data;

  it.skipIf(backend.skipReason)('a model the key may not use: 403 model_not_allowed, a refused row, no provider call', async () => {
    const key = await newKey({ allowed_models: ['openai:other'] });
    const sent = fake.requests.length;
    await expect(chat(key.key, `not-allowed-${backend.name}`)).rejects.toMatchObject({ status: 403, code: 'model_not_allowed' });
    expect(fake.requests.length).toBe(sent);
    expect(await rowsOf(key.id)).toEqual([
      expect.objectContaining({
        request_id: `not-allowed-${backend.name}`,
        key_id: key.id,
        status: 'refused',
        status_code: 403,
        reason: 'model_not_allowed',
        provider: 'openai',
        model: 'gpt-fake',
        attempts: 0,
        prompt_tokens: 0,
        cost: 0,
      }),
    ]);
  });

  it.skipIf(backend.skipReason)('a model call with a wrong key: 401 invalid_api_key, a refused row without key or user', async () => {
    const requestId = `bad-key-${backend.name}`;
    const response = await gateway.call('POST', '/v1/chat/completions', { key: 'gw-not-a-key', headers: { 'x-request-id': requestId }, body: { model: 'openai:gpt-fake', messages: [] } });
    expect(response.status).toBe(401);
    const row = await eventually(async () => ((await gateway.call('GET', '/v1/usage?status=refused&limit=1000')).json.data as { request_id: string }[]).find((r) => r.request_id === requestId), 'the refusal row');
    expect(row).toMatchObject({ status: 'refused', status_code: 401, reason: 'invalid_api_key', user_id: null, key_id: null, endpoint: 'chat.completions' });
  });

  it.skipIf(backend.skipReason)('an exhausted budget: 403 budget_exceeded, a refused row naming the user, nothing charged or held', async () => {
    // room for one call's hold ($0.018: the prompt estimate and max_tokens 5), not for a second after its cost ($0.024)
    const budget = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 0.03 } })).json;
    await gateway.call('POST', '/v1/users', { body: { user_id: `spent-${backend.name}`, alias: 'Spent' } });
    const key = await newKey({ budget_id: budget.budget_id, user_id: `spent-${backend.name}` });
    await chat(key.key, `within-${backend.name}`);
    await expect(chat(key.key, `over-${backend.name}`)).rejects.toMatchObject({ status: 403, code: 'budget_exceeded' });
    const rows = await rowsOf(key.id);
    expect(rows.map((row: { status: string }) => row.status)).toEqual(['refused', 'success']);
    expect(rows[0]).toMatchObject({ request_id: `over-${backend.name}`, user_id: `spent-${backend.name}`, status_code: 403, reason: 'budget_exceeded', cost: 0 });
    const after = (await gateway.call('GET', `/v1/budgets/${budget.budget_id}`)).json;
    expect(after.reserved).toBe(0);
    expect(after.spend).toBeCloseTo(rows[1].cost, 12);
  });

  it.skipIf(backend.skipReason)('the rate limit: 429 rate_limit_exceeded rows; the summary and the series count the refusals as errors', async () => {
    const key = await newKey({});
    const outcomes = await Promise.allSettled(Array.from({ length: RPM + 2 }, (_, i) => chat(key.key, `rate-${backend.name}-${i}`)));
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(RPM);
    const rows = await rowsOf(key.id);
    const refused = rows.filter((row: { status: string }) => row.status === 'refused');
    expect(refused).toHaveLength(2);
    for (const row of refused) expect(row).toMatchObject({ status_code: 429, reason: 'rate_limit_exceeded', cost: 0 });

    const summary = (await gateway.call('GET', `/v1/usage/summary?key_id=${key.id}`)).json;
    expect(summary.totals).toMatchObject({ requests: RPM + 2, errors: 2, refused: 2 });
    expect(summary.by_model).toEqual([expect.objectContaining({ requests: RPM + 2, refused: 2 })]);
    const series = (await gateway.call('GET', `/v1/usage/series?interval=hour&key_id=${key.id}`)).json;
    expect(series.data.at(-1)).toMatchObject({ requests: RPM + 2, errors: 2, refused: 2 });
    const only = (await gateway.call('GET', `/v1/usage?key_id=${key.id}&status=refused`)).json.data;
    expect(only.map((row: { request_id: string }) => row.request_id).sort()).toEqual(refused.map((row: { request_id: string }) => row.request_id).sort());
    const csv = (await gateway.call('GET', `/v1/usage.csv?key_id=${key.id}&status=refused`)).json as string;
    expect(csv.trim().split('\r\n').slice(1).every((line) => line.includes(',refused,429,') && line.endsWith(',rate_limit_exceeded'))).toBe(true);
  });
});

it('refusals without a key or user (authentication failures) are written up to a cap per minute, so a flood cannot fill the database', async () => {
  const store = openStore('sqlite::memory:');
  await store.migrate();
  try {
    const ledger = new CallLedger({ store, recorder: new UsageRecorder(store), metrics: new GatewayMetrics({ processMetrics: false }), reserveOutputTokens: 16 });
    const error = new GatewayError(401, 'authentication_error', 'invalid_api_key', 'Invalid API key');
    const minute = Date.UTC(2026, 10, 1, 12, 0);
    await Promise.all(Array.from({ length: ANONYMOUS_REFUSAL_ROWS_PER_MINUTE + 40 }, (_, i) => ledger.recordRefusal({ requestId: `anon-${i}`, error, endpoint: '/v1/chat/completions' }, minute + i)));
    // The next minute writes rows again; a refusal of a known key is never capped.
    await ledger.recordRefusal({ requestId: 'anon-next', error, endpoint: '/v1/chat/completions' }, minute + 60_000);
    await Promise.all(Array.from({ length: 80 }, (_, i) => ledger.recordRefusal({ requestId: `key-${i}`, error, endpoint: 'chat.completions', keyId: 'key_1' }, minute + i)));
    const rows = await store.usage.page({}, undefined, 1000);
    expect(rows.filter((row) => row.key_id === null)).toHaveLength(ANONYMOUS_REFUSAL_ROWS_PER_MINUTE + 1);
    expect(rows.filter((row) => row.key_id === 'key_1')).toHaveLength(80);
    expect(rows[0]).toMatchObject({ status: 'refused', status_code: 401, reason: 'invalid_api_key', user_id: null, provider: '', model: '', cost_nanos: 0n });
  } finally {
    await store.close();
  }
});
