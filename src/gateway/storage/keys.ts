import type { Row, SqlDriver } from './driver.ts';
import { GroupCommit } from './group-commit.ts';
import type { KeyRecord, Metadata } from './records.ts';
import { assignments, json, modelList, modelListOf, newId, num, parseJson } from './rows.ts';

/** A virtual key found by a secret's hash, with what a call needs of its owner. */
export interface KeyLookup {
  key: KeyRecord;
  ownerBudgetId: string | null;
  ownerAllowedModels: string[] | null;
}

const KEY_WITH_OWNER = 'SELECT k.*, u.budget_id AS owner_budget_id, u.allowed_models AS owner_allowed_models FROM virtual_keys k LEFT JOIN users u ON u.user_id = k.user_id';
/** Lookups of concurrent calls in one query (PostgreSQL), at most this many (a JSON parameter). */
const LOOKUPS_PER_QUERY = 500;

/** Virtual keys (table virtual_keys): only the hash of a secret is stored. */
export class VirtualKeys {
  readonly #driver: SqlDriver;
  /**
   * PostgreSQL: the key lookups of calls that arrive while one is running go in the next query together, so that
   * under concurrency the server answers one query per batch instead of one per call (each a round trip it parses,
   * binds and plans). A lookup never joins a query already sent: it sees every change committed before it began.
   * SQLite answers a lookup in microseconds without a round trip, alone.
   */
  readonly #lookups: GroupCommit<{ hash: string; now: number }, KeyLookup | null> | null;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
    this.#lookups = driver.dialect === 'postgres' ? new GroupCommit((lookups) => this.#lookUpTogether(lookups), LOOKUPS_PER_QUERY) : null;
  }

  async create(
    key: {
      key_hash: string;
      key_prefix: string;
      key_name: string;
      user_id?: string | null;
      budget_id?: string | null;
      metadata?: Metadata;
      expires_at?: number | null;
      allowed_models?: string[] | null;
      allow_user_override?: boolean;
    },
    now = Date.now(),
  ): Promise<KeyRecord> {
    const id = newId('key');
    await this.#driver.run(
      'INSERT INTO virtual_keys (id, key_hash, key_prefix, key_name, user_id, budget_id, metadata, is_active, expires_at, allowed_models, allow_user_override, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)',
      [
        id,
        key.key_hash,
        key.key_prefix,
        key.key_name,
        key.user_id ?? null,
        key.budget_id ?? null,
        json(key.metadata),
        key.expires_at ?? null,
        modelList(key.allowed_models),
        key.allow_user_override ? 1 : 0,
        now,
        now,
      ],
    );
    return (await this.get(id))!;
  }

  async get(id: string): Promise<KeyRecord | null> {
    const rows = await this.#driver.all('SELECT * FROM virtual_keys WHERE id = ?', [id]);
    return rows[0] ? keyOf(rows[0]) : null;
  }

  /**
   * The key a secret names and its owner's budget: what every model call with a virtual key needs, in one query. The
   * previous secret of a rotated key names it until its grace period ends.
   */
  async byHash(hash: string, now = Date.now()): Promise<KeyLookup | null> {
    return this.#lookups ? this.#lookups.add({ hash, now }) : this.#lookUp(hash, now);
  }

  async #lookUp(hash: string, now: number): Promise<KeyLookup | null> {
    const [row] = await this.#driver.all(`${KEY_WITH_OWNER} WHERE k.key_hash = ? OR (k.previous_key_hash = ? AND k.previous_key_expires_at > ?)`, [hash, hash, now]);
    return row ? lookupOf(row) : null;
  }

  /** PostgreSQL: several lookups in one query (one alone as byHash's query); each checks a previous secret's grace period at its own time. */
  async #lookUpTogether(lookups: { hash: string; now: number }[]): Promise<(KeyLookup | null)[]> {
    if (lookups.length === 1) return [await this.#lookUp(lookups[0].hash, lookups[0].now)];
    const hashes = JSON.stringify([...new Set(lookups.map(({ hash }) => hash))]);
    const rows = await this.#driver.all(
      `${KEY_WITH_OWNER} WHERE k.key_hash = ANY (ARRAY(SELECT json_array_elements_text(CAST(? AS json))))
         OR k.previous_key_hash = ANY (ARRAY(SELECT json_array_elements_text(CAST(? AS json))))`,
      [hashes, hashes],
    );
    return lookups.map(({ hash, now }) => {
      const row = rows.find((r) => r.key_hash === hash) ?? rows.find((r) => r.previous_key_hash === hash && Number(r.previous_key_expires_at) > now);
      return row ? lookupOf(row) : null;
    });
  }

  async list(filter: { user_id?: string } = {}): Promise<KeyRecord[]> {
    const rows =
      filter.user_id === undefined
        ? await this.#driver.all('SELECT * FROM virtual_keys ORDER BY created_at, id')
        : await this.#driver.all('SELECT * FROM virtual_keys WHERE user_id = ? ORDER BY created_at, id', [filter.user_id]);
    return rows.map(keyOf);
  }

  async update(
    id: string,
    patch: {
      key_name?: string;
      is_active?: boolean;
      expires_at?: number | null;
      metadata?: Metadata;
      user_id?: string | null;
      budget_id?: string | null;
      allowed_models?: string[] | null;
      allow_user_override?: boolean;
    },
    now = Date.now(),
  ): Promise<KeyRecord | null> {
    const { sets, params } = assignments({
      allowed_models: patch.allowed_models === undefined ? undefined : modelList(patch.allowed_models),
      key_name: patch.key_name,
      is_active: patch.is_active === undefined ? undefined : patch.is_active ? 1 : 0,
      expires_at: patch.expires_at,
      metadata: patch.metadata === undefined ? undefined : json(patch.metadata),
      user_id: patch.user_id,
      budget_id: patch.budget_id,
      allow_user_override: patch.allow_user_override === undefined ? undefined : patch.allow_user_override ? 1 : 0,
    });
    await this.#driver.run(`UPDATE virtual_keys SET ${[...sets, 'updated_at = ?'].join(', ')} WHERE id = ?`, [...params, now, id]);
    return this.get(id);
  }

  /**
   * Gives a key a new secret (its hash and display prefix). With a grace period the old secret keeps working until
   * `now + graceMs`; without, it stops at once. Everything else (budget, usage, owner) stays with the key.
   */
  async rotate(id: string, secret: { key_hash: string; key_prefix: string }, graceMs: number, now = Date.now()): Promise<KeyRecord | null> {
    const previous = graceMs > 0 ? 'previous_key_hash = key_hash, previous_key_expires_at = ?' : 'previous_key_hash = NULL, previous_key_expires_at = NULL';
    // the right-hand sides read the row as it was (SQL): previous_key_hash gets the old key_hash
    await this.#driver.run(`UPDATE virtual_keys SET ${previous}, key_hash = ?, key_prefix = ?, updated_at = ? WHERE id = ?`, [
      ...(graceMs > 0 ? [now + graceMs] : []),
      secret.key_hash,
      secret.key_prefix,
      now,
      id,
    ]);
    return this.get(id);
  }

  async delete(id: string): Promise<boolean> {
    return (await this.#driver.run('DELETE FROM virtual_keys WHERE id = ?', [id])) > 0;
  }
}

function lookupOf(row: Row): KeyLookup {
  return { key: keyOf(row), ownerBudgetId: (row.owner_budget_id as string | null) ?? null, ownerAllowedModels: modelListOf(row.owner_allowed_models) };
}

function keyOf(row: Row): KeyRecord {
  return {
    id: String(row.id),
    key_prefix: String(row.key_prefix),
    key_name: String(row.key_name),
    user_id: (row.user_id as string | null) ?? null,
    budget_id: (row.budget_id as string | null) ?? null,
    metadata: parseJson(row.metadata),
    is_active: Number(row.is_active) === 1,
    expires_at: num(row.expires_at),
    allowed_models: modelListOf(row.allowed_models),
    allow_user_override: Number(row.allow_user_override) === 1,
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}
