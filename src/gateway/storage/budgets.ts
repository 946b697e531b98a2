import type { Row, SqlDriver, Statement } from './driver.ts';
import type { InstanceRegistration } from './instances.ts';
import type { BudgetHold, BudgetRecord, BudgetSettlement, Metadata } from './records.ts';
import { assignments, bigintJson, isForeignKeyViolation, json, nanos, newId, num, parseJson } from './rows.ts';

/** The condition "this budget's period is over": spend starts again from 0 in the same statement. */
const PERIOD_OVER = `(reset_every_seconds IS NOT NULL AND ? >= period_started_at + reset_every_seconds * 1000)`;

/**
 * Budgets (table budgets) and the holds on them: a call reserves its estimated cost before it runs and settles it
 * when its usage is recorded. On PostgreSQL each hold is also kept under this instance's registration, in
 * budget_reservations (see GatewayStore).
 */
export class Budgets {
  readonly #driver: SqlDriver;
  readonly #shared: boolean;
  readonly #registration: InstanceRegistration;

  constructor(driver: SqlDriver, shared: boolean, registration: InstanceRegistration) {
    this.#driver = driver;
    this.#shared = shared;
    this.#registration = registration;
  }

  async create(budget: { max_budget_nanos: bigint; reset_every_seconds?: number | null; metadata?: Metadata }, now = Date.now()): Promise<BudgetRecord> {
    const id = newId('budget');
    await this.#driver.run(
      'INSERT INTO budgets (budget_id, max_budget_nanos, reset_every_seconds, period_started_at, spend_nanos, reserved_nanos, metadata, created_at, updated_at) VALUES (?, ?, ?, ?, 0, 0, ?, ?, ?)',
      [id, budget.max_budget_nanos, budget.reset_every_seconds ?? null, now, json(budget.metadata), now, now],
    );
    return (await this.get(id))!;
  }

  /** The budget as of `now`: a period that is over reads as spend 0 even before the next reservation resets it. */
  async get(id: string, now = Date.now()): Promise<BudgetRecord | null> {
    const rows = await this.#driver.all('SELECT * FROM budgets WHERE budget_id = ?', [id]);
    return rows[0] ? budgetOf(rows[0], now) : null;
  }

  async list(now = Date.now()): Promise<BudgetRecord[]> {
    return (await this.#driver.all('SELECT * FROM budgets ORDER BY created_at, budget_id')).map((row) => budgetOf(row, now));
  }

  async update(id: string, patch: { max_budget_nanos?: bigint; reset_every_seconds?: number | null; metadata?: Metadata }, now = Date.now()): Promise<BudgetRecord | null> {
    const { sets, params } = assignments({
      max_budget_nanos: patch.max_budget_nanos,
      reset_every_seconds: patch.reset_every_seconds,
      metadata: patch.metadata === undefined ? undefined : json(patch.metadata),
    });
    await this.#driver.run(`UPDATE budgets SET ${[...sets, 'updated_at = ?'].join(', ')} WHERE budget_id = ?`, [...params, now, id]);
    return this.get(id, now);
  }

  /** Deletes a budget after detaching it from every user and key. */
  async delete(id: string): Promise<boolean> {
    const changes = await this.#driver.transaction([
      { sql: 'UPDATE users SET budget_id = NULL WHERE budget_id = ?', params: [id] },
      { sql: 'UPDATE virtual_keys SET budget_id = NULL WHERE budget_id = ?', params: [id] },
      { sql: 'DELETE FROM budgets WHERE budget_id = ?', params: [id] },
    ]);
    return changes[2] > 0;
  }

  /**
   * Takes `amount` nano-dollars of headroom if the budget has that much left (spend + reserved + amount ≤ limit, and
   * spend + reserved < limit, so that an exhausted budget refuses even a free call), resetting the period first when
   * it is over. One statement: atomic on SQLite (one writer) and on PostgreSQL (the row lock makes a concurrent UPDATE
   * re-check the condition on the new row). Null when the budget cannot hold it.
   */
  /** PostgreSQL: a hold's statement can carry another write (`also` of reserve), a call's pending usage row. */
  get holdsCarryWrites(): boolean {
    return this.#shared;
  }

  /**
   * `also` (PostgreSQL only, see holdsCarryWrites): a write done in the hold's statement exactly when the hold is
   * taken, made from the hold (its holder is known only then); it may select from the CTE `hold`.
   */
  async reserve(id: string, amount: bigint, now = Date.now(), also?: (hold: BudgetHold) => Statement): Promise<BudgetHold | null> {
    const hold = `UPDATE budgets SET
        spend_nanos = CASE WHEN ${PERIOD_OVER} THEN 0 ELSE spend_nanos END,
        period_started_at = CASE WHEN ${PERIOD_OVER} THEN ? ELSE period_started_at END,
        reserved_nanos = reserved_nanos + ?
      WHERE budget_id = ? AND (CASE WHEN ${PERIOD_OVER} THEN 0 ELSE spend_nanos END) + reserved_nanos < max_budget_nanos
        AND (CASE WHEN ${PERIOD_OVER} THEN 0 ELSE spend_nanos END) + reserved_nanos + ? <= max_budget_nanos`;
    const params = [now, now, now, amount, id, now, now, amount];
    if (!this.#shared) return (await this.#driver.runRelaxed(hold, params)) > 0 ? { budget_id: id, reserved_nanos: amount, holder: null } : null;
    for (let attempt = 1; ; attempt++) {
      const seen = this.#registration.count;
      const holder = this.#registration.id;
      const taken: BudgetHold = { budget_id: id, reserved_nanos: amount, holder };
      const carried = also?.(taken);
      try {
        const changed = await this.#driver.runRelaxed(
          `WITH hold AS (${hold} RETURNING budget_id)${carried ? `, carried AS (${carried.sql})` : ''}
           INSERT INTO budget_reservations (instance_id, budget_id, reserved_nanos) SELECT CAST(? AS TEXT), budget_id, CAST(? AS BIGINT) FROM hold
           ON CONFLICT (instance_id, budget_id) DO UPDATE SET reserved_nanos = budget_reservations.reserved_nanos + excluded.reserved_nanos`,
          [...params, ...(carried?.params ?? []), holder, amount],
        );
        return changed > 0 ? taken : null;
      } catch (error) {
        // This instance has no row (not registered yet, or reaped since): the whole statement, hold included, was
        // undone. Register (again) and hold under the registration that now exists (a few times: a reaper may take
        // a registration for dead again before its first hold if this process stalls right then).
        if (attempt >= 3 || !isForeignKeyViolation(error)) throw error;
        await this.#registration.register(seen, Date.now());
      }
    }
  }

  /** Gives back a reservation whose call never happened (another budget refused it). */
  async release(hold: BudgetHold): Promise<void> {
    await this.settle([{ ...hold, actual_nanos: 0n }]);
  }

  /**
   * Settles holds (gives back what each reserved, adds what its call cost) in one transaction with `writes` (the usage
   * rows that record the calls): one UPDATE per budget, settlements of the same budget and holder added up first.
   */
  async settle(settlements: BudgetSettlement[], writes: Statement[] = []): Promise<void> {
    const statements = [...writes];
    const sums = settlementSums(settlements, this.#shared);
    if (this.#shared && sums.length > 0) {
      // One statement: the writes as data-modifying CTEs (run to completion whether read or not) and the
      // settlement in gateway_settle_holds (migration 6), which locks the budget rows and reads each holder's share
      // after the lock: a reap that gave a share back meanwhile leaves nothing to give back twice.
      const inserts = statements.map(({ sql }, i) => `u${i} AS (${sql})`);
      await this.#driver.run(`${inserts.length > 0 ? `WITH ${inserts.join(', ')} ` : ''}SELECT gateway_settle_holds(CAST(? AS TEXT))`, [
        ...statements.flatMap(({ params }) => params),
        // bigints as JSON strings: json_to_recordset reads a string into a BIGINT column exactly
        bigintJson(sums),
      ]);
      return;
    }
    for (const { budget_id, reserved, actual } of sums) {
      // Never below zero: a gateway started on the same file clears every hold (it takes them for a killed
      // process's), and a call of the previous process settling afterwards would otherwise leave free headroom.
      statements.push({
        sql: 'UPDATE budgets SET reserved_nanos = MAX(0, reserved_nanos - ?), spend_nanos = spend_nanos + ? WHERE budget_id = ?',
        params: [reserved, actual, budget_id],
      });
    }
    if (statements.length > 0) await this.#driver.transaction(statements);
  }
}

