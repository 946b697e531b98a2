/** One SQL statement with `?` placeholders (the PostgreSQL driver numbers them). */
export interface Statement {
  sql: string;
  params: SqlValue[];
}

export type SqlValue = string | number | bigint | null;
/**
 * A row as both drivers return it: an integer is a number while it is safe (|n| < 2^53) and a bigint beyond, so a
 * BIGINT of nano-dollars up to 2^63 reads back exactly (rows.ts `nanos` takes either).
 */
export type Row = Record<string, unknown>;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** Rows read with every integer as a bigint (node:sqlite's readBigInts) turned into Rows: safe integers as numbers. */
export function narrowIntegers(rows: Row[]): Row[] {
  for (const row of rows) {
    for (const column in row) {
      const value = row[column];
      if (typeof value === 'bigint' && value <= MAX_SAFE && value >= -MAX_SAFE) row[column] = Number(value);
    }
  }
  return rows;
}

/** Statements run one at a time inside a synchronous transaction (SQLite): a step may read and decide the next. */
export interface SyncSql {
  all(sql: string, params?: SqlValue[]): Row[];
  run(sql: string, params?: SqlValue[]): number;
}

/**
 * The little a store needs from a database: run one statement, or several in one transaction. Statements in a
 * transaction are fixed up front (no reads in between), which keeps SQLite's synchronous transactions from
 * interleaving with other requests' statements.
 */
export interface SqlDriver {
  readonly dialect: 'sqlite' | 'postgres';
  /** Rows of a query. */
  all(sql: string, params?: SqlValue[]): Promise<Row[]>;
  /**
   * Rows of a query that may read many rows (usage analytics). SQLite with a reader thread answers it there, off the
   * event loop, from a connection that sees what was committed before it began; otherwise it is `all`.
   */
  scan(sql: string, params?: SqlValue[]): Promise<Row[]>;
  /** Runs a statement; the number of rows it changed. */
  run(sql: string, params?: SqlValue[]): Promise<number>;
  /**
   * Runs a statement whose loss in a database crash would be harmless (budget reservations): PostgreSQL commits it
   * without waiting for the WAL flush (synchronous_commit off), so the budget row's lock is not held across an
   * fsync. SQLite runs it like `run`.
   */
  runRelaxed(sql: string, params?: SqlValue[]): Promise<number>;
  /** `runRelaxed` for a statement that returns rows (an UPDATE … RETURNING): its rows. */
  allRelaxed(sql: string, params?: SqlValue[]): Promise<Row[]>;
  /** Runs statements in one transaction; the rows changed by each. */
  transaction(statements: Statement[]): Promise<number[]>;
  /**
   * SQLite only (null on PostgreSQL, whose multi-step writes run in PL/pgSQL functions): runs `fn` in one transaction,
   * synchronously, so no other request's statement can land in between and `fn` may read before it writes.
   */
  readonly atomically: (<T>(fn: (sql: SyncSql) => T) => T) | null;
  /** Runs `fn` while holding the database-wide migration lock (a no-op on SQLite, whose writers are serialised). */
  withMigrationLock<T>(fn: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}
