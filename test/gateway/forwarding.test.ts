import Anthropic from '@anthropic-ai/sdk';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { createServer } from 'node:net';
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { fakeMessageEvents, startAnthropicFake } from '../fakes/anthropic.ts';
import {
  CHAT_USAGE,
  DEFAULT_COMPLETION_TEXT,
  DEFAULT_STREAM_PIECES,
  EMBEDDING_TOKENS_PER_INPUT,
  FAKE_MODEL_IDS,
  chatChunks,
  chatStreamUsage,
  fakeEmbedding,
  type ScriptedReply,
} from '../fakes/openai-compatible.ts';
import {
  CHAT_COST,
  KEY_IN_PROVIDER_ERROR,
  MASTER_KEY,
  PROVIDER_CHAT_ROUTE,
  PROVIDER_FAILURES,
  TEST_PRICING,
  useBackends,
  useFakeProvider,
  useTestGateway,
  type TestGateway,
} from './helpers/gateway.ts';

type ErrorBody = { error: { message: string; type: string; code: string; param: string | null } };

const backends = await useBackends();
const fake = await useFakeProvider();
const anthropicFake = await startAnthropicFake();
afterAll(() => anthropicFake.close());
const { prompt_tokens: PROMPT_TOKENS, completion_tokens: COMPLETION_TOKENS } = CHAT_USAGE;
/** A loopback port nobody listens on (one was, a moment ago): a provider that is down. */
const downPort = await new Promise<number>((resolve) => {
  const probe = createServer().listen(0, '127.0.0.1', () => {
    const { port } = probe.address() as { port: number };
    probe.close(() => resolve(port));
  });
});
/** The body of the last chat completion the fake provider received. */
const lastChatBody = () => fake.requestsTo(PROVIDER_CHAT_ROUTE).at(-1)!.body;

/** Waits for the usage rows the gateway commits before it answers (streams: before the last event). */
async function usageOf(gateway: TestGateway, path: string) {
  return (await gateway.call('GET', path)).json;
}

