import { DatabaseSync } from 'node:sqlite';
import OpenAI from 'openai';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelRouteConfig } from '../../src/gateway/config.ts';
import { parseConfigText } from '../../src/gateway/config.ts';
import { ModelRouter } from '../../src/gateway/model-router.ts';
import { openStore } from '../../src/gateway/storage/index.ts';
import { MIGRATIONS, SCHEMA_MIGRATIONS_TABLE } from '../../src/gateway/storage/migrations.ts';
import { CHAT_USAGE, DEFAULT_STREAM_PIECES, chatChunks, chatStreamUsage } from '../fakes/openai-compatible.ts';
import { PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES, TEST_PRICING, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

// Model routes (the `models:` section): a public name tried over its targets in order, falling back on 429, 5xx,
// connection failures and timeouts, never on the request's own faults; weights share the calls among targets of
// equal priority. Two fake providers stand for two accounts: `primary` (the configured openai provider) and
// `secondary` (reached by route targets that bring their own api_base and key).

const backends = await useBackends();
const primary = await useFakeProvider();
const secondary = await useFakeProvider();

/** The secondary account's price: twice the primary's, so a row's cost tells which target answered. */
const SECONDARY_PRICING = { input_cost_per_million: 2 * TEST_PRICING.input_cost_per_million, output_cost_per_million: 2 * TEST_PRICING.output_cost_per_million };
const costAt = (pricing: typeof TEST_PRICING, prompt: number, completion: number) => (prompt * pricing.input_cost_per_million + completion * pricing.output_cost_per_million) / 1e6;

/** Every target must be priced for a route to be called (require_pricing); these tests do not look at their costs. */
const ROUTE_PRICING = Object.fromEntries(['openai:gpt-a', 'openai:gpt-b', 'openai:gpt-c', 'openai:gpt-real'].map((model) => [model, TEST_PRICING]));

function routes(): Record<string, ModelRouteConfig> {
  const onSecondary = (model: string, extra: object = {}) => ({ model, api_key: 'sk-secondary', api_base: secondary.baseURL, ...extra });
  return {
    smart: { targets: [{ model: 'openai:gpt-primary' }, onSecondary('openai:gpt-secondary')] },
    patient: { timeout_seconds: 0.4, targets: [{ model: 'openai:gpt-primary' }, onSecondary('openai:gpt-secondary', { timeout_seconds: 5 })] },
    balanced: {
      targets: [
        { model: 'openai:gpt-a', priority: 0, weight: 3 },
        { model: 'openai:gpt-b', priority: 0 },
        onSecondary('openai:gpt-c', { priority: 1 }),
      ],
    },
    // a route whose name is also a provider:model string: the route wins
    'openai:gpt-shadow': { targets: [onSecondary('openai:gpt-real')] },
  };
}

describe.each(backends)('model routes on $name', (backend) => {
  let gateway: TestGateway;
  let client: OpenAI;
  let key: { id: string; key: string };
  let budgetId: string;

  useTestGateway(
    backend,
    () => ({
      providers: { openai: { api_key: 'sk-primary', api_base: primary.baseURL } },
      pricing: { ...ROUTE_PRICING, 'openai:gpt-primary': TEST_PRICING, 'openai:gpt-secondary': SECONDARY_PRICING },
      models: routes(),
    }),
    async (started) => {
      gateway = started;
      budgetId = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 1000 } })).json.budget_id;
      key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'routes', budget_id: budgetId } })).json;
      client = new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    },
  );
  afterEach(() => {
    primary.reset();
    secondary.reset();
  });

  const ask = (model = 'smart') => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }] });
  const lastRow = async () => (await gateway.call('GET', `/v1/keys/${key.id}/usage?limit=1`)).json.data[0];
  const budget = async () => (await gateway.call('GET', `/v1/budgets/${budgetId}`)).json;

  it.skipIf(backend.skipReason)('primary 500 → the secondary answers with its own key; the row names it, counts 2 attempts and costs its price', async () => {
    const spentBefore = (await budget()).spend;
    primary.script(PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES.serverError);
    const completion = await ask();
    expect(completion.choices[0].message.content).toBeTruthy();
    expect(primary.requestsTo(PROVIDER_CHAT_ROUTE)).toHaveLength(1);
    expect(primary.requestsTo(PROVIDER_CHAT_ROUTE)[0]).toMatchObject({ body: { model: 'gpt-primary' }, headers: { authorization: 'Bearer sk-primary' } });
    const [answered] = secondary.requestsTo(PROVIDER_CHAT_ROUTE);
    expect(answered).toMatchObject({ body: { model: 'gpt-secondary' }, headers: { authorization: 'Bearer sk-secondary' } });
    const row = await lastRow();
    expect(row).toMatchObject({ route: 'smart', attempts: 2, provider: 'openai', model: 'gpt-secondary', status: 'success', status_code: 200 });
    expect(row.cost).toBeCloseTo(costAt(SECONDARY_PRICING, CHAT_USAGE.prompt_tokens, CHAT_USAGE.completion_tokens), 10);
    // one hold for the call, settled once with the answering target's cost; nothing left reserved
    const after = await budget();
    expect(after.reserved).toBe(0);
    expect(after.spend - spentBefore).toBeCloseTo(row.cost, 10);
    const metrics = (await gateway.call('GET', '/metrics', { key: null })).json as string;
    expect(metrics).toMatch(/gateway_route_fallbacks_total\{route="smart",provider="openai",code="upstream_error"\} 1\b/);
  });

  it.skipIf(backend.skipReason)('the one hold of a route call is sized for its dearest target, whichever is tried first', async () => {
    primary.script(PROVIDER_CHAT_ROUTE, { delayMs: 1500, then: PROVIDER_FAILURES.serverError });
    const messages = [{ role: 'user' as const, content: 'Hi' }];
    const call = client.chat.completions.create({ model: 'smart', messages, max_tokens: 10 });
    // the hold is taken before the provider is asked
    while (primary.requestsTo(PROVIDER_CHAT_ROUTE).length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    // the gateway's estimate: prompt characters / 4, and max_tokens, at the secondary's (dearer) prices
    const promptTokens = Math.ceil(JSON.stringify(messages).length / 4);
    expect((await budget()).reserved).toBeCloseTo(costAt(SECONDARY_PRICING, promptTokens, 10), 10);
    await call;
    expect((await budget()).reserved).toBe(0);
  });

  it.skipIf(backend.skipReason)('primary 429, a connection cut, or a timeout → the secondary answers', async () => {
    primary.script(PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES.rateLimited, { destroy: true });
    for (let i = 0; i < 2; i++) {
      await ask();
      expect(await lastRow()).toMatchObject({ attempts: 2, model: 'gpt-secondary', status: 'success' });
    }
    expect(secondary.requestsTo(PROVIDER_CHAT_ROUTE)).toHaveLength(2);
    // `patient` gives its first target 0.4 s; the stalled primary is left for the secondary well before it answers
    primary.script(PROVIDER_CHAT_ROUTE, { delayMs: 5000, then: { json: {} } });
    const started = Date.now();
    await ask('patient');
    expect(Date.now() - started).toBeLessThan(4000);
    expect(await lastRow()).toMatchObject({ route: 'patient', attempts: 2, model: 'gpt-secondary', status: 'success' });
  });

  it.skipIf(backend.skipReason)('primary 400 or 401 → no fallback: the client gets the error, the secondary is not asked', async () => {
    primary.script(PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES.badRequest, PROVIDER_FAILURES.unauthorized);
    await expect(ask()).rejects.toMatchObject({ status: 400 });
    expect(await lastRow()).toMatchObject({ route: 'smart', attempts: 1, model: 'gpt-primary', status: 'error', status_code: 400, cost: 0 });
    await expect(ask()).rejects.toMatchObject({ status: 502, code: 'upstream_authentication_failed' });
    expect(await lastRow()).toMatchObject({ attempts: 1, model: 'gpt-primary', status_code: 502 });
    expect(secondary.requestsTo(PROVIDER_CHAT_ROUTE)).toHaveLength(0);
    expect((await budget()).reserved).toBe(0);
  });

  it.skipIf(backend.skipReason)('every target failing → the last failure, recorded against the last target, the hold given back', async () => {
    primary.script(PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES.serverError);
    secondary.script(PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES.rateLimited);
    const error = await ask().catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 429, code: 'upstream_rate_limited' });
    expect((error as InstanceType<typeof OpenAI.APIError>).headers?.get('retry-after')).toBe('7');
    expect(await lastRow()).toMatchObject({ route: 'smart', attempts: 2, model: 'gpt-secondary', status: 'error', status_code: 429, cost: 0 });
    expect((await budget()).reserved).toBe(0);
  });

  it.skipIf(backend.skipReason)('a stream that fails before its first event falls back; the client sees one clean stream', async () => {
    // a 500 to the stream request, then a 200 stream cut before any event
    primary.script(PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES.serverError, { sse: [], done: false, cut: true });
    for (let i = 0; i < 2; i++) {
      const stream = await client.chat.completions.create({ model: 'smart', messages: [{ role: 'user', content: 'Hi' }], stream: true });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
      expect(text).toBe(DEFAULT_STREAM_PIECES.join(''));
      const streamed = chatStreamUsage();
      expect(await lastRow()).toMatchObject({ route: 'smart', attempts: 2, model: 'gpt-secondary', status: 'success', prompt_tokens: streamed.prompt_tokens });
    }
    expect(primary.requestsTo(PROVIDER_CHAT_ROUTE)).toHaveLength(2);
    expect(secondary.requestsTo(PROVIDER_CHAT_ROUTE)).toHaveLength(2);
  });

  it.skipIf(backend.skipReason)('a stream that fails after its first event does not fall back: it ends with an error event', async () => {
    primary.script(PROVIDER_CHAT_ROUTE, { sse: chatChunks('gpt-primary').slice(0, 2), done: false, cut: true });
    const stream = await client.chat.completions.create({ model: 'smart', messages: [{ role: 'user', content: 'Hi' }], stream: true });
    let text = '';
    const failure = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    })().catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(Error);
    expect(text).toBe(DEFAULT_STREAM_PIECES[0]);
    expect(secondary.requestsTo(PROVIDER_CHAT_ROUTE)).toHaveLength(0);
    expect(await lastRow()).toMatchObject({ route: 'smart', attempts: 1, model: 'gpt-primary', status: 'error' });
    expect((await budget()).reserved).toBe(0);
  });

  it.skipIf(backend.skipReason)('embeddings, responses and messages fall back the same way', async () => {
    primary.script('POST /v1/embeddings', PROVIDER_FAILURES.serverError);
    const embedding = await client.embeddings.create({ model: 'smart', input: 'x', encoding_format: 'float' });
    expect(embedding.data[0].embedding.length).toBeGreaterThan(0);
    expect(secondary.requestsTo('POST /v1/embeddings')[0].body).toMatchObject({ model: 'gpt-secondary' });
    expect(await lastRow()).toMatchObject({ endpoint: 'embeddings', route: 'smart', attempts: 2, model: 'gpt-secondary' });

    primary.script('POST /v1/responses', PROVIDER_FAILURES.serverError);
    const response = await client.responses.create({ model: 'smart', input: 'Hi' });
    expect(response.output_text).toBeTruthy();
    expect(await lastRow()).toMatchObject({ endpoint: 'responses', route: 'smart', attempts: 2, model: 'gpt-secondary' });

    primary.script(PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES.serverError);
    const message = await gateway.call('POST', '/v1/messages', { key: key.key, body: { model: 'smart', max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] } });
    expect(message.status).toBe(200);
    expect(message.json).toMatchObject({ type: 'message', role: 'assistant' });
    expect(await lastRow()).toMatchObject({ endpoint: 'messages', route: 'smart', attempts: 2, model: 'gpt-secondary' });
  });

  it.skipIf(backend.skipReason)('a name that is a route and a provider:model goes to the route; GET /v1/models lists the routes', async () => {
    await ask('openai:gpt-shadow');
    expect(primary.requestsTo(PROVIDER_CHAT_ROUTE)).toHaveLength(0);
    expect(secondary.requestsTo(PROVIDER_CHAT_ROUTE)[0].body).toMatchObject({ model: 'gpt-real' });
    expect(await lastRow()).toMatchObject({ route: 'openai:gpt-shadow', model: 'gpt-real', attempts: 1 });
    // a direct provider:model call is no route call
    await ask('openai:gpt-primary');
    expect(await lastRow()).toMatchObject({ route: null, attempts: 1, model: 'gpt-primary' });

    const listed = (await gateway.call('GET', '/v1/models')).json.data as { id: string; owned_by: string; targets?: unknown }[];
    const ids = listed.map((model) => model.id);
    expect(ids.slice(0, 4)).toEqual(['smart', 'patient', 'balanced', 'openai:gpt-shadow']);
    // the master key sees where a route goes, by priority group (0 first) and weight; never keys or addresses
    expect(listed[2]).toEqual({
      id: 'balanced',
      object: 'model',
      created: 0,
      owned_by: 'gateway',
      targets: [
        { model: 'openai:gpt-a', priority: 0, weight: 3 },
        { model: 'openai:gpt-b', priority: 0, weight: 1 },
        { model: 'openai:gpt-c', priority: 1, weight: 1 },
      ],
    });
    expect(ids.filter((id: string) => id === 'openai:gpt-shadow')).toHaveLength(1);
    expect(ids.some((id: string) => id.startsWith('openai:fake-model'))).toBe(true);
    const onlyProvider = (await gateway.call('GET', '/v1/models?provider=openai')).json.data.map((model: { id: string }) => model.id);
    expect(onlyProvider).not.toContain('smart');
  });

  it.skipIf(backend.skipReason)('allowed_models: a key must be allowed the public name it calls, not the targets', async () => {
    const routeOnly = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'route-only', allowed_models: ['smart'] } })).json;
    const viaRoute = new OpenAI({ apiKey: routeOnly.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    await expect(viaRoute.chat.completions.create({ model: 'smart', messages: [{ role: 'user', content: 'Hi' }] })).resolves.toBeDefined();
    await expect(viaRoute.chat.completions.create({ model: 'openai:gpt-primary', messages: [{ role: 'user', content: 'Hi' }] })).rejects.toMatchObject({ status: 403, code: 'model_not_allowed' });
    const listed = await fetch(`${gateway.url}/v1/models`, { headers: { authorization: `Bearer ${routeOnly.key}` } }).then((r) => r.json() as Promise<{ data: { id: string }[] }>);
    // a virtual key sees the names it may call, not the targets behind them
    expect(listed.data).toEqual([{ id: 'smart', object: 'model', created: 0, owned_by: 'gateway' }]);

    const targetOnly = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'target-only', allowed_models: ['openai:gpt-primary', 'openai:gpt-secondary'] } })).json;
    const viaTarget = new OpenAI({ apiKey: targetOnly.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    const before = primary.requestsTo(PROVIDER_CHAT_ROUTE).length;
    await expect(viaTarget.chat.completions.create({ model: 'smart', messages: [{ role: 'user', content: 'Hi' }] })).rejects.toMatchObject({ status: 403, code: 'model_not_allowed' });
    expect(primary.requestsTo(PROVIDER_CHAT_ROUTE)).toHaveLength(before);
    // a route name with a colon counts as of its provider for provider:* patterns
    const wildcard = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'wildcard', allowed_models: ['openai:*'] } })).json;
    const viaWildcard = new OpenAI({ apiKey: wildcard.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    await expect(viaWildcard.chat.completions.create({ model: 'openai:gpt-shadow', messages: [{ role: 'user', content: 'Hi' }] })).resolves.toBeDefined();
    await expect(viaWildcard.chat.completions.create({ model: 'smart', messages: [{ role: 'user', content: 'Hi' }] })).rejects.toMatchObject({ status: 403 });

    // a bare name in a list must be a configured route
    const typo = await gateway.call('POST', '/v1/keys', { body: { key_name: 'typo', allowed_models: ['smart', 'smrat'] } });
    expect(typo.status).toBe(400);
    expect(typo.json.error).toMatchObject({ param: 'allowed_models.1' });
    expect(typo.json.error.message).toContain('"smrat"');
  });
});

