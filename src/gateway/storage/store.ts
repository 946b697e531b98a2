import { randomBytes } from 'node:crypto';
import { conflict } from '../errors.ts';
import type { Row, SqlDriver, SqlValue, Statement } from './driver.ts';
import { MIGRATIONS, SCHEMA_MIGRATIONS_TABLE } from './migrations.ts';
import type {
  BudgetHold,
  BudgetRecord,
  BudgetSettlement,
  KeyRecord,
  Metadata,
  PricingPrices,
  PricingRecord,
  UsageRecord,
  UsageTotals,
  UserRecord,
} from './records.ts';

/** Which usage rows an analytics query covers; every field narrows it (epoch ms: since inclusive, until exclusive). */
export interface UsageFilter {
  since?: number;
  until?: number;
  user_id?: string;
  key_id?: string;
  model?: string;
  provider?: string;
}

/** Where a page of usage rows continues: the last row of the previous page. */
export interface UsageCursor {
  created_at: number;
  id: string;
}

/** What usage analytics can total by. */
export const USAGE_GROUPS = ['model', 'user_id', 'key_id', 'provider'] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

/** Totals of a group of usage rows, with the calls that did not succeed. */
export interface UsageAggregate extends UsageTotals {
  errors: number;
}

/** The totals of one value of a grouping (a model, user, key or provider; null: rows without one). */
export interface UsageGroupTotals extends UsageAggregate {
  group: string | null;
}

export interface UsageQuery {
  user_id?: string;
  key_id?: string;
  /** Epoch ms, inclusive. */
  since?: number;
  /** Epoch ms, exclusive. */
  until?: number;
  limit: number;
}

const json = (value: unknown) => JSON.stringify(value ?? {});
const parseJson = (text: unknown): Metadata => (typeof text === 'string' ? (JSON.parse(text) as Metadata) : {});
const num = (value: unknown) => (value === null || value === undefined ? null : Number(value));