describe.each(backends)('forwarding on $name', (backend) => {
  let gateway: TestGateway;
  let virtualKey: { id: string; key: string };
  let viaKey: OpenAI;
  let viaMaster: OpenAI;

  useTestGateway(
    backend,
    () => ({
      providers: {
        openai: { api_key: 'sk-provider-secret', api_base: fake.baseURL },
        anthropic: { api_key: 'sk-ant-secret', api_base: anthropicFake.server.url },
        groq: { api_key: 'gsk-secret', api_base: `http://127.0.0.1:${downPort}/v1` },
      },
      // every model the tests call is priced (require_pricing is on); the anthropic models are in the bundled table
      pricing: { 'openai:gpt-fake': TEST_PRICING, 'openai:embed-fake': { input_cost_per_million: 0.02 }, 'groq:llama-down': TEST_PRICING },
    }),
    async (started) => {
      gateway = started;
      await gateway.call('POST', '/v1/users', { body: { user_id: 'carol', alias: 'Carol' } });
      virtualKey = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'app', user_id: 'carol' } })).json;
      viaKey = new OpenAI({ apiKey: virtualKey.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
      viaMaster = new OpenAI({ apiKey: MASTER_KEY, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    },
  );

  it.skipIf(backend.skipReason)('the openai client with a virtual key: chat, passing other fields on, usage and cost recorded', async () => {
    const completion = await viaKey.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], temperature: 0.3, max_tokens: 50 });
    expect(completion.choices[0].message.content).toBe(DEFAULT_COMPLETION_TEXT);
    expect(completion.usage).toMatchObject({ prompt_tokens: PROMPT_TOKENS, completion_tokens: COMPLETION_TOKENS });
    const forwarded = lastChatBody();
    expect(forwarded).toMatchObject({ model: 'gpt-fake', temperature: 0.3, max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }] });
    const usage = await usageOf(gateway, `/v1/keys/${virtualKey.id}/usage`);
    expect(usage.data[0]).toMatchObject({
      key_id: virtualKey.id,
      user_id: 'carol',
      endpoint: 'chat.completions',
      provider: 'openai',
      model: 'gpt-fake',
      prompt_tokens: PROMPT_TOKENS,
      completion_tokens: COMPLETION_TOKENS,
      status: 'success',
      status_code: 200,
    });
    // CHAT_USAGE at TEST_PRICING: 12 tokens at $1000/M + 6 at $2000/M = $0.024
    expect(usage.data[0].cost).toBeCloseTo(CHAT_COST, 10);
    expect(usage.data[0].duration_ms).toBeGreaterThan(0);
    expect(usage.totals).toMatchObject({ requests: 1, prompt_tokens: PROMPT_TOKENS, completion_tokens: COMPLETION_TOKENS });
  });

  it.skipIf(backend.skipReason)('the openai client with the master key: user is required (400), must exist (404), and is charged', async () => {
    const missing = viaMaster.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] });
    await expect(missing).rejects.toMatchObject({ status: 400, code: 'missing_user', param: 'user' });
    const unknown = viaMaster.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], user: 'nobody' });
    await expect(unknown).rejects.toMatchObject({ status: 404, code: 'user_not_found' });
    const completion = await viaMaster.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], user: 'carol' });
    expect(completion.choices[0].message.content).toBe(DEFAULT_COMPLETION_TEXT);
    // The gateway's `user` selects whom to charge; it is not sent to the provider.
    expect(lastChatBody()).not.toHaveProperty('user');
    const usage = await usageOf(gateway, '/v1/users/carol/usage');
    expect(usage.data[0]).toMatchObject({ user_id: 'carol', key_id: null, status: 'success' });
  });

  it.skipIf(backend.skipReason)('streaming: chunks unchanged, [DONE] at the end, usage asked of the provider and recorded', async () => {
    const stream = await viaKey.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], stream: true });
    let text = '';
    let usageChunks = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usageChunks++;
    }
    expect(text).toBe(DEFAULT_STREAM_PIECES.join(''));
    // The client did not ask for usage, so it gets none, but the gateway asked the provider.
    expect(usageChunks).toBe(0);
    expect(lastChatBody()).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    const streamed = chatStreamUsage();
    const usage = await usageOf(gateway, `/v1/keys/${virtualKey.id}/usage`);
    expect(usage.data[0]).toMatchObject({ prompt_tokens: streamed.prompt_tokens, completion_tokens: streamed.completion_tokens, status: 'success' });

    const withUsage = await viaMaster.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], stream: true, stream_options: { include_usage: true }, user: 'carol' });
    const chunks = [];
    for await (const chunk of withUsage) chunks.push(chunk);
    expect(chunks.at(-1)?.usage).toMatchObject({ prompt_tokens: streamed.prompt_tokens, completion_tokens: streamed.completion_tokens });

    const raw = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${virtualKey.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], stream: true }),
    });
    expect(raw.headers.get('content-type')).toContain('text/event-stream');
    expect((await raw.text()).trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it.skipIf(backend.skipReason)('a provider that is down: 502 upstream_error that says why (ECONNREFUSED), and an error row', async () => {
    const failure = await viaKey.chat.completions.create({ model: 'groq:llama-down', messages: [{ role: 'user', content: 'Hi' }] }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect(failure).toMatchObject({ status: 502, code: 'upstream_error' });
    expect((failure as Error).message).toMatch(/^502 Provider groq: .*\(ECONNREFUSED\)$/);
    expect((failure as Error).message).not.toContain(String(downPort));
    const usage = await usageOf(gateway, `/v1/keys/${virtualKey.id}/usage`);
    expect(usage.data[0]).toMatchObject({ provider: 'groq', model: 'llama-down', status: 'error', status_code: 502 });
  });

  it.skipIf(backend.skipReason)('a stream cut by the provider ends with an error event and an error usage row with what was streamed', async () => {
    // The role chunk, "Hello" and " from", then the connection drops.
    const cut: ScriptedReply = { sse: chatChunks('gpt-fake').slice(0, 3), cut: true };
    fake.script(PROVIDER_CHAT_ROUTE, cut, cut);
    const response = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${virtualKey.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], stream: true }),
    });
    const text = await response.text();
    const events = text.trim().split('\n\n');
    expect(events.slice(0, -1).join('\n')).toContain('Hello');
    const last = JSON.parse(events.at(-1)!.replace(/^data: /, ''));
    expect(last.error).toMatchObject({ type: 'upstream_error', code: 'upstream_error' });
    expect(text).not.toContain('[DONE]');
    const stream = await viaKey.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], stream: true });
    await expect(
      (async () => {
        for await (const _chunk of stream) {
          // consume
        }
      })(),
    ).rejects.toThrow(/Provider openai/);
    const usage = await usageOf(gateway, `/v1/keys/${virtualKey.id}/usage`);
    expect(usage.data[0]).toMatchObject({ model: 'gpt-fake', status: 'error', status_code: 502 });
    expect(usage.data[0].completion_tokens).toBeGreaterThan(0);
  });

  it.skipIf(backend.skipReason)('a client that goes away mid-stream aborts the provider call; the row says cancelled', async () => {
    const abandoned = fake.abandonedStreams;
    // The role chunk and "Hello", then the provider says nothing more.
    fake.script(PROVIDER_CHAT_ROUTE, { sse: chatChunks('gpt-fake').slice(0, 2), hold: true });
    const controller = new AbortController();
    const response = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${virtualKey.key}`, 'content-type': 'application/json', 'x-request-id': `walk-away-${backend.name}` },
      body: JSON.stringify({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], stream: true }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    let received = '';
    while (!received.includes('Hello')) {
      const { value, done } = await reader.read();
      if (done) break;
      received += new TextDecoder().decode(value);
    }
    expect(received).toContain('Hello');
    controller.abort();
    let row: { status: string; status_code: number; completion_tokens: number } | undefined;
    for (let attempt = 0; attempt < 200 && !row; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const usage = await usageOf(gateway, `/v1/keys/${virtualKey.id}/usage?limit=5`);
      row = usage.data.find((r: { request_id: string }) => r.request_id === `walk-away-${backend.name}`);
    }
    expect(row).toMatchObject({ status: 'cancelled', status_code: 499 });
    expect(row!.completion_tokens).toBeGreaterThan(0);
    for (let attempt = 0; attempt < 200 && fake.abandonedStreams === abandoned; attempt++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(fake.abandonedStreams).toBe(abandoned + 1);
  });

  it.skipIf(backend.skipReason)('provider failures map to 429 with Retry-After, 400, 502 — never a bare 500 — and leak no provider key', async () => {
    const { rateLimited, badRequest, serverError, unauthorized: rejected } = PROVIDER_FAILURES;
    fake.script(PROVIDER_CHAT_ROUTE, rateLimited, badRequest, serverError, rejected);
    const call = () =>
      fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${virtualKey.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] }),
      });
    const limited = await call();
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    expect(((await limited.json()) as ErrorBody).error).toMatchObject({ type: 'rate_limit_error', code: 'upstream_rate_limited' });
    const bad = await call();
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as ErrorBody).error.message).toContain("Invalid value for 'temperature'");
    expect((await call()).status).toBe(502);
    const unauthorized = await call();
    expect(unauthorized.status).toBe(502);
    const body = await unauthorized.text();
    expect(body).toContain('upstream_authentication_failed');
    expect(body).not.toContain(KEY_IN_PROVIDER_ERROR);
    const unknownProvider = await viaKey.chat.completions.create({ model: 'nope:x', messages: [{ role: 'user', content: 'Hi' }] }).catch((e) => e);
    expect(unknownProvider).toMatchObject({ status: 400, code: 'unknown_provider' });
    const noProvider = await viaKey.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'Hi' }] }).catch((e) => e);
    expect(noProvider).toMatchObject({ status: 400, param: 'model' });
    const noMessages = await viaKey.chat.completions.create({ model: 'openai:gpt-fake', messages: [] }).catch((e) => e);
    expect(noMessages).toMatchObject({ status: 400, param: 'messages' });
    const usage = await usageOf(gateway, `/v1/keys/${virtualKey.id}/usage?limit=4`);
    expect(usage.data.map((row: { status_code: number }) => row.status_code)).toEqual([502, 502, 400, 429]);
  });

  it.skipIf(backend.skipReason)('embeddings (float and the client default base64) and model listing through the openai client', async () => {
    const embeddings = await viaKey.embeddings.create({ model: 'openai:embed-fake', input: ['abc', 'hello'] });
    // The provider's numbers at float32 precision: the openai SDK inside Hub asks the provider for base64 (float32),
    // as it does by default, and the openai client here decodes the gateway's base64 as float32.
    const float32Embedding = (text: string) => Array.from(new Float32Array(fakeEmbedding(text)));
    expect(embeddings.data.map((item) => Array.from(item.embedding))).toEqual(['abc', 'hello'].map(float32Embedding));
    const floats = await viaMaster.embeddings.create({ model: 'openai:embed-fake', input: 'abcd', encoding_format: 'float', user: 'carol' });
    expect(floats.data[0].embedding).toEqual(float32Embedding('abcd'));
    const usage = await usageOf(gateway, `/v1/keys/${virtualKey.id}/usage`);
    expect(usage.data[0]).toMatchObject({ endpoint: 'embeddings', prompt_tokens: 2 * EMBEDDING_TOKENS_PER_INPUT, completion_tokens: 0 });

    const models = [];
    for await (const model of viaKey.models.list()) models.push(model.id);
    expect(models).toEqual(expect.arrayContaining([...FAKE_MODEL_IDS.map((id) => `openai:${id}`), 'anthropic:claude-opus-4-5']));
    const viaMasterModels = [];
    for await (const model of viaMaster.models.list()) viaMasterModels.push(model.id);
    expect(viaMasterModels.sort()).toEqual([...models].sort());
    const one = await gateway.call('GET', '/v1/models?provider=anthropic', { key: virtualKey.key });
    expect(one.json.data.every((model: { id: string }) => model.id.startsWith('anthropic:'))).toBe(true);
    expect((await gateway.call('GET', '/v1/models?provider=nope', { key: virtualKey.key })).json.error.code).toBe('unknown_provider');
  });

  it.skipIf(backend.skipReason)('the Anthropic client does messages (plain and streaming) with x-api-key', async () => {
    const client = new Anthropic({ apiKey: virtualKey.key, baseURL: gateway.url, maxRetries: 0 });
    const message = await client.messages.create({ model: 'anthropic:claude-haiku-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'ping' }] });
    expect(message.content[0]).toMatchObject({ type: 'text', text: 'echo: ping' });
    const stream = client.messages.stream({ model: 'anthropic:claude-haiku-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'pong' }] });
    const final = await stream.finalMessage();
    expect(final.content[0]).toMatchObject({ type: 'text', text: 'echo: pong' });
    const usage = await usageOf(gateway, `/v1/keys/${virtualKey.id}/usage?limit=2`);
    expect(usage.data.map((row: { endpoint: string; status: string }) => [row.endpoint, row.status])).toEqual([
      ['messages', 'success'],
      ['messages', 'success'],
    ]);
    // input_tokens leaves out cached prompt tokens; the row counts the whole prompt, like OpenAI's prompt_tokens
    const { input_tokens, cache_read_input_tokens, cache_creation_input_tokens } = final.usage;
    expect(cache_read_input_tokens).toBeGreaterThan(0);
    expect(usage.data[0].prompt_tokens).toBe(input_tokens + (cache_read_input_tokens ?? 0) + (cache_creation_input_tokens ?? 0));
    expect(usage.data[0].completion_tokens).toBe(final.usage.output_tokens);
    expect(usage.data[1].prompt_tokens).toBe(usage.data[0].prompt_tokens); // the plain call's usage is the same
    const refused = await new Anthropic({ apiKey: 'gw-wrong', baseURL: gateway.url, maxRetries: 0 }).messages
      .create({ model: 'anthropic:claude-haiku-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(refused).toBeInstanceOf(Anthropic.AuthenticationError);
  });

  it.skipIf(backend.skipReason)('an Anthropic stream cut mid-way ends with an error event the Anthropic client raises', async () => {
    const body = { model: 'claude-haiku-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'a long answer please' }] };
    anthropicFake.server.enqueue({ sse: fakeMessageEvents(body), cutAfter: 4 });
    const client = new Anthropic({ apiKey: virtualKey.key, baseURL: gateway.url, maxRetries: 0 });
    const stream = client.messages.stream({ ...body, model: 'anthropic:claude-haiku-4-5' } as Anthropic.MessageCreateParamsNonStreaming);
    const failure = await stream.finalMessage().catch((e) => e);
    expect(failure).toBeInstanceOf(Error);
    expect(String(failure.message)).toMatch(/Provider anthropic/);
    const usage = await usageOf(gateway, `/v1/keys/${virtualKey.id}/usage?limit=1`);
    expect(usage.data[0]).toMatchObject({ endpoint: 'messages', status: 'error', status_code: 502 });
  });

  it.skipIf(backend.skipReason)('messages with the master key charge metadata.user_id; Hub converts them for an OpenAI-compatible provider', async () => {
    const client = new Anthropic({ apiKey: MASTER_KEY, baseURL: gateway.url, maxRetries: 0 });
    const missing = await client.messages.create({ model: 'openai:gpt-fake', max_tokens: 16, messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(missing).toBeInstanceOf(Anthropic.BadRequestError);
    expect(missing.error).toMatchObject({ type: 'error', error: { code: 'missing_user', param: 'user' } });
    const message = await client.messages.create({ model: 'openai:gpt-fake', max_tokens: 16, messages: [{ role: 'user', content: 'x' }], metadata: { user_id: 'carol' } });
    expect(message.content[0]).toMatchObject({ type: 'text', text: DEFAULT_COMPLETION_TEXT });
    // Hub reports the provider's cached prompt tokens apart, as Anthropic does; the row counts and bills them all.
    const cached = CHAT_USAGE.prompt_tokens_details.cached_tokens;
    expect(message.usage).toMatchObject({ input_tokens: CHAT_USAGE.prompt_tokens - cached, cache_read_input_tokens: cached, output_tokens: CHAT_USAGE.completion_tokens });
    const usage = await usageOf(gateway, '/v1/users/carol/usage?limit=1');
    expect(usage.data[0]).toMatchObject({ endpoint: 'messages', provider: 'openai', model: 'gpt-fake', key_id: null, prompt_tokens: CHAT_USAGE.prompt_tokens });
    expect(usage.data[0].cost).toBeCloseTo(CHAT_COST, 9);
  });

  it.skipIf(backend.skipReason)('every response body matches the schema the OpenAPI document gives for its path and status', async () => {
    const document = (await gateway.call('GET', '/openapi.json', { key: null })).json;
    const ajv = new Ajv2020({ strict: false });
    ajv.addSchema(document, 'openapi');
    const check = async (method: string, path: string, template: string, options: { key?: string | null; body?: unknown } = {}) => {
      const response = await gateway.call(method, path, options);
      const described = document.paths[template][method.toLowerCase()].responses[String(response.status)];
      expect(described, `${method} ${path} → ${response.status} is documented`).toBeDefined();
      const pointer = ['paths', template, method.toLowerCase(), 'responses', String(response.status), 'content', 'application/json', 'schema']
        .map((part) => encodeURIComponent(part.replace(/~/g, '~0').replace(/\//g, '~1')))
        .join('/');
      const validate = ajv.compile({ $ref: `openapi#/${pointer}` });
      expect(validate(response.json), `${method} ${path} → ${response.status}: ${ajv.errorsText(validate.errors)}`).toBe(true);
      return response;
    };
    const budget = (await check('POST', '/v1/budgets', '/v1/budgets', { body: { max_budget: 5, reset_every_seconds: 60 } })).json;
    await check('POST', '/v1/users', '/v1/users', { body: { user_id: 'schema-user', alias: 'S', budget_id: budget.budget_id } });
    await check('POST', '/v1/users', '/v1/users', { body: { user_id: 'schema-user', alias: 'S' } });
    await check('GET', '/v1/users/schema-user', '/v1/users/{user_id}');
    await check('GET', '/v1/users/nobody', '/v1/users/{user_id}');
    const key = (await check('POST', '/v1/keys', '/v1/keys', { body: { key_name: 'schema', user_id: 'schema-user' } })).json;
    await check('GET', `/v1/keys/${key.id}`, '/v1/keys/{key_id}');
    await check('PATCH', `/v1/keys/${key.id}`, '/v1/keys/{key_id}', { body: { is_active: true } });
    await check('GET', `/v1/keys/${key.id}`, '/v1/keys/{key_id}', { key: key.key });
    await check('GET', `/v1/budgets/${budget.budget_id}`, '/v1/budgets/{budget_id}');
    await check('PUT', '/v1/pricing/openai:schema', '/v1/pricing/{model}', { body: { input_cost_per_million: 1, output_cost_per_million: 2 } });
    await check('POST', '/v1/chat/completions', '/v1/chat/completions', { key: key.key, body: { model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] } });
    fake.script(PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES.rateLimited);
    await check('POST', '/v1/chat/completions', '/v1/chat/completions', { key: key.key, body: { model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] } });
    await check('POST', '/v1/chat/completions', '/v1/chat/completions', { key: null, body: { model: 'openai:gpt-fake', messages: [] } });
    await check('POST', '/v1/embeddings', '/v1/embeddings', { key: key.key, body: { model: 'openai:embed-fake', input: 'x' } });
    await check('GET', '/v1/models', '/v1/models', { key: key.key });
    await check('POST', '/v1/messages', '/v1/messages', { key: key.key, body: { model: 'anthropic:claude-haiku-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] } });
    await check('GET', `/v1/keys/${key.id}/usage`, '/v1/keys/{key_id}/usage');
    await check('GET', '/v1/users/schema-user/usage', '/v1/users/{user_id}/usage');
    await check('DELETE', `/v1/keys/${key.id}`, '/v1/keys/{key_id}');
  });

  it.skipIf(backend.skipReason)('a budget for 10 calls holds against 100 concurrent calls (no overspend: every hold covers its call)', async () => {
    // Each call costs CHAT_COST at the configured pricing. The reservation must not be below the cost for the bound to
    // hold: max_tokens caps the output, and this prompt's size estimate (characters / 4) exceeds the prompt tokens billed.
    const prompt = 'Please answer this question briefly and politely.';
    const budget = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 10 * CHAT_COST } })).json;
    const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'budgeted', budget_id: budget.budget_id } })).json;
    const client = new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    const results = await Promise.allSettled(
      Array.from({ length: 100 }, () => client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: prompt }], max_tokens: COMPLETION_TOKENS })),
    );
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason);
    // Without reservations all 100 would pass the check "spend < limit" at once. With holds that must fit what is
    // left (spend + reserved + hold <= limit) at most 10 do.
    expect(ok).toBeGreaterThanOrEqual(1);
    expect(ok).toBeLessThanOrEqual(10);
    expect(refused.length).toBe(100 - ok);
    expect(refused.every((e) => e.status === 403 && e.code === 'budget_exceeded')).toBe(true);
    const after = (await gateway.call('GET', `/v1/budgets/${budget.budget_id}`)).json;
    expect(after.reserved).toBe(0);
    expect(after.spend).toBeCloseTo(ok * CHAT_COST, 10);
    expect(after.spend).toBeLessThanOrEqual(10 * CHAT_COST + 1e-12);
    // Every refusal has its row too (status refused, reason budget_exceeded, nothing charged).
    const { data: rows } = (await gateway.call('GET', `/v1/keys/${key.id}/usage?limit=1000`)).json;
    expect(rows.filter((row: { status: string }) => row.status === 'success')).toHaveLength(ok);
    const refusedRows = rows.filter((row: { status: string }) => row.status === 'refused');
    expect(refusedRows).toHaveLength(100 - ok);
    expect(refusedRows.every((row: { reason: string; status_code: number; cost: number }) => row.reason === 'budget_exceeded' && row.status_code === 403 && row.cost === 0)).toBe(true);
    const metrics = (await gateway.call('GET', '/metrics', { key: null })).json as string;
    expect(metrics).toMatch(/gateway_budget_rejections_total\{scope="key"\} (\d+)/);
  });

  it.skipIf(backend.skipReason)("a key's own budget and its owner's both apply; a refusal by one gives the other's hold back", async () => {
    const keyBudget = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 100 } })).json;
    const userBudget = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 0 } })).json;
    await gateway.call('POST', '/v1/users', { body: { user_id: 'erin', alias: 'Erin', budget_id: userBudget.budget_id } });
    const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'erin', user_id: 'erin', budget_id: keyBudget.budget_id } })).json;
    const client = new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    const refused = await client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] }).catch((e) => e);
    expect(refused).toMatchObject({ status: 403, code: 'budget_exceeded' });
    expect(refused.message).toContain(`user "erin"`);
    expect((await gateway.call('GET', `/v1/budgets/${keyBudget.budget_id}`)).json).toMatchObject({ reserved: 0, spend: 0 });
    // Raising the owner's limit lets the key spend, and both budgets are charged.
    await gateway.call('PATCH', `/v1/budgets/${userBudget.budget_id}`, { body: { max_budget: 1 } });
    await client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], max_tokens: COMPLETION_TOKENS });
    const [forKey, forUser] = await Promise.all([keyBudget, userBudget].map(async (b) => (await gateway.call('GET', `/v1/budgets/${b.budget_id}`)).json));
    expect(forKey).toMatchObject({ reserved: 0 });
    expect(forKey.spend).toBeCloseTo(CHAT_COST, 10);
    expect(forUser.spend).toBeCloseTo(CHAT_COST, 10);
  });

  it.skipIf(backend.skipReason)("a user's periodic budget resets on time; the key owner's budget applies to the key", async () => {
    const budget = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: CHAT_COST, reset_every_seconds: 3 } })).json;
    await gateway.call('POST', '/v1/users', { body: { user_id: 'dave', alias: 'Dave', budget_id: budget.budget_id } });
    const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'dave', user_id: 'dave' } })).json;
    const client = new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    const ask = () => client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], max_tokens: COMPLETION_TOKENS });
    await ask();
    await expect(ask()).rejects.toMatchObject({ status: 403, code: 'budget_exceeded' });
    await expect(viaMaster.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }], user: 'dave' })).rejects.toMatchObject({ status: 403 });
    // Wait until the period is over, as the budget itself says.
    const nextReset = Date.parse(`${budget.next_reset_at}Z`);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, nextReset - Date.now()) + 150));
    expect((await gateway.call('GET', `/v1/budgets/${budget.budget_id}`)).json.spend).toBe(0);
    await expect(ask()).resolves.toBeDefined();
  });
});
