import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayConfig } from '../../src/gateway/config.ts';
import type { CallLedger } from '../../src/gateway/ledger.ts';
import { ModelRouter } from '../../src/gateway/model-router.ts';
import { RuntimeConfig } from '../../src/gateway/runtime-config.ts';
import type { GatewayStore } from '../../src/gateway/storage/index.ts';
import type { Upstream } from '../../src/gateway/upstream.ts';
import { CHAT_USAGE } from '../fakes/openai-compatible.ts';
import {
  eventually,
  PROVIDER_CHAT_ROUTE,
  startTestGateway,
  TEST_PRICING,
  useBackends,
  useFakeProvider,
  type TestGateway,
} from './helpers/gateway.ts';

// Providers, model routes and prices edited through the API: stored, used by the next call, audited, secrets never
// answered; and the configuration file seeding them (which entries a restart writes again).

const backends = await useBackends();
const fake = await useFakeProvider();

const PROVIDER_KEY = 'sk-provider-secret-0001';
const fileConfig = (): Pick<GatewayConfig, 'providers' | 'pricing' | 'models'> => ({
  providers: { openai: { api_key: PROVIDER_KEY, api_base: fake.baseURL } },
  pricing: { 'openai:gpt-fake': TEST_PRICING },
  models: { smart: { targets: [{ model: 'openai:gpt-fake' }] } },
});

const costAt = (prices: { input_cost_per_million: number; output_cost_per_million: number }) =>
  (CHAT_USAGE.prompt_tokens * prices.input_cost_per_million + CHAT_USAGE.completion_tokens * prices.output_cost_per_million) / 1e6;