export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('base64url')}`;
}

/** Whether a PostgreSQL error is a foreign-key violation (a hold whose instance row is gone). */
function isForeignKeyViolation(error: unknown): boolean {
  return (error as { code?: unknown })?.code === '23503';
}

/** Whether a database error is a unique-key violation (SQLite and PostgreSQL word it differently). */
function isUniqueViolation(error: unknown): boolean {
  const e = error as { code?: unknown; errcode?: unknown; message?: unknown };
  return e?.code === '23505' || (typeof e?.message === 'string' && e.message.includes('UNIQUE constraint failed'));
}

const USAGE_COLUMNS = [
  'id',
  'request_id',
  'created_at',
  'user_id',
  'key_id',
  'endpoint',
  'provider',
  'model',
  'route',
  'attempts',
  'prompt_tokens',
  'completion_tokens',
  'search_units',
  'cost_nanos',
  'status',
  'status_code',
  'duration_ms',
] as const satisfies readonly (keyof UsageRecord)[];
const USAGE_PLACEHOLDERS = `(${USAGE_COLUMNS.map(() => '?').join(', ')})`;
const USAGE_ROWS_PER_INSERT = 500;

/** The condition "this budget's period is over": spend starts again from 0 in the same statement. */
const PERIOD_OVER = `(reset_every_seconds IS NOT NULL AND ? >= period_started_at + reset_every_seconds * 1000)`;

/**
 * The gateway's state in SQL, the same statements on SQLite and PostgreSQL. Budget reservations are single
 * conditional UPDATEs, so concurrent requests (in one process or in several on one PostgreSQL) cannot all pass the
 * check on the same headroom.
 *
 * On PostgreSQL, where several instances share the budgets, each instance also keeps the sum of its own holds per
 * budget in budget_reservations (in the same statement as the hold) and a heartbeat in gateway_instances, so that
 * the holds of an instance that died (SIGKILL, lost machine) can be given back by the others (`reapDeadInstances`).
 * A hold's row must name a registered instance (a foreign key): an instance that was taken for dead registers again,
 * under a new id, before it holds anything more. Whatever changes a budget's `reserved` and an instance's share of it
 * locks the budget row first (rows in budget_id order), and reads the shares only after that lock, so a reap and a
 * settlement of the same hold cannot both give it back. SQLite has one gateway per file, which clears all holds at
 * start instead.
 */
export class GatewayStore {
  readonly driver: SqlDriver;
  #instanceId = newId('instance');
  /** How often this store registered its instance; a registration after the first takes a new id. */
  #registrations = 0;
  #registering: Promise<void> | null = null;

  constructor(driver: SqlDriver) {
    this.driver = driver;
  }

  /** This process's identity in gateway_instances (PostgreSQL); new after the instance was taken for dead. */
  get instanceId(): string {
    return this.#instanceId;
  }

  get #shared(): boolean {
    return this.driver.dialect === 'postgres';
  }

  get dialect(): 'sqlite' | 'postgres' {
    return this.driver.dialect;
  }

  /** Applies the migrations this database lacks; the versions applied now. */
  async migrate(now = Date.now()): Promise<number[]> {
    return this.driver.withMigrationLock(async () => {
      await this.driver.run(SCHEMA_MIGRATIONS_TABLE);
      const applied = new Set((await this.driver.all('SELECT version FROM schema_migrations')).map((row) => Number(row.version)));
      const done: number[] = [];
      for (const migration of MIGRATIONS) {
        if (applied.has(migration.version)) continue;
        const statements = migration.onlyOn === undefined || migration.onlyOn === this.dialect ? migration.statements : [];
        await this.driver.transaction([
          ...statements.map((sql) => ({ sql, params: [] })),
          { sql: 'INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', params: [migration.version, migration.name, now] },
        ]);
        done.push(migration.version);
      }
      return done;
    });
  }

  async schemaVersion(): Promise<number> {
    const rows = await this.driver.all('SELECT MAX(version) AS version FROM schema_migrations');
    return Number(rows[0]?.version ?? 0);
  }

  async ping(): Promise<void> {
    await this.driver.all('SELECT 1 AS ok');
  }

  close(): Promise<void> {
    return this.driver.close();
  }

  // Users

  async createUser(
    user: { user_id: string; alias: string; metadata?: Metadata; budget_id?: string | null; allowed_models?: string[] | null },
    now = Date.now(),
  ): Promise<UserRecord> {
    try {
      await this.driver.run('INSERT INTO users (user_id, alias, metadata, budget_id, allowed_models, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)', [
        user.user_id,
        user.alias,
        json(user.metadata),
        user.budget_id ?? null,
        modelList(user.allowed_models),
        now,
        now,
      ]);
    } catch (error) {
      if (isUniqueViolation(error)) throw conflict(`A user with user_id "${user.user_id}" already exists`, 'user_exists');
      throw error;
    }
    return (await this.getUser(user.user_id))!;
  }

  async getUser(userId: string): Promise<UserRecord | null> {
    const rows = await this.driver.all('SELECT * FROM users WHERE user_id = ?', [userId]);
    return rows[0] ? userOf(rows[0]) : null;
  }

  async listUsers(): Promise<UserRecord[]> {
    return (await this.driver.all('SELECT * FROM users ORDER BY created_at, user_id')).map(userOf);
  }

  async updateUser(
    userId: string,
    patch: { alias?: string; metadata?: Metadata; budget_id?: string | null; allowed_models?: string[] | null },
    now = Date.now(),
  ): Promise<UserRecord | null> {
    const { sets, params } = assignments({
      alias: patch.alias,
      metadata: patch.metadata === undefined ? undefined : json(patch.metadata),
      budget_id: patch.budget_id,
      allowed_models: patch.allowed_models === undefined ? undefined : modelList(patch.allowed_models),
    });
    await this.driver.run(`UPDATE users SET ${[...sets, 'updated_at = ?'].join(', ')} WHERE user_id = ?`, [...params, now, userId]);
    return this.getUser(userId);
  }

  /** Deletes a user and the keys it owns; usage rows stay (they name the user by id). */
  async deleteUser(userId: string): Promise<boolean> {
    const [, users] = await this.driver.transaction([
      { sql: 'DELETE FROM virtual_keys WHERE user_id = ?', params: [userId] },
      { sql: 'DELETE FROM users WHERE user_id = ?', params: [userId] },
    ]);
    return users > 0;
  }

  // Virtual keys

  async createKey(
    key: {
      key_hash: string;
      key_prefix: string;
      key_name: string;
      user_id?: string | null;
      budget_id?: string | null;
      metadata?: Metadata;
      expires_at?: number | null;
      allowed_models?: string[] | null;
    },
    now = Date.now(),
  ): Promise<KeyRecord> {
    const id = newId('key');
    await this.driver.run(
      'INSERT INTO virtual_keys (id, key_hash, key_prefix, key_name, user_id, budget_id, metadata, is_active, expires_at, allowed_models, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)',
      [id, key.key_hash, key.key_prefix, key.key_name, key.user_id ?? null, key.budget_id ?? null, json(key.metadata), key.expires_at ?? null, modelList(key.allowed_models), now, now],
    );
    return (await this.getKey(id))!;
  }

  async getKey(id: string): Promise<KeyRecord | null> {
    const rows = await this.driver.all('SELECT * FROM virtual_keys WHERE id = ?', [id]);
    return rows[0] ? keyOf(rows[0]) : null;
  }

  /**
   * The key a secret names and its owner's budget: what every model call with a virtual key needs, in one query. The
   * previous secret of a rotated key names it until its grace period ends.
   */
  async getKeyByHash(hash: string, now = Date.now()): Promise<{ key: KeyRecord; ownerBudgetId: string | null; ownerAllowedModels: string[] | null } | null> {
    const rows = await this.driver.all(
      `SELECT k.*, u.budget_id AS owner_budget_id, u.allowed_models AS owner_allowed_models FROM virtual_keys k LEFT JOIN users u ON u.user_id = k.user_id
       WHERE k.key_hash = ? OR (k.previous_key_hash = ? AND k.previous_key_expires_at > ?)`,
      [hash, hash, now],
    );
    return rows[0]
      ? { key: keyOf(rows[0]), ownerBudgetId: (rows[0].owner_budget_id as string | null) ?? null, ownerAllowedModels: modelListOf(rows[0].owner_allowed_models) }
      : null;
  }

  async listKeys(filter: { user_id?: string } = {}): Promise<KeyRecord[]> {
    const rows =
      filter.user_id === undefined
        ? await this.driver.all('SELECT * FROM virtual_keys ORDER BY created_at, id')
        : await this.driver.all('SELECT * FROM virtual_keys WHERE user_id = ? ORDER BY created_at, id', [filter.user_id]);
    return rows.map(keyOf);
  }

  async updateKey(
    id: string,
    patch: {
      key_name?: string;
      is_active?: boolean;
      expires_at?: number | null;
      metadata?: Metadata;
      user_id?: string | null;
      budget_id?: string | null;
      allowed_models?: string[] | null;
    },
    now = Date.now(),
  ): Promise<KeyRecord | null> {
    const { sets, params } = assignments({
      allowed_models: patch.allowed_models === undefined ? undefined : modelList(patch.allowed_models),
      key_name: patch.key_name,
      is_active: patch.is_active === undefined ? undefined : patch.is_active ? 1 : 0,
      expires_at: patch.expires_at,
      metadata: patch.metadata === undefined ? undefined : json(patch.metadata),
      user_id: patch.user_id,
      budget_id: patch.budget_id,
    });
    await this.driver.run(`UPDATE virtual_keys SET ${[...sets, 'updated_at = ?'].join(', ')} WHERE id = ?`, [...params, now, id]);
    return this.getKey(id);
  }

  /**
   * Gives a key a new secret (its hash and display prefix). With a grace period the old secret keeps working until
   * `now + graceMs`; without, it stops at once. Everything else (budget, usage, owner) stays with the key.
   */
  async rotateKey(id: string, secret: { key_hash: string; key_prefix: string }, graceMs: number, now = Date.now()): Promise<KeyRecord | null> {
    const previous = graceMs > 0 ? 'previous_key_hash = key_hash, previous_key_expires_at = ?' : 'previous_key_hash = NULL, previous_key_expires_at = NULL';
    // the right-hand sides read the row as it was (SQL): previous_key_hash gets the old key_hash
    await this.driver.run(`UPDATE virtual_keys SET ${previous}, key_hash = ?, key_prefix = ?, updated_at = ? WHERE id = ?`, [
      ...(graceMs > 0 ? [now + graceMs] : []),
      secret.key_hash,
      secret.key_prefix,
      now,
      id,
    ]);
    return this.getKey(id);
  }

  async deleteKey(id: string): Promise<boolean> {
    return (await this.driver.run('DELETE FROM virtual_keys WHERE id = ?', [id])) > 0;
  }

  // Budgets

  async createBudget(budget: { max_budget_nanos: number; reset_every_seconds?: number | null; metadata?: Metadata }, now = Date.now()): Promise<BudgetRecord> {
    const id = newId('budget');
    await this.driver.run(
      'INSERT INTO budgets (budget_id, max_budget_nanos, reset_every_seconds, period_started_at, spend_nanos, reserved_nanos, metadata, created_at, updated_at) VALUES (?, ?, ?, ?, 0, 0, ?, ?, ?)',
      [id, budget.max_budget_nanos, budget.reset_every_seconds ?? null, now, json(budget.metadata), now, now],
    );
    return (await this.getBudget(id))!;
  }

  /** The budget as of `now`: a period that is over reads as spend 0 even before the next reservation resets it. */
  async getBudget(id: string, now = Date.now()): Promise<BudgetRecord | null> {
    const rows = await this.driver.all('SELECT * FROM budgets WHERE budget_id = ?', [id]);
    return rows[0] ? budgetOf(rows[0], now) : null;
  }

  async listBudgets(now = Date.now()): Promise<BudgetRecord[]> {
    return (await this.driver.all('SELECT * FROM budgets ORDER BY created_at, budget_id')).map((row) => budgetOf(row, now));
  }

  async updateBudget(id: string, patch: { max_budget_nanos?: number; reset_every_seconds?: number | null; metadata?: Metadata }, now = Date.now()): Promise<BudgetRecord | null> {
    const { sets, params } = assignments({
      max_budget_nanos: patch.max_budget_nanos,
      reset_every_seconds: patch.reset_every_seconds,
      metadata: patch.metadata === undefined ? undefined : json(patch.metadata),
    });
    await this.driver.run(`UPDATE budgets SET ${[...sets, 'updated_at = ?'].join(', ')} WHERE budget_id = ?`, [...params, now, id]);
    return this.getBudget(id, now);
  }

  /** Deletes a budget after detaching it from every user and key. */
  async deleteBudget(id: string): Promise<boolean> {
    const changes = await this.driver.transaction([
      { sql: 'UPDATE users SET budget_id = NULL WHERE budget_id = ?', params: [id] },
      { sql: 'UPDATE virtual_keys SET budget_id = NULL WHERE budget_id = ?', params: [id] },
      { sql: 'DELETE FROM budgets WHERE budget_id = ?', params: [id] },
    ]);
    return changes[2] > 0;
  }

  /**
   * Takes `amount` nano-dollars of headroom if the budget has any left (spend + reserved < limit), resetting the
   * period first when it is over. One statement: atomic on SQLite (one writer) and on PostgreSQL (the row lock
   * makes a concurrent UPDATE re-check the condition on the new row). Null when the budget is exhausted.
   */
  async reserveBudget(id: string, amount: number, now = Date.now()): Promise<BudgetHold | null> {
    const hold = `UPDATE budgets SET
        spend_nanos = CASE WHEN ${PERIOD_OVER} THEN 0 ELSE spend_nanos END,
        period_started_at = CASE WHEN ${PERIOD_OVER} THEN ? ELSE period_started_at END,
        reserved_nanos = reserved_nanos + ?
      WHERE budget_id = ? AND (CASE WHEN ${PERIOD_OVER} THEN 0 ELSE spend_nanos END) + reserved_nanos < max_budget_nanos`;
    const params = [now, now, now, amount, id, now];
    if (!this.#shared) return (await this.driver.runRelaxed(hold, params)) > 0 ? { budget_id: id, reserved_nanos: amount, holder: null } : null;
    for (let attempt = 1; ; attempt++) {
      const seen = this.#registrations;
      const holder = this.#instanceId;
      try {
        const changed = await this.driver.runRelaxed(
          `WITH hold AS (${hold} RETURNING budget_id)
           INSERT INTO budget_reservations (instance_id, budget_id, reserved_nanos) SELECT CAST(? AS TEXT), budget_id, CAST(? AS BIGINT) FROM hold
           ON CONFLICT (instance_id, budget_id) DO UPDATE SET reserved_nanos = budget_reservations.reserved_nanos + excluded.reserved_nanos`,
          [...params, holder, amount],
        );
        return changed > 0 ? { budget_id: id, reserved_nanos: amount, holder } : null;
      } catch (error) {
        // This instance has no row (not registered yet, or reaped since): the whole statement, hold included, was
        // undone. Register (again) and hold under the registration that now exists (a few times: a reaper may take
        // a registration for dead again before its first hold if this process stalls right then).
        if (attempt >= 3 || !isForeignKeyViolation(error)) throw error;
        await this.#register(seen, Date.now());
      }
    }
  }

  /** Gives back a reservation whose call never happened (another budget refused it). */
  async releaseBudget(hold: BudgetHold): Promise<void> {
    await this.recordUsage([], [{ ...hold, actual_nanos: 0 }]);
  }

  /** Registers this instance (again), unless that happened since the caller saw `seen` registrations. */
  #register(seen: number, now: number): Promise<void> {
    if (this.#registrations !== seen) return Promise.resolve();
    this.#registering ??= (async () => {
      // A new id after a reap: holds of calls from before it were given back already and must not be given back
      // again from the holds taken after it.
      const id = this.#registrations === 0 ? this.#instanceId : newId('instance');
      await this.driver.run('INSERT INTO gateway_instances (instance_id, started_at, heartbeat_at) VALUES (?, ?, ?)', [id, now, now]);
      this.#instanceId = id;
      this.#registrations++;
    })().finally(() => {
      this.#registering = null;
    });
    return this.#registering;
  }

  /**
   * Announces this instance (PostgreSQL) and refreshes its heartbeat; call it every few seconds. True when the
   * instance had been taken for dead (it registered again under a new id).
   */
  async heartbeat(now = Date.now()): Promise<boolean> {
    if (!this.#shared) return false;
    const seen = this.#registrations;
    if (seen > 0 && (await this.driver.runRelaxed('UPDATE gateway_instances SET heartbeat_at = ? WHERE instance_id = ?', [now, this.#instanceId])) > 0) {
      return false;
    }
    await this.#register(seen, now);
    return seen > 0;
  }

  /**
   * Gives back the holds of instances whose heartbeat is older than `staleBefore` (they died without settling)
   * and forgets them; the budgets they held become usable again. The number of instances reaped.
   */
  async reapDeadInstances(staleBefore: number): Promise<number> {
    if (!this.#shared) return 0;
    const dead = await this.driver.all('SELECT instance_id FROM gateway_instances WHERE heartbeat_at < ? ORDER BY instance_id', [staleBefore]);
    let reaped = 0;
    for (const row of dead) reaped += await this.#giveBackAll(String(row.instance_id), staleBefore);
    return reaped;
  }

  /** A clean stop: this instance's remaining holds (none once every call settled) are given back, and it leaves. */
  async leave(): Promise<void> {
    if (!this.#shared) return;
    await this.#giveBackAll(this.#instanceId, null);
  }

  /**
   * Gives back all holds of one instance and removes it (if its heartbeat is still older than `staleBefore`, when
   * given); 1 if it did. One transaction per instance, locking the instance row, then the rows of the budgets it
   * holds, then reading its shares: a reservation needs the instance row only when it holds a budget it held
   * nothing on (the foreign key), a budget this transaction does not wait for, so the two cannot deadlock. Two
   * reapers queue on the instance row; the second finds it gone.
   */
  async #giveBackAll(instanceId: string, staleBefore: number | null): Promise<number> {
    const stale = staleBefore === null ? '' : ' AND heartbeat_at < ?';
    const which = staleBefore === null ? [instanceId] : [instanceId, staleBefore];
    const [reaped] = await this.driver.transaction([
      { sql: `SELECT instance_id FROM gateway_instances WHERE instance_id = ?${stale} FOR UPDATE`, params: which },
      {
        sql: `SELECT budget_id FROM budgets WHERE budget_id IN (
                SELECT r.budget_id FROM budget_reservations r JOIN gateway_instances i USING (instance_id) WHERE i.instance_id = ?${stale})
              ORDER BY budget_id FOR NO KEY UPDATE`,
        params: which,
      },
      {
        sql: `WITH gone AS (DELETE FROM gateway_instances WHERE instance_id = ?${stale} RETURNING instance_id),
              freed AS (DELETE FROM budget_reservations r USING gone WHERE r.instance_id = gone.instance_id RETURNING r.budget_id, r.reserved_nanos),
              given AS (UPDATE budgets b SET reserved_nanos = b.reserved_nanos - f.reserved_nanos FROM freed f WHERE b.budget_id = f.budget_id RETURNING 1)
              SELECT (SELECT COUNT(*) FROM gone) AS gone, (SELECT COUNT(*) FROM given) AS given`,
        params: which,
      },
    ]);
    return reaped;
  }

  /**
   * Clears every reservation: in-flight calls of a process that was killed never settle. Only safe when no other
   * gateway shares the database (SQLite at start).
   */
  async clearReservations(): Promise<void> {
    await this.driver.run('UPDATE budgets SET reserved_nanos = 0 WHERE reserved_nanos <> 0');
  }

  // Pricing

  /** Prices left out are 0. */
  async upsertPricing(pricing: PricingPrices & { model: string }, now = Date.now()): Promise<PricingRecord> {
    await this.driver.run(
      `INSERT INTO model_pricing (model, input_cost_per_million, output_cost_per_million, search_unit_cost_per_thousand, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (model) DO UPDATE SET input_cost_per_million = excluded.input_cost_per_million,
         output_cost_per_million = excluded.output_cost_per_million, search_unit_cost_per_thousand = excluded.search_unit_cost_per_thousand,
         updated_at = excluded.updated_at`,
      [pricing.model, pricing.input_cost_per_million ?? 0, pricing.output_cost_per_million ?? 0, pricing.search_unit_cost_per_thousand ?? 0, now],
    );
    return (await this.getPricing(pricing.model))!;
  }

  async getPricing(model: string): Promise<PricingRecord | null> {
    const rows = await this.driver.all('SELECT * FROM model_pricing WHERE model = ?', [model]);
    return rows[0] ? pricingOf(rows[0]) : null;
  }

  async listPricing(): Promise<PricingRecord[]> {
    return (await this.driver.all('SELECT * FROM model_pricing ORDER BY model')).map(pricingOf);
  }

  async deletePricing(model: string): Promise<boolean> {
    return (await this.driver.run('DELETE FROM model_pricing WHERE model = ?', [model])) > 0;
  }

  // Usage

  /**
   * Writes usage rows and settles their budget reservations in one transaction: one multi-row INSERT per 500 rows
   * and one UPDATE per budget (settlements of the same budget and holder are added up first), so a group-commit
   * batch costs a handful of statements whatever its size.
   */
  async recordUsage(rows: UsageRecord[], settlements: BudgetSettlement[]): Promise<void> {
    const statements: Statement[] = [];
    for (let start = 0; start < rows.length; start += USAGE_ROWS_PER_INSERT) {
      const chunk = rows.slice(start, start + USAGE_ROWS_PER_INSERT);
      statements.push({
        sql: `INSERT INTO usage (${USAGE_COLUMNS.join(', ')}) VALUES ${chunk.map(() => USAGE_PLACEHOLDERS).join(', ')}`,
        params: chunk.flatMap((row) => USAGE_COLUMNS.map((column) => (column === 'route' ? (row.route ?? null) : column === 'attempts' ? (row.attempts ?? 1) : row[column]))),
      });
    }
    const sums = new Map<string, { budget_id: string; holder: string | null; reserved: number; actual: number }>();
    for (const s of settlements) {
      const holder = this.#shared ? s.holder : null;
      const key = `${s.budget_id}\u0000${holder ?? ''}`;
      const sum = sums.get(key) ?? { budget_id: s.budget_id, holder, reserved: 0, actual: 0 };
      sum.reserved += s.reserved_nanos;
      sum.actual += s.actual_nanos;
      sums.set(key, sum);
    }
    if (this.#shared && sums.size > 0) {
      // One statement: the rows' INSERTs as data-modifying CTEs (run to completion whether read or not) and the
      // settlement in gateway_settle_holds (migration 6), which locks the budget rows and reads each holder's share
      // after the lock: a reap that gave a share back meanwhile leaves nothing to give back twice.
      const inserts = statements.map(({ sql }, i) => `u${i} AS (${sql})`);
      await this.driver.run(`${inserts.length > 0 ? `WITH ${inserts.join(', ')} ` : ''}SELECT gateway_settle_holds(CAST(? AS TEXT))`, [
        ...statements.flatMap(({ params }) => params),
        JSON.stringify([...sums.values()]),
      ]);
      return;
    }
    for (const { budget_id, reserved, actual } of sums.values()) {
      // Never below zero: a gateway started on the same file clears every hold (it takes them for a killed
      // process's), and a call of the previous process settling afterwards would otherwise leave free headroom.
      statements.push({
        sql: 'UPDATE budgets SET reserved_nanos = MAX(0, reserved_nanos - ?), spend_nanos = spend_nanos + ? WHERE budget_id = ?',
        params: [reserved, actual, budget_id],
      });
    }
    if (statements.length > 0) await this.driver.transaction(statements);
  }

  async listUsage(query: UsageQuery): Promise<{ data: UsageRecord[]; totals: UsageTotals }> {
    const where: string[] = [];
    const params: SqlValue[] = [];
    const filter = (condition: string, value: SqlValue | undefined) => {
      if (value === undefined) return;
      where.push(condition);
      params.push(value);
    };
    filter('user_id = ?', query.user_id);
    filter('key_id = ?', query.key_id);
    filter('created_at >= ?', query.since);
    filter('created_at < ?', query.until);
    const clause = where.length > 0 ? `WHERE ${where.join(' AND ')}` : '';
    const data = (await this.driver.scan(`SELECT * FROM usage ${clause} ORDER BY created_at DESC, id LIMIT ?`, [...params, query.limit])).map(usageOf);
    const [totals] = await this.driver.scan(
      `SELECT COUNT(*) AS requests, CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS prompt_tokens,
        CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS completion_tokens, CAST(COALESCE(SUM(cost_nanos), 0) AS BIGINT) AS cost_nanos
       FROM usage ${clause}`,
      params,
    );
    return {
      data,
      totals: {
        requests: Number(totals.requests),
        prompt_tokens: Number(totals.prompt_tokens),
        completion_tokens: Number(totals.completion_tokens),
        cost_nanos: Number(totals.cost_nanos),
      },
    };
  }

  /**
   * Totals of the rows a filter covers, overall and by model, user, key and provider (each most cost first, then most
   * calls, then by name with none first). One scan grouped by all four columns, rolled up here: a key belongs to one
   * user and a model to one provider, so there are about as many groups as keys × models, while a scan per grouping
   * read the range five times.
   */
  async summarizeUsage(filter: UsageFilter): Promise<{ totals: UsageAggregate; groups: Record<UsageGroup, UsageGroupTotals[]> }> {
    const { clause, params } = usageWhere(filter);
    const rows = await this.driver.scan(`SELECT ${USAGE_GROUPS.join(', ')}, ${AGGREGATES} FROM usage ${clause} GROUP BY ${USAGE_GROUPS.join(', ')}`, params);
    const totals = emptyAggregate();
    const sums = new Map(USAGE_GROUPS.map((group) => [group, new Map<string | null, UsageAggregate>()]));
    for (const row of rows) {
      const aggregate = aggregateOf(row);
      addAggregate(totals, aggregate);
      for (const group of USAGE_GROUPS) {
        const value = (row[group] as string | null) ?? null;
        const byValue = sums.get(group)!;
        let sum = byValue.get(value);
        if (!sum) byValue.set(value, (sum = emptyAggregate()));
        addAggregate(sum, aggregate);
      }
    }
    const ranked = (group: UsageGroup) => [...sums.get(group)!].map(([value, sum]) => ({ group: value, ...sum })).sort(mostCostFirst);
    return { totals, groups: Object.fromEntries(USAGE_GROUPS.map((group) => [group, ranked(group)])) as Record<UsageGroup, UsageGroupTotals[]> };
  }

  /** Totals per time bucket of `bucketMs` (UTC, from the epoch): only buckets that have rows, oldest first. */
  async usageSeries(filter: UsageFilter, bucketMs: number): Promise<(UsageAggregate & { bucket: number })[]> {
    const { clause, params } = usageWhere(filter);
    // integer division truncates alike in SQLite and PostgreSQL (BIGINT / BIGINT; the casts keep SQLite from binding
    // the size as a REAL and dividing exactly); times are never negative
    const rows = await this.driver.scan(
      `SELECT (created_at / CAST(? AS BIGINT)) * CAST(? AS BIGINT) AS bucket, ${AGGREGATES} FROM usage ${clause} GROUP BY bucket ORDER BY bucket`,
      [bucketMs, bucketMs, ...params],
    );
    return rows.map((row) => ({ bucket: Number(row.bucket), ...aggregateOf(row) }));
  }

  /**
   * One page of the rows a filter covers, oldest first, after the row `after` (keyset pagination: every page is one
   * indexed range query, however far in; rows written meanwhile with later times come in later pages). `newest`
   * turns the order round: newest first, the rows before `after`.
   */
  async usagePage(filter: UsageFilter, after: UsageCursor | undefined, limit: number, order: 'oldest' | 'newest' = 'oldest'): Promise<UsageRecord[]> {
    const [cmp, dir] = order === 'oldest' ? ['>', 'ASC'] : ['<', 'DESC'];
    // A row-value comparison, which SQLite and PostgreSQL both turn into a seek on usage_created; the equivalent
    // `created_at > ? OR (created_at = ? AND id > ?)` made SQLite walk the index from its start on every page.
    const { clause, params } = usageWhere(filter, after ? [`(created_at, id) ${cmp} (?, ?)`, [after.created_at, after.id]] : undefined);
    return (await this.driver.scan(`SELECT * FROM usage ${clause} ORDER BY created_at ${dir}, id ${dir} LIMIT ?`, [...params, limit])).map(usageOf);
  }

  // Rate limit windows shared by the instances on one database (src/gateway/rate-limit.ts)

  /**
   * Counts one call in a subject's window while the window holds fewer than `limits.requests` calls and fewer than
   * `limits.tokens` tokens: true when counted. One statement: the upsert's WHERE leaves a full window unchanged, and
   * RETURNING says whether the row was written.
   */
  async countRateWindow(subject: string, windowStart: number, limits: { requests: number; tokens: number }): Promise<boolean> {
    const rows = await this.driver.all(
      `INSERT INTO rate_limit_windows (subject, window_start, requests, tokens) VALUES (?, ?, 1, 0)
       ON CONFLICT (subject, window_start) DO UPDATE SET requests = rate_limit_windows.requests + 1
       WHERE rate_limit_windows.requests < ? AND rate_limit_windows.tokens < ?
       RETURNING requests`,
      [subject, windowStart, limits.requests, limits.tokens],
    );
    return rows.length > 0;
  }

  /** Adds a finished call's tokens to the window it was counted in. */
  async addRateWindowTokens(subject: string, windowStart: number, tokens: number): Promise<void> {
    await this.driver.run('UPDATE rate_limit_windows SET tokens = tokens + ? WHERE subject = ? AND window_start = ?', [tokens, subject, windowStart]);
  }

  async forgetRateWindows(before: number): Promise<void> {
    await this.driver.run('DELETE FROM rate_limit_windows WHERE window_start < ?', [before]);
  }

  async countUsage(): Promise<number> {
    const [row] = await this.driver.all('SELECT COUNT(*) AS n FROM usage');
    return Number(row.n);
  }
}

const AGGREGATES = `COUNT(*) AS requests, CAST(COALESCE(SUM(CASE WHEN status = 'success' THEN 0 ELSE 1 END), 0) AS BIGINT) AS errors,
  CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS prompt_tokens, CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS completion_tokens,
  CAST(COALESCE(SUM(cost_nanos), 0) AS BIGINT) AS cost_nanos`;

/** Totals of no rows. */
export const emptyAggregate = (): UsageAggregate => ({ requests: 0, errors: 0, prompt_tokens: 0, completion_tokens: 0, cost_nanos: 0 });

function addAggregate(sum: UsageAggregate, add: UsageAggregate): void {
  sum.requests += add.requests;
  sum.errors += add.errors;
  sum.prompt_tokens += add.prompt_tokens;
  sum.completion_tokens += add.completion_tokens;
  sum.cost_nanos += add.cost_nanos;
}

function mostCostFirst(a: UsageGroupTotals, b: UsageGroupTotals): number {
  if (a.cost_nanos !== b.cost_nanos) return b.cost_nanos - a.cost_nanos;
  if (a.requests !== b.requests) return b.requests - a.requests;
  if (a.group === b.group) return 0;
  if (a.group === null) return -1;
  if (b.group === null) return 1;
  return a.group < b.group ? -1 : 1;
}

function aggregateOf(row: Row): UsageAggregate {
  return {
    requests: Number(row.requests),
    errors: Number(row.errors),
    prompt_tokens: Number(row.prompt_tokens),
    completion_tokens: Number(row.completion_tokens),
    cost_nanos: Number(row.cost_nanos),
  };
}

/** The WHERE clause of a usage filter, plus one more condition when given. */
function usageWhere(filter: UsageFilter, extra?: [string, SqlValue[]]): { clause: string; params: SqlValue[] } {
  const where: string[] = [];
  const params: SqlValue[] = [];
  const add = (condition: string, value: SqlValue | undefined) => {
    if (value === undefined) return;
    where.push(condition);
    params.push(value);
  };
  add('created_at >= ?', filter.since);
  add('created_at < ?', filter.until);
  add('user_id = ?', filter.user_id);
  add('key_id = ?', filter.key_id);
  add('model = ?', filter.model);
  add('provider = ?', filter.provider);
  if (extra) {
    where.push(extra[0]);
    params.push(...extra[1]);
  }
  return { clause: where.length > 0 ? `WHERE ${where.join(' AND ')}` : '', params };
}

/** `column = ?` for each defined field (undefined = leave as is, null = clear). */
function assignments(fields: Record<string, SqlValue | undefined>): { sets: string[]; params: SqlValue[] } {
  const sets: string[] = [];
  const params: SqlValue[] = [];
  for (const [column, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    sets.push(`${column} = ?`);
    params.push(value);
  }
  return { sets, params };
}

function userOf(row: Row): UserRecord {
  return {
    user_id: String(row.user_id),
    alias: String(row.alias),
    metadata: parseJson(row.metadata),
    budget_id: (row.budget_id as string | null) ?? null,
    allowed_models: modelListOf(row.allowed_models),
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}

/** An allowed-models list as stored: JSON text, or NULL for every model. */
function modelList(models: string[] | null | undefined): string | null {
  return models === undefined || models === null ? null : JSON.stringify(models);
}

function modelListOf(value: unknown): string[] | null {
  return typeof value === 'string' ? (JSON.parse(value) as string[]) : null;
}

function keyOf(row: Row): KeyRecord {
  return {
    id: String(row.id),
    key_prefix: String(row.key_prefix),
    key_name: String(row.key_name),
    user_id: (row.user_id as string | null) ?? null,
    budget_id: (row.budget_id as string | null) ?? null,
    metadata: parseJson(row.metadata),
    is_active: Number(row.is_active) === 1,
    expires_at: num(row.expires_at),
    allowed_models: modelListOf(row.allowed_models),
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}

function budgetOf(row: Row, now: number): BudgetRecord {
  const reset = num(row.reset_every_seconds);
  const started = Number(row.period_started_at);
  const over = reset !== null && now >= started + reset * 1000;
  return {
    budget_id: String(row.budget_id),
    max_budget_nanos: Number(row.max_budget_nanos),
    reset_every_seconds: reset,
    period_started_at: over ? now : started,
    spend_nanos: over ? 0 : Number(row.spend_nanos),
    reserved_nanos: Number(row.reserved_nanos),
    metadata: parseJson(row.metadata),
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}

function pricingOf(row: Row): PricingRecord {
  return {
    model: String(row.model),
    input_cost_per_million: Number(row.input_cost_per_million),
    output_cost_per_million: Number(row.output_cost_per_million),
    search_unit_cost_per_thousand: Number(row.search_unit_cost_per_thousand),
    updated_at: Number(row.updated_at),
  };
}

function usageOf(row: Row): UsageRecord {
  return {
    id: String(row.id),
    request_id: String(row.request_id),
    created_at: Number(row.created_at),
    user_id: (row.user_id as string | null) ?? null,
    key_id: (row.key_id as string | null) ?? null,
    endpoint: String(row.endpoint),
    provider: String(row.provider),
    model: String(row.model),
    route: (row.route as string | null) ?? null,
    attempts: Number(row.attempts ?? 1),
    prompt_tokens: Number(row.prompt_tokens),
    completion_tokens: Number(row.completion_tokens),
    search_units: Number(row.search_units),
    cost_nanos: Number(row.cost_nanos),
    status: row.status as UsageRecord['status'],
    status_code: Number(row.status_code),
    duration_ms: Number(row.duration_ms),
  };
}
