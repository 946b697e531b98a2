import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_PRICING, startTestGateway, useBackends, useFakeProvider, type TestGateway } from './helpers/gateway.ts';

// POST /v1/keys/{id}/rotate on both storage engines: a new secret once, the old one refused at once or after a
// grace period, the key's budget and usage unchanged — and a second gateway instance on the same database agrees.

const backends = await useBackends();
const fake = await useFakeProvider();

describe.each(backends)('key rotation on $name', (backend) => {
  let gateway: TestGateway;
  let other: TestGateway;

  beforeAll(async () => {
    if (backend.skipReason) return;
    const url = await backend.newDatabaseUrl();
    const config = { providers: { openai: { api_key: 'sk-provider', api_base: fake.baseURL } }, pricing: { 'openai:gpt-fake': TEST_PRICING } };
    gateway = await startTestGateway(url, config);
    other = await startTestGateway(url, config);
  });
  afterAll(async () => {
    await other?.close();
    await gateway?.close();
  });

  const chat = (on: TestGateway, key: string) =>
    on.call('POST', '/v1/chat/completions', { key, body: { model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'hi' }] } });

  it.skipIf(backend.skipReason)('gives a new secret once and refuses the old one at once; budget and usage stay with the key', async () => {
    const budget = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 10 } })).json;
    const created = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'svc', budget_id: budget.budget_id } })).json;
    expect((await chat(gateway, created.key)).status).toBe(200);

    const rotated = await gateway.call('POST', `/v1/keys/${created.id}/rotate`);
    expect(rotated.status).toBe(200);
    expect(rotated.json).toMatchObject({ object: 'virtual_key', id: created.id, key_name: 'svc', budget_id: budget.budget_id, previous_key_expires_at: null });
    expect(rotated.json.key).toMatch(/^gw-[A-Za-z0-9_-]{43}$/);
    expect(rotated.json.key).not.toBe(created.key);
    expect(rotated.json.key_prefix).toBe(rotated.json.key.slice(0, 7));
    // shown once: not in the key's record
    expect(JSON.stringify((await gateway.call('GET', `/v1/keys/${created.id}`)).json)).not.toContain(rotated.json.key);

    for (const on of [gateway, other]) {
      const old = await chat(on, created.key);
      expect(old.status).toBe(401);
      expect(old.json.error.code).toBe('invalid_api_key');
      expect((await chat(on, rotated.json.key)).status).toBe(200);
    }
    const usage = (await gateway.call('GET', `/v1/keys/${created.id}/usage`)).json;
    expect(usage.totals.requests).toBe(3);
    const spent = (await gateway.call('GET', `/v1/budgets/${budget.budget_id}`)).json.spend;
    expect(spent).toBeGreaterThan(0);
  });

  it.skipIf(backend.skipReason)('with a grace period both secrets work until it ends; rotating again ends it', async () => {
    const created = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'graceful' } })).json;
    const first = await gateway.call('POST', `/v1/keys/${created.id}/rotate`, { body: { grace_period_seconds: 3600 } });
    expect(first.status).toBe(200);
    expect(Date.parse(`${first.json.previous_key_expires_at}Z`)).toBeGreaterThan(Date.now() + 3_500_000);
    expect((await chat(other, created.key)).status).toBe(200);
    expect((await chat(other, first.json.key)).status).toBe(200);

    // the grace period, as the database sees it, has ended
    await gateway.store.driver.run('UPDATE virtual_keys SET previous_key_expires_at = ? WHERE id = ?', [Date.now() - 1, created.id]);
    expect((await chat(gateway, created.key)).status).toBe(401);
    expect((await chat(gateway, first.json.key)).status).toBe(200);

    // a rotation without grace drops any previous secret at once
    await gateway.call('POST', `/v1/keys/${created.id}/rotate`, { body: { grace_period_seconds: 600 } });
    const third = await gateway.call('POST', `/v1/keys/${created.id}/rotate`);
    expect((await chat(gateway, first.json.key)).status).toBe(401);
    expect((await chat(gateway, third.json.key)).status).toBe(200);
  });

  it.skipIf(backend.skipReason)('refuses an unknown key, a bad grace period and anyone but the master key', async () => {
    expect((await gateway.call('POST', '/v1/keys/key_nope/rotate')).json.error.code).toBe('key_not_found');
    for (const grace of [-1, 1.5, 8 * 24 * 3600, '60']) {
      const response = await gateway.call('POST', '/v1/keys/key_nope/rotate', { body: { grace_period_seconds: grace } });
      expect(response.status, String(grace)).toBe(400);
      expect(response.json.error.param).toBe('grace_period_seconds');
    }
    expect((await gateway.call('POST', '/v1/keys/key_nope/rotate', { body: { other: 1 } })).status).toBe(400);
    const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'not-master' } })).json;
    expect((await gateway.call('POST', `/v1/keys/${key.id}/rotate`, { key: key.key })).json.error.code).toBe('master_key_required');
  });
});
