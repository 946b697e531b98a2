import type { SqlValue } from './driver.ts';
import type { CallRow, UsageRecord } from './records.ts';
import { bigintJson } from './rows.ts';

// The columns of a call's rows (usage, and pending_calls while it runs) and their values as bound: shared by the
// usage log, which writes them, and the budgets, whose hold statement carries a call's pending row on PostgreSQL.

export const USAGE_COLUMNS = [
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
  'reason',
] as const satisfies readonly (keyof UsageRecord)[];
/** What a call writes besides: its instance and its holds (JSON). */
export const CALL_COLUMNS = [...USAGE_COLUMNS, 'instance_id', 'holds'] as const;
export type CallColumn = (typeof CALL_COLUMNS)[number];
/**
 * A call in flight (table pending_calls, migration 12): what its usage row would say if it were settled as
 * interrupted now; the other columns have a fixed value then (INTERRUPTED_ROWS).
 */
const INTERRUPTED_ONLY = new Set<string>(['attempts', 'overshoot_nanos', 'status', 'status_code', 'reason']);
export const PENDING_COLUMNS = CALL_COLUMNS.filter((column) => !INTERRUPTED_ONLY.has(column));
/** pending_calls' column types (migration 12), for a row bound as parameters. */
const PENDING_TYPES: Partial<Record<CallColumn, string>> = {
  created_at: 'BIGINT',
  prompt_tokens: 'INTEGER',
  completion_tokens: 'INTEGER',
  search_units: 'INTEGER',
  cost_nanos: 'BIGINT',
  duration_ms: 'DOUBLE PRECISION',
};

/**
 * PostgreSQL: the INSERT of one pending row bound as parameters (PendingCallRow), one for each row `source` yields
 * (a CTE: the hold that was taken, or none). Parameters rather than JSON: cheaper to send and to read in.
 */
export const pendingInsertFrom = (source: string) =>
  `INSERT INTO pending_calls (${PENDING_COLUMNS.join(', ')})
   SELECT ${PENDING_COLUMNS.map((column) => `CAST(? AS ${PENDING_TYPES[column] ?? 'TEXT'})`).join(', ')} FROM ${source}`;

/** A row's value of a column, as bound. */
export function valueOf(row: UsageRecord | CallRow, column: CallColumn): SqlValue {
  switch (column) {
    case 'route':
      return row.route ?? null;
    case 'attempts':
      return row.attempts ?? 1;
    case 'overshoot_nanos':
      return row.overshoot_nanos ?? 0;
    case 'reason':
      return row.reason ?? null;
    case 'instance_id':
      return 'instance_id' in row ? row.instance_id : null;
    case 'holds':
      // JSON, money as strings (PostgreSQL reads them into BIGINT)
      return 'holds' in row && row.holds.length > 0 ? bigintJson(row.holds) : null;
    default:
      return row[column];
  }
}

/** A call's pending_calls row: its values in PENDING_COLUMNS order. */
export type PendingCallRow = SqlValue[];

/**
 * A call's pending row, to be inserted by the statement that takes its (last) budget hold on PostgreSQL
 * (Budgets.admit): written exactly when the hold is taken, in the same round trip.
 */
export function pendingRowWithHold(row: CallRow): PendingCallRow {
  return PENDING_COLUMNS.map((column) => valueOf(row, column));
}

/** A pending row as a JSON object (column: value), for json_populate_record (gateway_hold_calls). */
export function pendingRowObject(row: PendingCallRow): Record<string, SqlValue> {
  return Object.fromEntries(PENDING_COLUMNS.map((column, i) => [column, row[i]]));
}
