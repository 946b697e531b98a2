import { periodAt, type ResetAlignment, type ResetSchedule } from '../budget-periods.ts';
import type { Row, SqlDriver, Statement } from './driver.ts';
import { GroupCommit } from './group-commit.ts';
import type { InstanceRegistration } from './instances.ts';
import type { BudgetAdmission, BudgetHold, BudgetRecord, BudgetSettlement, Metadata } from './records.ts';
import { assignments, bigintJson, isForeignKeyViolation, json, nanos, newId, num, parseJson } from './rows.ts';
import { pendingInsertFrom, pendingRowObject, type PendingCallRow } from './usage-columns.ts';

/** What a budget is made with; `schedule` null or absent: its spend never starts again. */
export interface BudgetFields {
  name?: string | null;
  max_budget_nanos: bigint;
  soft_budget_nanos?: bigint | null;
  schedule?: ResetSchedule;
  metadata?: Metadata;
}

/**
 * A hold: `amount` more reserved if the budget's current period has not ended and it has that much left (spend +
 * reserved + amount ≤ limit, and spend + reserved < limit, so that an exhausted budget refuses even a free call).
 * One statement: atomic on SQLite (one writer) and on PostgreSQL (the row lock makes a concurrent UPDATE re-check the
 * condition on the new row). Its RETURNING is what the call's soft budget warning is made of.
 */
const HOLD = `UPDATE budgets SET reserved_nanos = reserved_nanos + ?
  WHERE budget_id = ? AND (period_ends_at IS NULL OR ? < period_ends_at)
    AND spend_nanos + reserved_nanos < max_budget_nanos AND spend_nanos + reserved_nanos + ? <= max_budget_nanos`;
const HELD = 'spend_nanos, soft_budget_nanos, max_budget_nanos';
/**
 * PostgreSQL: HOLD and this instance's share of it (budget_reservations) in one statement; with the call's pending
 * row (PendingCallRow, as parameters) inserted when the hold is taken, or without.
 */
const sharedHold = (opening: boolean) => `WITH hold AS (${HOLD} RETURNING budget_id, ${HELD})${opening ? `, opened AS (${pendingInsertFrom('hold')})` : ''},
  share AS (INSERT INTO budget_reservations (instance_id, budget_id, reserved_nanos) SELECT CAST(? AS TEXT), budget_id, CAST(? AS BIGINT) FROM hold
    ON CONFLICT (instance_id, budget_id) DO UPDATE SET reserved_nanos = budget_reservations.reserved_nanos + excluded.reserved_nanos)
  SELECT ${HELD} FROM hold`;
/** SQLite: HOLD alone (one gateway per file: no shares). */
const LONE_HOLD = `${HOLD} RETURNING ${HELD}`;
const SHARED_HOLD = sharedHold(false);
const SHARED_HOLD_OPENING = sharedHold(true);

/** Holds of concurrent calls taken in one statement (PostgreSQL), at most this many (a JSON parameter). */
const HOLDS_PER_STATEMENT = 500;

/** A hold asked for: `amount` on budget `id` at `now`, with the call's pending row when it is the call's last hold. */
interface HoldRequest {
  id: string;
  amount: bigint;
  now: number;
  pending?: (hold: BudgetHold) => PendingCallRow;
}

/** A request a batch may have refused for another's amount (gateway_hold_calls): asked again alone. */
const ALONE = Symbol('alone');

/** Rounds of "hold, else start the next period": after a reset the period ends in the future, so two suffice (more if a PATCH moves it meanwhile). */
const HOLD_ROUNDS = 4;

/**
 * Budgets (table budgets) and the holds on them: a call reserves its estimated cost before it runs and settles it
 * when its usage is recorded. On PostgreSQL each hold is also kept under this instance's registration, in
 * budget_reservations (see GatewayStore).
 *
 * Periods: each budget stores when its current period ends (period_ends_at, computed here from its schedule: a
 * calendar boundary in a time zone cannot be computed in SQLite's SQL). A hold is refused once that instant has
 * passed; the refused caller then starts the next period (spend 0) with a compare-and-set on period_ends_at, so that
 * of several instances (or calls) seeing the end at once exactly one resets, and holds again.
 */