describe.each(backends)('migration 9 on $name', (backend) => {
  /** Runs SQL on the database without the store: the schema as an older gateway left it. */
  async function olderDatabase(url: string, statements: string[]): Promise<void> {
    if (backend.name === 'sqlite') {
      const db = new DatabaseSync(url.slice('sqlite:'.length));
      for (const sql of statements) db.exec(sql);
      db.close();
      return;
    }
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      for (const sql of statements) await client.query(sql);
    } finally {
      await client.end();
    }
  }

  it.skipIf(backend.skipReason)('upgrades a database with usage rows: they read as direct calls (route null, 1 attempt)', async () => {
    const url = await backend.newDatabaseUrl();
    const before = MIGRATIONS.filter((m) => m.version <= 8);
    await olderDatabase(url, [
      SCHEMA_MIGRATIONS_TABLE,
      ...before.flatMap((m) => (m.onlyOn === undefined || m.onlyOn === backend.name ? m.statements : [])),
      ...before.map((m) => `INSERT INTO schema_migrations (version, name, applied_at) VALUES (${m.version}, 'v${m.version}', 0)`),
      `INSERT INTO usage (id, request_id, created_at, user_id, key_id, endpoint, provider, model, prompt_tokens, completion_tokens, cost_nanos, status, status_code, duration_ms)
       VALUES ('usage_old', 'req', 1, NULL, NULL, 'chat.completions', 'openai', 'gpt-old', 3, 4, 5, 'success', 200, 1.5)`,
    ]);
    const store = openStore(url);
    try {
      expect(await store.migrate()).toEqual(MIGRATIONS.filter((m) => m.version > 8).map((m) => m.version));
      const [row] = await store.usage.page({}, undefined, 10);
      expect(row).toMatchObject({ id: 'usage_old', model: 'gpt-old', route: null, attempts: 1, prompt_tokens: 3 });
    } finally {
      await store.close();
    }
  });
});

