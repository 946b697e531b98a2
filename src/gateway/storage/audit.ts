import type { Row, SqlDriver, SqlValue, Statement } from './driver.ts';
import type { ConfigChange, ConfigChangeRecord, ConfigKind } from './records.ts';
import { newId } from './rows.ts';

/** Filters and page of GET /v1/audit. */
export interface AuditQuery {
  kind?: ConfigKind;
  name?: string;
  since?: number;
  until?: number;
  limit: number;
  /** Rows older than this one (`next_cursor` of the previous page). */
  cursor?: { created_at: number; id: string };
}

/**
 * The audit of runtime configuration changes (table config_audit) and the change counter every instance polls
 * (config_version). A change is written in the same transaction as the rows it changes (`changeTransaction`), so
 * neither the audit nor the counter can miss one.
 */
export class ConfigAudit {
  readonly #driver: SqlDriver;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
  }

  /**
   * One change as one transaction: `writes`, the audit row of `change` and a raise of the change counter. `seen` is the
   * counter the caller read before reading what it changes: if it moved since (another change landed, on any
   * instance), the transaction fails with a unique violation (`isUniqueViolation`) and writes nothing, so the caller
   * reads again instead of auditing a stale `before` or merging into a stale row. On PostgreSQL the counter's row is
   * locked first, so that a change committing meanwhile is seen by the check.
   */
  changeTransaction(writes: Statement[], change: ConfigChange, seen: number, now = Date.now()): Statement[] {
    return [
      ...(this.#driver.dialect === 'postgres' ? [{ sql: 'SELECT version FROM config_version WHERE id = 1 FOR UPDATE', params: [] }] : []),
      // Inserts the counter's row again, which its primary key refuses, exactly when the counter is no longer `seen`.
      { sql: 'INSERT INTO config_version (id, version) SELECT 1, 0 WHERE (SELECT version FROM config_version WHERE id = 1) <> ?', params: [seen] },
      ...writes,
      {
        sql: `INSERT INTO config_audit (id, created_at, actor, client, request_id, action, kind, name, before_value, after_value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        params: [
          newId('change'),
          now,
          change.actor,
          change.client,
          change.request_id,
          change.action,
          change.kind,
          change.name,
          change.before === null ? null : JSON.stringify(change.before),
          change.after === null ? null : JSON.stringify(change.after),
        ],
      },
      { sql: 'UPDATE config_version SET version = version + 1 WHERE id = 1', params: [] },
    ];
  }

  /** The change counter: it moves whenever a provider, route or price changes, on any instance. */
  async version(): Promise<number> {
    const rows = await this.#driver.all('SELECT version FROM config_version WHERE id = 1');
    return Number(rows[0]?.version ?? 0);
  }

  /** Changes newest first, at most `limit`, and the cursor of the next page (null: no more). */
  async list(query: AuditQuery): Promise<{ data: ConfigChangeRecord[]; next_cursor: { created_at: number; id: string } | null }> {
    const where: string[] = [];
    const params: SqlValue[] = [];
    const add = (clause: string, ...values: SqlValue[]) => {
      where.push(clause);
      params.push(...values);
    };
    if (query.kind !== undefined) add('kind = ?', query.kind);
    if (query.name !== undefined) add('name = ?', query.name);
    if (query.since !== undefined) add('created_at >= ?', query.since);
    if (query.until !== undefined) add('created_at < ?', query.until);
    if (query.cursor) add('(created_at < ? OR (created_at = ? AND id < ?))', query.cursor.created_at, query.cursor.created_at, query.cursor.id);
    const rows = await this.#driver.all(
      `SELECT * FROM config_audit${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, id DESC LIMIT ?`,
      [...params, query.limit + 1],
    );
    const data = rows.slice(0, query.limit).map(changeOf);
    const last = data.at(-1);
    return { data, next_cursor: rows.length > query.limit && last ? { created_at: last.created_at, id: last.id } : null };
  }
}

function changeOf(row: Row): ConfigChangeRecord {
  const parsed = (value: unknown) => (typeof value === 'string' ? (JSON.parse(value) as unknown) : null);
  return {
    id: String(row.id),
    created_at: Number(row.created_at),
    actor: String(row.actor),
    client: row.client === null || row.client === undefined ? null : String(row.client),
    request_id: row.request_id === null || row.request_id === undefined ? null : String(row.request_id),
    action: String(row.action) as ConfigChange['action'],
    kind: String(row.kind) as ConfigKind,
    name: String(row.name),
    before: parsed(row.before_value),
    after: parsed(row.after_value),
  };
}
