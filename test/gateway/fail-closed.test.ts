import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { CHAT_USAGE } from '../fakes/openai-compatible.ts';
import { BUNDLED_PRICES } from '../../src/gateway/pricing-table.ts';
import { MASTER_KEY, PROVIDER_CHAT_ROUTE, TEST_PRICING, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

/**
 * Issue 31, fail-closed defaults: a model without a price is refused (402 pricing_missing) unless require_pricing
 * exempts it; a bundled price table sits below the configured prices; a virtual key cannot name another user (403
 * user_mismatch) unless it has allow_user_override.
 */
const backends = await useBackends();
const fake = await useFakeProvider();

const ask = (content = 'Hi') => ({ messages: [{ role: 'user' as const, content }] });
const costAt = (prices: { input_cost_per_million?: number; output_cost_per_million?: number }) =>
  (CHAT_USAGE.prompt_tokens * (prices.input_cost_per_million ?? 0) + CHAT_USAGE.completion_tokens * (prices.output_cost_per_million ?? 0)) / 1e6;

describe.each(backends)('fail-closed defaults on $name', (backend) => {
  const providers = { openai: { api_key: 'sk-test', api_base: fake.baseURL }, groq: { api_key: 'gsk-test', api_base: fake.baseURL } };
  let strict: TestGateway;
  let exempting: TestGateway;
  let open: TestGateway;
  let unbundled: TestGateway;

  useTestGateway(
    backend,
    () => ({ providers, pricing: { 'openai:gpt-fake': TEST_PRICING, 'openai:gpt-4o': TEST_PRICING }, models: { mixed: { targets: [{ model: 'openai:gpt-fake' }, { model: 'openai:unpriced-fallback' }] } } }),
    (started) => {
      strict = started;
    },
  );
  useTestGateway(backend, () => ({ providers, requirePricing: { 'groq:*': false, 'openai:self-hosted': false } }), (started) => {
    exempting = started;
  });
  useTestGateway(backend, () => ({ providers, requirePricing: false }), (started) => {
    open = started;
  });
  useTestGateway(backend, () => ({ providers, bundledPricing: false }), (started) => {
    unbundled = started;
  });

  const client = (gateway: TestGateway, key = MASTER_KEY) => new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  async function withUser(gateway: TestGateway, userId: string) {
    await gateway.call('POST', '/v1/users', { body: { user_id: userId, alias: userId } });
    return userId;
  }

  it.skipIf(backend.skipReason)('an unpriced model is 402 pricing_missing before the provider is called, on every model endpoint', async () => {
    const user = await withUser(strict, 'payer');
    const sent = fake.requests.length;
    const refused = await client(strict).chat.completions.create({ model: 'openai:gpt-unpriced', user, ...ask() }).catch((e) => e);
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    expect(refused.status).toBe(402);
    expect(refused.error).toEqual({
      message: expect.stringContaining('Model "openai:gpt-unpriced" has no pricing on this gateway'),
      type: 'invalid_request_error',
      code: 'pricing_missing',
      param: 'model',
    });
    // streamed, embeddings, responses, messages: the same refusal
    for (const [path, body] of [
      ['/v1/chat/completions', { model: 'openai:gpt-unpriced', user, stream: true, ...ask() }],
      ['/v1/embeddings', { model: 'openai:embed-unpriced', user, input: 'x' }],
      ['/v1/responses', { model: 'openai:gpt-unpriced', user, input: 'x' }],
      ['/v1/messages', { model: 'openai:gpt-unpriced', max_tokens: 5, metadata: { user_id: user }, ...ask() }],
    ] as const) {
      const response = await strict.call('POST', path, { body });
      expect(response.status, path).toBe(402);
      expect(response.json.error.code, path).toBe('pricing_missing');
    }
    // a model route is refused when any target it may fall back to is unpriced
    const route = await strict.call('POST', '/v1/chat/completions', { body: { model: 'mixed', user, ...ask() } });
    expect(route.status).toBe(402);
    expect(route.json.error.message).toContain('Model "openai:unpriced-fallback" (a target of model route "mixed")');
    expect(fake.requests.length).toBe(sent);
    // each refusal is a row: refused, 402, pricing_missing, nothing charged
    const refusedRows = (await strict.call('GET', `/v1/users/${user}/usage`)).json.data;
    expect(refusedRows.length).toBeGreaterThan(0);
    for (const row of refusedRows) expect(row).toMatchObject({ status: 'refused', status_code: 402, reason: 'pricing_missing', cost: 0 });
    // priced through the API, the model is served
    await strict.call('PUT', '/v1/pricing/openai:gpt-unpriced', { body: { input_cost_per_million: 0 } });
    await expect(client(strict).chat.completions.create({ model: 'openai:gpt-unpriced', user, ...ask() })).resolves.toBeDefined();
  });

  it.skipIf(backend.skipReason)('the OpenAPI document gives the 402 and 403 answers of model calls and the new fields', async () => {
    const doc = (await strict.call('GET', '/openapi.json', { key: null })).json;
    for (const path of ['/v1/chat/completions', '/v1/embeddings', '/v1/responses', '/v1/messages', '/v1/rerank']) {
      const responses = doc.paths[path].post.responses;
      expect(responses[402]?.description, path).toContain('pricing_missing');
      expect(responses[403]?.description, path).toContain('user_mismatch');
    }
    expect(doc.components.schemas.VirtualKey.required).toContain('allow_user_override');
    expect(doc.components.schemas.Usage.required).toContain('overshoot');
    expect(doc.components.schemas.ModelPricing.properties.source.enum).toEqual(['config', 'api', 'bundled']);
  });

  it.skipIf(backend.skipReason)('require_pricing opts out globally, per provider and per model; those calls cost $0', async () => {
    const user = await withUser(exempting, 'exempt');
    await expect(client(exempting).chat.completions.create({ model: 'groq:any-model', user, ...ask() })).resolves.toBeDefined();
    await expect(client(exempting).chat.completions.create({ model: 'openai:self-hosted', user, ...ask() })).resolves.toBeDefined();
    const other = await client(exempting).chat.completions.create({ model: 'openai:not-exempt', user, ...ask() }).catch((e) => e);
    expect(other).toMatchObject({ status: 402, code: 'pricing_missing' });
    const rows = (await exempting.call('GET', `/v1/users/${user}/usage`)).json.data;
    expect(rows.map((row: { model: string; cost: number; status: string }) => [row.model, row.cost, row.status]).sort()).toEqual([
      ['any-model', 0, 'success'],
      ['not-exempt', 0, 'refused'],
      ['self-hosted', 0, 'success'],
    ]);

    const anyone = await withUser(open, 'anyone');
    await expect(client(open).chat.completions.create({ model: 'openai:whatever', user: anyone, ...ask() })).resolves.toBeDefined();
    expect((await open.call('GET', `/v1/users/${anyone}/usage`)).json.data[0]).toMatchObject({ model: 'whatever', cost: 0 });
  });

  it.skipIf(backend.skipReason)('bundled prices apply below the configured ones; PUT overrides them; bundled_pricing: false turns them off', async () => {
    const user = await withUser(strict, 'bundled');
    const bundled = BUNDLED_PRICES['openai:gpt-4o-mini'];
    await client(strict).chat.completions.create({ model: 'openai:gpt-4o-mini', user, ...ask() });
    // the configuration's price of gpt-4o (TEST_PRICING) wins over the bundled one
    await client(strict).chat.completions.create({ model: 'openai:gpt-4o', user, ...ask() });
    const rows = (await strict.call('GET', `/v1/users/${user}/usage`)).json.data as { model: string; cost: number }[];
    expect(rows.find((row) => row.model === 'gpt-4o-mini')!.cost).toBeCloseTo(costAt(bundled), 12);
    expect(rows.find((row) => row.model === 'gpt-4o')!.cost).toBeCloseTo(costAt(TEST_PRICING), 12);

    const list = (await strict.call('GET', '/v1/pricing')).json.data as { model: string; source: string; input_cost_per_million: number }[];
    expect(list.find((entry) => entry.model === 'openai:gpt-4o-mini')).toMatchObject({ source: 'bundled', input_cost_per_million: bundled.input_cost_per_million });
    expect(list.filter((entry) => entry.model === 'openai:gpt-4o')).toEqual([expect.objectContaining({ source: 'config', input_cost_per_million: TEST_PRICING.input_cost_per_million })]);
    expect((await strict.call('GET', '/v1/pricing/anthropic:claude-sonnet-4-5')).json).toMatchObject({ source: 'bundled', output_cost_per_million: 15 });
    // only a stored price can be deleted; a PUT overrides the bundled one
    expect((await strict.call('DELETE', '/v1/pricing/openai:gpt-4o-mini')).status).toBe(404);
    await strict.call('PUT', '/v1/pricing/openai:gpt-4o-mini', { body: { input_cost_per_million: 7, output_cost_per_million: 9 } });
    expect((await strict.call('GET', '/v1/pricing/openai:gpt-4o-mini')).json).toMatchObject({ source: 'api', input_cost_per_million: 7 });
    await client(strict).chat.completions.create({ model: 'openai:gpt-4o-mini', user, ...ask('again') }, { headers: { 'x-request-id': `override-${backend.name}` } });
    const overridden = (await strict.call('GET', `/v1/users/${user}/usage`)).json.data.find((row: { request_id: string }) => row.request_id === `override-${backend.name}`);
    expect(overridden.cost).toBeCloseTo(costAt({ input_cost_per_million: 7, output_cost_per_million: 9 }), 12);
    await strict.call('DELETE', '/v1/pricing/openai:gpt-4o-mini');
    expect((await strict.call('GET', '/v1/pricing/openai:gpt-4o-mini')).json.source).toBe('bundled');

    const off = await withUser(unbundled, 'unbundled');
    const refused = await client(unbundled).chat.completions.create({ model: 'openai:gpt-4o-mini', user: off, ...ask() }).catch((e) => e);
    expect(refused).toMatchObject({ status: 402, code: 'pricing_missing' });
    expect((await unbundled.call('GET', '/v1/pricing')).json.data).toEqual([]);
  });

  it.skipIf(backend.skipReason)('a virtual key naming another user, or one that does not exist, is 403 user_mismatch unless allow_user_override', async () => {
    await withUser(strict, 'alice');
    await withUser(strict, 'bob');
    const owned = (await strict.call('POST', '/v1/keys', { body: { key_name: 'alice-app', user_id: 'alice' } })).json;
    const ownerless = (await strict.call('POST', '/v1/keys', { body: { key_name: 'shared' } })).json;
    expect(owned.allow_user_override).toBe(false);
    const sent = fake.requestsTo(PROVIDER_CHAT_ROUTE).length;
    for (const [key, user] of [
      [owned.key, 'bob'],
      [owned.key, 'ghost'],
      [ownerless.key, 'bob'],
      [ownerless.key, 'ghost'],
    ]) {
      const refused = await client(strict, key).chat.completions.create({ model: 'openai:gpt-fake', user, ...ask() }).catch((e) => e);
      expect(refused, `${key === owned.key ? 'owned' : 'ownerless'} key, user ${user}`).toMatchObject({ status: 403, code: 'user_mismatch', param: 'user', type: 'permission_error' });
      // whether the user exists is not told
      expect(refused.message).not.toContain('does not exist');
    }
    // the Anthropic format names the user in metadata.user_id
    const messages = await strict.call('POST', '/v1/messages', { key: owned.key, body: { model: 'openai:gpt-fake', max_tokens: 5, metadata: { user_id: 'bob' }, ...ask() } });
    expect(messages.status).toBe(403);
    expect(messages.json).toMatchObject({ type: 'error', error: { code: 'user_mismatch' } });
    expect(fake.requestsTo(PROVIDER_CHAT_ROUTE).length).toBe(sent);
    // its own owner, or no user at all, is fine
    await expect(client(strict, owned.key).chat.completions.create({ model: 'openai:gpt-fake', user: 'alice', ...ask() })).resolves.toBeDefined();
    await expect(client(strict, owned.key).chat.completions.create({ model: 'openai:gpt-fake', ...ask() })).resolves.toBeDefined();
    // the master key names any user that exists; an unknown one is 404
    const unknown = await client(strict).chat.completions.create({ model: 'openai:gpt-fake', user: 'ghost', ...ask() }).catch((e) => e);
    expect(unknown).toMatchObject({ status: 404, code: 'user_not_found' });

    // allow_user_override: the user is an end-user id for the provider; the call is still the key's and its owner's
    const patched = await strict.call('PATCH', `/v1/keys/${owned.id}`, { body: { allow_user_override: true } });
    expect(patched.json.allow_user_override).toBe(true);
    for (const user of ['bob', 'ghost']) {
      await client(strict, owned.key).chat.completions.create({ model: 'openai:gpt-fake', user, ...ask() }, { headers: { 'x-request-id': `override-${user}-${backend.name}` } });
      expect(fake.requestsTo(PROVIDER_CHAT_ROUTE).at(-1)!.body).toMatchObject({ user });
    }
    const rows = (await strict.call('GET', `/v1/keys/${owned.id}/usage`)).json.data as { request_id: string; user_id: string }[];
    expect(rows.filter((row) => row.request_id.startsWith('override-')).map((row) => row.user_id)).toEqual(['alice', 'alice']);
    expect((await strict.call('GET', '/v1/users/bob/usage')).json.data).toEqual([]);
    // created with it, and taken away again
    const lenient = (await strict.call('POST', '/v1/keys', { body: { key_name: 'lenient', allow_user_override: true } })).json;
    await expect(client(strict, lenient.key).chat.completions.create({ model: 'openai:gpt-fake', user: 'end-user-42', ...ask() })).resolves.toBeDefined();
    await strict.call('PATCH', `/v1/keys/${lenient.id}`, { body: { allow_user_override: false } });
    await expect(client(strict, lenient.key).chat.completions.create({ model: 'openai:gpt-fake', user: 'end-user-42', ...ask() })).rejects.toMatchObject({ status: 403, code: 'user_mismatch' });
    expect((await strict.call('PATCH', `/v1/keys/${lenient.id}`, { body: { allow_user_override: 'yes' } })).json.error).toMatchObject({ param: 'allow_user_override' });
  });
});
