import type { Row, SqlDriver, Statement } from './driver.ts';
import { sourceOf } from './rows.ts';
import type { ConfigSource, ProviderRecord } from './records.ts';

/** Providers' connection settings (table gateway_providers): the `providers:` section, editable at run time. */
export class Providers {
  readonly #driver: SqlDriver;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
  }

  putStatement(provider: { name: string; api_key: string | null; api_base: string | null }, source: ConfigSource, now = Date.now()): Statement {
    return {
      sql: `INSERT INTO gateway_providers (name, api_key, api_base, source, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET api_key = excluded.api_key, api_base = excluded.api_base, source = excluded.source, updated_at = excluded.updated_at`,
      params: [provider.name, provider.api_key, provider.api_base, source, now, now],
    };
  }

  deleteStatement(name: string): Statement {
    return { sql: 'DELETE FROM gateway_providers WHERE name = ?', params: [name] };
  }

  async get(name: string): Promise<ProviderRecord | null> {
    const rows = await this.#driver.all('SELECT * FROM gateway_providers WHERE name = ?', [name]);
    return rows[0] ? providerOf(rows[0]) : null;
  }

  async list(): Promise<ProviderRecord[]> {
    return (await this.#driver.all('SELECT * FROM gateway_providers ORDER BY name')).map(providerOf);
  }
}

function providerOf(row: Row): ProviderRecord {
  const text = (value: unknown) => (value === null || value === undefined ? null : String(value));
  return {
    name: String(row.name),
    api_key: text(row.api_key),
    api_base: text(row.api_base),
    source: sourceOf(row.source),
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}
