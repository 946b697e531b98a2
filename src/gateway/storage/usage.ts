import type { Budgets } from './budgets.ts';
import type { Row, SqlDriver, SqlValue, Statement } from './driver.ts';
import type { BudgetSettlement, UsageRecord, UsageTotals } from './records.ts';
import { nanos } from './rows.ts';

/** Which usage rows an analytics query covers; every field narrows it (epoch ms: since inclusive, until exclusive). */
export interface UsageFilter {
  since?: number;
  until?: number;
  user_id?: string;
  key_id?: string;
  /** `provider:model`, or a bare model name (that model of any provider). */
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
  'overshoot_nanos',
  'status',
  'status_code',
  'duration_ms',
] as const satisfies readonly (keyof UsageRecord)[];
const USAGE_PLACEHOLDERS = `(${USAGE_COLUMNS.map(() => '?').join(', ')})`;
const USAGE_ROWS_PER_INSERT = 500;

/** One row per model call (table usage): written with the settlement of the call's budget holds, read by analytics. */
export class UsageLog {
  readonly #driver: SqlDriver;
  readonly #budgets: Budgets;

  constructor(driver: SqlDriver, budgets: Budgets) {
    this.#driver = driver;
    this.#budgets = budgets;
  }

  /**
   * Writes usage rows and settles their budget reservations in one transaction: one multi-row INSERT per 500 rows
   * and one UPDATE per budget (Budgets.settle), so a group-commit batch costs a handful of statements whatever its size.
   */
  async record(rows: UsageRecord[], settlements: BudgetSettlement[]): Promise<void> {
    const inserts: Statement[] = [];
    for (let start = 0; start < rows.length; start += USAGE_ROWS_PER_INSERT) {
      const chunk = rows.slice(start, start + USAGE_ROWS_PER_INSERT);
      inserts.push({
        sql: `INSERT INTO usage (${USAGE_COLUMNS.join(', ')}) VALUES ${chunk.map(() => USAGE_PLACEHOLDERS).join(', ')}`,
        params: chunk.flatMap((row) => USAGE_COLUMNS.map((column) => usageValue(row, column))),
      });
    }
    await this.#budgets.settle(settlements, inserts);
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

  async count(): Promise<number> {
    const [row] = await this.#driver.all('SELECT COUNT(*) AS n FROM usage');
    return Number(row.n);
  }
}

/**
 * The sum of cost_nanos in two BIGINT parts, whole dollars and the nano-dollars below them, added up exactly here
 * (costSumOf): one SUM could pass 2^63 (SQLite's SUM then fails with "integer overflow"), since a row alone may hold up
 * to 6.4e18 (docs/gateway.md, "Money"). The parts stay under 2^63 for over a billion rows of that size.
 */
const COST_SUM = `CAST(COALESCE(SUM(cost_nanos / 1000000000), 0) AS BIGINT) AS cost_dollars, CAST(COALESCE(SUM(cost_nanos % 1000000000), 0) AS BIGINT) AS cost_rest`;
const costSumOf = (row: Row): bigint => nanos(row.cost_dollars) * 1_000_000_000n + nanos(row.cost_rest);

const AGGREGATES = `COUNT(*) AS requests, CAST(COALESCE(SUM(CASE WHEN status = 'success' THEN 0 ELSE 1 END), 0) AS BIGINT) AS errors,
  CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS prompt_tokens, CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS completion_tokens,
  ${COST_SUM}`;

/** Totals of no rows. */
export const emptyAggregate = (): UsageAggregate => ({ requests: 0, errors: 0, prompt_tokens: 0, completion_tokens: 0, cost_nanos: 0n });

function addAggregate(sum: UsageAggregate, add: UsageAggregate): void {
  sum.requests += add.requests;
  sum.errors += add.errors;
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
  if (extra) {
    where.push(extra[0]);
    params.push(...extra[1]);
  }
  return { clause: where.length > 0 ? `WHERE ${where.join(' AND ')}` : '', params };
}

/** A row's value for a column; the optional columns have their defaults. */
function usageValue(row: UsageRecord, column: (typeof USAGE_COLUMNS)[number]): SqlValue {
  if (column === 'route') return row.route ?? null;
  if (column === 'attempts') return row.attempts ?? 1;
  if (column === 'overshoot_nanos') return row.overshoot_nanos ?? 0;
  return row[column];
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
    cost_nanos: nanos(row.cost_nanos),
    overshoot_nanos: nanos(row.overshoot_nanos ?? 0),
    status: row.status as UsageRecord['status'],
    status_code: Number(row.status_code),
    duration_ms: Number(row.duration_ms),
  };
}
