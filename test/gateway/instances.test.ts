import { afterAll, beforeAll, expect, it } from 'vitest';
import { openStore, type GatewayStore, type UsageRecord } from '../../src/gateway/storage/index.ts';
import { postgresBackend, sqliteBackend, usageRecord, type Backend } from './helpers/gateway.ts';

/** Several instances on one PostgreSQL: holds of an instance taken for dead must not be given back twice. */
const backend: Backend = await postgresBackend();
let paused: GatewayStore;
let reaper: GatewayStore;

beforeAll(async () => {
  if (backend.skipReason) return;
  const url = await backend.newDatabaseUrl();
  paused = openStore(url);
  await paused.migrate();
  reaper = openStore(url);
});
const sqlite = sqliteBackend();
afterAll(async () => {
  await paused?.close();
  await reaper?.close();
  await backend.close();
  await sqlite.close();
});

const usageRow = (id: string): UsageRecord => usageRecord(id, { cost_nanos: 40n });

it.skipIf(backend.skipReason)('an instance reaped while merely paused settles its calls without driving reserved below zero for good', async () => {
  const budget = await paused.budgets.create({ max_budget_nanos: 1_000_000n });
  const start = Date.now();
  await paused.instances.heartbeat(start - 60_000);
  const old = await paused.budgets.reserve(budget.budget_id, 100n);
  expect(old).not.toBeNull();
  // The other instance sees no heartbeat for longer than the lease and gives the hold back.
  await reaper.instances.heartbeat(start);
  expect(await reaper.instances.reapDead(start - 30_000)).toBe(1);
  expect((await reaper.budgets.get(budget.budget_id))!.reserved_nanos).toBe(0n);
  // The paused instance wakes up, re-registers and takes a new hold, then its old call settles, then the new one.
  await paused.instances.heartbeat(Date.now());
  const fresh = await paused.budgets.reserve(budget.budget_id, 70n);
  expect(fresh).not.toBeNull();
  await paused.usage.record([usageRow('old')], [{ ...old!, actual_nanos: 40n }]);
  await paused.usage.record([usageRow('new')], [{ ...fresh!, actual_nanos: 40n }]);
  const after = (await reaper.budgets.get(budget.budget_id))!;
  expect(after.reserved_nanos).toBe(0n);
  expect(after.spend_nanos).toBe(80n);
});

it('SQLite: a gateway started on the file while the previous one still finishes calls cannot leave reserved below zero', async () => {
  const url = await sqlite.newDatabaseUrl();
  const previous = openStore(url);
  await previous.migrate();
  const budget = await previous.budgets.create({ max_budget_nanos: 1_000_000n });
  const hold = await previous.budgets.reserve(budget.budget_id, 100n);
  expect(hold).toEqual({ budget_id: budget.budget_id, reserved_nanos: 100n, holder: null });
  // The next process starts (clearing holds it takes for a killed process's) before the previous one has settled.
  const next = openStore(url);
  await next.budgets.clearReservations();
  await previous.usage.record([usageRow('late')], [{ ...hold!, actual_nanos: 40n }]);
  const after = (await next.budgets.get(budget.budget_id))!;
  expect(after.reserved_nanos).toBe(0n);
  expect(after.spend_nanos).toBe(40n);
  await previous.close();
  await next.close();
});