describe('weights', () => {
  let gateway: TestGateway;
  useTestGateway(backends[0], () => ({ providers: { openai: { api_key: 'sk-primary', api_base: primary.baseURL } }, models: routes(), pricing: ROUTE_PRICING }), (started) => {
    gateway = started;
  });
  afterEach(() => {
    primary.reset();
    secondary.reset();
  });

  it('targets of equal priority split 1,000 calls by weight (3:1) within ±10%; the next priority is not used', async () => {
    const client = new OpenAI({ apiKey: (await gateway.call('POST', '/v1/keys', { body: { key_name: 'w' } })).json.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    const calls = Array.from({ length: 1000 }, (_, i) => i);
    // 8 callers at a time, so the split is seen under concurrency too
    for (let i = 0; i < calls.length; i += 8) {
      await Promise.all(calls.slice(i, i + 8).map(() => client.chat.completions.create({ model: 'balanced', messages: [{ role: 'user', content: 'Hi' }] })));
    }
    const models = primary.requestsTo(PROVIDER_CHAT_ROUTE).map((request) => (request.body as { model: string }).model);
    const count = (model: string) => models.filter((m) => m === model).length;
    expect(models).toHaveLength(1000);
    expect(Math.abs(count('gpt-a') - 750)).toBeLessThanOrEqual(75);
    expect(Math.abs(count('gpt-b') - 250)).toBeLessThanOrEqual(25);
    expect(secondary.requestsTo(PROVIDER_CHAT_ROUTE)).toHaveLength(0);
  });

  it('a failing target of a weighted group falls back to its equal first, then to the next priority', async () => {
    const client = new OpenAI({ apiKey: (await gateway.call('POST', '/v1/keys', { body: { key_name: 'w2' } })).json.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    primary.script(PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES.serverError, PROVIDER_FAILURES.serverError);
    await client.chat.completions.create({ model: 'balanced', messages: [{ role: 'user', content: 'Hi' }] });
    const tried = primary.requestsTo(PROVIDER_CHAT_ROUTE).map((request) => (request.body as { model: string }).model);
    expect(tried.sort()).toEqual(['gpt-a', 'gpt-b']);
    expect(secondary.requestsTo(PROVIDER_CHAT_ROUTE)[0].body).toMatchObject({ model: 'gpt-c' });
  });
});

describe('ModelRouter', () => {
  it('orders by priority, and over any run of total-weight picks gives each target exactly its weight, interleaved', () => {
    const router = new ModelRouter(
      { r: { targets: [{ model: 'openai:a', priority: 1, weight: 2 }, { model: 'openai:b', priority: 1, weight: 1 }, { model: 'openai:z', priority: 0 }] } },
      { openai: {} },
    );
    const plans = Array.from({ length: 6 }, () => router.plan('r').targets.map((target) => target.model));
    expect(plans.every((plan) => plan[0] === 'z' && plan.length === 3)).toBe(true);
    // second position: the weighted pick (a, b, a, a, b, a — never b twice in a row), then the other of the group
    expect(plans.map((plan) => plan[1])).toEqual(['a', 'b', 'a', 'a', 'b', 'a']);
    expect(plans.map((plan) => plan[2])).toEqual(['b', 'a', 'b', 'b', 'a', 'b']);
  });

  it('a plain provider:model is one target on the provider\'s own connection; unknown names are 400', () => {
    const router = new ModelRouter({}, { openai: {} });
    expect(router.plan('openai:gpt-4o')).toEqual({ route: null, targets: [{ provider: 'openai', model: 'gpt-4o', connection: 'openai' }] });
    expect(() => router.plan('fast')).toThrow(expect.objectContaining({ status: 400, param: 'model' }));
    expect(() => router.plan('groq:x')).toThrow(expect.objectContaining({ status: 400, code: 'unknown_provider' }));
  });

  it('a target with its own key or address gets a connection that inherits nothing from the provider; a timeout alone inherits', () => {
    const router = new ModelRouter(
      { r: { timeout_seconds: 2, targets: [{ model: 'openai:a' }, { model: 'openai:b', api_base: 'http://other/v1' }] } },
      { openai: { api_key: 'sk-main', api_base: 'http://main/v1' } },
    );
    const [a, b] = router.plan('r').targets;
    expect(router.connections[a.connection]).toEqual({ provider: 'openai', api_key: 'sk-main', api_base: 'http://main/v1', timeoutMs: 2000 });
    expect(router.connections[b.connection]).toEqual({ provider: 'openai', api_key: undefined, api_base: 'http://other/v1', timeoutMs: 2000 });
  });
});

describe('the models: section of the configuration', () => {
  const parse = (yaml: string) => parseConfigText(yaml, 'gateway.yaml', {});

  it('takes a bare list of provider:model strings or {targets, timeout_seconds} with target objects', () => {
    const config = parse(
      [
        'providers: {openai: {api_key: k}, groq: {api_key: g}}',
        'models:',
        '  fast: [openai:gpt-4o-mini, groq:llama]',
        '  smart:',
        '    timeout_seconds: 20',
        '    targets:',
        '      - {model: openai:gpt-4o, priority: 0, weight: 3}',
        '      - {model: "openai:gpt-4o", priority: 0, api_key: other, api_base: "https://eu.example.com/v1"}',
        '      - {model: groq:llama, priority: 1, timeout_seconds: 5}',
      ].join('\n'),
    );
    expect(config.models!.fast).toEqual({ targets: [{ model: 'openai:gpt-4o-mini' }, { model: 'groq:llama' }] });
    expect(config.models!.smart.timeout_seconds).toBe(20);
    expect(config.models!.smart.targets[1]).toMatchObject({ api_key: 'other', api_base: 'https://eu.example.com/v1' });
  });

  it.each([
    ['a target that is not provider:model', 'models: {fast: [gpt-4o]}', 'models.fast.targets.0.model: a target is provider:model'],
    ['an empty route', 'models: {fast: []}', 'models.fast.targets'],
    ['a provider not configured and no settings of its own', 'models: {fast: [mistral:small]}', 'models.fast.targets.0.model: provider "mistral" is not configured under providers'],
    ['an unknown provider with its own address', 'models: {fast: [{model: "nosuch:x", api_base: "http://h/v1"}]}', 'unknown provider "nosuch"'],
    ['priority on some targets only', 'models: {fast: [{model: openai:a, priority: 0}, openai:b]}', 'models.fast.targets: give priority to every target or to none'],
    ['a weight without priorities', 'models: {fast: [{model: openai:a, weight: 2}, openai:b]}', 'models.fast.targets.0.weight: weight shares the calls among targets of equal priority'],
    ['a zero weight', 'models: {fast: [{model: openai:a, priority: 0, weight: 0}]}', 'models.fast.targets.0.weight'],
    ['an unknown target field', 'models: {fast: [{model: openai:a, wieght: 2}]}', 'wieght'],
    ['a name with spaces', 'models: {"my model": [openai:a]}', 'a model name is 1 to 256 characters without white space'],
  ])('refuses %s, naming where', (_what, yaml, message) => {
    expect(() => parse(`providers: {openai: {api_key: k}}\n${yaml}`)).toThrow(message);
  });
});
