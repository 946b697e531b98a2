import { DatabaseSync, type StatementSync } from 'node:sqlite';
import type { Row, SqlDriver, SqlValue, Statement } from './driver.ts';

/**
 * SQLite through node:sqlite: one file in WAL mode, with a busy timeout so that a second process (`migrate` while
 * serving) waits instead of failing. synchronous=NORMAL in WAL mode loses no committed transaction when the
 * process is killed (only on power loss), which is the crash the gateway has to survive.
 */
export class SqliteDriver implements SqlDriver {
  readonly dialect = 'sqlite';
  readonly #db: DatabaseSync;
  readonly #statements = new Map<string, StatementSync>();

  constructor(file: string, options: { busyTimeoutMs?: number } = {}) {
    this.#db = new DatabaseSync(file, { timeout: options.busyTimeoutMs ?? 5000 });
    this.#db.exec('PRAGMA journal_mode = WAL');
    this.#db.exec('PRAGMA synchronous = NORMAL');
    this.#db.exec('PRAGMA foreign_keys = ON');
  }

  #prepare(sql: string): StatementSync {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.#db.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  async all(sql: string, params: SqlValue[] = []): Promise<Row[]> {
    return this.#prepare(sql).all(...params) as Row[];
  }

  async run(sql: string, params: SqlValue[] = []): Promise<number> {
    return Number(this.#prepare(sql).run(...params).changes);
  }

  runRelaxed(sql: string, params: SqlValue[] = []): Promise<number> {
    return this.run(sql, params);
  }

  async transaction(statements: Statement[]): Promise<number[]> {
    // Synchronous from BEGIN to COMMIT: no other request's statement can land inside this transaction.
    this.#prepare('BEGIN IMMEDIATE').run();
    try {
      const changes = statements.map(({ sql, params }) => Number(this.#prepare(sql).run(...params).changes));
      this.#prepare('COMMIT').run();
      return changes;
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      throw error;
    }
  }

  async withMigrationLock<T>(fn: () => Promise<T>): Promise<T> {
    return fn();
  }

  async close(): Promise<void> {
    this.#statements.clear();
    if (this.#db.isOpen) this.#db.close();
  }
}
