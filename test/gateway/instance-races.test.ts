import pg from 'pg';
import { afterAll, afterEach, beforeEach, expect, it } from 'vitest';
import { MIGRATIONS, SCHEMA_MIGRATIONS_TABLE } from '../../src/gateway/storage/migrations.ts';
import { openStore, type BudgetHold, type GatewayStore, type UsageRecord } from '../../src/gateway/storage/index.ts';
import { UsageRecorder } from '../../src/gateway/usage-recorder.ts';
import { postgresBackend, usageRecord, type Backend } from './helpers/gateway.ts';

/**
 * Two gateway instances on one PostgreSQL, one of them taken for dead (a forced reap) while it still reserves and
 * settles. Each interleaving is made deterministic with a third connection (the gate) that holds a budget row's
 * lock: the statements of both instances queue behind it in a known order, then the gate lets them go.
 */
const backend: Backend = await postgresBackend();
let url = '';
let admin: pg.Client;
let paused: GatewayStore;
let reaper: GatewayStore;

afterAll(() => backend.close());

// A database per test, so that what one interleaving leaves behind cannot hide or fake another's result.
beforeEach(async () => {
  if (backend.skipReason) return;
  url = await backend.newDatabaseUrl();
  paused = openStore(url);
  await paused.migrate();
  reaper = openStore(url);
  admin = new pg.Client({ connectionString: url });
  await admin.connect();
});
afterEach(async () => {
  // Some tests close `paused` themselves (the instance dies).
  await paused?.close().catch(() => {});
  await reaper?.close();
  await admin?.end();
});

const LEASE_MS = 30_000;
let rows = 0;
const usageRow = (costNanos: number): UsageRecord => usageRecord(`usage_${++rows}`, { request_id: `request_${rows}`, cost_nanos: BigInt(costNanos) });

/** Makes `paused` look dead to `reaper`: its last heartbeat is older than the lease, the reaper's is fresh. */
async function pauseLongerThanLease(): Promise<number> {
  const now = Date.now();
  await paused.instances.heartbeat(now - 2 * LEASE_MS);
  await reaper.instances.heartbeat(now);
  return now - LEASE_MS;
}

/** A transaction on its own connection that holds the row lock of `budgetId` until `open` is called. */
async function lockBudget(budgetId: string): Promise<{ open(): Promise<void> }> {
  const gate = new pg.Client({ connectionString: url });
  await gate.connect();
  await gate.query('BEGIN');
  await gate.query('SELECT budget_id FROM budgets WHERE budget_id = $1 FOR UPDATE', [budgetId]);
  return {
    async open() {
      await gate.query('COMMIT');
      await gate.end();
    },
  };
}

