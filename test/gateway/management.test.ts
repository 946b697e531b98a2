import { Validator } from '@seriousme/openapi-schema-validator';
import { beforeAll, describe, expect, it } from 'vitest';
import { MASTER_KEY, useBackends, useTestGateway, type TestGateway } from './helpers/gateway.ts';

const ISO_NO_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}$/;
type ErrorBody = { error: { message: string; type: string; code: string; param: string | null } };

const backends = await useBackends();

describe.each(backends)('management API on $name', (backend) => {
  let gateway: TestGateway;

  useTestGateway(backend, () => ({}), (started) => {
    gateway = started;
  });

  it.skipIf(backend.skipReason)('creates users, refuses a duplicate with 409, lists, gets, updates and deletes them', async () => {
    const created = await gateway.call('POST', '/v1/users', { body: { user_id: 'alice', alias: 'Alice', metadata: { team: 'red' } } });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ object: 'user', user_id: 'alice', alias: 'Alice', metadata: { team: 'red' }, budget_id: null });
    expect(created.json.created_at).toMatch(ISO_NO_ZONE);

    const duplicate = await gateway.call('POST', '/v1/users', { body: { user_id: 'alice', alias: 'Other' } });
    expect(duplicate.status).toBe(409);
    expect(duplicate.json.error).toEqual({ message: 'A user with user_id "alice" already exists', type: 'conflict_error', code: 'user_exists', param: null });

    const missingAlias = await gateway.call('POST', '/v1/users', { body: { user_id: 'bob' } });
    expect(missingAlias.status).toBe(400);
    expect(missingAlias.json.error).toMatchObject({ type: 'invalid_request_error', param: 'alias' });

    await gateway.call('POST', '/v1/users', { body: { user_id: 'bob', alias: 'Bob' } });
    const list = await gateway.call('GET', '/v1/users');
    expect(list.json.data.map((user: { user_id: string }) => user.user_id)).toEqual(['alice', 'bob']);

    const patched = await gateway.call('PATCH', '/v1/users/bob', { body: { alias: 'Robert', metadata: { a: 1 } } });
    expect(patched.json).toMatchObject({ user_id: 'bob', alias: 'Robert', metadata: { a: 1 } });
    expect((await gateway.call('GET', '/v1/users/bob')).json.alias).toBe('Robert');

    const key = await gateway.call('POST', '/v1/keys', { body: { key_name: 'bob-key', user_id: 'bob' } });
    expect((await gateway.call('DELETE', '/v1/users/bob')).json).toEqual({ object: 'user', user_id: 'bob', deleted: true });
    expect((await gateway.call('GET', '/v1/users/bob')).status).toBe(404);
    // The user's keys go with it.
    expect((await gateway.call('GET', `/v1/keys/${key.json.id}`)).status).toBe(404);
    expect((await gateway.call('DELETE', '/v1/users/bob')).json.error.code).toBe('user_not_found');
  });

  it.skipIf(backend.skipReason)('creates a key whose secret is shown once and never stored or listed', async () => {
    const created = await gateway.call('POST', '/v1/keys', { body: { key_name: 'ci', expires_at: '2099-01-01T00:00:00Z' } });
    expect(created.status).toBe(201);
    const { key, id } = created.json;
    expect(key).toMatch(/^gw-[A-Za-z0-9_-]{43}$/);
    expect(created.json).toMatchObject({ key_name: 'ci', is_active: true, status: 'active', metadata: {}, expires_at: '2099-01-01T00:00:00.000', key_prefix: key.slice(0, 7) });
    expect(created.json.created_at).toMatch(ISO_NO_ZONE);

    const listed = await gateway.call('GET', '/v1/keys');
    const entry = listed.json.data.find((k: { id: string }) => k.id === id);
    expect(entry).toBeDefined();
    expect(entry).not.toHaveProperty('key');
    expect(JSON.stringify(listed.json)).not.toContain(key);
    const got = await gateway.call('GET', `/v1/keys/${id}`);
    expect(got.json).not.toHaveProperty('key');
    expect(JSON.stringify(got.json)).not.toContain(key);

    // Only the SHA-256 is in the database.
    const rows = await gateway.store.driver.all('SELECT * FROM virtual_keys WHERE id = ?', [id]);
    expect(JSON.stringify(rows)).not.toContain(key.slice(7));
    expect(rows[0].key_hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it.skipIf(backend.skipReason)('validates key requests: past or malformed expires_at, unknown owner or budget, unknown fields', async () => {
    const past = await gateway.call('POST', '/v1/keys', { body: { key_name: 'old', expires_at: '2001-01-01T00:00:00Z' } });
    expect(past.status).toBe(400);
    expect(past.json.error.param).toBe('expires_at');
    const malformed = await gateway.call('POST', '/v1/keys', { body: { key_name: 'x', expires_at: 'tomorrow' } });
    expect(malformed.json.error).toMatchObject({ param: 'expires_at', type: 'invalid_request_error' });
    expect((await gateway.call('POST', '/v1/keys', { body: { key_name: 'x', user_id: 'nobody' } })).json.error.code).toBe('user_not_found');
    expect((await gateway.call('POST', '/v1/keys', { body: { key_name: 'x', budget_id: 'budget_none' } })).json.error.code).toBe('budget_not_found');
    const unknown = await gateway.call('POST', '/v1/keys', { body: { key_name: 'x', colour: 'blue' } });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.param).toBe('colour');
    expect((await gateway.call('PATCH', '/v1/keys/key_missing', { body: { is_active: false } })).status).toBe(404);
    expect((await gateway.call('DELETE', '/v1/keys/key_missing')).json.error.code).toBe('key_not_found');
  });

  describe('virtual key states', () => {
    it.skipIf(backend.skipReason)('active → inactive → active again (reactivation), each visible to requests', async () => {
      const { json: key } = await gateway.call('POST', '/v1/keys', { body: { key_name: 'toggle' } });
      expect((await gateway.call('GET', '/v1/models', { key: key.key })).status).not.toBe(401);
      const inactive = await gateway.call('PATCH', `/v1/keys/${key.id}`, { body: { is_active: false } });
      expect(inactive.json).toMatchObject({ is_active: false, status: 'inactive' });
      const refused = await gateway.call('GET', '/v1/models', { key: key.key });
      expect(refused.status).toBe(401);
      expect(refused.json.error.code).toBe('key_inactive');
      const active = await gateway.call('PATCH', `/v1/keys/${key.id}`, { body: { is_active: true } });
      expect(active.json).toMatchObject({ is_active: true, status: 'active' });
      expect((await gateway.call('GET', '/v1/models', { key: key.key })).status).not.toBe(401);
    });

    it.skipIf(backend.skipReason)('active → expired when expires_at passes, with no request in between', async () => {
      const expiresAt = Date.now() + 2500;
      const { json: key } = await gateway.call('POST', '/v1/keys', { body: { key_name: 'short', expires_at: new Date(expiresAt).toISOString() } });
      expect(key.status).toBe('active');
      expect((await gateway.call('GET', '/v1/models', { key: key.key })).status).not.toBe(401);
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt - Date.now()) + 100));
      expect((await gateway.call('GET', `/v1/keys/${key.id}`)).json).toMatchObject({ status: 'expired', is_active: true });
      const refused = await gateway.call('GET', '/v1/models', { key: key.key });
      expect(refused.status).toBe(401);
      expect(refused.json.error.code).toBe('key_expired');
      // Extending the expiry revives it.
      await gateway.call('PATCH', `/v1/keys/${key.id}`, { body: { expires_at: null } });
      expect((await gateway.call('GET', '/v1/models', { key: key.key })).status).not.toBe(401);
    });

    it.skipIf(backend.skipReason)('any → deleted: the record is gone and the secret no longer works', async () => {
      const { json: key } = await gateway.call('POST', '/v1/keys', { body: { key_name: 'doomed' } });
      await gateway.call('PATCH', `/v1/keys/${key.id}`, { body: { is_active: false } });
      expect((await gateway.call('DELETE', `/v1/keys/${key.id}`)).json).toEqual({ object: 'virtual_key', id: key.id, deleted: true });
      expect((await gateway.call('GET', `/v1/keys/${key.id}`)).status).toBe(404);
      expect((await gateway.call('PATCH', `/v1/keys/${key.id}`, { body: { is_active: true } })).status).toBe(404);
      expect((await gateway.call('GET', '/v1/models', { key: key.key })).json.error.code).toBe('invalid_api_key');
    });
  });

  describe('authentication rules', () => {
    let virtualKey: string;
    beforeAll(async () => {
      if (backend.skipReason) return;
      virtualKey = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'auth' } })).json.key;
    });

    it.skipIf(backend.skipReason)('no credential → 401 missing_api_key', async () => {
      const response = await gateway.call('GET', '/v1/users', { key: null });
      expect(response.status).toBe(401);
      expect(response.json.error).toMatchObject({ type: 'authentication_error', code: 'missing_api_key' });
    });

    it.skipIf(backend.skipReason)('a header without "Bearer " → 401 malformed_api_key, naming the header', async () => {
      const hub = await gateway.call('GET', '/v1/users', { key: null, headers: { 'x-hub-key': MASTER_KEY } });
      expect(hub.json.error.code).toBe('malformed_api_key');
      expect(hub.json.error.message).toContain('X-Hub-Key');
      const auth = await gateway.call('GET', '/v1/users', { key: null, headers: { authorization: `Basic ${MASTER_KEY}` } });
      expect(auth.status).toBe(401);
      expect(auth.json.error.message).toContain('Authorization');
    });

    it.skipIf(backend.skipReason)('an unknown token → 401 invalid_api_key, without echoing it', async () => {
      for (const token of ['gw-notarealkey', 'something-else']) {
        const response = await gateway.call('GET', '/v1/users', { key: token });
        expect(response.status).toBe(401);
        expect(response.json.error.code).toBe('invalid_api_key');
        expect(JSON.stringify(response.json)).not.toContain(token);
      }
    });

    it.skipIf(backend.skipReason)('Authorization: Bearer works alone; X-Hub-Key wins when both are present', async () => {
      expect((await gateway.call('GET', '/v1/users', { key: null, headers: { authorization: `Bearer ${MASTER_KEY}` } })).status).toBe(200);
      // X-Hub-Key (virtual) + Authorization (master) → treated as the virtual key → 403 on management.
      const both = await gateway.call('GET', '/v1/users', { key: virtualKey, headers: { authorization: `Bearer ${MASTER_KEY}` } });
      expect(both.status).toBe(403);
      // X-Hub-Key (master) + Authorization (garbage) → master.
      expect((await gateway.call('GET', '/v1/users', { key: MASTER_KEY, headers: { authorization: 'Bearer nonsense' } })).status).toBe(200);
    });

    it.skipIf(backend.skipReason)('a virtual key on every management endpoint → 403 master_key_required', async () => {
      const endpoints: [string, string, unknown?][] = [
        ['POST', '/v1/users', { user_id: 'x', alias: 'x' }],
        ['GET', '/v1/users'],
        ['GET', '/v1/users/alice'],
        ['PATCH', '/v1/users/alice', { alias: 'y' }],
        ['DELETE', '/v1/users/alice'],
        ['GET', '/v1/users/alice/usage'],
        ['POST', '/v1/keys', { key_name: 'x' }],
        ['GET', '/v1/keys'],
        ['GET', '/v1/keys/key_x'],
        ['PATCH', '/v1/keys/key_x', { is_active: true }],
        ['DELETE', '/v1/keys/key_x'],
        ['GET', '/v1/keys/key_x/usage'],
        ['POST', '/v1/budgets', { max_budget: 1 }],
        ['GET', '/v1/budgets'],
        ['GET', '/v1/pricing'],
        ['PUT', '/v1/pricing/openai:gpt', { input_cost_per_million: 1, output_cost_per_million: 1 }],
      ];
      for (const [method, path, body] of endpoints) {
        const response = await gateway.call(method, path, { key: virtualKey, body });
        expect(response.status, `${method} ${path}`).toBe(403);
        expect(response.json.error).toMatchObject({ type: 'permission_error', code: 'master_key_required' });
      }
      expect((await gateway.call('GET', '/v1/users/alice')).status).toBe(200);
    });
  });

  it.skipIf(backend.skipReason)('budgets and pricing: create, attach, read, update, detach on delete', async () => {
    const budget = await gateway.call('POST', '/v1/budgets', { body: { max_budget: 2.5, reset_every_seconds: 3600 } });
    expect(budget.status).toBe(201);
    expect(budget.json).toMatchObject({ max_budget: 2.5, spend: 0, reserved: 0, remaining: 2.5, reset_every_seconds: 3600 });
    expect(budget.json.next_reset_at).toMatch(ISO_NO_ZONE);
    const id = budget.json.budget_id;
    expect((await gateway.call('PATCH', '/v1/users/alice', { body: { budget_id: id } })).json.budget_id).toBe(id);
    expect((await gateway.call('PATCH', `/v1/budgets/${id}`, { body: { max_budget: 5 } })).json.max_budget).toBe(5);
    expect((await gateway.call('DELETE', `/v1/budgets/${id}`)).json.deleted).toBe(true);
    expect((await gateway.call('GET', '/v1/users/alice')).json.budget_id).toBeNull();
    expect((await gateway.call('POST', '/v1/budgets', { body: { max_budget: -1 } })).json.error.param).toBe('max_budget');

    const price = await gateway.call('PUT', '/v1/pricing/openrouter:meta/llama-3', { body: { input_cost_per_million: 0.5, output_cost_per_million: 1.5 } });
    expect(price.json).toMatchObject({ model: 'openrouter:meta/llama-3', input_cost_per_million: 0.5, output_cost_per_million: 1.5 });
    expect((await gateway.call('GET', '/v1/pricing/openrouter:meta/llama-3')).status).toBe(200);
    expect((await gateway.call('PUT', '/v1/pricing/no-colon', { body: { input_cost_per_million: 1, output_cost_per_million: 1 } })).status).toBe(400);
    expect((await gateway.call('DELETE', '/v1/pricing/openrouter:meta/llama-3')).json.deleted).toBe(true);
    expect((await gateway.call('GET', '/v1/pricing/openrouter:meta/llama-3')).status).toBe(404);
  });

  it.skipIf(backend.skipReason)('bad bodies get OpenAI-shaped 400/415, unknown routes 404', async () => {
    const response = await fetch(`${gateway.url}/v1/users`, { method: 'POST', headers: { 'x-hub-key': `Bearer ${MASTER_KEY}`, 'content-type': 'application/json' }, body: '{"user_id": ' });
    expect(response.status).toBe(400);
    expect(((await response.json()) as ErrorBody).error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
    const text = await fetch(`${gateway.url}/v1/users`, { method: 'POST', headers: { 'x-hub-key': `Bearer ${MASTER_KEY}`, 'content-type': 'text/plain' }, body: 'hi' });
    expect(text.status).toBe(415);
    expect(((await text.json()) as ErrorBody).error.code).toBe('unsupported_media_type');
    const missing = await gateway.call('GET', '/v1/nothing');
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe('route_not_found');
  });

  it.skipIf(backend.skipReason)('health, readiness, metrics and a valid OpenAPI document', async () => {
    expect((await gateway.call('GET', '/health', { key: null })).json).toEqual({ status: 'ok' });
    expect((await gateway.call('GET', '/health/readiness', { key: null })).json).toEqual({ status: 'ok', database: backend.name });
    const metrics = await gateway.call('GET', '/metrics', { key: null });
    expect(metrics.status).toBe(200);
    expect(metrics.json).toMatch(/gateway_auth_failures_total\{reason="missing_api_key"\} [1-9]/);
    expect(metrics.json).toContain('gateway_http_requests_total');
    const document = (await gateway.call('GET', '/openapi.json', { key: null })).json;
    const result = await new Validator().validate(document);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    for (const path of ['/v1/users', '/v1/keys/{key_id}', '/v1/chat/completions', '/v1/embeddings', '/v1/models', '/v1/messages', '/v1/budgets', '/v1/pricing/{model}']) {
      expect(document.paths).toHaveProperty([path]);
    }
    expect(Object.keys(document.paths['/v1/chat/completions'].post.responses).sort()).toEqual(['200', '400', '401', '402', '403', '404', '413', '415', '429', '502', '503', '504']);
  });
});
