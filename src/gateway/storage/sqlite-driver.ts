import { DatabaseSync, type StatementSync } from 'node:sqlite';
import type { ThreadScript } from '../../shared/thread-script.ts';
import { narrowIntegers, type Row, type SqlDriver, type SqlValue, type Statement, type SyncSql } from './driver.ts';
import { SqliteReaderThread } from './sqlite-reader-thread.ts';

/**
 * SQLite through node:sqlite: one file in WAL mode, with a busy timeout so that a second process (`migrate` while
 * serving) waits instead of failing. synchronous=NORMAL in WAL mode loses no committed transaction when the
 * process is killed (only on power loss), which is the crash the gateway has to survive.
 */
export class SqliteDriver implements SqlDriver {
  readonly dialect = 'sqlite';
  readonly #db: DatabaseSync;
  readonly #statements = new Map<string, StatementSync>();
  readonly #reader: SqliteReaderThread | null;

  /** `reader`: the program of a thread that answers `scan` (not for `:memory:`, which a second connection cannot see). */
  constructor(file: string, options: { busyTimeoutMs?: number; reader?: ThreadScript } = {}) {
    const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
    this.#db = new DatabaseSync(file, { timeout: busyTimeoutMs });
    this.#db.exec('PRAGMA journal_mode = WAL');
    this.#db.exec('PRAGMA synchronous = NORMAL');
    this.#db.exec('PRAGMA foreign_keys = ON');
    this.#reader = options.reader && file !== ':memory:' ? new SqliteReaderThread(options.reader, { file, busyTimeoutMs }) : null;
  }

  #prepare(sql: string): StatementSync {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.#db.prepare(sql);
      // Every integer as a bigint, then narrowed (see Row): without it an integer beyond 2^53 (a $1e9 budget in
      // nano-dollars) throws ERR_OUT_OF_RANGE on every read of its row.
      statement.setReadBigInts(true);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  async all(sql: string, params: SqlValue[] = []): Promise<Row[]> {
    return narrowIntegers(this.#prepare(sql).all(...params) as Row[]);
  }

  /** On the reader thread when there is one; a thread that failed fails the query (no quiet fallback to hide it). */
  scan(sql: string, params: SqlValue[] = []): Promise<Row[]> {
    return this.#reader ? this.#reader.all(sql, params) : this.all(sql, params);
  }

  async run(sql: string, params: SqlValue[] = []): Promise<number> {
    return Number(this.#prepare(sql).run(...params).changes);
  }

  runRelaxed(sql: string, params: SqlValue[] = []): Promise<number> {
    return this.run(sql, params);
  }

  allRelaxed(sql: string, params: SqlValue[] = []): Promise<Row[]> {
    return this.all(sql, params);
  }

  async transaction(statements: Statement[]): Promise<number[]> {
    return this.atomically((sql) => statements.map(({ sql: text, params }) => sql.run(text, params)));
  }

  readonly #sync: SyncSql = {
    all: (sql, params = []) => narrowIntegers(this.#prepare(sql).all(...params) as Row[]),
    run: (sql, params = []) => Number(this.#prepare(sql).run(...params).changes),
  };

  readonly atomically = <T>(fn: (sql: SyncSql) => T): T => {
    // Synchronous from BEGIN to COMMIT: no other request's statement can land inside this transaction.
    this.#prepare('BEGIN IMMEDIATE').run();
    try {
      const result = fn(this.#sync);
      this.#prepare('COMMIT').run();
      return result;
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      throw error;
    }
  };

  async withMigrationLock<T>(fn: () => Promise<T>): Promise<T> {
    return fn();
  }

  async close(): Promise<void> {
    await this.#reader?.close();
    this.#statements.clear();
    if (this.#db.isOpen) this.#db.close();
  }
}
