import { settlementSums, type Budgets } from './budgets.ts';
import type { Row, SqlDriver, SqlValue, Statement, SyncSql } from './driver.ts';
import type { BudgetSettlement, CallProgress, CallRow, UsageRecord, UsageStatus, UsageTotals } from './records.ts';
import { bigintJson, nanos } from './rows.ts';
import { CALL_COLUMNS, PENDING_COLUMNS, USAGE_COLUMNS, valueOf, type CallColumn } from './usage-columns.ts';

/** Which usage rows an analytics query covers; every field narrows it (epoch ms: since inclusive, until exclusive). */
export interface UsageFilter {
  since?: number;
  until?: number;
  user_id?: string;
  key_id?: string;
  /** `provider:model`, or a bare model name (that model of any provider). */
  model?: string;
  provider?: string;
  status?: UsageStatus;
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
  /** Calls refused before any provider (budget, allowed models, rate limit, …); counted in errors too. */
  refused: number;
}

/** The totals of one value of a grouping (a `provider:model`, user, key or provider; null: rows without one). */
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

/**
 * A call in flight: what its pending row says of it (its first target; `cost_nanos`: its hold, or what its stream has
 * delivered so far), and the gateway instance making it (PostgreSQL; null on SQLite).
 */
export interface InFlightCall extends Pick<UsageRecord, 'id' | 'request_id' | 'created_at' | 'user_id' | 'key_id' | 'endpoint' | 'provider' | 'model' | 'route' | 'cost_nanos'> {
  instance_id: string | null;
}
const IN_FLIGHT_COLUMNS = ['id', 'request_id', 'created_at', 'user_id', 'key_id', 'endpoint', 'provider', 'model', 'route', 'cost_nanos', 'instance_id'] as const;

/**
 * The INSERT that turns the pending calls `cut` (a CTE or table with PENDING_COLUMNS) into usage rows `interrupted`
 * for `reason` (a parameter), charged what they were last recorded at: their hold, or what their stream delivered.
 */
export const INTERRUPTED_ROWS = (cut: string) =>
  `INSERT INTO usage (${PENDING_COLUMNS.join(', ')}, attempts, overshoot_nanos, status, status_code, reason)
   SELECT ${PENDING_COLUMNS.join(', ')}, 1, 0, 'interrupted', 0, CAST(? AS TEXT) FROM ${cut}`;
const USAGE_ROWS_PER_INSERT = 500;

/** Multi-row INSERTs of `rows` (one per 500 rows) into `columns` of `table`. */
function inserts(rows: (UsageRecord | CallRow)[], columns: readonly CallColumn[], table = 'usage'): Statement[] {
  const statements: Statement[] = [];
  for (let start = 0; start < rows.length; start += USAGE_ROWS_PER_INSERT) {
    const chunk = rows.slice(start, start + USAGE_ROWS_PER_INSERT);
    statements.push({ sql: insertSql(table, columns, chunk.length), params: chunk.flatMap((row) => columns.map((column) => valueOf(row, column))) });
  }
  return statements;
}

/**
 * The INSERT of `count` rows into `columns` (one of this module's column lists) of `table`, made once per shape: a
 * batch's statement is then the same string each time, which the driver's statement caches find without hashing a
 * new string of a few kilobytes.
 */
function insertSql(table: string, columns: readonly string[], count: number): string {
  let byShape = INSERT_SQL.get(columns);
  if (!byShape) INSERT_SQL.set(columns, (byShape = new Map()));
  const shape = `${table} ${count}`;
  let sql = byShape.get(shape);
  if (sql === undefined) {
    const placeholders = `(${columns.map(() => '?').join(', ')})`;
    byShape.set(shape, (sql = `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${Array.from({ length: count }, () => placeholders).join(', ')}`));
  }
  return sql;
}
const INSERT_SQL = new Map<readonly string[], Map<string, string>>();

/** One row per model call (table usage): written with the settlement of the call's budget holds, read by analytics. */
export class UsageLog {
  readonly #driver: SqlDriver;
  readonly #budgets: Budgets;
  /** PostgreSQL: the statement that finishes a batch of calls, by the batch's size (see insertSql). */
  readonly #completions = new Map<number, string>();

  constructor(driver: SqlDriver, budgets: Budgets) {
    this.#driver = driver;
    this.#budgets = budgets;
  }

