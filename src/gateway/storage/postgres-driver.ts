import pg from 'pg';
import type { Row, SqlDriver, SqlValue, Statement } from './driver.ts';

/** Any number of gateway instances share one PostgreSQL database; migrations take this advisory lock. */
const MIGRATION_LOCK_ID = 0x67617465; // "gate"

// BIGINT (int8) columns hold epoch milliseconds and counts, all well inside a double.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

/** PostgreSQL through a `pg` pool. */
export class PostgresDriver implements SqlDriver {
  readonly dialect = 'postgres';
  readonly #pool: pg.Pool;
  readonly #numbered = new Map<string, string>();

  constructor(connectionString: string, options: { maxConnections?: number } = {}) {
    this.#pool = new pg.Pool({ connectionString, max: options.maxConnections ?? 10 });
    // An idle client that loses its connection must not crash the process; the next query reconnects.
    this.#pool.on('error', () => {});
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

  async all(sql: string, params: SqlValue[] = []): Promise<Row[]> {
    return (await this.#pool.query(this.#sql(sql), params)).rows as Row[];
  }

  async run(sql: string, params: SqlValue[] = []): Promise<number> {
    return (await this.#pool.query(this.#sql(sql), params)).rowCount ?? 0;
  }

  async transaction(statements: Statement[]): Promise<number[]> {
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
    await this.#pool.end();
  }
}
