import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { usageRecord, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

/**
 * Usage analytics label a model `provider:model`, as the dashboard shows it: `by_model` keeps one model name of two
 * providers (at two prices) apart, and the `model` filter of every usage route takes that label, or a bare name for
 * that model of every provider. Calls go through the gateway, so the rows are what the ledger writes.
 */
const backends = await useBackends();
const fake = await useFakeProvider();

const DEAR = { input_cost_per_million: 600, output_cost_per_million: 600 };
const CHEAP = { input_cost_per_million: 0.1, output_cost_per_million: 0.1 };
/** Two calls of the fake's usage (18 tokens) at each price, in dollars as the API gives them. */
const TWO_DEAR = 0.0216;
const TWO_CHEAP = 0.0000036;

describe.each(backends)('usage labels on $name', (backend) => {
  let gateway: TestGateway;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are checked field by field
  const get = async (path: string): Promise<any> => {
    const response = await gateway.call('GET', path);
    expect(response.status, path).toBe(200);
    return response.json;
  };

  useTestGateway(
    backend,
    () => ({
      providers: { openai: { api_key: 'sk-test', api_base: fake.baseURL }, vllm: { api_base: fake.baseURL } },
      pricing: { 'openai:fake-1': DEAR, 'vllm:fake-1': CHEAP },
    }),
    async (started) => {
      gateway = started;
      await gateway.call('POST', '/v1/users', { body: { user_id: 'ann', alias: 'Ann' } });
      const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'labels', user_id: 'ann' } })).json;
      const client = new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
      for (const model of ['openai:fake-1', 'vllm:fake-1', 'openai:fake-1', 'vllm:fake-1']) {
        await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });
      }
      // a model whose own name holds ':' (Ollama's tags), written as the ledger writes it
      await gateway.store.usage.record([usageRecord('usage_tagged', { user_id: 'ann', provider: 'ollama', model: 'llama3:8b', cost_nanos: 0n })], []);
    },
  );

  it.skipIf(backend.skipReason)('by_model groups by provider and model: openai:fake-1 ($600/M) is not merged with vllm:fake-1 ($0.10/M)', async () => {
    const summary = await get('/v1/usage/summary');
    expect(summary.by_model.map((entry: { model: string; requests: number; cost: number }) => [entry.model, entry.requests, entry.cost])).toEqual([
      ['openai:fake-1', 2, TWO_DEAR],
      ['vllm:fake-1', 2, TWO_CHEAP],
      ['ollama:llama3:8b', 1, 0],
    ]);
    expect(summary.by_provider.map((entry: { provider: string }) => entry.provider)).toEqual(['openai', 'vllm', 'ollama']);
  });

  it.skipIf(backend.skipReason)('the model filter takes provider:model on the list, summary, series and CSV', async () => {
    const list = await get('/v1/usage?model=openai:fake-1');
    expect(list.data.map((row: { provider: string; model: string }) => `${row.provider}:${row.model}`)).toEqual(['openai:fake-1', 'openai:fake-1']);
    const summary = await get('/v1/usage/summary?model=vllm:fake-1');
    expect(summary.totals).toMatchObject({ requests: 2, cost: TWO_CHEAP });
    expect(summary.by_model.map((entry: { model: string }) => entry.model)).toEqual(['vllm:fake-1']);
    const series = await get('/v1/usage/series?interval=day&model=openai:fake-1');
    expect(series.data.reduce((n: number, bucket: { requests: number }) => n + bucket.requests, 0)).toBe(2);
    const csv = String(await get('/v1/usage.csv?model=openai:fake-1')).trim().split('\r\n').slice(1);
    expect(csv).toHaveLength(2);
    expect(csv.every((line) => line.includes(',openai,fake-1,'))).toBe(true);
    // a name with ':' of its own: split at the first one
    expect((await get('/v1/usage/summary?model=ollama:llama3:8b')).totals.requests).toBe(1);
    // nothing of another provider, nothing with the provider filter contradicting the label
    expect((await get('/v1/usage/summary?model=anthropic:fake-1')).totals.requests).toBe(0);
    expect((await get('/v1/usage/summary?model=openai:fake-1&provider=vllm')).totals.requests).toBe(0);
  });

  it.skipIf(backend.skipReason)('a bare model name matches that model of every provider', async () => {
    const summary = await get('/v1/usage/summary?model=fake-1');
    expect(summary.totals).toMatchObject({ requests: 4, cost: 0.0216036 });
    expect(summary.by_model.map((entry: { model: string }) => entry.model)).toEqual(['openai:fake-1', 'vllm:fake-1']);
    expect((await get('/v1/usage?model=fake-1')).data).toHaveLength(4);
    expect((await get('/v1/usage/summary?model=llama3:8b')).totals.requests).toBe(1);
    expect((await get('/v1/usage/summary?model=fake')).totals.requests).toBe(0);
  });
});
