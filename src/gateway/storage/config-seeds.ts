import type { SqlDriver, Statement } from './driver.ts';
import type { ConfigKind } from './records.ts';

/**
 * What the configuration file said of each entry when the gateway last wrote the entry from it (table config_seeds:
 * a digest per kind and name). An entry is written from the file again only when the file's text of it changed,
 * so edits made through the API survive restarts with the same file.
 */
export class ConfigSeeds {
  readonly #driver: SqlDriver;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
  }

  /** Digests by kind, then name. */
  async all(): Promise<Map<ConfigKind, Map<string, string>>> {
    const seeds = new Map<ConfigKind, Map<string, string>>();
    for (const row of await this.#driver.all('SELECT kind, name, digest FROM config_seeds')) {
      const kind = String(row.kind) as ConfigKind;
      if (!seeds.has(kind)) seeds.set(kind, new Map());
      seeds.get(kind)!.set(String(row.name), String(row.digest));
    }
    return seeds;
  }

  setStatement(kind: ConfigKind, name: string, digest: string): Statement {
    return {
      sql: 'INSERT INTO config_seeds (kind, name, digest) VALUES (?, ?, ?) ON CONFLICT (kind, name) DO UPDATE SET digest = excluded.digest',
      params: [kind, name, digest],
    };
  }

  forgetStatement(kind: ConfigKind, name: string): Statement {
    return { sql: 'DELETE FROM config_seeds WHERE kind = ? AND name = ?', params: [kind, name] };
  }
}
