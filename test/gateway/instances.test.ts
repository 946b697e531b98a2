import { afterAll, beforeAll, expect, it } from 'vitest';
import { openStore, pendingRowWithHold, type BudgetHold, type CallRow, type GatewayStore, type UsageRecord } from '../../src/gateway/storage/index.ts';
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
  await next.usage.settleInterrupted();
  await previous.usage.record([usageRow('late')], [{ ...hold!, actual_nanos: 40n }]);
  const after = (await next.budgets.get(budget.budget_id))!;
  expect(after.reserved_nanos).toBe(0n);
  expect(after.spend_nanos).toBe(40n);
  await previous.close();
  await next.close();
});

/** A pending call with one hold of 100, as the ledger writes it before the provider is called. */
async function openCall(store: GatewayStore, budgetId: string, id: string): Promise<CallRow> {
  const row = (hold: BudgetHold): CallRow => ({ ...usageRecord(id, { status: 'pending', cost_nanos: 100n, status_code: 0 }), holds: [hold], instance_id: hold.holder ?? store.instanceId });
  if (store.budgets.holdsCarryWrites) {
    let opened: CallRow | null = null;
    await store.budgets.reserve(budgetId, 100n, Date.now(), (hold) => pendingRowWithHold((opened = row(hold))));
    return opened!;
  }
  const opened = row((await store.budgets.reserve(budgetId, 100n))!);
  await store.usage.open([opened]);
  return opened;
}

const finished = (call: CallRow): CallRow => ({ ...call, status: 'success', status_code: 200, cost_nanos: 40n });

it.skipIf(backend.skipReason)('a pending call of an instance reaped while paused is settled once: interrupted at its hold, then corrected by its late finish', async () => {
  const budget = await paused.budgets.create({ max_budget_nanos: 1_000_000n });
  const start = Date.now();
  await paused.instances.heartbeat(start - 60_000);
  const call = await openCall(paused, budget.budget_id, 'usage_paused_call');
  await reaper.instances.heartbeat(start);
  expect(await reaper.instances.reapDead(start - 30_000)).toBe(1);
  expect((await reaper.budgets.get(budget.budget_id))!).toMatchObject({ reserved_nanos: 0n, spend_nanos: 100n });
  expect((await reaper.usage.page({}, undefined, 10)).find((row) => row.id === call.id)).toMatchObject({ status: 'interrupted', reason: 'instance_reaped', cost_nanos: 100n });
  // The paused instance wakes up and finishes the call: its true cost replaces the charge, nothing is given back twice.
  await paused.usage.complete([finished(call)]);
  expect((await reaper.budgets.get(budget.budget_id))!).toMatchObject({ reserved_nanos: 0n, spend_nanos: 40n });
  expect((await reaper.usage.page({}, undefined, 10)).find((row) => row.id === call.id)).toMatchObject({ status: 'success', cost_nanos: 40n });
  // Finishing it again changes nothing.
  await paused.usage.complete([finished(call)]);
  expect((await reaper.budgets.get(budget.budget_id))!.spend_nanos).toBe(40n);
});

it.skipIf(backend.skipReason)('a batch that finishes a still pending call, a call reaped meanwhile and a refusal together settles each once', async () => {
  const budget = await paused.budgets.create({ max_budget_nanos: 1_000_000n });
  const start = Date.now();
  await paused.instances.heartbeat(start - 60_000);
  const reaped = await openCall(paused, budget.budget_id, 'usage_batch_reaped');
  await reaper.instances.heartbeat(start);
  expect(await reaper.instances.reapDead(start - 30_000)).toBe(1);
  // Registered again, the paused instance opens another call; then both finish in one batch with a refusal.
  await paused.instances.heartbeat(Date.now());
  const pending = await openCall(paused, budget.budget_id, 'usage_batch_pending');
  const refusal: CallRow = { ...usageRecord('usage_batch_refused', { status: 'refused', status_code: 403, cost_nanos: 0n, reason: 'budget_exceeded' }), holds: [], instance_id: null };
  await paused.usage.complete([finished(pending), finished(reaped), refusal]);
  // 40 for each call (the reaped one's charge of 100 corrected), both holds back, three rows.
  expect((await reaper.budgets.get(budget.budget_id))!).toMatchObject({ reserved_nanos: 0n, spend_nanos: 80n });
  const rows = (await reaper.usage.page({}, undefined, 50)).filter((row) => row.id.startsWith('usage_batch_'));
  expect(rows.map((row) => [row.id, row.status, row.cost_nanos]).sort()).toEqual([
    ['usage_batch_pending', 'success', 40n],
    ['usage_batch_reaped', 'success', 40n],
    ['usage_batch_refused', 'refused', 0n],
  ]);
});

it('SQLite: a pending call settled as interrupted by a restart that overlapped its process is corrected by its late finish', async () => {
  const url = await sqlite.newDatabaseUrl();
  const previous = openStore(url);
  await previous.migrate();
  const budget = await previous.budgets.create({ max_budget_nanos: 1_000_000n });
  const call = await openCall(previous, budget.budget_id, 'usage_overlap_call');
  const next = openStore(url);
  expect(await next.usage.settleInterrupted()).toBe(1);
  expect((await next.budgets.get(budget.budget_id))!).toMatchObject({ reserved_nanos: 0n, spend_nanos: 100n });
  // A hold the next process takes is not eaten by the late settlement of the previous one.
  const fresh = await next.budgets.reserve(budget.budget_id, 50n);
  await previous.usage.complete([finished(call)]);
  expect((await next.budgets.get(budget.budget_id))!).toMatchObject({ reserved_nanos: 50n, spend_nanos: 40n });
  await next.budgets.release(fresh!);
  await previous.close();
  await next.close();
});
