import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeEmbedding } from '../fakes/openai-compatible.ts';
import { ApiKey } from '../../src/serve/api-key.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';
import { eventually, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

/**
 * POST /v1/embeddings beyond model and input: `dimensions` reaches the provider (or is refused with a 400 naming it),
 * `encoder:<name>` reaches this project's encoder server (started with an API key, which the gateway's provider
 * configuration gives; rerank.test.ts has one without), and a client that goes away cancels the provider call and
 * is recorded as cancelled, not billed as a success.
 */
const backends = await useBackends();
const fake = await useFakeProvider();
const EMBEDDINGS_ROUTE = 'POST /v1/embeddings';

let encoder: InProcessEncoder;
const ENCODER_KEY = 'gateway-to-encoder_key';

beforeAll(async () => {
  // strict about model names (serve --strict-model-name), so that another name is the server's 404 model_not_found
  encoder = await serveInProcess(await generateTinyModel({ modelType: 'embedding' }), 'tiny-sentences', 'sentence_embedding', {
    apiKey: new ApiKey(ENCODER_KEY),
    modelNames: { strict: true },
  });
});
afterAll(() => encoder?.close());

/** The encoder server's own answer, asked directly in base64: its float32 values, decoded here. */
async function encoderAnswer(body: { input: string[]; dimensions?: number }): Promise<{ vectors: number[][]; promptTokens: number }> {
  const response = await fetch(`${encoder.httpUrl}/v1/embeddings`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ENCODER_KEY}` },
    body: JSON.stringify({ ...body, encoding_format: 'base64' }),
  });
  expect(response.status).toBe(200);
  const answer = (await response.json()) as { data: { embedding: string }[]; usage: { prompt_tokens: number } };
  const vectors = answer.data.map(({ embedding }) => Array.from(new Float32Array(Uint8Array.from(Buffer.from(embedding, 'base64')).buffer)));
  return { vectors, promptTokens: answer.usage.prompt_tokens };
}

const lastForwarded = () => fake.requestsTo(EMBEDDINGS_ROUTE).at(-1)!.body as Record<string, unknown>;
/** The fake's numbers as the gateway's openai client reads them (float32, the precision base64 carries). */
const float32 = (text: string, dimensions?: number) => Array.from(new Float32Array(fakeEmbedding(text, dimensions)));

describe.each(backends)('embeddings on $name', (backend) => {
  let gateway: TestGateway;
  let key: { id: string; key: string };
  let client: OpenAI;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- usage rows are checked field by field
  const rows = async (): Promise<any[]> => (await gateway.call('GET', `/v1/keys/${key.id}/usage?limit=100`)).json.data;

  useTestGateway(
    backend,
    // encoder: this project's own server, serving a sentence_embedding model in this process; self-hosted, so its
    // models are served unpriced (the per-provider opt-out), the openai ones are priced (bundled or not)
    () => ({
      providers: { openai: { api_key: 'sk-provider-secret', api_base: fake.baseURL }, encoder: { api_base: encoder.httpUrl, api_key: ENCODER_KEY } },
      requirePricing: { 'encoder:*': false },
    }),
    async (started) => {
      gateway = started;
      await gateway.call('POST', '/v1/users', { body: { user_id: 'dora', alias: 'Dora' } });
      key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'embedder', user_id: 'dora' } })).json;
      client = new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    },
  );

  it.skipIf(backend.skipReason)('dimensions reaches the provider and the vectors have that length (float and base64)', async () => {
    const floats = await client.embeddings.create({ model: 'openai:text-embedding-3-small', input: ['abc', 'hello'], dimensions: 6, encoding_format: 'float' });
    expect(lastForwarded()).toMatchObject({ model: 'text-embedding-3-small', input: ['abc', 'hello'], dimensions: 6 });
    expect(floats.data.map((item) => item.embedding)).toEqual(['abc', 'hello'].map((text) => float32(text, 6)));
    const base64 = await client.embeddings.create({ model: 'openai:text-embedding-3-small', input: 'abc', dimensions: 9 });
    expect(lastForwarded()).toMatchObject({ dimensions: 9 });
    expect(Array.from(base64.data[0].embedding)).toEqual(float32('abc', 9));
  });

  it.skipIf(backend.skipReason)('without dimensions (or with null) none is forwarded', async () => {
    await client.embeddings.create({ model: 'openai:text-embedding-3-small', input: 'abc' });
    expect(lastForwarded()).not.toHaveProperty('dimensions');
    await client.embeddings.create({ model: 'openai:text-embedding-3-small', input: 'abc', dimensions: null as never });
    expect(lastForwarded()).not.toHaveProperty('dimensions');
  });

  it.skipIf(backend.skipReason).each([0, -4, 2.5, '6', true, 2 ** 53])('dimensions %j: 400 with param "dimensions", nothing forwarded or recorded', async (dimensions) => {
    const forwarded = fake.requestsTo(EMBEDDINGS_ROUTE).length;
    const recorded = (await rows()).length;
    const error = await client.embeddings.create({ model: 'openai:text-embedding-3-small', input: 'abc', dimensions: dimensions as never }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ status: 400, param: 'dimensions', type: 'invalid_request_error' });
    expect(fake.requestsTo(EMBEDDINGS_ROUTE)).toHaveLength(forwarded);
    expect(await rows()).toHaveLength(recorded);
  });

  it.skipIf(backend.skipReason)("encoder:<name> reaches this project's encoder server: its float32s exactly (float and base64), usage recorded", async () => {
    const input = ['the cat sat on the mat', 'hello there'];
    const direct = await encoderAnswer({ input });
    const floats = await client.embeddings.create({ model: 'encoder:tiny-sentences', input, encoding_format: 'float' }, { headers: { 'x-request-id': `encoder-${backend.name}` } });
    expect(floats.model).toBe('tiny-sentences');
    expect(floats.data.map((item) => item.embedding)).toEqual(direct.vectors);
    // the openai client's default: base64, decoded by the client
    const base64 = await client.embeddings.create({ model: 'encoder:tiny-sentences', input });
    expect(base64.data.map((item) => Array.from(item.embedding))).toEqual(direct.vectors);
    expect(base64.usage).toMatchObject({ prompt_tokens: direct.promptTokens });
    const row = await eventually(async () => (await rows()).find((r) => r.request_id === `encoder-${backend.name}` && r.status !== 'pending'), 'the usage row');
    expect(row).toMatchObject({ endpoint: 'embeddings', provider: 'encoder', model: 'tiny-sentences', status: 'success', prompt_tokens: direct.promptTokens });
  });

  it.skipIf(backend.skipReason)('encoder: dimensions reaches the server (its own shortened vectors); its models are listed', async () => {
    const short = await client.embeddings.create({ model: 'encoder:tiny-sentences', input: ['abc', 'de f'], dimensions: 16 });
    const direct = await encoderAnswer({ input: ['abc', 'de f'], dimensions: 16 });
    expect(short.data.map((item) => Array.from(item.embedding))).toEqual(direct.vectors);
    for (const item of short.data) {
      expect(item.embedding).toHaveLength(16);
      expect(Math.hypot(...item.embedding)).toBeCloseTo(1, 5);
    }
    const models = await client.models.list();
    expect(models.data.map((model) => model.id)).toContain('encoder:tiny-sentences');
  });

  it.skipIf(backend.skipReason)("encoder: the server's refusals reach the client as 400s naming them, recorded as errors", async () => {
    // another model name: the server's 404 model_not_found, a 400 here like every provider refusal
    const other = await client.embeddings.create({ model: 'encoder:other-model', input: 'abc' }, { headers: { 'x-request-id': `encoder-other-${backend.name}` } }).catch((e: unknown) => e);
    expect(other).toBeInstanceOf(OpenAI.BadRequestError);
    expect(other).toMatchObject({ status: 400, code: 'model_not_found' });
    expect((other as Error).message).toMatch(/The model 'other-model' does not exist; this server serves 'tiny-sentences'/);
    // more dimensions than the model has: the server's 400 naming dimensions
    const wide = await client.embeddings.create({ model: 'encoder:tiny-sentences', input: 'abc', dimensions: 4096 }).catch((e: unknown) => e);
    expect(wide).toBeInstanceOf(OpenAI.BadRequestError);
    expect(wide).toMatchObject({ status: 400, param: 'dimensions' });
    const row = await eventually(async () => (await rows()).find((r) => r.request_id === `encoder-other-${backend.name}` && r.status !== 'pending'), 'the error row');
    expect(row).toMatchObject({ endpoint: 'embeddings', provider: 'encoder', status: 'error', status_code: 400, prompt_tokens: 0 });
  });

  it.skipIf(backend.skipReason)('a client that goes away during the call aborts the provider call: the row says cancelled', async () => {
    const abandoned = fake.abandonedReplies;
    const before = fake.requestsTo(EMBEDDINGS_ROUTE).length;
    fake.script(EMBEDDINGS_ROUTE, { delayMs: 30_000, then: { json: { object: 'list', model: 'text-embedding-3-small', data: [], usage: { prompt_tokens: 1, total_tokens: 1 } } } });
    const controller = new AbortController();
    const requestId = `leaves-${backend.name}`;
    const pending = client.embeddings
      .create({ model: 'openai:text-embedding-3-small', input: 'x'.repeat(400), dimensions: 6 }, { signal: controller.signal, headers: { 'x-request-id': requestId } })
      .catch((e: unknown) => e);
    await eventually(() => (fake.requestsTo(EMBEDDINGS_ROUTE).length > before ? true : undefined), 'the provider call');
    controller.abort();
    expect(await pending).toBeInstanceOf(OpenAI.APIUserAbortError);
    // the gateway closed its connection to the provider instead of waiting for (and paying) the answer
    await eventually(() => (fake.abandonedReplies > abandoned ? true : undefined), 'the provider connection to close');
    expect(fake.abandonedReplies).toBe(abandoned + 1);
    const row = await eventually(async () => (await rows()).find((r) => r.request_id === requestId && r.status !== 'pending'), 'the usage row');
    expect(row).toMatchObject({ endpoint: 'embeddings', status: 'cancelled', status_code: 499, completion_tokens: 0 });
    // the prompt was sent to the provider, so it is billed by estimate (as for chat)
    expect(row.prompt_tokens).toBeGreaterThan(0);
  });
});
