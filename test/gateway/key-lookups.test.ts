import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type GatewayStore } from '../../src/gateway/storage/index.ts';
import { useBackends } from './helpers/gateway.ts';

/**
 * Key lookups of concurrent calls: on PostgreSQL those that arrive while one query runs go in the next together; each
 * must find what it would find alone (its key and owner, a rotated key's old secret only within its grace period at
 * the lookup's own time, nothing for an unknown secret).
 */
const backends = await useBackends();

describe.each(backends)('concurrent key lookups on $name', (backend) => {
  let store: GatewayStore;
  let queries = 0;

  beforeAll(async () => {
    if (backend.skipReason) return;
    store = openStore(await backend.newDatabaseUrl());
    await store.migrate();
    const all = store.driver.all.bind(store.driver);
    store.driver.all = (sql, params) => {
      if (sql.includes('FROM virtual_keys k')) queries++;
      return all(sql, params);
    };
  });
  afterAll(() => store?.close());

  it.skipIf(backend.skipReason)('each of many lookups at once finds what it finds alone', async () => {
    const now = Date.now();
    const budget = await store.budgets.create({ max_budget_nanos: 1000n });
    const owner = await store.users.create({ user_id: 'lookup-owner', alias: 'owner', budget_id: budget.budget_id, allowed_models: ['openai:a'] });
    const plain = await store.keys.create({ key_hash: 'hash-plain', key_prefix: 'gw-p', key_name: 'plain', user_id: owner.user_id });
    const graceful = await store.keys.create({ key_hash: 'hash-old', key_prefix: 'gw-o', key_name: 'graceful' });
    await store.keys.rotate(graceful.id, { key_hash: 'hash-new', key_prefix: 'gw-n' }, 60_000, now);
    const ended = await store.keys.create({ key_hash: 'hash-ended-old', key_prefix: 'gw-e', key_name: 'ended' });
    await store.keys.rotate(ended.id, { key_hash: 'hash-ended-new', key_prefix: 'gw-f' }, 1_000, now - 10_000);

    const asked: [string, number][] = [
      ['hash-plain', now],
      ['hash-old', now],
      ['hash-new', now],
      ['hash-ended-old', now],
      ['hash-unknown', now],
      ['hash-plain', now],
      // the old secret past its grace period at this lookup's time
      ['hash-old', now + 120_000],
      ['hash-ended-new', now],
    ];
    queries = 0;
    const together = await Promise.all(asked.map(([hash, at]) => store.keys.byHash(hash, at)));
    const batchQueries = queries;
    const alone = [];
    for (const [hash, at] of asked) alone.push(await store.keys.byHash(hash, at));
    expect(together).toEqual(alone);
    expect(together.map((found) => found?.key.id ?? null)).toEqual([plain.id, graceful.id, graceful.id, null, null, plain.id, null, ended.id]);
    expect(together[0]).toMatchObject({ ownerBudgetId: budget.budget_id, ownerAllowedModels: ['openai:a'] });
    expect(together[1]).toMatchObject({ ownerBudgetId: null, ownerAllowedModels: null });
    // PostgreSQL: one query for the eight; SQLite: one each
    expect(batchQueries).toBe(backend.name === 'postgres' ? 1 : asked.length);
  });
});
