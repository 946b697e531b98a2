import type { Row, SqlDriver, Statement } from './driver.ts';
import { sourceOf } from './rows.ts';
import type { ConfigSource, RouteDefinition, RouteRecord } from './records.ts';

/** Model routes (table model_routes): public model names and their targets, the `models:` section editable at run time. */
export class Routes {
  readonly #driver: SqlDriver;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
  }

  putStatement(name: string, definition: RouteDefinition, source: ConfigSource, now = Date.now()): Statement {
    return {
      sql: `INSERT INTO model_routes (name, definition, source, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET definition = excluded.definition, source = excluded.source, updated_at = excluded.updated_at`,
      params: [name, JSON.stringify(definition), source, now, now],
    };
  }

  deleteStatement(name: string): Statement {
    return { sql: 'DELETE FROM model_routes WHERE name = ?', params: [name] };
  }

  async get(name: string): Promise<RouteRecord | null> {
    const rows = await this.#driver.all('SELECT * FROM model_routes WHERE name = ?', [name]);
    return rows[0] ? routeOf(rows[0]) : null;
  }

  /** In the order they were created (a file's routes in its order), as GET /v1/models lists them. */
  async list(): Promise<RouteRecord[]> {
    return (await this.#driver.all('SELECT * FROM model_routes ORDER BY created_at, name')).map(routeOf);
  }
}

function routeOf(row: Row): RouteRecord {
  return {
    name: String(row.name),
    definition: JSON.parse(String(row.definition)) as RouteDefinition,
    source: sourceOf(row.source),
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}
