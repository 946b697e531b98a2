import { expect, it } from 'vitest';
import type { BudgetSettlement, GatewayStore, UsageRecord } from '../../src/gateway/storage/index.ts';
import { UsageRecorder } from '../../src/gateway/usage-recorder.ts';
import { usageRecord } from './helpers/gateway.ts';

const row = (id: string): UsageRecord => usageRecord(id, { created_at: 0 });

it('one row the database refuses does not take the other rows of its group commit (and their settlements) with it', async () => {
  const written: string[] = [];
  const settled: string[] = [];
  // A database that refuses any transaction containing the row "bad", as PostgreSQL refuses a whole transaction.
  const store = {
    usage: {
      async record(rows: UsageRecord[], settlements: BudgetSettlement[]) {
        if (rows.some((r) => r.id === 'bad')) throw new Error('value out of range');
        written.push(...rows.map((r) => r.id));
        settled.push(...settlements.map((s) => s.budget_id));
      },
    },
  } as unknown as GatewayStore;
  const recorder = new UsageRecorder(store);
  const settle = (budget: string): BudgetSettlement[] => [{ budget_id: budget, reserved_nanos: 5n, actual_nanos: 1n, holder: null }];
  // Handed in in the same turn: one batch.
  const results = await Promise.allSettled([recorder.record(row('a'), settle('A')), recorder.record(row('bad'), settle('B')), recorder.record(row('c'), settle('C'))]);
  expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  expect(written.sort()).toEqual(['a', 'c']);
  expect(settled.sort()).toEqual(['A', 'C']);
});
