import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ResetSchedule } from '../../src/gateway/budget-periods.ts';
import type { SqlValue } from '../../src/gateway/storage/driver.ts';
import { GatewayStore, openStore, type BudgetHold } from '../../src/gateway/storage/index.ts';
import { useBackends } from './helpers/gateway.ts';

/**
 * Calendar resets in the store, on both databases, with the clock given to every call (the store's `now`), and two
 * stores on one database standing for two gateway instances.
 */
const backends = await useBackends();

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

describe.each(backends)('calendar budget resets on $name', (backend) => {
  let first: GatewayStore;
  let second: GatewayStore;
  let databaseUrl: string;
  beforeAll(async () => {
    if (backend.skipReason) return;
    databaseUrl = await backend.newDatabaseUrl();
    first = openStore(databaseUrl);
    await first.migrate();
    second = openStore(databaseUrl);
  });
  afterAll(async () => {
    await first?.close();
    await second?.close();
  });

  /** A budget of 1,000 nano-dollars on `schedule`, made at `created`. */
  const budget = async (schedule: ResetSchedule, created: string) => (await first.budgets.create({ max_budget_nanos: 1000n, schedule }, at(created))).budget_id;
  /** A call's hold taken at `when` and settled at its full amount (spend += amount). */
  async function spend(store: GatewayStore, id: string, amount: bigint, when: string): Promise<BudgetHold> {
    const hold = await store.budgets.reserve(id, amount, at(when));
    expect(hold, `a hold of ${amount} at ${when}`).not.toBeNull();
    await store.budgets.settle([{ ...hold!, actual_nanos: amount }]);
    return hold!;
  }

  it.skipIf(backend.skipReason)('monthly in Europe/Berlin: January ends at local midnight of Feb 1 (23:00 UTC), reset once by whichever instance comes first', async () => {
    const id = await budget({ alignment: 'monthly', time_zone: 'Europe/Berlin' }, '2027-01-15T12:00:00Z');
    expect(iso((await first.budgets.get(id, at('2027-01-15T12:00:00Z')))!.period_ends_at)).toBe('2027-01-31T23:00:00.000Z');
    await spend(first, id, 600n, '2027-01-31T22:30:00Z');
    // 23:59:59.999 on Jan 31 in Berlin: still January, 400 left
    expect(await second.budgets.reserve(id, 500n, at('2027-01-31T22:59:59.999Z'))).toBeNull();
    expect((await second.budgets.get(id, at('2027-01-31T22:59:59.999Z')))!.spend_nanos).toBe(600n);
    // Feb 1 00:00 in Berlin: the second instance starts February and spends in it
    await spend(second, id, 300n, '2027-01-31T23:00:00Z');
    // the first instance, a moment later, finds February started: no second reset wipes those 300
    const hold = await first.budgets.reserve(id, 700n, at('2027-01-31T23:00:00.001Z'));
    expect(hold).not.toBeNull();
    const february = (await first.budgets.get(id, at('2027-01-31T23:00:00.002Z')))!;
    expect({ spend: february.spend_nanos, reserved: february.reserved_nanos }).toEqual({ spend: 300n, reserved: 700n });
    expect([iso(february.period_started_at), iso(february.period_ends_at)]).toEqual(['2027-01-31T23:00:00.000Z', '2027-02-28T23:00:00.000Z']);
    await first.budgets.settle([{ ...hold!, actual_nanos: 700n }]);
    // exhausted for the rest of February (28 days in 2027), whichever instance asks
    expect(await second.budgets.reserve(id, 1n, at('2027-02-28T22:59:59.999Z'))).toBeNull();
    expect(await first.budgets.reserve(id, 1n, at('2027-02-28T22:59:59.999Z'))).toBeNull();
    expect((await first.budgets.get(id, at('2027-02-28T22:59:59.999Z')))!.spend_nanos).toBe(1000n);
  });

  it.skipIf(backend.skipReason)('instances racing at the boundary: one reset, and the limit holds across both', async () => {
    const id = await budget({ alignment: 'daily', time_zone: 'UTC' }, '2027-02-28T08:00:00Z');
    await spend(first, id, 1000n, '2027-02-28T09:00:00Z');
    // March 1st (2027 is no leap year): 2 × 3 holds of 300 from two instances at once; 3 fit in 1,000
    const when = at('2027-03-01T00:00:00.005Z');
    const holds = await Promise.all([first, second, first, second, first, second].map((store) => store.budgets.reserve(id, 300n, when)));
    expect(holds.filter((hold) => hold !== null)).toHaveLength(3);
    const state = (await second.budgets.get(id, when))!;
    expect({ spend: state.spend_nanos, reserved: state.reserved_nanos }).toEqual({ spend: 0n, reserved: 900n });
    expect([iso(state.period_started_at), iso(state.period_ends_at)]).toEqual(['2027-03-01T00:00:00.000Z', '2027-03-02T00:00:00.000Z']);
    for (const hold of holds) if (hold) await first.budgets.release(hold);
  });

  it.skipIf(backend.skipReason)('an instance that saw the old period end resets nothing once another instance started the next period and spent in it', async () => {
    const id = await budget({ alignment: 'daily', time_zone: 'UTC' }, '2027-06-01T08:00:00Z');
    await spend(first, id, 1000n, '2027-06-01T09:00:00Z');
    // a third instance whose read of the period's end is held back until the first has reset, held and settled
    let reading!: () => void;
    const readDone = new Promise<void>((resolve) => (reading = resolve));
    let resume!: () => void;
    const resumed = new Promise<void>((resolve) => (resume = resolve));
    const driver = openStore(databaseUrl).driver;
    const slow = new GatewayStore(
      new Proxy(driver, {
        get(target, property) {
          if (property !== 'all') {
            const value: unknown = Reflect.get(target, property, target);
            return typeof value === 'function' ? value.bind(target) : value;
          }
          return async (sql: string, params?: SqlValue[]) => {
            const rows = await target.all(sql, params);
            if (sql.startsWith('SELECT reset_every_seconds')) {
              reading();
              await resumed;
            }
            return rows;
          };
        },
      }),
    );
    try {
      const late = slow.budgets.reserve(id, 100n, at('2027-06-02T00:00:01Z'));
      await readDone;
      await spend(second, id, 300n, '2027-06-02T00:00:00.500Z');
      resume();
      expect(await late).not.toBeNull();
      const state = (await first.budgets.get(id, at('2027-06-02T00:00:02Z')))!;
      expect({ spend: state.spend_nanos, reserved: state.reserved_nanos }).toEqual({ spend: 300n, reserved: 100n });
      await first.budgets.release((await late)!);
    } finally {
      await slow.close();
    }
  });

  it.skipIf(backend.skipReason)('daily in America/New_York across the March DST change: the 23-hour day ends at 04:00 UTC', async () => {
    const id = await budget({ alignment: 'daily', time_zone: 'America/New_York' }, '2027-03-14T06:00:00Z');
    // made at 01:00 EST on Mar 14: the day began at 00:00 EST (05:00 UTC) and ends at 00:00 EDT (04:00 UTC)
    const created = (await first.budgets.get(id, at('2027-03-14T06:00:00Z')))!;
    expect([iso(created.period_started_at), iso(created.period_ends_at)]).toEqual(['2027-03-14T05:00:00.000Z', '2027-03-15T04:00:00.000Z']);
    await spend(first, id, 1000n, '2027-03-15T03:59:59Z');
    expect(await second.budgets.reserve(id, 1n, at('2027-03-15T03:59:59.999Z'))).toBeNull();
    await spend(second, id, 1000n, '2027-03-15T04:00:00Z');
    expect(iso((await first.budgets.get(id, at('2027-03-15T04:00:00Z')))!.period_ends_at)).toBe('2027-03-16T04:00:00.000Z');
  });

  it.skipIf(backend.skipReason)('weekly (ISO, from Monday) across the year end, and a reading after an idle month shows the current week', async () => {
    const id = await budget({ alignment: 'weekly', time_zone: 'UTC' }, '2027-12-28T10:00:00Z');
    await spend(first, id, 1000n, '2027-12-31T23:00:00Z');
    // Saturday Jan 1 and Sunday Jan 2, 2028 are in the week of Monday Dec 27
    expect(await second.budgets.reserve(id, 1n, at('2028-01-02T23:59:59.999Z'))).toBeNull();
    const monday = (await first.budgets.get(id, at('2028-01-03T00:00:00Z')))!;
    expect({ spend: monday.spend_nanos, start: iso(monday.period_started_at), end: iso(monday.period_ends_at) }).toEqual({
      spend: 0n,
      start: '2028-01-03T00:00:00.000Z',
      end: '2028-01-10T00:00:00.000Z',
    });
    // nobody calls for a month: the first call starts the week it is in, not the one after the last reset
    await spend(second, id, 10n, '2028-02-02T12:00:00Z');
    const later = (await first.budgets.get(id, at('2028-02-02T12:00:00Z')))!;
    expect({ spend: later.spend_nanos, start: iso(later.period_started_at), end: iso(later.period_ends_at) }).toEqual({
      spend: 10n,
      start: '2028-01-31T00:00:00.000Z',
      end: '2028-02-07T00:00:00.000Z',
    });
  });

  it.skipIf(backend.skipReason)('a schedule change keeps the spend and moves the period; removing it stops resets', async () => {
    const id = await budget({ every_seconds: 3600 }, '2028-02-28T10:00:00Z');
    await spend(first, id, 400n, '2028-02-28T10:30:00Z');
    const monthly = (await second.budgets.update(id, { schedule: { alignment: 'monthly', time_zone: 'Europe/Berlin' } }, at('2028-02-28T10:45:00Z')))!;
    expect({ spend: monthly.spend_nanos, start: iso(monthly.period_started_at), end: iso(monthly.period_ends_at) }).toEqual({
      spend: 400n,
      start: '2028-01-31T23:00:00.000Z',
      end: '2028-02-29T23:00:00.000Z', // 2028 is a leap year: March 1st 00:00 in Berlin
    });
    const never = (await first.budgets.update(id, { schedule: null }, at('2028-02-28T11:00:00Z')))!;
    expect(never.period_ends_at).toBeNull();
    expect((await first.budgets.get(id, at('2029-01-01T00:00:00Z')))!.spend_nanos).toBe(400n);
  });

  it.skipIf(backend.skipReason)('a rolling budget made before migration 13 gets its period end from reset_every_seconds', async () => {
    const url = await backend.newDatabaseUrl();
    const old = openStore(url);
    try {
      await old.migrate(Date.now(), 11);
      await old.driver.run(
        "INSERT INTO budgets (budget_id, max_budget_nanos, reset_every_seconds, period_started_at, spend_nanos, reserved_nanos, metadata, created_at, updated_at) VALUES ('budget_old', 1000, 60, ?, 900, 0, '{}', 0, 0)",
        [at('2027-06-01T00:00:00Z')],
      );
      expect(await old.migrate()).toContain(13);
      const migrated = (await old.budgets.get('budget_old', at('2027-06-01T00:00:30Z')))!;
      expect({ spend: migrated.spend_nanos, end: iso(migrated.period_ends_at), name: migrated.name }).toEqual({ spend: 900n, end: '2027-06-01T00:01:00.000Z', name: null });
      expect(await old.budgets.reserve('budget_old', 200n, at('2027-06-01T00:00:59Z'))).toBeNull();
      expect(await old.budgets.reserve('budget_old', 200n, at('2027-06-01T00:01:00Z'))).not.toBeNull();
    } finally {
      await old.close();
    }
  });
});
