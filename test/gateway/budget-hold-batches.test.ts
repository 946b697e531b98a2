import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, pendingRowWithHold, type BudgetHold, type CallRow, type GatewayStore } from '../../src/gateway/storage/index.ts';
import { usageRecord, useBackends } from './helpers/gateway.ts';

/**
 * Holds of concurrent calls: on PostgreSQL those that arrive while one statement runs are taken together in the next
 * (gateway_hold_calls), on SQLite each alone. Either way no more is held than the budget has, each held call's
 * pending row is written with its hold and no refused call's is.
 */
const backends = await useBackends();

describe.each(backends)('concurrent budget holds on $name', (backend) => {
  let store: GatewayStore;
  /** The statements that took holds together (PostgreSQL), and all the hold statements. */
  const statements = { together: 0, all: 0 };

  beforeAll(async () => {
    if (backend.skipReason) return;
    store = openStore(await backend.newDatabaseUrl());
    await store.migrate();
    await store.instances.heartbeat();
    // Counted where the budgets send them (the driver object they hold).
    const allRelaxed = store.driver.allRelaxed.bind(store.driver);
    store.driver.allRelaxed = (sql, params) => {
      statements.all++;
      if (sql.includes('gateway_hold_calls')) statements.together++;
      return allRelaxed(sql, params);
    };
  });
  afterAll(() => store?.close());

  /** Holds `amount` for call `id` with its pending row (PostgreSQL: in the hold's statement; SQLite: written after it). */
  async function hold(budgetId: string, id: string, amount: bigint): Promise<BudgetHold | null> {
    const row = (holds: BudgetHold[]): CallRow => ({ ...usageRecord(id, { status: 'pending', cost_nanos: amount, status_code: 0 }), holds, instance_id: holds[0]?.holder ?? null });
    if (store.budgets.holdsCarryWrites) return store.budgets.reserve(budgetId, amount, Date.now(), (taken) => pendingRowWithHold(row([taken])));
    const taken = await store.budgets.reserve(budgetId, amount);
    if (taken) await store.usage.open([row([taken])]);
    return taken;
  }

  const shares = async (budgetId: string) =>
    (await store.driver.all('SELECT COALESCE(SUM(reserved_nanos), 0) AS total FROM budget_reservations WHERE budget_id = ?', [budgetId]))[0].total;

  it.skipIf(backend.skipReason)('60 calls at once on a budget with room for 25: 25 held, each with its pending row, the budget and its shares agree', async () => {
    const budget = await store.budgets.create({ max_budget_nanos: 255n });
    statements.together = statements.all = 0;
    const holds = await Promise.all(Array.from({ length: 60 }, (_, i) => hold(budget.budget_id, `usage_batch_${i}`, 10n)));
    const held = holds.filter((h) => h !== null);
    expect(held).toHaveLength(25);
    expect((await store.budgets.get(budget.budget_id))!.reserved_nanos).toBe(250n);
    const pending = await store.usage.listInFlight(100);
    const heldIds = holds.flatMap((h, i) => (h ? [`usage_batch_${i}`] : []));
    expect(pending.map((call) => call.id).sort()).toEqual(heldIds.sort());
    if (backend.name === 'postgres') {
      expect(held.every((h) => h!.holder === store.instanceId)).toBe(true);
      expect(Number(await shares(budget.budget_id))).toBe(250);
      // Asked in one turn of the event loop: one statement for all; the refusals after the first asked for as much, so
      // none is asked again alone.
      expect(statements).toEqual({ together: 1, all: 1 });
    }
  });

  it.skipIf(backend.skipReason)('a large hold refused in a batch does not refuse the smaller ones after it that fit', async () => {
    const budget = await store.budgets.create({ max_budget_nanos: 120n });
    // The same turn of the event loop: on PostgreSQL one batch, in this order.
    statements.together = statements.all = 0;
    const [large, medium, small] = await Promise.all([hold(budget.budget_id, 'usage_large', 200n), hold(budget.budget_id, 'usage_medium', 100n), hold(budget.budget_id, 'usage_small', 15n)]);
    expect(large).toBeNull();
    // PostgreSQL: the batch, then the two smaller ones alone
    if (backend.name === 'postgres') expect(statements).toEqual({ together: 1, all: 3 });
    // As one statement per call in this order would hold: the medium fits, then the small one on top of it.
    expect(medium?.reserved_nanos).toBe(100n);
    expect(small?.reserved_nanos).toBe(15n);
    expect((await store.budgets.get(budget.budget_id))!.reserved_nanos).toBe(115n);
    const ids = (await store.usage.listInFlight(100)).map((call) => call.id);
    expect(ids).toEqual(expect.arrayContaining(['usage_medium', 'usage_small']));
    expect(ids).not.toContain('usage_large');
  });

  it.skipIf(backend.skipReason)('holds on two budgets in one batch, one of them unknown: each budget holds its own, the unknown one refuses', async () => {
    const first = await store.budgets.create({ max_budget_nanos: 1000n });
    const second = await store.budgets.create({ max_budget_nanos: 30n });
    const holds = await Promise.all([
      hold(first.budget_id, 'usage_two_1', 400n),
      hold(second.budget_id, 'usage_two_2', 20n),
      hold('budget_missing', 'usage_two_3', 1n),
      hold(second.budget_id, 'usage_two_4', 20n),
      hold(first.budget_id, 'usage_two_5', 400n),
    ]);
    expect(holds.map((h) => h?.reserved_nanos ?? null)).toEqual([400n, 20n, null, null, 400n]);
    expect((await store.budgets.get(first.budget_id))!.reserved_nanos).toBe(800n);
    expect((await store.budgets.get(second.budget_id))!.reserved_nanos).toBe(20n);
    if (backend.name === 'postgres') expect(Number(await shares(second.budget_id))).toBe(20);
  });

  it.skipIf(backend.skipReason)('a batch whose registration was reaped is taken again alone under a new registration', async () => {
    if (backend.name !== 'postgres') return;
    const budget = await store.budgets.create({ max_budget_nanos: 1000n });
    const before = store.instanceId;
    // Another instance takes this one for dead and reaps it (its registration row goes).
    const reaper = openStore(await backendUrlOf(store));
    await reaper.instances.heartbeat();
    await store.driver.run('UPDATE gateway_instances SET heartbeat_at = 0 WHERE instance_id = ?', [before]);
    expect(await reaper.instances.reapDead(Date.now() - 30_000)).toBe(1);
    await reaper.close();
    const holds = await Promise.all(Array.from({ length: 4 }, (_, i) => hold(budget.budget_id, `usage_reaped_${i}`, 100n)));
    expect(holds.every((h) => h !== null && h.holder !== before && h.holder === store.instanceId)).toBe(true);
    expect(Number(await shares(budget.budget_id))).toBe(400);
    expect((await store.usage.listInFlight(100)).filter((call) => call.id.startsWith('usage_reaped_'))).toHaveLength(4);
  });
});

/** The URL of the database a PostgreSQL store is on (its current_database on the same server). */
async function backendUrlOf(store: GatewayStore): Promise<string> {
  const [row] = await store.driver.all('SELECT current_database() AS name, inet_server_port() AS port');
  return `postgres://postgres@127.0.0.1:${row.port}/${row.name}`;
}