describe.each(backends)('runtime configuration on $name', (backend) => {
  let gateway: TestGateway;
  let key: string;
  let keyId: string;

  beforeAll(async () => {
    if (backend.skipReason) return;
    gateway = await startTestGateway(await backend.newDatabaseUrl(), fileConfig());
    const created = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'caller' } })).json;
    key = created.key;
    keyId = created.id;
  });
  afterAll(async () => {
    await gateway?.close();
  });

  /** One chat call with the key; the model the fake provider was asked for and the authorization it got. */
  async function callAndSee(model: string, requestId: string) {
    const before = fake.requestsTo(PROVIDER_CHAT_ROUTE).length;
    const answer = await gateway.call('POST', '/v1/chat/completions', { key, body: { model, messages: [{ role: 'user', content: 'hi' }] }, headers: { 'x-request-id': requestId } });
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    const seen = fake.requestsTo(PROVIDER_CHAT_ROUTE).slice(before);
    expect(seen).toHaveLength(1);
    return { model: (seen[0].body as { model: string }).model, authorization: seen[0].headers.authorization };
  }

  async function costOf(requestId: string): Promise<number> {
    return eventually(async () => {
      const rows = (await gateway.call('GET', `/v1/keys/${keyId}/usage`)).json.data as { request_id: string; cost: number; status: string }[];
      const row = rows.find((item) => item.request_id === requestId && item.status === 'success');
      return row?.cost;
    }, `the usage row of ${requestId}`);
  }

  const auditOf = async (query = '') => (await gateway.call('GET', `/v1/audit${query}`)).json;

  it.skipIf(backend.skipReason)('seeds providers, prices and routes from the file, marked source config and audited, without the key', async () => {
    const providers = await gateway.call('GET', '/v1/providers');
    expect(providers.json.data).toEqual([
      expect.objectContaining({ object: 'provider', name: 'openai', api_base: fake.baseURL, api_key_set: true, source: 'config' }),
    ]);
    expect(JSON.stringify(providers.json)).not.toContain(PROVIDER_KEY);
    expect((await gateway.call('GET', '/v1/routes/smart')).json).toMatchObject({
      object: 'model_route',
      name: 'smart',
      targets: [{ model: 'openai:gpt-fake', api_key_set: false }],
      timeout_seconds: null,
      source: 'config',
    });
    expect((await gateway.call('GET', '/v1/pricing/openai:gpt-fake')).json).toMatchObject({ source: 'config', ...TEST_PRICING });
    const audit = await auditOf('?limit=1000');
    const seeded = audit.data.filter((change: { actor: string }) => change.actor === 'config_file');
    expect(seeded.map((change: { kind: string; name: string; action: string }) => `${change.action} ${change.kind} ${change.name}`).sort()).toEqual([
      'create pricing openai:gpt-fake',
      'create provider openai',
      'create route smart',
    ]);
    expect(JSON.stringify(audit)).not.toContain(PROVIDER_KEY);
  });

  it.skipIf(backend.skipReason)('a route edited through the API is used by the next call, and the change is audited with its before and after', async () => {
    expect((await callAndSee('smart', `route-before-${backend.name}`)).model).toBe('gpt-fake');
    expect((await gateway.call('PUT', '/v1/pricing/openai:gpt-other', { body: { input_cost_per_million: 1, output_cost_per_million: 1 } })).status).toBe(200);
    const put = await gateway.call('PUT', '/v1/routes/smart', {
      body: { targets: [{ model: 'openai:gpt-other', priority: 0, weight: 3 }, { model: 'openai:gpt-fake', priority: 1 }], timeout_seconds: 30 },
      headers: { 'x-request-id': `edit-route-${backend.name}` },
    });
    expect(put.status, JSON.stringify(put.json)).toBe(200);
    expect(put.json).toMatchObject({ name: 'smart', source: 'api', timeout_seconds: 30, targets: [{ model: 'openai:gpt-other', weight: 3, priority: 0 }, { model: 'openai:gpt-fake', priority: 1 }] });
    expect((await callAndSee('smart', `route-after-${backend.name}`)).model).toBe('gpt-other');
    // the models list shows the route's new targets to the master key
    expect((await gateway.call('GET', '/v1/models/smart')).json.targets.map((target: { model: string }) => target.model)).toEqual(['openai:gpt-other', 'openai:gpt-fake']);

    const changes = (await auditOf('?kind=route&name=smart')).data;
    expect(changes[0]).toMatchObject({
      object: 'config_change',
      actor: 'master_key',
      request_id: `edit-route-${backend.name}`,
      action: 'update',
      kind: 'route',
      name: 'smart',
      before: { name: 'smart', targets: [{ model: 'openai:gpt-fake', api_key_set: false }], source: 'config' },
      after: { name: 'smart', targets: [{ model: 'openai:gpt-other' }, { model: 'openai:gpt-fake' }], source: 'api' },
    });
    expect(changes[0].client).toMatch(/127\.0\.0\.1/);
    expect(changes.at(-1)).toMatchObject({ actor: 'config_file', action: 'create' });
  });

  it.skipIf(backend.skipReason)('a price edited through the API changes the cost of the next call; its deletion is audited too', async () => {
    const first = `price-before-${backend.name}`;
    await callAndSee('openai:gpt-fake', first);
    expect(await costOf(first)).toBeCloseTo(costAt(TEST_PRICING), 12);
    const dearer = { input_cost_per_million: 3000, output_cost_per_million: 5000 };
    expect((await gateway.call('PUT', '/v1/pricing/openai:gpt-fake', { body: dearer })).json).toMatchObject({ source: 'api', ...dearer });
    const second = `price-after-${backend.name}`;
    await callAndSee('openai:gpt-fake', second);
    expect(await costOf(second)).toBeCloseTo(costAt(dearer), 12);
    const change = (await auditOf('?kind=pricing&name=openai:gpt-fake')).data[0];
    expect(change).toMatchObject({ action: 'update', before: { ...TEST_PRICING, source: 'config' }, after: { ...dearer, source: 'api' } });

    expect((await gateway.call('DELETE', '/v1/pricing/openai:gpt-other')).status).toBe(200);
    expect((await auditOf('?kind=pricing&name=openai:gpt-other')).data[0]).toMatchObject({ action: 'delete', after: null, before: { input_cost_per_million: 1 } });
  });

  it.skipIf(backend.skipReason)('provider keys are write-only: set, used by the next call, never answered nor audited', async () => {
    const secret = 'sk-rotated-secret-0002';
    const put = await gateway.call('PUT', '/v1/providers/openai', { body: { api_key: secret } });
    expect(put.status).toBe(200);
    // api_base was left out: kept
    expect(put.json).toEqual(expect.objectContaining({ name: 'openai', api_key_set: true, api_base: fake.baseURL, source: 'api' }));
    expect(JSON.stringify(put.json)).not.toContain(secret);
    expect((await callAndSee('openai:gpt-fake', `key-${backend.name}`)).authorization).toBe(`Bearer ${secret}`);
    const everything = JSON.stringify([await auditOf('?limit=1000'), (await gateway.call('GET', '/v1/providers')).json, (await gateway.call('GET', '/v1/providers/openai')).json]);
    expect(everything).not.toContain(secret);
    expect(everything).not.toContain(PROVIDER_KEY);
    expect((await auditOf('?kind=provider&name=openai')).data[0]).toMatchObject({ before: { api_key_set: true }, after: { api_key_set: true, api_base: fake.baseURL } });

    // a provider added at run time can be called at once, and routed to
    expect((await gateway.call('PUT', '/v1/providers/groq', { body: { api_key: 'gsk_groq_secret_0003', api_base: fake.baseURL } })).status).toBe(200);
    await gateway.call('PUT', '/v1/pricing/groq:llama-fake', { body: { input_cost_per_million: 1 } });
    const viaGroq = await callAndSee('groq:llama-fake', `groq-${backend.name}`);
    expect(viaGroq).toEqual({ model: 'llama-fake', authorization: 'Bearer gsk_groq_secret_0003' });
    expect((await gateway.call('GET', '/v1/models?provider=groq')).status).toBe(200);
    // clearing the key: null
    expect((await gateway.call('PUT', '/v1/providers/groq', { body: { api_key: null } })).json.api_key_set).toBe(false);
    expect((await gateway.call('DELETE', '/v1/providers/groq')).json).toEqual({ object: 'provider', name: 'groq', deleted: true });
    expect((await gateway.call('POST', '/v1/chat/completions', { key, body: { model: 'groq:llama-fake', messages: [{ role: 'user', content: 'hi' }] } })).json.error.code).toBe(
      'unknown_provider',
    );
  });

  it.skipIf(backend.skipReason)("a target's own key is write-only; sent back with api_key_set it is kept", async () => {
    const target = { model: 'openai:gpt-own', api_key: 'sk-target-secret-0004', api_base: fake.baseURL };
    await gateway.call('PUT', '/v1/pricing/openai:gpt-own', { body: { input_cost_per_million: 1 } });
    const put = await gateway.call('PUT', '/v1/routes/own', { body: { targets: [target] } });
    expect(put.status, JSON.stringify(put.json)).toBe(200);
    expect(put.json.targets).toEqual([{ model: 'openai:gpt-own', api_base: fake.baseURL, api_key_set: true }]);
    expect(JSON.stringify(put.json)).not.toContain(target.api_key);
    expect((await callAndSee('own', `own-${backend.name}`)).authorization).toBe(`Bearer ${target.api_key}`);
    // what GET answered, sent back with a timeout added: the key stays
    const got = (await gateway.call('GET', '/v1/routes/own')).json;
    expect((await gateway.call('PUT', '/v1/routes/own', { body: { targets: got.targets, timeout_seconds: 20 } })).status).toBe(200);
    expect((await callAndSee('own', `own-kept-${backend.name}`)).authorization).toBe(`Bearer ${target.api_key}`);
    // GET's targets sent back as they are keep them (keys included); timeout_seconds null clears the route's timeout
    const again = (await gateway.call('GET', '/v1/routes/own')).json;
    const roundTrip = await gateway.call('PUT', '/v1/routes/own', { body: { targets: again.targets, timeout_seconds: null } });
    expect(roundTrip.json).toMatchObject({ targets: again.targets, timeout_seconds: null });
    expect(JSON.stringify(await auditOf('?kind=route&name=own'))).not.toContain(target.api_key);
    // api_key_set for a target the route never had: nothing to keep
    const refused = await gateway.call('PUT', '/v1/routes/own', { body: { targets: [{ model: 'openai:gpt-new', api_base: fake.baseURL, api_key_set: true }] } });
    expect(refused.status).toBe(400);
    expect(refused.json.error.param).toBe('targets.0.api_key_set');
    expect((await gateway.call('DELETE', '/v1/routes/own')).json).toEqual({ object: 'model_route', name: 'own', deleted: true });
    expect((await gateway.call('GET', '/v1/routes/own')).json.error.code).toBe('route_not_found');
    expect((await gateway.call('POST', '/v1/chat/completions', { key, body: { model: 'own', messages: [{ role: 'user', content: 'hi' }] } })).status).toBe(400);
  });

  it.skipIf(backend.skipReason)('refuses bad edits with the documented error, changing nothing and auditing nothing', async () => {
    const changesBefore = (await auditOf('?limit=1000')).data.length;
    const routeBefore = (await gateway.call('GET', '/v1/routes/smart')).json;
    const refusals: [string, string, unknown, number, string, string | null][] = [
      ['PUT', '/v1/routes/smart', { targets: [{ model: 'nosuch:model' }] }, 400, 'unknown_provider', 'targets.0.model'],
      ['PUT', '/v1/routes/smart', { targets: [{ model: 'mistral:small' }] }, 400, 'unknown_provider', 'targets.0.model'],
      ['PUT', '/v1/routes/smart', { targets: [{ model: 'openai:a', priority: 0, weight: 0 }] }, 400, 'invalid_request', 'targets.0.weight'],
      ['PUT', '/v1/routes/smart', { targets: [{ model: 'openai:a', priority: 0, weight: -2 }] }, 400, 'invalid_request', 'targets.0.weight'],
      ['PUT', '/v1/routes/smart', { targets: [{ model: 'openai:a', weight: 2 }, 'openai:b'] }, 400, 'invalid_request', 'targets.0.weight'],
      ['PUT', '/v1/routes/smart', { targets: [{ model: 'openai:a', priority: 0 }, 'openai:b'] }, 400, 'invalid_request', 'targets'],
      ['PUT', '/v1/routes/smart', { targets: [] }, 400, 'invalid_request', 'targets'],
      ['PUT', '/v1/routes/smart', { targets: ['gpt-4o'] }, 400, 'invalid_request', 'targets.0.model'],
      ['PUT', '/v1/routes/smart', { targets: ['openai:a'], wieght: 1 }, 400, 'invalid_request', 'wieght'],
      ['PUT', '/v1/routes/two%20words', { targets: ['openai:a'] }, 400, 'invalid_request', 'name'],
      ['PUT', '/v1/providers/nosuch', { api_key: 'k' }, 400, 'unknown_provider', 'name'],
      ['PUT', '/v1/providers/openai', { api_base: 'not a url' }, 400, 'invalid_request', 'api_base'],
      ['PUT', '/v1/providers/openai', { api_key: 'sk-\u0000' }, 400, 'invalid_request', 'api_key'],
      ['PUT', '/v1/providers/openai', { api_key: 42 }, 400, 'invalid_request', 'api_key'],
      ['PUT', '/v1/routes/smart', { targets: [{ model: 'openai:a\u0000', api_key: 'k' }] }, 400, 'invalid_request', 'targets.0.model'],
      ['PUT', '/v1/pricing/openai:gpt-fake', { input_cost_per_million: -1 }, 400, 'invalid_request', 'input_cost_per_million'],
      ['DELETE', '/v1/providers/openai', undefined, 409, 'provider_in_use', null],
      ['DELETE', '/v1/providers/cohere', undefined, 404, 'provider_not_found', null],
      ['DELETE', '/v1/routes/nosuch', undefined, 404, 'route_not_found', null],
      ['GET', '/v1/routes/nosuch', undefined, 404, 'route_not_found', null],
      ['GET', '/v1/audit?kind=users', undefined, 400, 'invalid_request', 'kind'],
      ['GET', '/v1/audit?cursor=nonsense', undefined, 400, 'invalid_request', 'cursor'],
    ];
    for (const [method, path, body, status, code, param] of refusals) {
      const answer = await gateway.call(method, path, { body });
      expect({ method, path, status: answer.status, code: answer.json.error?.code, param: answer.json.error?.param }).toEqual({ method, path, status, code, param });
      expect(answer.json.error.type).toBeTypeOf('string');
    }
    expect((await gateway.call('DELETE', '/v1/providers/openai')).json.error.message).toContain('"smart"');
    // a virtual key may not touch any of it
    for (const [method, path] of [['GET', '/v1/routes'], ['PUT', '/v1/routes/x'], ['GET', '/v1/providers'], ['GET', '/v1/audit']]) {
      expect((await gateway.call(method, path, { key, body: method === 'PUT' ? { targets: ['openai:a'] } : undefined })).status).toBe(403);
    }
    expect((await gateway.call('GET', '/v1/routes/smart')).json).toEqual(routeBefore);
    expect((await auditOf('?limit=1000')).data.length).toBe(changesBefore);
  });

  it.skipIf(backend.skipReason)('lists the audit newest first, a page at a time, filtered by kind, name and time', async () => {
    const all = (await auditOf('?limit=1000')).data as { id: string; created_at: string }[];
    expect(all.length).toBeGreaterThan(6);
    const times = all.map((change) => change.created_at);
    expect([...times].sort().reverse()).toEqual(times);
    const pages: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { data: { id: string }[]; next_cursor: string | null } = await auditOf(`?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(page.data.length).toBeLessThanOrEqual(2);
      pages.push(...page.data.map((change) => change.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(pages).toEqual(all.map((change) => change.id));
    const providers = (await auditOf('?kind=provider')).data as { kind: string }[];
    expect(providers.length).toBeGreaterThan(0);
    expect(providers.every((change) => change.kind === 'provider')).toBe(true);
    expect((await auditOf(`?since=${encodeURIComponent(all[0].created_at)}`)).data.length).toBeGreaterThanOrEqual(1);
    expect((await auditOf('?until=2000-01-01T00:00:00Z')).data).toEqual([]);
  });
});

describe.each(backends)('the change check on $name', (backend) => {
  it.skipIf(backend.skipReason)('a change made through one gateway on the database is used by another within a second; the check is one cheap read off the call path', async () => {
    const url = await backend.newDatabaseUrl();
    // two gateways on one database, each with its own connections (on SQLite: two connections to one file)
    const [editor, other] = [await startTestGateway(url, fileConfig()), await startTestGateway(url, fileConfig())];
    try {
      const key = (await editor.call('POST', '/v1/keys', { body: { key_name: 'check' } })).json.key as string;
      const ask = () => other.call('POST', '/v1/chat/completions', { key, body: { model: 'smart', messages: [{ role: 'user', content: 'hi' }] } });
      await editor.call('PUT', '/v1/pricing/openai:gpt-moved', { body: { input_cost_per_million: 1 } });
      expect((await editor.call('PUT', '/v1/routes/smart', { body: { targets: ['openai:gpt-moved'] } })).status).toBe(200);
      const edited = performance.now();
      let lag = -1;
      while (performance.now() - edited < 5000) {
        const at = performance.now();
        if ((await ask()).json.model === 'gpt-moved') {
          lag = at - edited;
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(lag).toBeGreaterThanOrEqual(0);
      expect(lag).toBeLessThan(1000);

      // What each poll costs, against what one model call costs, measured here: the poll runs on a timer, 4 times a
      // second whatever the traffic, and a call only reads the router in memory.
      const mean = async (runs: number, fn: () => Promise<unknown>) => {
        const start = performance.now();
        for (let i = 0; i < runs; i++) await fn();
        return (performance.now() - start) / runs;
      };
      await mean(20, () => other.store.audit.version());
      const check = await mean(200, () => other.store.audit.version());
      const call = await mean(20, ask);
      console.info(`${backend.name}: change check ${(check * 1000).toFixed(0)} µs, model call ${(call * 1000).toFixed(0)} µs, propagation ${lag.toFixed(0)} ms`);
      expect(check).toBeLessThan(call / 2);

      // Edits of one provider on both gateways at once: each lands once, and each audit row's before is the state it
      // replaced (no two edits replaced the same state, none was lost)
      const bases = Array.from({ length: 10 }, (_, i) => `https://h${i}.example.com/v1`);
      const answers = await Promise.all(bases.map((base, i) => (i % 2 === 0 ? editor : other).call('PUT', '/v1/providers/openai', { body: { api_base: base } })));
      expect(answers.map((answer) => answer.status)).toEqual(bases.map(() => 200));
      const changes = (await other.call('GET', '/v1/audit?kind=provider&name=openai&limit=1000')).json.data as { action: string; before: { api_base: string }; after: { api_base: string } }[];
      const edits = changes.filter((change) => bases.includes(change.after.api_base));
      expect(edits).toHaveLength(bases.length);
      const replaced = edits.map((change) => change.before.api_base);
      expect(new Set(replaced).size).toBe(bases.length);
      const final = (await editor.call('GET', '/v1/providers/openai')).json.api_base as string;
      expect(new Set([...replaced, final])).toEqual(new Set([fake.baseURL, ...bases]));
    } finally {
      await other.close();
      await editor.close();
    }
  });
});

