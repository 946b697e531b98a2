import pg from 'pg';
import type { Row, SqlDriver, SqlValue, Statement } from './driver.ts';

/** Any number of gateway instances share one PostgreSQL database; migrations take this advisory lock. */
const MIGRATION_LOCK_ID = 0x67617465; // "gate"

// BIGINT (int8) columns hold epoch milliseconds and counts, and money in nano-dollars, which may pass 2^53: a number
// while it is safe, a bigint beyond (the Row contract, as on SQLite).
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => {
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : BigInt(value);
});

const DML = /^\s*(INSERT|UPDATE|DELETE)\b/i;

/** PostgreSQL through a `pg` pool. */
export class PostgresDriver implements SqlDriver {
  readonly dialect = 'postgres';
  readonly atomically = null;
  readonly #pool: pg.Pool;
  /** Connections with synchronous_commit off, for `runRelaxed`. */
  readonly #relaxedPool: pg.Pool;
  readonly #numbered = new Map<string, string>();
  /** Prepared-statement names: the server parses and plans each distinct statement once per connection. */
  readonly #names = new Map<string, string>();

  constructor(connectionString: string, options: { maxConnections?: number } = {}) {
    this.#pool = new pg.Pool({ connectionString, max: options.maxConnections ?? 10 });
    this.#relaxedPool = new pg.Pool({ connectionString, max: options.maxConnections ?? 10, options: '-c synchronous_commit=off' });
    // An idle client that loses its connection must not crash the process; the next query reconnects.
    this.#pool.on('error', () => {});
    this.#relaxedPool.on('error', () => {});
  }

  /** `?` placeholders to `$1, $2, …` (the store's SQL has no `?` inside string literals). */
  #sql(sql: string): string {
    let numbered = this.#numbered.get(sql);
    if (numbered === undefined) {
      let n = 0;
      numbered = sql.replace(/\?/g, () => `$${++n}`);
      this.#numbered.set(sql, numbered);
    }
    return numbered;
  }

  #query(sql: string, values: SqlValue[]): pg.QueryConfig {
    const text = this.#sql(sql);
    let name = this.#names.get(text);
    if (name === undefined && this.#names.size < 1000) {
      name = `gw_${this.#names.size}`;
      this.#names.set(text, name);
    }
    return { text, values, name };
  }

  async all(sql: string, params: SqlValue[] = []): Promise<Row[]> {
    return (await this.#pool.query(this.#query(sql, params))).rows as Row[];
  }

  /** pg queries never hold the event loop: the same as `all`. */
  scan(sql: string, params: SqlValue[] = []): Promise<Row[]> {
    return this.all(sql, params);
  }

  async run(sql: string, params: SqlValue[] = []): Promise<number> {
    return (await this.#pool.query(this.#query(sql, params))).rowCount ?? 0;
  }

  async runRelaxed(sql: string, params: SqlValue[] = []): Promise<number> {
    return (await this.#relaxedPool.query(this.#query(sql, params))).rowCount ?? 0;
  }

  async allRelaxed(sql: string, params: SqlValue[] = []): Promise<Row[]> {
    return (await this.#relaxedPool.query(this.#query(sql, params))).rows as Row[];
  }

  async transaction(statements: Statement[]): Promise<number[]> {
    if (statements.length === 1) return [await this.run(statements[0].sql, statements[0].params)];
    if (statements.every(({ sql }) => DML.test(sql))) return this.#oneStatement(statements);
    const client = await this.#pool.connect();
    try {
      await client.query('BEGIN');
      const changes: number[] = [];
      for (const { sql, params } of statements) changes.push((await client.query(this.#sql(sql), params)).rowCount ?? 0);
      await client.query('COMMIT');
      return changes;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  /**
   * INSERT/UPDATE/DELETE statements as one statement of data-modifying CTEs: atomic like a transaction (a statement
   * is its own transaction), in one round trip instead of BEGIN, each statement, COMMIT. Foreign keys are checked at
   * the end of the statement, so deleting a row and what refers to it together is fine.
   */
  async #oneStatement(statements: Statement[]): Promise<number[]> {
    const parts = statements.map(({ sql }, i) => `s${i} AS (${sql} RETURNING 1)`);
    const counts = statements.map((_, i) => `(SELECT COUNT(*) FROM s${i}) AS c${i}`);
    const sql = `WITH ${parts.join(', ')} SELECT ${counts.join(', ')}`;
    const [row] = await this.all(sql, statements.flatMap(({ params }) => params));
    return statements.map((_, i) => Number(row[`c${i}`]));
  }

  async withMigrationLock<T>(fn: () => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    try {
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
      try {
        return await fn();
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]);
      }
    } finally {
      client.release();
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.#pool.end(), this.#relaxedPool.end()]);
  }
}
