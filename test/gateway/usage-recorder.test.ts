import { expect, it } from 'vitest';
import type { CallRow, GatewayStore } from '../../src/gateway/storage/index.ts';
import { UsageRecorder } from '../../src/gateway/usage-recorder.ts';
import { usageRecord } from './helpers/gateway.ts';

const row = (id: string, budget: string): CallRow => ({ ...usageRecord(id, { created_at: 0 }), holds: [{ budget_id: budget, reserved_nanos: 5n, holder: null }], instance_id: null });

it('one row the database refuses does not take the other rows of its group commit (and their settlements) with it', async () => {
  const written: string[] = [];
  const settled: string[] = [];
  const opened: string[][] = [];
  // A database that refuses any transaction containing the row "bad", as PostgreSQL refuses a whole transaction.
  const store = {
    usage: {
      async complete(rows: CallRow[]) {
        if (rows.some((r) => r.id === 'bad')) throw new Error('value out of range');
        written.push(...rows.map((r) => r.id));
        settled.push(...rows.flatMap((r) => r.holds.map((hold) => hold.budget_id)));
      },
      async open(rows: CallRow[]) {
        opened.push(rows.map((r) => r.id));
      },
    },
  } as unknown as GatewayStore;
  const recorder = new UsageRecorder(store);
  // Handed in in the same turn: one batch.
  const results = await Promise.allSettled([recorder.complete(row('a', 'A')), recorder.complete(row('bad', 'B')), recorder.complete(row('c', 'C'))]);
  expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  expect(written.sort()).toEqual(['a', 'c']);
  expect(settled.sort()).toEqual(['A', 'C']);
  // Pending rows opened in one turn are one write.
  await Promise.all([recorder.open(row('p', 'A')), recorder.open(row('q', 'A'))]);
  expect(opened).toEqual([['p', 'q']]);
});