/** Resolves once `count` statements of this database wait for a lock (so the queue order behind the gate is known). */
async function lockWaiters(count: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows: [row] } = await admin.query(
      "SELECT COUNT(*)::int AS waiting FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    );
    if (row.waiting >= count) return;
    if (Date.now() > deadline) throw new Error(`expected ${count} statements waiting for a lock, saw ${row.waiting}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * What must hold whatever the interleaving: no budget reserved below zero, each budget's `reserved` equal to the
 * holds the instances keep for it, and every hold kept by an instance that has a row (so a reaper can find it).
 */
async function expectConsistent(): Promise<void> {
  const negative = await admin.query('SELECT budget_id, reserved_nanos FROM budgets WHERE reserved_nanos < 0');
  expect(negative.rows).toEqual([]);
  const mismatched = await admin.query(
    `SELECT b.budget_id, b.reserved_nanos, COALESCE(SUM(r.reserved_nanos), 0)::bigint AS held
     FROM budgets b LEFT JOIN budget_reservations r ON r.budget_id = b.budget_id
     GROUP BY b.budget_id, b.reserved_nanos HAVING b.reserved_nanos <> COALESCE(SUM(r.reserved_nanos), 0)`,
  );
  expect(mismatched.rows).toEqual([]);
  const orphans = await admin.query(
    'SELECT r.instance_id, r.budget_id, r.reserved_nanos FROM budget_reservations r LEFT JOIN gateway_instances i USING (instance_id) WHERE i.instance_id IS NULL',
  );
  expect(orphans.rows).toEqual([]);
}

/** A hold `store` takes (it must get it). */
async function hold(store: GatewayStore, budgetId: string, amount: number): Promise<BudgetHold> {
  const taken = await store.budgets.reserve(budgetId, BigInt(amount));
  expect(taken).toMatchObject({ budget_id: budgetId, reserved_nanos: BigInt(amount) });
  return taken!;
}

/** The usage row of a call that held `taken` and cost `actual`, and its settlement, as the ledger hands them over. */
function settle(store: GatewayStore, taken: BudgetHold, actual: number): { row: UsageRecord; done: Promise<void> } {
  const row = usageRow(actual);
  return { row, done: store.usage.record([row], [{ ...taken, actual_nanos: BigInt(actual) }]) };
}

async function budgetState(budgetId: string): Promise<{ reserved: number; spend: number }> {
  const budget = (await reaper.budgets.get(budgetId))!;
  return { reserved: Number(budget.reserved_nanos), spend: Number(budget.spend_nanos) };
}

async function usageRows(ids: string[]): Promise<number> {
  const { rows: [row] } = await admin.query('SELECT COUNT(*)::int AS n FROM usage WHERE id = ANY($1)', [ids]);
  return row.n;
}

for (const first of ['reap', 'settlement'] as const) {
  it.skipIf(backend.skipReason)(`a settlement racing the reap of its instance (${first} first at the budget row) gives the hold back once`, async () => {
    const budget = await paused.budgets.create({ max_budget_nanos: 1_000_000n });
    const staleBefore = await pauseLongerThanLease();
    const taken = await hold(paused, budget.budget_id, 100);
    const gate = await lockBudget(budget.budget_id);
    let row: UsageRecord | undefined;
    const reap = () => reaper.instances.reapDead(staleBefore);
    const settlement = () => {
      const settling = settle(paused, taken, 40);
      row = settling.row;
      return settling.done;
    };
    const [a, b] = first === 'reap' ? [reap, settlement] : [settlement, reap];
    const firstDone = a();
    await lockWaiters(1);
    const secondDone = b();
    await lockWaiters(2);
    await gate.open();
    const outcomes = await Promise.allSettled([firstDone, secondDone]);
    // Neither may fail (a deadlock between them lost the usage row or left the dead instance's holds in place).
    expect(outcomes.map((o) => (o.status === 'rejected' ? String(o.reason) : 'ok'))).toEqual(['ok', 'ok']);
    expect(await budgetState(budget.budget_id)).toEqual({ reserved: 0, spend: 40 });
    expect(await usageRows([row!.id])).toBe(1);
    await expectConsistent();
  });
}

it.skipIf(backend.skipReason)('a hold a reaped instance takes before its next heartbeat is given back when the instance then dies', async () => {
  const budget = await paused.budgets.create({ max_budget_nanos: 1_000_000n });
  const staleBefore = await pauseLongerThanLease();
  expect(await reaper.instances.reapDead(staleBefore)).toBe(1);
  // Awake again, the instance takes a hold before its heartbeat has noticed that it was reaped...
  await hold(paused, budget.budget_id, 70);
  await expectConsistent();
  // ...and dies (SIGKILL: no settlement, no clean leave). Once its lease is over, the reaper gives the hold back.
  await paused.close();
  expect(await reaper.instances.reapDead(Date.now() + LEASE_MS)).toBeGreaterThanOrEqual(1);
  expect(await budgetState(budget.budget_id)).toEqual({ reserved: 0, spend: 0 });
  await expectConsistent();
});

it.skipIf(backend.skipReason)('a hold taken while its instance is being reaped is not left without an instance', async () => {
  const held = await paused.budgets.create({ max_budget_nanos: 1_000_000n });
  const next = await paused.budgets.create({ max_budget_nanos: 1_000_000n });
  const staleBefore = await pauseLongerThanLease();
  await hold(paused, held.budget_id, 100);
  // The instance's next reservation waits for the budget row while another instance reaps it.
  const gate = await lockBudget(next.budget_id);
  const reserving = paused.budgets.reserve(next.budget_id, 50n);
  await lockWaiters(1);
  expect(await reaper.instances.reapDead(staleBefore)).toBe(1);
  await gate.open();
  expect(await reserving).toMatchObject({ budget_id: next.budget_id, reserved_nanos: 50n });
  expect(await budgetState(held.budget_id)).toEqual({ reserved: 0, spend: 0 });
  expect(await budgetState(next.budget_id)).toEqual({ reserved: 50, spend: 0 });
  await expectConsistent();
  // The instance dies; its hold on the second budget must come back too.
  await paused.close();
  await reaper.instances.reapDead(Date.now() + LEASE_MS);
  expect(await budgetState(next.budget_id)).toEqual({ reserved: 0, spend: 0 });
  await expectConsistent();
});

it.skipIf(backend.skipReason)('a call from before the reap settling late does not give back the hold of a call taken after it', async () => {
  const budget = await paused.budgets.create({ max_budget_nanos: 1_000_000n });
  const staleBefore = await pauseLongerThanLease();
  const before = await hold(paused, budget.budget_id, 100);
  expect(await reaper.instances.reapDead(staleBefore)).toBe(1);
  expect(await budgetState(budget.budget_id)).toEqual({ reserved: 0, spend: 0 });
  // The instance wakes up, heartbeats (learning that it was taken for dead: it registers again under a new id)
  // and takes a new hold; then the call from before the reap settles.
  const reapedId = paused.instanceId;
  expect(await paused.instances.heartbeat(Date.now())).toBe(true);
  expect(paused.instanceId).not.toBe(reapedId);
  expect(await paused.instances.heartbeat(Date.now())).toBe(false);
  const after = await hold(paused, budget.budget_id, 70);
  const old = settle(paused, before, 40);
  await old.done;
  // The new call is still in flight: its 70 stay reserved.
  expect(await budgetState(budget.budget_id)).toEqual({ reserved: 70, spend: 40 });
  await expectConsistent();
  const fresh = settle(paused, after, 30);
  await fresh.done;
  expect(await budgetState(budget.budget_id)).toEqual({ reserved: 0, spend: 70 });
  expect(await usageRows([old.row.id, fresh.row.id])).toBe(2);
  await expectConsistent();
});

it.skipIf(backend.skipReason)('calls of two instances under load while one is reaped again and again: every hold comes back exactly once', async () => {
  const budgets = await Promise.all([1, 2, 3].map(() => reaper.budgets.create({ max_budget_nanos: 10n ** 15n })));
  await paused.instances.heartbeat();
  await reaper.instances.heartbeat();
  const recorders = new Map([paused, reaper].map((store) => [store, new UsageRecorder(store)]));
  let spent = 0;
  const ids: string[] = [];
  const call = async (i: number) => {
    const store = i % 3 === 0 ? reaper : paused;
    // A call holds one or two budgets, like a virtual key with a budget whose owner has one.
    const chosen = i % 2 === 0 ? [budgets[i % 3]] : [budgets[i % 3], budgets[(i + 1) % 3]];
    const holds: BudgetHold[] = [];
    if (store === paused) pausedHoldsUnderWay.add(i);
    try {
      for (const budget of chosen) holds.push(await hold(store, budget.budget_id, 1000 + i));
    } finally {
      pausedHoldsUnderWay.delete(i);
    }
    if (store === paused) pausedHolds++;
    await new Promise((resolve) => setTimeout(resolve, i % 7));
    const actual = 100 + i;
    spent += actual * holds.length;
    const row = usageRow(actual);
    ids.push(row.id);
    // Never opened (no pending row): completing it inserts the row and settles its holds.
    await recorders.get(store)!.complete({ ...row, holds, instance_id: null });
  };
  let calling = true;
  let pausedHolds = 0;
  const pausedHoldsUnderWay = new Set<number>();
  const reaps = (async () => {
    let reaped = 0;
    while (calling) {
      // The paused instance's heartbeat goes stale; the other instance reaps it. It registers again at its next
      // hold, and is taken for dead again only after many calls under its new registration and once every hold that
      // was under way at this reap has ended, as a lease is long next to a statement (a hold is retried under a new
      // registration a few times, not without end). Counting holds, not time: on a busy machine one hold can wait
      // behind many others for a pooled connection.
      const registration = paused.instanceId;
      await admin.query('UPDATE gateway_instances SET heartbeat_at = 0 WHERE instance_id = $1', [registration]);
      reaped += await reaper.instances.reapDead(Date.now() - LEASE_MS);
      const holdsBefore = pausedHolds;
      const underWay = [...pausedHoldsUnderWay];
      while (calling && (paused.instanceId === registration || pausedHolds < holdsBefore + 60 || underWay.some((i) => pausedHoldsUnderWay.has(i)))) {
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    }
    return reaped;
  })();
  const calls = 600;
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < calls) await call(next++);
    }),
  ).finally(() => (calling = false));
  expect(await reaps).toBeGreaterThanOrEqual(4);
  let spend = 0;
  for (const budget of budgets) {
    const state = await budgetState(budget.budget_id);
    expect(state.reserved).toBe(0);
    spend += state.spend;
  }
  expect(spend).toBe(spent);
  expect(await usageRows(ids)).toBe(calls);
  await expectConsistent();
});

it.skipIf(backend.skipReason)('upgrading a database the race left holds without an instance in: the next reap gives them back', async () => {
  const oldUrl = await backend.newDatabaseUrl();
  const old = new pg.Client({ connectionString: oldUrl });
  await old.connect();
  try {
    // The schema before migration 6, with a hold whose instance was reaped before the hold was taken.
    await old.query(SCHEMA_MIGRATIONS_TABLE);
    for (const migration of MIGRATIONS.filter((m) => m.version <= 5)) {
      for (const sql of migration.statements) await old.query(sql);
      await old.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, 0)', [migration.version, migration.name]);
    }
    await old.query(`INSERT INTO budgets (budget_id, max_budget_nanos, period_started_at, reserved_nanos, created_at, updated_at) VALUES ('b', 1000, 0, 70, 0, 0)`);
    await old.query(`INSERT INTO budget_reservations (instance_id, budget_id, reserved_nanos) VALUES ('instance_gone', 'b', 70)`);
    const store = openStore(oldUrl);
    try {
      expect(await store.migrate()).toEqual(MIGRATIONS.filter((m) => m.version >= 6).map((m) => m.version));
      await store.instances.heartbeat();
      expect(await store.instances.reapDead(Date.now() - LEASE_MS)).toBe(1);
      expect((await store.budgets.get('b'))!.reserved_nanos).toBe(0n);
      // From now on the database itself refuses a hold without an instance.
      await expect(old.query(`INSERT INTO budget_reservations (instance_id, budget_id, reserved_nanos) VALUES ('instance_unknown', 'b', 1)`)).rejects.toMatchObject({
        code: '23503',
      });
    } finally {
      await store.close();
    }
  } finally {
    await old.end();
  }
});
