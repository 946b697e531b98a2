import { describe, expect, it } from 'vitest';
import { modelAllowed } from '../../src/gateway/ledger.ts';
import { useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

// allowed_models of keys and users: 403 model_not_allowed before any provider is contacted, with either credential
// header, on both storage engines; set and shown by the management API.

const backends = await useBackends();
const fake = await useFakeProvider();

it('matches exact names and provider:* patterns; null allows everything, [] nothing', () => {
  expect(modelAllowed('openai:gpt-4o', ['openai:gpt-4o'])).toBe(true);
  expect(modelAllowed('openai:gpt-4o-mini', ['openai:gpt-4o'])).toBe(false);
  expect(modelAllowed('openai:anything/with:colons', ['openai:*'])).toBe(true);
  expect(modelAllowed('openai2:gpt', ['openai:*'])).toBe(false);
  expect(modelAllowed('mistral:large', null)).toBe(true);
  expect(modelAllowed('mistral:large', [])).toBe(false);
});

describe.each(backends)('allowed_models on $name', (backend) => {
  let gateway: TestGateway;

  useTestGateway(
    backend,
    // Unpriced fake models: this file is not about pricing (require_pricing: fail-closed.test.ts).
    () => ({ providers: { openai: { api_key: 'sk-provider', api_base: fake.baseURL }, groq: { api_key: 'sk-g', api_base: fake.baseURL } }, requirePricing: false }),
    (started) => {
      gateway = started;
    },
  );

  const chat = (key: string, model: string, header: 'x-hub-key' | 'authorization', user?: string) =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { [header]: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], ...(user ? { user } : {}) }),
    }).then(async (response) => ({ status: response.status, json: (await response.json()) as { error?: { code: string; message: string } } }));

  it.skipIf(backend.skipReason)('a key\'s list: its models answer, others are 403 without reaching the provider, with either header', async () => {
    const key = await gateway.call('POST', '/v1/keys', { body: { key_name: 'limited', allowed_models: ['openai:gpt-fake', 'groq:*'] } });
    expect(key.status).toBe(201);
    expect(key.json.allowed_models).toEqual(['openai:gpt-fake', 'groq:*']);
    expect((await gateway.call('GET', `/v1/keys/${key.json.id}`)).json.allowed_models).toEqual(['openai:gpt-fake', 'groq:*']);
    for (const header of ['x-hub-key', 'authorization'] as const) {
      expect((await chat(key.json.key, 'openai:gpt-fake', header)).status).toBe(200);
      expect((await chat(key.json.key, 'groq:small', header)).status).toBe(200);
      const before = fake.requestsTo('POST /v1/chat/completions').length;
      const refused = await chat(key.json.key, 'openai:gpt-other', header);
      expect(refused.status).toBe(403);
      expect(refused.json.error).toMatchObject({ code: 'model_not_allowed' });
      expect(refused.json.error!.message).toContain('"openai:gpt-other" is not allowed for virtual key');
      expect(fake.requestsTo('POST /v1/chat/completions').length).toBe(before);
    }
    // GET /v1/models shows the key only what it may call
    const listed = await fetch(`${gateway.url}/v1/models`, { headers: { authorization: `Bearer ${key.json.key}` } }).then((response) => response.json() as Promise<{ data: { id: string }[] }>);
    const ids = listed.data.map((model) => model.id);
    expect(ids.length).toBeGreaterThan(0);
    expect(ids.every((id) => id === 'openai:gpt-fake' || id.startsWith('groq:'))).toBe(true);
    const all = (await gateway.call('GET', '/v1/models')).json.data.map((model: { id: string }) => model.id);
    expect(all.length).toBeGreaterThan(ids.length);
    // embeddings are model calls too
    const embedding = await fetch(`${gateway.url}/v1/embeddings`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.json.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai:text-embedding-other', input: 'x' }),
    });
    expect(embedding.status).toBe(403);

    // PATCH changes the list; null allows everything again
    const patched = await gateway.call('PATCH', `/v1/keys/${key.json.id}`, { body: { allowed_models: null } });
    expect(patched.json.allowed_models).toBeNull();
    expect((await chat(key.json.key, 'openai:gpt-other', 'authorization')).status).toBe(200);
    await gateway.call('PATCH', `/v1/keys/${key.json.id}`, { body: { allowed_models: [] } });
    expect((await chat(key.json.key, 'openai:gpt-fake', 'authorization')).json.error?.code).toBe('model_not_allowed');
  });

  it.skipIf(backend.skipReason)('a user\'s list binds the master key naming the user and every key the user owns', async () => {
    const user = await gateway.call('POST', '/v1/users', { body: { user_id: 'dana', alias: 'Dana', allowed_models: ['openai:*'] } });
    expect(user.json.allowed_models).toEqual(['openai:*']);
    const master = (await import('./helpers/gateway.ts')).MASTER_KEY;
    expect((await chat(master, 'openai:gpt-fake', 'x-hub-key', 'dana')).status).toBe(200);
    const refused = await chat(master, 'groq:small', 'x-hub-key', 'dana');
    expect(refused.status).toBe(403);
    expect(refused.json.error!.message).toContain('not allowed for user "dana"');
    // a key of hers with no list of its own is still bound by hers; one with its own list needs both to allow
    const free = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'dana-free', user_id: 'dana' } })).json;
    expect((await chat(free.key, 'groq:small', 'authorization')).json.error?.code).toBe('model_not_allowed');
    const own = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'dana-own', user_id: 'dana', allowed_models: ['groq:*', 'openai:gpt-fake'] } })).json;
    expect((await chat(own.key, 'openai:gpt-fake', 'authorization')).status).toBe(200);
    expect((await chat(own.key, 'groq:small', 'authorization')).json.error!.message).toContain('user "dana" (the key\'s owner)');
    await gateway.call('PATCH', '/v1/users/dana', { body: { allowed_models: null } });
    expect((await chat(free.key, 'groq:small', 'authorization')).status).toBe(200);
  });

  it.skipIf(backend.skipReason)('refuses lists that are not provider:model names', async () => {
    for (const allowed of [['gpt-4o'], [':x'], ['openai:'], 'openai:*', [5], ['openai: spaced ']]) {
      const response = await gateway.call('POST', '/v1/keys', { body: { key_name: 'bad', allowed_models: allowed } });
      expect(response.status, JSON.stringify(allowed)).toBe(400);
      expect(response.json.error.param).toMatch(/^allowed_models/);
    }
  });
});
