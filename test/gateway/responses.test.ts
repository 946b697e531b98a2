import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { DEFAULT_COMPLETION_TEXT } from '../fakes/openai-compatible.ts';
import { MASTER_KEY, TEST_PRICING, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

// POST /v1/responses through the gateway with the official openai client (responses.create, plain and streamed):
// usage rows, cost and budgets as for chat, on both storage engines.

const backends = await useBackends();
const fake = await useFakeProvider();

describe.each(backends)('/v1/responses on $name', (backend) => {
  let gateway: TestGateway;
  let key: { id: string; key: string };
  let client: OpenAI;

  useTestGateway(
    backend,
    () => ({ providers: { openai: { api_key: 'sk-provider', api_base: fake.baseURL } }, pricing: { 'openai:gpt-fake': TEST_PRICING } }),
    async (started) => {
      gateway = started;
      key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'responses' } })).json;
      client = new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    },
  );

  // the fake answers 5 input and 5 output tokens: $1000/M and $2000/M
  const COST = (5 * TEST_PRICING.input_cost_per_million + 5 * TEST_PRICING.output_cost_per_million) / 1e6;

  it.skipIf(backend.skipReason)('answers responses.create and records usage and cost', async () => {
    const response = await client.responses.create({ model: 'openai:gpt-fake', input: 'Say hello', instructions: 'Be brief' });
    expect(response.output_text).toBe(DEFAULT_COMPLETION_TEXT);
    const forwarded = fake.requestsTo('POST /v1/responses').at(-1)!.body;
    expect(forwarded).toMatchObject({ model: 'gpt-fake', input: 'Say hello', instructions: 'Be brief' });
    const usage = (await gateway.call('GET', `/v1/keys/${key.id}/usage`)).json.data[0];
    expect(usage).toMatchObject({ endpoint: 'responses', provider: 'openai', model: 'gpt-fake', prompt_tokens: 5, completion_tokens: 5, status: 'success' });
    expect(usage.cost).toBeCloseTo(COST, 12);
  });

  it.skipIf(backend.skipReason)('streams responses.create events and records the usage of response.completed', async () => {
    const stream = await client.responses.create({ model: 'openai:gpt-fake', input: 'Say hello', stream: true });
    const types: string[] = [];
    let text = '';
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
    }
    expect(types).toEqual(['response.created', 'response.output_text.delta', 'response.output_text.delta', 'response.completed']);
    expect(text).toBe('Hello from the fake server');
    const rows = (await gateway.call('GET', `/v1/keys/${key.id}/usage`)).json.data;
    expect(rows[0]).toMatchObject({ endpoint: 'responses', prompt_tokens: 5, completion_tokens: 5, status: 'success' });
  });

  it.skipIf(backend.skipReason)('refuses a missing input, a missing user with the master key, and an exhausted budget', async () => {
    const missing = await gateway.call('POST', '/v1/responses', { key: key.key, body: { model: 'openai:gpt-fake' } });
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatchObject({ param: 'input' });
    const noUser = await gateway.call('POST', '/v1/responses', { key: MASTER_KEY, body: { model: 'openai:gpt-fake', input: 'x' } });
    expect(noUser.json.error.code).toBe('missing_user');
    const budget = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 1.5 * COST } })).json;
    const poor = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'poor', budget_id: budget.budget_id } })).json;
    const poorClient = new OpenAI({ apiKey: poor.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    const sent = fake.requestsTo('POST /v1/responses').length;
    // without max_output_tokens the hold is reserve_output_tokens (1,024) at $2000/M: more than the budget
    const tooDear = await poorClient.responses.create({ model: 'openai:gpt-fake', input: 'unbounded' }).catch((error: unknown) => error);
    expect(tooDear).toMatchObject({ status: 403, code: 'budget_exceeded' });
    await poorClient.responses.create({ model: 'openai:gpt-fake', input: 'first call fits', max_output_tokens: 5 });
    expect(fake.requestsTo('POST /v1/responses').length).toBe(sent + 1);
    expect((await gateway.call('GET', `/v1/budgets/${budget.budget_id}`)).json.spend).toBeCloseTo(COST, 9);
    const refused = await poorClient.responses.create({ model: 'openai:gpt-fake', input: 'second', max_output_tokens: 5 }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 403, code: 'budget_exceeded' });
  });
});