export class Budgets {
  readonly #driver: SqlDriver;
  readonly #shared: boolean;
  readonly #registration: InstanceRegistration;
  /** PostgreSQL: the holds of calls that arrive while one is being taken, taken together (gateway_hold_calls). */
  readonly #holds: GroupCommit<HoldRequest, BudgetAdmission | null | typeof ALONE>;

  constructor(driver: SqlDriver, shared: boolean, registration: InstanceRegistration) {
    this.#driver = driver;
    this.#shared = shared;
    this.#registration = registration;
    this.#holds = new GroupCommit((requests) => this.#holdTogether(requests), HOLDS_PER_STATEMENT);
  }

  async create(budget: BudgetFields, now = Date.now()): Promise<BudgetRecord> {
    const id = newId('budget');
    const schedule = budget.schedule ?? null;
    const period = periodAt(schedule, now);
    await this.#driver.run(
      `INSERT INTO budgets (budget_id, name, max_budget_nanos, soft_budget_nanos, reset_every_seconds, reset_alignment, reset_time_zone, period_started_at,
         period_ends_at, spend_nanos, reserved_nanos, metadata, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?)`,
      [id, budget.name ?? null, budget.max_budget_nanos, budget.soft_budget_nanos ?? null, ...scheduleColumns(schedule), period.start, period.end, json(budget.metadata), now, now],
    );
    return (await this.get(id, now))!;
  }

  /** The budget as of `now`: a period that is over reads as the next one (spend 0) even before a reservation starts it. */
  async get(id: string, now = Date.now()): Promise<BudgetRecord | null> {
    const rows = await this.#driver.all('SELECT * FROM budgets WHERE budget_id = ?', [id]);
    return rows[0] ? budgetOf(rows[0], now) : null;
  }

  async list(now = Date.now()): Promise<BudgetRecord[]> {
    return (await this.#driver.all('SELECT * FROM budgets ORDER BY created_at, budget_id')).map((row) => budgetOf(row, now));
  }

  /**
   * `schedule` (undefined: unchanged) ends a period that is already over first, then keeps the spend and puts the
   * budget in the period the new schedule gives: rolling, counted from the start of the current period; calendar,
   * the day, week or month containing `now`; null, one that never ends.
   */
  async update(id: string, patch: Partial<BudgetFields>, now = Date.now()): Promise<BudgetRecord | null> {
    const columns: Record<string, string | number | bigint | null | undefined> = {
      name: patch.name,
      max_budget_nanos: patch.max_budget_nanos,
      soft_budget_nanos: patch.soft_budget_nanos,
      metadata: patch.metadata === undefined ? undefined : json(patch.metadata),
    };
    if (patch.schedule !== undefined) {
      await this.#startNextPeriod(id, now);
      const current = await this.get(id, now);
      if (!current) return null;
      const schedule = patch.schedule;
      const period =
        schedule !== null && 'every_seconds' in schedule
          ? { start: current.period_started_at, end: current.period_started_at + schedule.every_seconds * 1000 }
          : schedule === null
            ? { start: current.period_started_at, end: null }
            : periodAt(schedule, now);
      const [every, alignment, zone] = scheduleColumns(schedule);
      Object.assign(columns, { reset_every_seconds: every, reset_alignment: alignment, reset_time_zone: zone, period_started_at: period.start, period_ends_at: period.end });
    }
    const { sets, params } = assignments(columns);
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

  /** PostgreSQL: a hold's statement can carry the call's pending row (`pending` of admit). */
  get holdsCarryWrites(): boolean {
    return this.#shared;
  }

  /** Takes `amount` nano-dollars of headroom (see admit); null when the budget cannot hold it. */
  async reserve(id: string, amount: bigint, now = Date.now(), pending?: (hold: BudgetHold) => PendingCallRow): Promise<BudgetHold | null> {
    return (await this.admit(id, amount, now, pending))?.hold ?? null;
  }

  /**
   * Takes `amount` nano-dollars of headroom if the budget can hold it (HOLD), starting its next period first when the
   * current one is over. Null when the budget cannot hold it (or does not exist).
   *
   * `pending` (PostgreSQL only, see holdsCarryWrites): the call's pending_calls row, made from the hold (its holder is
   * known only then), inserted in the hold's statement exactly when the hold is taken.
   */
  async admit(id: string, amount: bigint, now = Date.now(), pending?: (hold: BudgetHold) => PendingCallRow): Promise<BudgetAdmission | null> {
    let triedInCurrent = false;
    for (let round = 0; round < HOLD_ROUNDS; round++) {
      const admitted = await this.#hold({ id, amount, now, pending });
      if (admitted) return admitted;
      const period = await this.#startNextPeriod(id, now);
      if (period === 'started') continue;
      // A budget whose period has not ended refuses for good, unless the refusal saw the period before it: another
      // call or instance started this one between the hold and the read (at a boundary, many calls race so). One
      // more hold in the current period settles it.
      if (period === 'none' || triedInCurrent) return null;
      triedInCurrent = true;
    }
    return null;
  }

  async #hold(request: HoldRequest): Promise<BudgetAdmission | null> {
    if (!this.#shared) {
      const { id, amount, now } = request;
      return admissionOf({ budget_id: id, reserved_nanos: amount, holder: null }, (await this.#driver.allRelaxed(LONE_HOLD, [amount, id, now, amount]))[0]);
    }
    const held = await this.#holds.add(request);
    return held === ALONE ? this.#holdAlone(request) : held;
  }

  /**
   * PostgreSQL: the holds of a group commit, one statement for all (gateway_hold_calls, migration 15), or HOLD alone
   * for one. Fewer statements and commits than calls under concurrency, and the budget row is locked once per batch.
   */
  async #holdTogether(requests: HoldRequest[]): Promise<(BudgetAdmission | null | typeof ALONE)[]> {
    if (requests.length === 1) return [await this.#holdAlone(requests[0])];
    const holder = this.#registration.id;
    const taken = requests.map(({ id, amount }): BudgetHold => ({ budget_id: id, reserved_nanos: amount, holder }));
    const rows = await this.#driver.allRelaxed('SELECT * FROM gateway_hold_calls(CAST(? AS TEXT), CAST(? AS TEXT))', [
      holder,
      bigintJson(
        requests.map(({ id, amount, now, pending }, i) => {
          const row = pending?.(taken[i]);
          return { i, budget_id: id, amount, at_ms: now, pending: row ? pendingRowObject(row) : null };
        }),
      ),
    ]);
    // The first request refused on a budget was refused as it would have been alone; a later one counted that one's
    // amount too, so it is asked again alone unless it asks for at least as much at the same time or later (then it
    // would not fit either, nor fall in a period the first did not).
    const firstRefused = new Map<string, HoldRequest>();
    return rows.map((row, i) => {
      if (row.held === true) return admissionOf(taken[i], row);
      const request = requests[i];
      const first = firstRefused.get(request.id);
      if (first === undefined) firstRefused.set(request.id, request);
      else if (request.amount < first.amount || request.now < first.now) return ALONE;
      return null;
    });
  }

  /** PostgreSQL: one hold in a statement of its own (HOLD, its share in budget_reservations, its pending row). */
  async #holdAlone({ id, amount, now, pending }: HoldRequest): Promise<BudgetAdmission | null> {
    const params = [amount, id, now, amount];
    for (let attempt = 1; ; attempt++) {
      const seen = this.#registration.count;
      const holder = this.#registration.id;
      const taken: BudgetHold = { budget_id: id, reserved_nanos: amount, holder };
      const row = pending?.(taken);
      try {
        const rows = await this.#driver.allRelaxed(row ? SHARED_HOLD_OPENING : SHARED_HOLD, [...params, ...(row ?? []), holder, amount]);
        return admissionOf(taken, rows[0]);
      } catch (error) {
        // This instance has no row (not registered yet, or reaped since): the whole statement, hold included, was
        // undone. Register (again) and hold under the registration that now exists (a few times: a reaper may take
        // a registration for dead again before its first hold if this process stalls right then).
        if (attempt >= 3 || !isForeignKeyViolation(error)) throw error;
        await this.#registration.register(seen, Date.now());
      }
    }
  }

  /**
   * Starts the budget's next period (spend 0) if its current one ended by `now`: a compare-and-set on the end it read,
   * so that when several instances see the end at once only the first resets (the others find the new period):
   * 'started' (by this call or, just now, by another). 'current' when the period has not ended; 'none' when the budget
   * never resets (or is gone).
   */
  async #startNextPeriod(id: string, now: number): Promise<'started' | 'current' | 'none'> {
    const [row] = await this.#driver.all('SELECT reset_every_seconds, reset_alignment, reset_time_zone, period_ends_at FROM budgets WHERE budget_id = ?', [id]);
    const ends = row ? num(row.period_ends_at) : null;
    if (ends === null) return 'none';
    if (now < ends) return 'current';
    const next = periodAt(scheduleOf(row), now);
    await this.#driver.run('UPDATE budgets SET spend_nanos = 0, period_started_at = ?, period_ends_at = ? WHERE budget_id = ? AND period_ends_at = ?', [next.start, next.end, id, ends]);
    return 'started';
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

