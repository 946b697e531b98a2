import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { fakeEmbedding, type FakeOpenAIServer } from '../fakes/openai-compatible.ts';
import { eventually, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

/**
 * Embeddings read by what the provider answered, not by what was asked: providers that ignore `encoding_format`
 * (floats to the base64 request the gateway sends OpenAI, base64 to the float request it sends other services) still
 * give the client the vectors in the format it asked for, through the real `openai` client at its defaults (which
 * asks for base64 and decodes it). An empty vector or a wrong count is a 502 naming it, recorded as an error, not
 * billed as a success.
 */
const backends = await useBackends();
const fake = await useFakeProvider();
const ROUTE = 'POST /v1/embeddings';
const INPUTS = ['abc', 'hello there'];
/** The fake's vectors as float32s: the precision base64 carries. */
const float32s = (text: string) => Array.from(new Float32Array(fakeEmbedding(text)));
const base64Of = (values: number[]) => Buffer.from(new Float32Array(values).buffer).toString('base64');

/** An embeddings answer with these vectors, whatever the request asked. */
function answer(vectors: unknown[]) {
  return {
    json: {
      object: 'list',
      model: 'e',
      data: vectors.map((embedding, index) => ({ object: 'embedding', index, embedding })),
      usage: { prompt_tokens: 7, total_tokens: 7 },
    },
  };
}

const scriptFloats = (server: FakeOpenAIServer) => server.script(ROUTE, answer(INPUTS.map((text) => fakeEmbedding(text))));
const scriptBase64 = (server: FakeOpenAIServer) => server.script(ROUTE, answer(INPUTS.map((text) => base64Of(fakeEmbedding(text)))));

describe.each(backends)('embeddings formats on $name', (backend) => {
  let gateway: TestGateway;
  let key: { id: string; key: string };
  let budgetId: string;
  let client: OpenAI;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- usage rows are checked field by field
  const rowOf = (requestId: string): Promise<any> =>
    eventually(async () => (await gateway.call('GET', `/v1/keys/${key.id}/usage?limit=100`)).json.data.find((row: { request_id: string }) => row.request_id === requestId), requestId);
  /** The body the gateway's provider client sent last. */
  const sent = () => fake.requestsTo(ROUTE).at(-1)!.body as Record<string, unknown>;

  useTestGateway(
    backend,
    () => ({
      // openai: Hub asks it for base64; vllm (an OpenAI-compatible server): for floats
      providers: { openai: { api_key: 'sk-test', api_base: fake.baseURL }, vllm: { api_base: fake.baseURL } },
      pricing: { 'openai:e': { input_cost_per_million: 1000 }, 'vllm:e': { input_cost_per_million: 1000 } },
      models: { 'embed-route': { targets: [{ model: 'openai:e' }, { model: 'vllm:e' }] } },
    }),
    async (started) => {
      gateway = started;
      budgetId = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 10 } })).json.budget_id;
      key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'formats', budget_id: budgetId } })).json;
      client = new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    },
  );

  for (const provider of ['openai', 'vllm'] as const) {
    for (const [answered, script] of [
      ['floats', scriptFloats],
      ['base64', scriptBase64],
    ] as const) {
      it.skipIf(backend.skipReason)(`${provider} answering ${answered}: the client gets its format (default client, float, base64)`, async () => {
        // the openai client at its defaults: asks the gateway for base64 and decodes it
        script(fake);
        const byDefault = await client.embeddings.create({ model: `${provider}:e`, input: INPUTS });
        expect(sent().encoding_format).toBe(provider === 'openai' ? 'base64' : 'float');
        expect(byDefault.data.map((item) => Array.from(item.embedding))).toEqual(INPUTS.map(float32s));
        script(fake);
        const floats = await client.embeddings.create({ model: `${provider}:e`, input: INPUTS, encoding_format: 'float' });
        // numbers as the provider wrote them, or the float32s its base64 carried
        expect(floats.data.map((item) => item.embedding)).toEqual(INPUTS.map(answered === 'floats' ? (text) => fakeEmbedding(text) : float32s));
        script(fake);
        const base64 = await client.embeddings.create({ model: `${provider}:e`, input: INPUTS, encoding_format: 'base64' });
        // asked for base64, the SDK hands the strings over as they came
        expect(base64.data.map((item) => item.embedding)).toEqual(INPUTS.map((text) => base64Of(fakeEmbedding(text))));
      });
    }
  }

  const broken: [string, unknown[], RegExp][] = [
    ['an empty vector', [[], fakeEmbedding('x')], /embedding 0 is empty/],
    ['an empty base64 vector', [base64Of(fakeEmbedding('x')), ''], /embedding 1 is empty/],
    ['one vector for two inputs', [fakeEmbedding('x')], /1 embedding\(s\) for 2 input\(s\)/],
    ['three vectors for two inputs', [fakeEmbedding('x'), fakeEmbedding('y'), fakeEmbedding('z')], /3 embedding\(s\) for 2 input\(s\)/],
    ['a vector of strings', [['0.5'], fakeEmbedding('y')], /embedding 0 is not a list of numbers/],
  ];
  for (const [what, vectors, reason] of broken) {
    it.skipIf(backend.skipReason)(`${what}: 502 with the reason in an OpenAI error body, recorded as an error, nothing charged`, async () => {
      const spendBefore = (await gateway.call('GET', `/v1/budgets/${budgetId}`)).json.spend;
      const requestId = `broken-${backend.name}-${what.replaceAll(' ', '-')}`;
      for (const format of ['float', 'base64'] as const) {
        fake.script(ROUTE, answer(vectors));
        const error = await client.embeddings.create({ model: 'openai:e', input: INPUTS, encoding_format: format }, { headers: { 'x-request-id': `${requestId}-${format}` } }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(OpenAI.APIError);
        expect(error).toMatchObject({ status: 502, type: 'upstream_error', code: 'upstream_invalid_response' });
        expect((error as Error).message).toMatch(reason);
        expect(await rowOf(`${requestId}-${format}`)).toMatchObject({ endpoint: 'embeddings', provider: 'openai', status: 'error', status_code: 502, prompt_tokens: 0, cost: 0 });
      }
      const budget = (await gateway.call('GET', `/v1/budgets/${budgetId}`)).json;
      expect(budget).toMatchObject({ spend: spendBefore, reserved: 0 });
    });
  }

  it.skipIf(backend.skipReason)('the raw body: 502 is an OpenAI-style error body', async () => {
    fake.script(ROUTE, answer([[]]));
    const response = await gateway.call('POST', '/v1/embeddings', { key: key.key, body: { model: 'openai:e', input: 'abc' } });
    expect(response.status).toBe(502);
    expect(response.json).toEqual({ error: { message: 'Provider openai: invalid embeddings answer: embedding 0 is empty', type: 'upstream_error', code: 'upstream_invalid_response', param: null } });
    // base64 that is not whole float32s (2 bytes): Hub's ProviderError, a 502 too
    fake.script(ROUTE, answer(['AAA=']));
    const ragged = await gateway.call('POST', '/v1/embeddings', { key: key.key, body: { model: 'openai:e', input: 'abc' } });
    expect(ragged.status).toBe(502);
    expect(ragged.json.error).toMatchObject({ type: 'upstream_error', message: expect.stringMatching(/not whole float32s/) });
  });

  it.skipIf(backend.skipReason)('through a model route, a target answering empty vectors is passed over for the next', async () => {
    fake.script(ROUTE, answer([[], []]), answer(INPUTS.map((text) => fakeEmbedding(text))));
    const result = await client.embeddings.create({ model: 'embed-route', input: INPUTS }, { headers: { 'x-request-id': `route-${backend.name}` } });
    expect(result.data.map((item) => Array.from(item.embedding))).toEqual(INPUTS.map(float32s));
    expect(await rowOf(`route-${backend.name}`)).toMatchObject({ provider: 'vllm', route: 'embed-route', attempts: 2, status: 'success', prompt_tokens: 7 });
  });
});
