import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Api, ApiError, recordPath, type Budget, type User, type VirtualKey } from '../../src/gateway/dashboard/page/api.ts';
import { budgetName, Names } from '../../src/gateway/dashboard/page/names.ts';
import { sqliteBackend, startTestGateway, type TestGateway } from './helpers/gateway.ts';

/** Ids a caller may choose that mean something in a URL. */
const AWKWARD = ['a/b', 'what?x=1', 'frag#ment', '100%', 'sp ace', '../keys', '.hidden', '...'];

describe('the dashboard builds record paths from encoded segments', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('an id with /, ?, #, % or spaces is one segment; a browser leaves it as it is', () => {
    expect(recordPath('users', 'a/b?c#d%e')).toBe('/v1/users/a%2Fb%3Fc%23d%25e');
    expect(recordPath('keys', 'k 1', 'rotate')).toBe('/v1/keys/k%201/rotate');
    for (const id of AWKWARD) {
      const path = recordPath('users', id);
      // what the browser sends: the path after URL parsing (dot segments resolved)
      expect(new URL(path, 'http://gateway.test').pathname).toBe(path);
      expect(decodeURIComponent(path.slice('/v1/users/'.length))).toBe(id);
    }
  });

  it('"." and ".." ids are refused by the page, never sent (they would reach /v1/ or /v1/users/)', async () => {
    const fetch = vi.fn();
    vi.stubGlobal('fetch', fetch);
    const api = new Api('key', () => {});
    for (const [id, rest] of [['..', []], ['.', []], ['..', ['rotate']]] as const) {
      const error = await api.call('DELETE', recordPath('users', id, ...rest)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApiError);
      expect((error as ApiError).code).toBe('unaddressable_path');
    }
    expect(fetch).not.toHaveBeenCalled();
  });
});

describe('the dashboard shows names, and ids where there are none', () => {
  const budget = (budget_id: string, name: string | null = null): Budget => ({
    budget_id,
    name,
    max_budget: 1,
    soft_budget: null,
    soft_budget_exceeded: false,
    spend: 0,
    reserved: 0,
    remaining: 1,
    reset_every_seconds: null,
    reset_alignment: null,
    reset_time_zone: null,
    next_reset_at: null,
  });
  const user = (user_id: string, alias: string) => ({ user_id, alias }) as User;
  const key = (id: string, key_name: string) => ({ id, key_name }) as VirtualKey;

  it('a budget by its name, by its id when unnamed (null or blank)', () => {
    expect(budgetName(budget('budget_1', 'Team A'))).toBe('Team A');
    expect(budgetName(budget('budget_2'))).toBe('budget_2');
    expect(budgetName(budget('budget_3', null))).toBe('budget_3');
    expect(budgetName(budget('budget_4', '  '))).toBe('budget_4');
  });

  it('users and keys by name; a deleted record (its usage rows stay) or none by its id or a dash', () => {
    const names = new Names([user('alice', 'Alice'), user('bob', ' ')], [key('k1', 'alice-app')], [budget('budget_1', 'Team A')]);
    expect([names.user('alice'), names.user('bob'), names.user('gone'), names.user(null)]).toEqual(['Alice', 'bob', 'gone', '—']);
    expect([names.key('k1'), names.key('k-deleted'), names.key(null)]).toEqual(['alice-app', 'k-deleted', '—']);
    expect([names.budget('budget_1'), names.budget('budget_9')]).toEqual(['Team A', 'budget_9']);
    expect(names.knows(['alice', null], ['k1'])).toBe(true);
    expect(names.knows(['carol'], [])).toBe(false);
    expect(names.knows([], ['k2'])).toBe(false);
  });
});

describe('against the gateway', () => {
  const backend = sqliteBackend();
  let gateway: TestGateway;
  beforeAll(async () => {
    gateway = await startTestGateway(await backend.newDatabaseUrl());
  });
  afterAll(async () => {
    await gateway?.close();
    await backend.close();
  });

  it('users with awkward ids are read, changed and deleted through the paths the page builds; "." and ".." are refused at creation', async () => {
    for (const id of AWKWARD) {
      expect((await gateway.call('POST', '/v1/users', { body: { user_id: id, alias: 'A' } })).status).toBe(201);
      expect((await gateway.call('GET', recordPath('users', id))).json.user_id).toBe(id);
      expect((await gateway.call('PATCH', recordPath('users', id), { body: { alias: 'B' } })).json).toMatchObject({ user_id: id, alias: 'B' });
    }
    // Deleting "../keys" must not reach /v1/keys: every other user is still there afterwards.
    expect((await gateway.call('DELETE', recordPath('users', '../keys'))).json).toEqual({ object: 'user', user_id: '../keys', deleted: true });
    expect((await gateway.call('GET', '/v1/users')).json.data).toHaveLength(AWKWARD.length - 1);
    for (const id of ['.', '..']) {
      const refused = await gateway.call('POST', '/v1/users', { body: { user_id: id, alias: 'Dots' } });
      expect(refused.status).toBe(400);
      expect(refused.json.error.param).toBe('user_id');
    }
  });
});
