import type { ThreadScript } from '../../shared/thread-script.ts';
import { GatewayConfigError } from '../errors.ts';
import { PostgresDriver } from './postgres-driver.ts';
import { SqliteDriver } from './sqlite-driver.ts';
import { GatewayStore } from './store.ts';

export { GatewayStore } from './store.ts';
export { newId } from './rows.ts';
export { GroupCommit } from './group-commit.ts';
export { pendingRowWithHold } from './usage-columns.ts';
export type * from './records.ts';
export type { BudgetFields } from './budgets.ts';

export const DEFAULT_DATABASE_URL = 'sqlite:gateway.db';

/**
 * Opens the store a database URL names: `postgres://…` / `postgresql://…` for PostgreSQL, `sqlite:<file>` (or
 * `sqlite::memory:`, or a bare file path) for SQLite. Does not migrate. `sqliteReader`: the program of the thread
 * that answers SQLite's usage analytics off the event loop (SqliteReaderThread); without it they run inline.
 */
export function openStore(databaseUrl: string, options: { maxConnections?: number; sqliteReader?: ThreadScript } = {}): GatewayStore {
  if (/^postgres(ql)?:\/\//i.test(databaseUrl)) return new GatewayStore(new PostgresDriver(databaseUrl, options));
  let file = databaseUrl;
  if (/^sqlite:/i.test(file)) file = file.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
  else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(file)) {
    throw new GatewayConfigError(`database_url "${redactUrl(databaseUrl)}": unsupported scheme; use sqlite:<file> or postgres://user:password@host:port/database`);
  }
  if (file === '') throw new GatewayConfigError('database_url "sqlite:" names no file; use sqlite:gateway.db or sqlite::memory:');
  try {
    return new GatewayStore(new SqliteDriver(file, { reader: options.sqliteReader }));
  } catch (error) {
    throw new GatewayConfigError(`cannot open SQLite database "${file}": ${(error as Error).message}`, { cause: error });
  }
}

/** A database URL without its password, for messages and logs. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]+:)[^@]*@/, '$1***@');
}
