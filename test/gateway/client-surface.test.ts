import { Validator } from '@seriousme/openapi-schema-validator';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { defaultFrontDoor } from '../../src/gateway/front-door-settings.ts';
import { splitModel } from '../../src/gateway/model-router.ts';
import { fakeInputTokens, startAnthropicFake } from '../fakes/anthropic.ts';
import { CHAT_USAGE, DEFAULT_COMPLETION_TEXT, FAKE_MODEL_IDS } from '../fakes/openai-compatible.ts';
import { MASTER_KEY, PROVIDER_CHAT_ROUTE, startTestGateway, TEST_PRICING, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';
import { startPostgres } from './helpers/postgres.ts';

// Issue 35, "client surface": calls the unchanged openai and @anthropic-ai/sdk clients make that the gateway must answer.

const backends = await useBackends();
const fake = await useFakeProvider();
const anthropicFake = await startAnthropicFake();
afterAll(() => anthropicFake.close());

describe('provider/model names (splitModel)', () => {
  const providers = ['openai', 'openrouter', 'anthropic'];
  it.each([
    ['openai:gpt-4o', 'openai', 'gpt-4o'],
    ['openai/gpt-4o', 'openai', 'gpt-4o'],
    // the first ':' splits when its prefix is a provider: the model keeps its '/'
    ['openrouter:meta-llama/llama-3', 'openrouter', 'meta-llama/llama-3'],
    // else the first '/' splits when its prefix is one: the model keeps its ':'
    ['openrouter/meta-llama/llama-3:free', 'openrouter', 'meta-llama/llama-3:free'],
    ['openai/gpt-4o:2024-08-06', 'openai', 'gpt-4o:2024-08-06'],
  ])('%s → %s + %s', (value, provider, model) => {
    expect(splitModel(value, providers)).toEqual({ provider, model });
  });
  it.each([
    ['meta-llama/llama-3', 'unknown_provider'],
    ['nope:gpt', 'unknown_provider'],
    ['gpt-4o', 'invalid_request'],
    ['openai/', 'invalid_request'],
    ['/gpt-4o', 'invalid_request'],
  ])('%s is refused (%s)', (value, code) => {
    expect(() => splitModel(value, providers)).toThrow(expect.objectContaining({ status: 400, code }));
  });
});

describe.each(backends)('client surface on $name', (backend) => {
  let gateway: TestGateway;
  let virtualKey: { id: string; key: string };
  let narrowKey: { id: string; key: string };
  let viaKey: OpenAI;

  useTestGateway(
    backend,
    () => ({
      providers: {
        openai: { api_key: 'sk-provider-secret', api_base: fake.baseURL },
        anthropic: { api_key: 'sk-ant-secret', api_base: anthropicFake.server.url },
      },
      pricing: { 'openai:gpt-fake': TEST_PRICING },
      models: { 'team/fast': { targets: [{ model: 'openai:gpt-fake' }] } },
    }),
    async (started) => {
      gateway = started;
      virtualKey = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'app' } })).json;
      narrowKey = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'narrow', allowed_models: ['openai:fake-model-1'] } })).json;
      viaKey = new OpenAI({ apiKey: virtualKey.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    },
  );

  it.skipIf(backend.skipReason)('openai models.retrieve: provider:model, provider/model, a route name, as the list shows them', async () => {
    const listed = new Map<string, unknown>();
    for await (const model of viaKey.models.list()) listed.set(model.id, model);
    for (const id of ['openai:fake-model-1', 'openai/fake-model-1']) {
      const model = await viaKey.models.retrieve(id);
      expect(model).toEqual(listed.get('openai:fake-model-1'));
    }
    expect(await viaKey.models.retrieve('anthropic:claude-haiku-4-5')).toEqual(listed.get('anthropic:claude-haiku-4-5'));
    expect(await viaKey.models.retrieve('team/fast')).toEqual(listed.get('team/fast'));
    // the master key sees the route's targets, as in the list
    const master = new OpenAI({ apiKey: MASTER_KEY, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    expect(await master.models.retrieve('team/fast')).toMatchObject({ id: 'team/fast', owned_by: 'gateway', targets: [{ model: 'openai:gpt-fake' }] });
    // unencoded '/' and ':' in the path work too
    const raw = await gateway.call('GET', '/v1/models/openai/fake-model-2', { key: virtualKey.key });
    expect(raw.json).toMatchObject({ id: 'openai:fake-model-2', object: 'model' });
    expect(FAKE_MODEL_IDS).toContain('fake-model-2');
  });

  it.skipIf(backend.skipReason)('models.retrieve of an unknown or forbidden model: 404 model_not_found in OpenAI\'s shape', async () => {
    for (const id of ['openai:no-such-model', 'nope:gpt', 'gpt-4o', 'team/slow']) {
      const failure = await viaKey.models.retrieve(id).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(OpenAI.NotFoundError);
      expect((failure as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({ code: 'model_not_found', type: 'invalid_request_error', param: 'model' });
    }
    const narrow = new OpenAI({ apiKey: narrowKey.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    expect(await narrow.models.retrieve('openai:fake-model-1')).toMatchObject({ id: 'openai:fake-model-1' });
    await expect(narrow.models.retrieve('openai:fake-model-2')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(narrow.models.retrieve('team/fast')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const unauthenticated = await gateway.call('GET', '/v1/models/openai:fake-model-1', { key: null });
    expect(unauthenticated.status).toBe(401);
  });

  it.skipIf(backend.skipReason)('x-api-key is a credential on every route, after X-Hub-Key and Authorization', async () => {
    const chat = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'x-api-key': virtualKey.key, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(chat.status).toBe(200);
    // a management route with the master key in x-api-key; a virtual key there is still refused
    expect((await fetch(`${gateway.url}/v1/keys`, { headers: { 'x-api-key': MASTER_KEY } })).status).toBe(200);
    const refused = await fetch(`${gateway.url}/v1/keys`, { headers: { 'x-api-key': virtualKey.key } });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('master_key_required');
    // Authorization wins over x-api-key
    const both = await fetch(`${gateway.url}/v1/keys`, { headers: { 'x-api-key': MASTER_KEY, authorization: `Bearer ${virtualKey.key}` } });
    expect(both.status).toBe(403);
    const wrong = await fetch(`${gateway.url}/v1/models`, { headers: { 'x-api-key': 'gw-wrong' } });
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    // the Anthropic client (x-api-key) on the models list and the OpenAI-format routes' neighbours
    const anthropic = new Anthropic({ apiKey: virtualKey.key, baseURL: gateway.url, maxRetries: 0 });
    const message = await anthropic.messages.create({ model: 'anthropic/claude-haiku-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'ping' }] });
    expect(message.content[0]).toMatchObject({ type: 'text', text: 'echo: ping' });
  });

  it.skipIf(backend.skipReason)('provider/model names are called like provider:model', async () => {
    const completion = await viaKey.chat.completions.create({ model: 'openai/gpt-fake', messages: [{ role: 'user', content: 'Hi' }] });
    expect(completion.choices[0].message.content).toBe(DEFAULT_COMPLETION_TEXT);
    expect(fake.requestsTo(PROVIDER_CHAT_ROUTE).at(-1)!.body).toMatchObject({ model: 'gpt-fake' });
    const usage = (await gateway.call('GET', `/v1/keys/${virtualKey.id}/usage?limit=1`)).json;
    expect(usage.data[0]).toMatchObject({ provider: 'openai', model: 'gpt-fake', status: 'success' });
    // a route name with '/' is the route, not a provider
    expect((await viaKey.chat.completions.create({ model: 'team/fast', messages: [{ role: 'user', content: 'Hi' }] })).choices[0].message.content).toBe(DEFAULT_COMPLETION_TEXT);
    const unknown = await viaKey.chat.completions.create({ model: 'meta-llama/llama-3', messages: [{ role: 'user', content: 'Hi' }] }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.BadRequestError);
    expect((unknown as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ code: 'unknown_provider' });
  });
  it.skipIf(backend.skipReason)('Anthropic messages.countTokens: counted by Anthropic, estimated (and flagged) elsewhere, never billed', async () => {
    const anthropic = new Anthropic({ apiKey: virtualKey.key, baseURL: gateway.url, maxRetries: 0 });
    const rowsBefore = (await gateway.call('GET', `/v1/keys/${virtualKey.id}/usage`)).json.totals.requests;
    const params = {
      model: 'anthropic:claude-haiku-4-5',
      system: 'Be brief.',
      messages: [{ role: 'user' as const, content: 'how many tokens is this?' }],
      tools: [{ name: 'get_time', description: 'The time', input_schema: { type: 'object' as const, properties: {} } }],
    };
    const { data, response } = await anthropic.messages.countTokens(params).withResponse();
    expect(data).toEqual({ input_tokens: fakeInputTokens(params) });
    expect(response.headers.get('x-token-count-estimate')).toBeNull();
    const sent = anthropicFake.server.requests.filter((r) => r.path === '/v1/messages/count_tokens').at(-1)!;
    expect(sent.json).toEqual({ ...params, model: 'claude-haiku-4-5' });
    // provider/model and the master key in Authorization work the same
    const master = new Anthropic({ authToken: MASTER_KEY, apiKey: null, baseURL: gateway.url, maxRetries: 0 });
    expect((await master.messages.countTokens({ ...params, model: 'anthropic/claude-haiku-4-5' })).input_tokens).toBe(fakeInputTokens(params));
    // a provider without count_tokens (and a route to one): an estimate, flagged
    for (const model of ['openai:gpt-fake', 'team/fast']) {
      const estimated = await anthropic.messages.countTokens({ ...params, model }).withResponse();
      expect(estimated.data.input_tokens).toBeGreaterThan(0);
      expect(estimated.response.headers.get('x-token-count-estimate')).toBe('true');
    }
    expect((await gateway.call('GET', `/v1/keys/${virtualKey.id}/usage`)).json.totals.requests).toBe(rowsBefore);
  });

  it.skipIf(backend.skipReason)('countTokens refusals: credential, allowed models, body, unknown provider — in Anthropic\'s error shape', async () => {
    const params = { model: 'anthropic:claude-haiku-4-5', messages: [{ role: 'user' as const, content: 'x' }] };
    const wrong = new Anthropic({ apiKey: 'gw-wrong', baseURL: gateway.url, maxRetries: 0 });
    await expect(wrong.messages.countTokens(params)).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
    const narrow = new Anthropic({ apiKey: narrowKey.key, baseURL: gateway.url, maxRetries: 0 });
    const refused = await narrow.messages.countTokens(params).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect((refused as InstanceType<typeof Anthropic.PermissionDeniedError>).error).toMatchObject({ type: 'error', error: { code: 'model_not_allowed' } });
    const anthropic = new Anthropic({ apiKey: virtualKey.key, baseURL: gateway.url, maxRetries: 0 });
    await expect(anthropic.messages.countTokens({ ...params, model: 'nope:model' })).rejects.toBeInstanceOf(Anthropic.BadRequestError);
    await expect(anthropic.messages.countTokens({ ...params, messages: [] })).rejects.toBeInstanceOf(Anthropic.BadRequestError);
  });
  it.skipIf(backend.skipReason)('the OpenAPI document is valid and has the new routes', async () => {
    const document = (await gateway.call('GET', '/openapi.json', { key: null })).json;
    const result = await new Validator().validate(document);
    expect(result.errors ?? []).toEqual([]);
    for (const path of ['/v1/models/{model}', '/v1/messages/count_tokens', '/health/liveness', '/health/readiness']) expect(document.paths).toHaveProperty([path]);
    expect(document.components.securitySchemes.anthropicKey).toMatchObject({ in: 'header', name: 'x-api-key' });
  });
});

describe.each(backends)('x-api-key and the failed-key throttle on $name', (backend) => {
  let gateway: TestGateway;
  useTestGateway(
    backend,
    () => ({ frontDoor: { ...defaultFrontDoor(), authThrottle: { maxFailures: 3, windowSeconds: 60 } } }),
    (started) => {
      gateway = started;
    },
  );

  it.skipIf(backend.skipReason)('invalid keys in x-api-key count, then every credential is refused with 429', async () => {
    for (let i = 0; i < 3; i++) expect((await fetch(`${gateway.url}/v1/models`, { headers: { 'x-api-key': `gw-wrong-${i}` } })).status).toBe(401);
    const throttled = await fetch(`${gateway.url}/v1/keys`, { headers: { 'x-api-key': MASTER_KEY } });
    expect(throttled.status).toBe(429);
    expect(throttled.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(((await throttled.json()) as { error: { code: string } }).error.code).toBe('too_many_auth_failures');
  });
});

describe.each(backends)('health routes on $name', (backend) => {
  it.skipIf(backend.skipReason)('liveness is 200 while the process runs; readiness is 503 while the gateway shuts down', async () => {
    const gateway = await startTestGateway(await backend.newDatabaseUrl(), {}, { shutdownDelayMs: 600 });
    expect(await gateway.call('GET', '/health/liveness', { key: null })).toMatchObject({ status: 200, json: { status: 'ok' } });
    expect(await gateway.call('GET', '/health/readiness', { key: null })).toMatchObject({ status: 200, json: { status: 'ok', database: backend.name } });
    expect(await gateway.call('GET', '/health', { key: null })).toMatchObject({ status: 200, json: { status: 'ok' } });
    const closed = gateway.close();
    // during the shutdown delay requests are still served, and readiness says not to send more
    const readiness = await gateway.call('GET', '/health/readiness', { key: null });
    expect(readiness).toMatchObject({ status: 503, json: { error: { code: 'shutting_down', type: 'api_error' } } });
    expect(readiness.headers.get('retry-after')).toBe('5');
    expect((await gateway.call('GET', '/health/liveness', { key: null })).status).toBe(200);
    expect((await gateway.call('GET', '/v1/keys')).status).toBe(200);
    await closed;
  });

  it.skipIf(backend.skipReason)('readiness is 503 database_unavailable when the database does not answer', async () => {
    const gateway = await startTestGateway(await backend.newDatabaseUrl());
    const ping = vi.spyOn(gateway.store, 'ping').mockRejectedValue(new Error('disk I/O error'));
    const readiness = await gateway.call('GET', '/health/readiness', { key: null });
    expect(readiness).toMatchObject({ status: 503, json: { error: { code: 'database_unavailable' } } });
    expect(readiness.headers.get('retry-after')).toBe('5');
    expect((await gateway.call('GET', '/health/liveness', { key: null })).status).toBe(200);
    ping.mockRestore();
    expect((await gateway.call('GET', '/health/readiness', { key: null })).status).toBe(200);
    await gateway.close();
  });
});

describe('readiness when the PostgreSQL server is gone', async () => {
  const started = await startPostgres();
  it.skipIf(!started.server)('503 database_unavailable once the server stops; liveness stays 200', async () => {
    const server = started.server!;
    const gateway = await startTestGateway(await server.createDatabase());
    try {
      expect((await gateway.call('GET', '/health/readiness', { key: null })).status).toBe(200);
      await server.stop();
      const readiness = await gateway.call('GET', '/health/readiness', { key: null });
      expect(readiness).toMatchObject({ status: 503, json: { error: { code: 'database_unavailable' } } });
      expect((await gateway.call('GET', '/health/liveness', { key: null })).status).toBe(200);
    } finally {
      await gateway.close();
      await server.stop();
    }
  });
});

describe.each(backends)('X-RateLimit headers on $name', (backend) => {
  let gateway: TestGateway;
  let key: string;
  useTestGateway(
    backend,
    () => ({
      providers: { openai: { api_key: 'sk-provider-secret', api_base: fake.baseURL } },
      pricing: { 'openai:gpt-fake': TEST_PRICING },
      rateLimits: { requests_per_minute: 3, tokens_per_minute: 1000 },
    }),
    async (started) => {
      gateway = started;
      key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'limited' } })).json.key;
    },
  );

  it.skipIf(backend.skipReason)('every answer of a rate-limited key: limits, what is left (decreasing) and the reset; the 429 too', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    const seen: { requests: number; tokens: number; reset: number }[] = [];
    for (let i = 0; i < 3; i++) {
      const { response } = await client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
      expect(response.headers.get('x-ratelimit-limit-requests')).toBe('3');
      expect(response.headers.get('x-ratelimit-limit-tokens')).toBe('1000');
      const reset = response.headers.get('x-ratelimit-reset-requests')!;
      expect(reset).toMatch(/^\d+s$/);
      expect(response.headers.get('x-ratelimit-reset-tokens')).toBe(reset);
      seen.push({ requests: Number(response.headers.get('x-ratelimit-remaining-requests')), tokens: Number(response.headers.get('x-ratelimit-remaining-tokens')), reset: parseInt(reset, 10) });
      // PostgreSQL adds a finished call's tokens to the shared window in the background
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(seen.map((s) => s.requests)).toEqual([2, 1, 0]);
    expect(seen[0].tokens).toBe(1000);
    const perCall = CHAT_USAGE.prompt_tokens + CHAT_USAGE.completion_tokens;
    expect(seen.map((s) => s.tokens)).toEqual([1000, 1000 - perCall, 1000 - 2 * perCall]);
    for (const { reset } of seen) {
      expect(reset).toBeGreaterThanOrEqual(0);
      expect(reset).toBeLessThanOrEqual(60);
    }
    const refused = await client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    const { headers, error } = refused as InstanceType<typeof OpenAI.RateLimitError>;
    expect(error).toMatchObject({ code: 'rate_limit_exceeded' });
    expect(headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(headers.get('x-ratelimit-limit-requests')).toBe('3');
    expect(headers.get('x-ratelimit-reset-requests')).toMatch(/^\d+s$/);
    expect(headers.get('retry-after')).toMatch(/^\d+$/);
  });

  it.skipIf(backend.skipReason)('no X-RateLimit headers without rate limits', async () => {
    const other = await startTestGateway(await backend.newDatabaseUrl(), { providers: { openai: { api_key: 'sk-provider-secret', api_base: fake.baseURL } }, pricing: { 'openai:gpt-fake': TEST_PRICING } });
    try {
      const free = (await other.call('POST', '/v1/keys', { body: { key_name: 'free' } })).json.key as string;
      const answer = await other.call('POST', '/v1/chat/completions', { key: free, body: { model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'hi' }] } });
      expect(answer.status).toBe(200);
      expect([...answer.headers.keys()].filter((name) => name.startsWith('x-ratelimit'))).toEqual([]);
    } finally {
      await other.close();
    }
  });
});