/** What a hold's statement returned of its budget (HELD), or null when it took no hold. */
function admissionOf(hold: BudgetHold, row: Row | undefined): BudgetAdmission | null {
  if (!row) return null;
  return { hold, spend_nanos: nanos(row.spend_nanos), soft_budget_nanos: row.soft_budget_nanos === null ? null : nanos(row.soft_budget_nanos), max_budget_nanos: nanos(row.max_budget_nanos) };
}

function scheduleOf(row: Row): ResetSchedule {
  const every = num(row.reset_every_seconds);
  if (every !== null) return { every_seconds: every };
  if (typeof row.reset_alignment === 'string') return { alignment: row.reset_alignment as ResetAlignment, time_zone: String(row.reset_time_zone ?? 'UTC') };
  return null;
}

/** The schedule as its columns: reset_every_seconds, reset_alignment, reset_time_zone. */
function scheduleColumns(schedule: ResetSchedule): [number | null, string | null, string | null] {
  if (schedule === null) return [null, null, null];
  return 'every_seconds' in schedule ? [schedule.every_seconds, null, null] : [null, schedule.alignment, schedule.time_zone];
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
  const schedule = scheduleOf(row);
  const ends = num(row.period_ends_at);
  const over = ends !== null && now >= ends;
  const period = over ? periodAt(schedule, now) : { start: Number(row.period_started_at), end: ends };
  const [every, alignment, zone] = scheduleColumns(schedule);
  return {
    budget_id: String(row.budget_id),
    name: row.name === null || row.name === undefined ? null : String(row.name),
    max_budget_nanos: nanos(row.max_budget_nanos),
    soft_budget_nanos: row.soft_budget_nanos === null || row.soft_budget_nanos === undefined ? null : nanos(row.soft_budget_nanos),
    reset_every_seconds: every,
    reset_alignment: alignment as ResetAlignment | null,
    reset_time_zone: zone,
    period_started_at: period.start,
    period_ends_at: period.end,
    spend_nanos: over ? 0n : nanos(row.spend_nanos),
    reserved_nanos: nanos(row.reserved_nanos),
    metadata: parseJson(row.metadata),
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}