  /**
   * Writes usage rows and settles their budget reservations in one transaction: one multi-row INSERT per 500 rows
   * and one UPDATE per budget (Budgets.settle), so a group-commit batch costs a handful of statements whatever its size.
   */
  async record(rows: UsageRecord[], settlements: BudgetSettlement[]): Promise<void> {
    await this.#budgets.settle(settlements, inserts(rows, USAGE_COLUMNS));
  }

  /**
   * Write-ahead: the calls about to reach a provider (their holds already taken) into pending_calls, one multi-row
   * INSERT for a group-commit batch (on PostgreSQL a call with a budget writes its own in its hold's statement,
   * pendingRowWithHold). Committed like the holds (PostgreSQL: without waiting for the WAL flush): a row lost with
   * its holds in a database crash is written again when its call finishes.
   */
  async open(rows: CallRow[]): Promise<void> {
    for (const { sql, params } of inserts(rows, PENDING_COLUMNS, 'pending_calls')) await this.#driver.runRelaxed(sql, params);
  }

  /**
   * Finishes calls in one transaction: each call's usage row is written with its outcome and its holds settled (what
   * they reserved given back, what the call cost added to spend). A call still pending has its pending_calls row
   * deleted and its usage row inserted; a call never opened (a refusal) is inserted; a call a recovery already settled
   * as `interrupted` (its instance was taken for dead while the call ran) gets its true outcome and only the
   * difference to the charge it was settled at; any other row is left alone. So a call is counted once, whoever
   * settles it first.
   */
  async complete(calls: CallRow[]): Promise<void> {
    if (calls.length === 0) return;
    if (!this.#driver.atomically) {
      // Refusals were never opened; every other call was, and normally still is.
      const opened = calls.filter((call) => call.status !== 'refused').length;
      const settlements = settlementSums(
        calls.flatMap((call) => call.holds.map((hold) => ({ ...hold, actual_nanos: call.cost_nanos }))),
        true,
      );
      // One statement (gateway_settle_opened, migration 12, undoes it if a pending row was missing); the rows as
      // multi-row INSERTs with parameters, as record() writes them: cheaper for the server than reading them out of JSON.
      // One call settling one budget (every call at low concurrency) binds its settlement as it is (gateway_settle_one,
      // migration 16): no JSON to write or read.
      const rows = inserts(calls, CALL_COLUMNS);
      const one = calls.length === 1 && settlements.length === 1;
      let sql = this.#completions.get(one ? 0 : calls.length);
      if (sql === undefined) {
        const inserted = rows.map(({ sql: insert }, i) => `u${i} AS (${insert})`).join(', ');
        sql = one
          ? `WITH gone AS (DELETE FROM pending_calls WHERE id = ? RETURNING 1), ${inserted}
             SELECT gateway_settle_one((SELECT COUNT(*) FROM gone), CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT))`
          : `WITH gone AS (DELETE FROM pending_calls WHERE id = ANY (ARRAY(SELECT json_array_elements_text(CAST(? AS json)))) RETURNING 1), ${inserted}
             SELECT gateway_settle_opened(CAST(? AS TEXT), (SELECT COUNT(*) FROM gone), CAST(? AS BIGINT))`;
        this.#completions.set(one ? 0 : calls.length, sql);
      }
      const rowValues = rows.flatMap(({ params }) => params);
      try {
        if (one) {
          const [{ budget_id, holder, reserved, actual }] = settlements;
          await this.#driver.run(sql, [calls[0].id, ...rowValues, opened, budget_id, holder, reserved, actual]);
        } else {
          await this.#driver.run(sql, [JSON.stringify(calls.map((call) => call.id)), ...rowValues, bigintJson(settlements), opened]);
        }
      } catch (error) {
        // A call of the batch was settled as interrupted meanwhile (its pending row gone, or its usage row written)
        if (!isSettledMeanwhile(error)) throw error;
        await this.#driver.run('SELECT gateway_complete_calls(CAST(? AS TEXT))', [bigintJson(calls)]);
      }
      return;
    }
    this.#driver.atomically((sql) => {
      const sums = new Map<string, { reserved: bigint; actual: bigint }>();
      for (const call of calls) {
        const opened = sql.run('DELETE FROM pending_calls WHERE id = ?', [call.id]) > 0;
        const [prior] = opened ? [] : sql.all('SELECT status, cost_nanos FROM usage WHERE id = ?', [call.id]);
        let extra = call.cost_nanos;
        if (!prior) {
          for (const { sql: text, params } of inserts([call], CALL_COLUMNS)) sql.run(text, params);
        } else if (prior.status === 'interrupted') {
          sql.run(
            `UPDATE usage SET provider = ?, model = ?, attempts = ?, prompt_tokens = ?, completion_tokens = ?, search_units = ?, cost_nanos = ?,
               overshoot_nanos = ?, status = ?, status_code = ?, duration_ms = ?, reason = ? WHERE id = ?`,
            [
              call.provider,
              call.model,
              call.attempts ?? 1,
              call.prompt_tokens,
              call.completion_tokens,
              call.search_units,
              call.cost_nanos,
              call.overshoot_nanos ?? 0,
              call.status,
              call.status_code,
              call.duration_ms,
              call.reason ?? null,
              call.id,
            ],
          );
          extra -= nanos(prior.cost_nanos);
        } else continue;
        // An interrupted row's holds were cleared by the recovery: nothing left to give back.
        const giveBack = prior?.status !== 'interrupted';
        for (const hold of call.holds) {
          const sum = sums.get(hold.budget_id) ?? { reserved: 0n, actual: 0n };
          sum.reserved += giveBack ? hold.reserved_nanos : 0n;
          sum.actual += extra;
          sums.set(hold.budget_id, sum);
        }
      }
      for (const [budget, { reserved, actual }] of sums) settleOne(sql, budget, reserved, actual);
    });
  }

  /** Records what streams have delivered so far on their pending calls (an interrupted stream is charged that). */
  async progress(updates: CallProgress[]): Promise<void> {
    if (updates.length === 0) return;
    if (!this.#driver.atomically) {
      await this.#driver.runRelaxed(
        `WITH v AS (SELECT * FROM json_to_recordset(CAST(? AS json)) AS x (id TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, cost_nanos BIGINT, duration_ms DOUBLE PRECISION))
         UPDATE pending_calls p SET prompt_tokens = v.prompt_tokens, completion_tokens = v.completion_tokens, cost_nanos = v.cost_nanos, duration_ms = v.duration_ms
         FROM v WHERE p.id = ANY (ARRAY(SELECT id FROM v)) AND p.id = v.id`,
        [bigintJson(updates)],
      );
      return;
    }
    this.#driver.atomically((sql) => {
      for (const u of updates) {
        sql.run('UPDATE pending_calls SET prompt_tokens = ?, completion_tokens = ?, cost_nanos = ?, duration_ms = ? WHERE id = ?', [u.prompt_tokens, u.completion_tokens, u.cost_nanos, u.duration_ms, u.id]);
      }
    });
  }

  /**
   * SQLite at start (one gateway per file): every pending call is a call of a process that died. Each gets its usage
   * row, `interrupted`, charged what it was last recorded at (its hold, or what its stream had delivered) on the
   * budgets it held, and every hold is cleared, in one transaction. The number of calls settled.
   */
  async settleInterrupted(): Promise<number> {
    if (!this.#driver.atomically) throw new Error('settleInterrupted is for SQLite; PostgreSQL settles a dead instance when it is reaped');
    return this.#driver.atomically((sql) => {
      const rows = sql.all('SELECT holds, cost_nanos FROM pending_calls');
      const charges = new Map<string, bigint>();
      for (const row of rows) {
        for (const hold of holdsOf(row.holds)) charges.set(hold.budget_id, (charges.get(hold.budget_id) ?? 0n) + nanos(row.cost_nanos));
      }
      for (const [budget, charge] of charges) settleOne(sql, budget, 0n, charge);
      sql.run(INTERRUPTED_ROWS('pending_calls'), ['gateway_restarted']);
      sql.run('DELETE FROM pending_calls');
      sql.run('UPDATE budgets SET reserved_nanos = 0 WHERE reserved_nanos <> 0');
      return rows.length;
    });
  }

  async list(query: UsageQuery): Promise<{ data: UsageRecord[]; totals: UsageTotals }> {
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
    const data = (await this.#driver.scan(`SELECT * FROM usage ${clause} ORDER BY created_at DESC, id LIMIT ?`, [...params, query.limit])).map(usageOf);
    const [totals] = await this.#driver.scan(
      `SELECT COUNT(*) AS requests, CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS prompt_tokens,
        CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS completion_tokens, ${COST_SUM}
       FROM usage ${clause}`,
      params,
    );
    return {
      data,
      totals: {
        requests: Number(totals.requests),
        prompt_tokens: Number(totals.prompt_tokens),
        completion_tokens: Number(totals.completion_tokens),
        cost_nanos: costSumOf(totals),
      },
    };
  }

  /**
   * Totals of the rows a filter covers, overall and by `provider:model`, user, key and provider (each most cost first,
   * then most calls, then by name with none first). One scan grouped by all four columns, rolled up here: a key belongs to one
   * user and a model to one provider, so there are about as many groups as keys × models, while a scan per grouping
   * read the range five times.
   */
  async summarize(filter: UsageFilter): Promise<{ totals: UsageAggregate; groups: Record<UsageGroup, UsageGroupTotals[]> }> {
    const { clause, params } = usageWhere(filter);
    const rows = await this.#driver.scan(`SELECT ${USAGE_GROUPS.join(', ')}, ${AGGREGATES} FROM usage ${clause} GROUP BY ${USAGE_GROUPS.join(', ')}`, params);
    const totals = emptyAggregate();
    const sums = new Map(USAGE_GROUPS.map((group) => [group, new Map<string | null, UsageAggregate>()]));
    for (const row of rows) {
      const aggregate = aggregateOf(row);
      addAggregate(totals, aggregate);
      for (const group of USAGE_GROUPS) {
        // a model is told apart by its provider (openai:fake-1 and vllm:fake-1 are two models at two prices)
        const value = group === 'model' ? `${String(row.provider)}:${String(row.model)}` : ((row[group] as string | null) ?? null);
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
  async series(filter: UsageFilter, bucketMs: number): Promise<(UsageAggregate & { bucket: number })[]> {
    const { clause, params } = usageWhere(filter);
    // integer division truncates alike in SQLite and PostgreSQL (BIGINT / BIGINT; the casts keep SQLite from binding
    // the size as a REAL and dividing exactly); times are never negative
    const rows = await this.#driver.scan(
      `SELECT (created_at / CAST(? AS BIGINT)) * CAST(? AS BIGINT) AS bucket, ${AGGREGATES} FROM usage ${clause} GROUP BY bucket ORDER BY bucket`,
      [bucketMs, bucketMs, ...params],
    );
    return rows.map((row) => ({ bucket: Number(row.bucket), ...aggregateOf(row) }));
  }

  /**
   * The calls in flight: their pending_calls rows (written before the provider is called, deleted when the call's
   * usage row is written), oldest first, at most `limit`. The dashboard's live view and GET /v1/usage/in-flight read
   * this and nothing else.
   */
  async listInFlight(limit: number): Promise<InFlightCall[]> {
    const rows = await this.#driver.scan(`SELECT ${IN_FLIGHT_COLUMNS.join(', ')} FROM pending_calls ORDER BY created_at, id LIMIT ?`, [limit]);
    return rows.map((row) => ({ ...callOf(row), instance_id: (row.instance_id as string | null) ?? null }));
  }

  /**
   * One page of the rows a filter covers, oldest first, after the row `after` (keyset pagination: every page is one
   * indexed range query, however far in; rows written meanwhile with later times come in later pages). `newest`
   * turns the order round: newest first, the rows before `after`.
   */
  async page(filter: UsageFilter, after: UsageCursor | undefined, limit: number, order: 'oldest' | 'newest' = 'oldest'): Promise<UsageRecord[]> {
    const [cmp, dir] = order === 'oldest' ? ['>', 'ASC'] : ['<', 'DESC'];
    // A row-value comparison, which SQLite and PostgreSQL both turn into a seek on usage_created; the equivalent
    // `created_at > ? OR (created_at = ? AND id > ?)` made SQLite walk the index from its start on every page.
    const { clause, params } = usageWhere(filter, after ? [`(created_at, id) ${cmp} (?, ?)`, [after.created_at, after.id]] : undefined);
    return (await this.#driver.scan(`SELECT * FROM usage ${clause} ORDER BY created_at ${dir}, id ${dir} LIMIT ?`, [...params, limit])).map(usageOf);
  }
}

/** The fast completion met a call a reap settled meanwhile: its own check (GW001), or the reap's usage row (23505). */
const isSettledMeanwhile = (error: unknown): boolean => ['GW001', '23505'].includes(String((error as { code?: unknown })?.code));

/** SQLite: gives back `reserved` (never below zero, see Budgets.settle) and adds `actual` to spend. */
function settleOne(sql: SyncSql, budget: string, reserved: bigint, actual: bigint): void {
  sql.run('UPDATE budgets SET reserved_nanos = MAX(0, reserved_nanos - ?), spend_nanos = spend_nanos + ? WHERE budget_id = ?', [reserved, actual, budget]);
}

const holdsOf = (text: unknown): { budget_id: string }[] => (typeof text === 'string' ? (JSON.parse(text) as { budget_id: string }[]) : []);

/**
 * The sum of cost_nanos in two BIGINT parts, whole dollars and the nano-dollars below them, added up exactly here
 * (costSumOf): one SUM could pass 2^63 (SQLite's SUM then fails with "integer overflow"), since a row alone may hold up
 * to 6.4e18 (docs/gateway.md, "Money"). The parts stay under 2^63 for over a billion rows of that size.
 */
const COST_SUM = `CAST(COALESCE(SUM(cost_nanos / 1000000000), 0) AS BIGINT) AS cost_dollars, CAST(COALESCE(SUM(cost_nanos % 1000000000), 0) AS BIGINT) AS cost_rest`;
const costSumOf = (row: Row): bigint => nanos(row.cost_dollars) * 1_000_000_000n + nanos(row.cost_rest);

// errors: every call that did not succeed, refusals included (refused counts those apart); a pending call has not ended
const AGGREGATES = `COUNT(*) AS requests, CAST(COALESCE(SUM(CASE WHEN status IN ('success', 'pending') THEN 0 ELSE 1 END), 0) AS BIGINT) AS errors,
  CAST(COALESCE(SUM(CASE WHEN status = 'refused' THEN 1 ELSE 0 END), 0) AS BIGINT) AS refused,
  CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS prompt_tokens, CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS completion_tokens,
  ${COST_SUM}`;

/** Totals of no rows. */
export const emptyAggregate = (): UsageAggregate => ({ requests: 0, errors: 0, refused: 0, prompt_tokens: 0, completion_tokens: 0, cost_nanos: 0n });

function addAggregate(sum: UsageAggregate, add: UsageAggregate): void {
  sum.requests += add.requests;
  sum.errors += add.errors;
  sum.refused += add.refused;
  sum.prompt_tokens += add.prompt_tokens;
  sum.completion_tokens += add.completion_tokens;
  sum.cost_nanos += add.cost_nanos;
}

function mostCostFirst(a: UsageGroupTotals, b: UsageGroupTotals): number {
  if (a.cost_nanos !== b.cost_nanos) return b.cost_nanos > a.cost_nanos ? 1 : -1;
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
    refused: Number(row.refused),
    prompt_tokens: Number(row.prompt_tokens),
    completion_tokens: Number(row.completion_tokens),
    cost_nanos: costSumOf(row),
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
  if (filter.model !== undefined) {
    // `provider:model` as the dashboard shows it (split at the first ':', providers have none), or a bare model name,
    // which matches that model of every provider (a model's own name may hold ':' too: `ollama:llama3:8b`)
    const colon = filter.model.indexOf(':');
    if (colon > 0) {
      where.push('(model = ? OR (provider = ? AND model = ?))');
      params.push(filter.model, filter.model.slice(0, colon), filter.model.slice(colon + 1));
    } else add('model = ?', filter.model);
  }
  add('provider = ?', filter.provider);
  add('status = ?', filter.status);
  if (extra) {
    where.push(extra[0]);
    params.push(...extra[1]);
  }
  return { clause: where.length > 0 ? `WHERE ${where.join(' AND ')}` : '', params };
}

/** What every row of a call says of it: who made it, when, to which model; and its cost (so far). */
function callOf(row: Row): Omit<InFlightCall, 'instance_id'> {
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
    cost_nanos: nanos(row.cost_nanos),
  };
}

/** A row's value for a column; the optional columns have their defaults. */
function usageOf(row: Row): UsageRecord {
  return {
    ...callOf(row),
    attempts: Number(row.attempts ?? 1),
    prompt_tokens: Number(row.prompt_tokens),
    completion_tokens: Number(row.completion_tokens),
    search_units: Number(row.search_units),
    overshoot_nanos: nanos(row.overshoot_nanos ?? 0),
    status: row.status as UsageRecord['status'],
    status_code: Number(row.status_code),
    duration_ms: Number(row.duration_ms),
    reason: (row.reason as string | null) ?? null,
  };
}