/**
 * Settlements added up per budget and holder (`shared`: PostgreSQL, where each instance registration's share of the
 * holds is kept apart; SQLite: per budget), as gateway_settle_holds takes them: one UPDATE per budget.
 */
export function settlementSums(settlements: BudgetSettlement[], shared: boolean): { budget_id: string; holder: string | null; reserved: bigint; actual: bigint }[] {
  const sums = new Map<string, { budget_id: string; holder: string | null; reserved: bigint; actual: bigint }>();
  for (const s of settlements) {
    const holder = shared ? s.holder : null;
    const key = `${s.budget_id}\u0000${holder ?? ''}`;
    const sum = sums.get(key) ?? { budget_id: s.budget_id, holder, reserved: 0n, actual: 0n };
    sum.reserved += s.reserved_nanos;
    sum.actual += s.actual_nanos;
    sums.set(key, sum);
  }
  return [...sums.values()];
}

function budgetOf(row: Row, now: number): BudgetRecord {
  const reset = num(row.reset_every_seconds);
  const started = Number(row.period_started_at);
  const over = reset !== null && now >= started + reset * 1000;
  return {
    budget_id: String(row.budget_id),
    max_budget_nanos: nanos(row.max_budget_nanos),
    reset_every_seconds: reset,
    period_started_at: over ? now : started,
    spend_nanos: over ? 0n : nanos(row.spend_nanos),
    reserved_nanos: nanos(row.reserved_nanos),
    metadata: parseJson(row.metadata),
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}
