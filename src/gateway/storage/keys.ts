import type { Row, SqlDriver } from './driver.ts';
import type { KeyRecord, Metadata } from './records.ts';
import { assignments, json, modelList, modelListOf, newId, num, parseJson } from './rows.ts';

/** Virtual keys (table virtual_keys): only the hash of a secret is stored. */
export class VirtualKeys {
  readonly #driver: SqlDriver;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
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
  async byHash(hash: string, now = Date.now()): Promise<{ key: KeyRecord; ownerBudgetId: string | null; ownerAllowedModels: string[] | null } | null> {
    const rows = await this.#driver.all(
      `SELECT k.*, u.budget_id AS owner_budget_id, u.allowed_models AS owner_allowed_models FROM virtual_keys k LEFT JOIN users u ON u.user_id = k.user_id
       WHERE k.key_hash = ? OR (k.previous_key_hash = ? AND k.previous_key_expires_at > ?)`,
      [hash, hash, now],
    );
    return rows[0]
      ? { key: keyOf(rows[0]), ownerBudgetId: (rows[0].owner_budget_id as string | null) ?? null, ownerAllowedModels: modelListOf(rows[0].owner_allowed_models) }
      : null;
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