describe('the configuration file seeds the database entry by entry (SQLite, restarts)', () => {
  const backend = backends[0];

  it('keeps API edits across restarts with the same file; a changed file entry wins; a removed one goes unless edited', async () => {
    const url = await backend.newDatabaseUrl();
    const restart = async (config: ReturnType<typeof fileConfig>) => {
      const gateway = await startTestGateway(url, config);
      const routes = (await gateway.call('GET', '/v1/routes')).json.data as { name: string; targets: { model: string }[]; source: string }[];
      const prices = (await gateway.call('GET', '/v1/pricing')).json.data as { model: string; input_cost_per_million: number; source: string }[];
      return { gateway, routes, prices };
    };
    const config = fileConfig();
    config.models = { ...config.models, ...{ fast: { targets: [{ model: 'openai:gpt-fast' }] }, gone: { targets: [{ model: 'openai:gpt-gone' }] } } };
    config.pricing = { ...config.pricing, 'openai:gpt-cheap': { input_cost_per_million: 1, output_cost_per_million: 1 } };

    let { gateway } = await restart(config);
    await gateway.call('PUT', '/v1/routes/smart', { body: { targets: ['openai:gpt-edited'] } });
    await gateway.call('DELETE', '/v1/pricing/openai:gpt-cheap');
    await gateway.close();

    // the same file: the edit and the deletion stand, nothing is written or audited again
    let seen = await restart(config);
    gateway = seen.gateway;
    expect(seen.routes.map((route) => route.name)).toEqual(['smart', 'fast', 'gone']);
    expect(seen.routes[0]).toMatchObject({ targets: [{ model: 'openai:gpt-edited' }], source: 'api' });
    expect(seen.prices.some((price) => price.model === 'openai:gpt-cheap')).toBe(false);
    const changes = (await gateway.call('GET', '/v1/audit?limit=1000')).json.data.length;
    await gateway.close();

    // the file changes smart and gpt-cheap and drops gone: the file's entries win, gone is deleted (it was the file's)
    const changed = fileConfig();
    changed.models = { smart: { targets: [{ model: 'openai:gpt-fake' }, { model: 'openai:gpt-second' }] }, fast: config.models.fast };
    changed.pricing = { ...changed.pricing, 'openai:gpt-cheap': { input_cost_per_million: 2, output_cost_per_million: 2 } };
    seen = await restart(changed);
    gateway = seen.gateway;
    expect(seen.routes.map((route) => route.name)).toEqual(['smart', 'fast']);
    expect(seen.routes[0]).toMatchObject({ targets: [{ model: 'openai:gpt-fake' }, { model: 'openai:gpt-second' }], source: 'config' });
    expect(seen.prices.find((price) => price.model === 'openai:gpt-cheap')).toMatchObject({ input_cost_per_million: 2, source: 'config' });
    const audit = (await gateway.call('GET', '/v1/audit?limit=1000')).json.data as { actor: string; action: string; kind: string; name: string; before: unknown }[];
    expect(audit.length - changes).toBe(3);
    expect(audit.slice(0, 3).map((change) => `${change.actor} ${change.action} ${change.kind} ${change.name}`).sort()).toEqual([
      'config_file create pricing openai:gpt-cheap',
      'config_file delete route gone',
      'config_file update route smart',
    ]);
    // an API edit of fast, then the file drops fast: the edit stays
    await gateway.call('PUT', '/v1/routes/fast', { body: { targets: ['openai:gpt-faster'] } });
    await gateway.close();
    const dropped = { ...changed, models: { smart: changed.models.smart } };
    seen = await restart(dropped);
    expect(seen.routes.map((route) => `${route.name} ${route.source}`)).toEqual(['smart config', 'fast api']);
    await seen.gateway.close();
  });
});

