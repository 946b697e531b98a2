/**
 * The gateway's usage rows against the calls the soak made, read from its SQLite file after it stopped: every call
 * that reached the provider has exactly one row, no call refused before it has one, no row belongs to a call the
 * soak did not make, and the budget's spend is the sum of its key's rows with nothing left reserved.
 */
import { DatabaseSync } from 'node:sqlite';
import { GATEWAY_KILLED, type Billing } from './operations.ts';

export interface UsageAudit {
  rows: number;
  /** Calls that must have one row and have none. */
  missing: string[];
  /** Calls with more than one row. */
  duplicated: string[];
  /** Rows of calls refused before the provider (which must write none). */
  unbillable: string[];
  /** Rows whose request id the soak never sent. */
  unknown: string[];
  /** Calls aborted by the client that have their one row (the others were aborted before the gateway began them). */
  abortedWithRow: number;
  /** Rows whose status is not what the client saw (success for 200, cancelled for an abort, error for a failure). */
  wrongStatus: string[];
  spendNanos: bigint;
  rowsCostNanos: bigint;
  reservedNanos: bigint;
  /** Calls still pending after the gateway stopped (none: a call's row is written when it ends, or settled as interrupted). */
  pending: number;
  /** Rows settled as interrupted (calls in flight when the gateway was killed). */
  interrupted: number;
}

/** The row status a call's outcome must have been recorded with; undefined when either would be right. */
function rowStatusOf(outcome: string): string | undefined {
  // a call cut by a kill of the gateway: interrupted, or whatever it ended as if it finished before the kill
  if (outcome.startsWith('200 (before the abort)') || outcome === GATEWAY_KILLED) return undefined;
  if (outcome.startsWith('200')) return 'success';
  if (outcome === 'client abort') return 'cancelled';
  return 'error';
}

export function auditUsage(databaseFile: string, calls: Billing[], keyId: string, budgetId: string): UsageAudit {
  const database = new DatabaseSync(databaseFile, { readOnly: true });
  try {
    const rows = database.prepare('SELECT request_id, status, key_id, cost_nanos FROM usage').all() as { request_id: string; status: string; key_id: string | null; cost_nanos: number }[];
    const budget = database.prepare('SELECT spend_nanos, reserved_nanos FROM budgets WHERE budget_id = ?').get(budgetId) as { spend_nanos: number; reserved_nanos: number };
    const byRequest = new Map<string, typeof rows>();
    for (const row of rows) byRequest.set(row.request_id, [...(byRequest.get(row.request_id) ?? []), row]);
    const audit: UsageAudit = {
      rows: rows.length,
      missing: [],
      duplicated: [],
      unbillable: [],
      unknown: [],
      abortedWithRow: 0,
      wrongStatus: [],
      spendNanos: BigInt(budget.spend_nanos),
      rowsCostNanos: rows.filter((row) => row.key_id === keyId).reduce((sum, row) => sum + BigInt(row.cost_nanos), 0n),
      reservedNanos: BigInt(budget.reserved_nanos),
      pending: Number((database.prepare('SELECT COUNT(*) AS calls FROM pending_calls').get() as { calls: number }).calls),
      interrupted: rows.filter((row) => row.status === 'interrupted').length,
    };
    const sent = new Set<string>();
    for (const call of calls) {
      sent.add(call.requestId);
      const found = byRequest.get(call.requestId) ?? [];
      const describe = `${call.requestId} (${call.outcome}: ${found.map((row) => row.status).join(', ') || 'no row'})`;
      if (found.length > 1) audit.duplicated.push(describe);
      else if (found.length === 0 && call.rows === 'one') audit.missing.push(describe);
      else if (found.length === 1 && call.rows === 'none') audit.unbillable.push(describe);
      else if (found.length === 1 && call.rows === 'at-most-one') audit.abortedWithRow++;
      const wanted = rowStatusOf(call.outcome);
      if (found.length === 1 && wanted !== undefined && found[0].status !== wanted) audit.wrongStatus.push(describe);
    }
    for (const requestId of byRequest.keys()) if (!sent.has(requestId)) audit.unknown.push(requestId);
    return audit;
  } finally {
    database.close();
  }
}