describe('the change poll when the database fails', () => {
  it('keeps serving the configuration loaded last, says so once, and loads the change once the database answers', async () => {
    let down = false;
    let version = 1;
    let target = 'openai:gpt-first';
    const store = {
      audit: {
        version: async () => {
          if (down) throw new Error('connection refused');
          return version;
        },
      },
      providers: { list: async () => [{ name: 'openai', api_key: 'sk-k', api_base: null, source: 'config', created_at: 0, updated_at: 0 }] },
      routes: { list: async () => [{ name: 'smart', definition: { targets: [{ model: target }] }, source: 'config', created_at: 0, updated_at: 0 }] },
    } as unknown as GatewayStore;
    const router = new ModelRouter({}, {});
    const reconfigured: string[][] = [];
    const upstream = { reconfigure: (settings: Record<string, unknown>) => reconfigured.push(Object.keys(settings)) } as unknown as Upstream;
    let forgotten = 0;
    const ledger = { forgetPricing: () => forgotten++ } as unknown as CallLedger;
    const runtime = new RuntimeConfig({ store, router, upstream, ledger });
    const failures: unknown[] = [];
    let recoveries = 0;
    runtime.onPollError = (error) => failures.push(error);
    runtime.onPollRecovered = () => recoveries++;

    expect(await runtime.refresh()).toBe(true);
    expect(router.plan('smart').targets.map((t) => t.model)).toEqual(['gpt-first']);
    expect(reconfigured).toEqual([['openai']]);
    expect(await runtime.refresh()).toBe(false);
    runtime.start(10);
    try {
      down = true;
      await new Promise((resolve) => setTimeout(resolve, 120));
      // several polls failed: reported once, and calls still plan with what was loaded
      expect(failures).toHaveLength(1);
      expect(router.plan('smart').targets.map((t) => t.model)).toEqual(['gpt-first']);
      target = 'openai:gpt-second';
      version = 2;
      down = false;
      await eventually(() => (recoveries === 1 ? true : undefined), 'the poll to recover');
      await eventually(() => (router.plan('smart').targets[0].model === 'gpt-second' ? true : undefined), 'the change to load');
      expect(failures).toHaveLength(1);
      expect(forgotten).toBe(2);
    } finally {
      runtime.stop();
    }
  });
});
