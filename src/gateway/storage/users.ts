import { conflict } from '../errors.ts';
import type { Row, SqlDriver } from './driver.ts';
import type { Metadata, UserRecord } from './records.ts';
import { assignments, isUniqueViolation, json, modelList, modelListOf, parseJson } from './rows.ts';

/** The gateway's users (table users). */
export class Users {
  readonly #driver: SqlDriver;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
  }

  async create(
    user: { user_id: string; alias: string; metadata?: Metadata; budget_id?: string | null; allowed_models?: string[] | null },
    now = Date.now(),
  ): Promise<UserRecord> {
    try {
      await this.#driver.run('INSERT INTO users (user_id, alias, metadata, budget_id, allowed_models, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)', [
        user.user_id,
        user.alias,
        json(user.metadata),
        user.budget_id ?? null,
        modelList(user.allowed_models),
        now,
        now,
      ]);
    } catch (error) {
      if (isUniqueViolation(error)) throw conflict(`A user with user_id "${user.user_id}" already exists`, 'user_exists');
      throw error;
    }
    return (await this.get(user.user_id))!;
  }

  async get(userId: string): Promise<UserRecord | null> {
    const rows = await this.#driver.all('SELECT * FROM users WHERE user_id = ?', [userId]);
    return rows[0] ? userOf(rows[0]) : null;
  }

  async list(): Promise<UserRecord[]> {
    return (await this.#driver.all('SELECT * FROM users ORDER BY created_at, user_id')).map(userOf);
  }

  async update(
    userId: string,
    patch: { alias?: string; metadata?: Metadata; budget_id?: string | null; allowed_models?: string[] | null },
    now = Date.now(),
  ): Promise<UserRecord | null> {
    const { sets, params } = assignments({
      alias: patch.alias,
      metadata: patch.metadata === undefined ? undefined : json(patch.metadata),
      budget_id: patch.budget_id,
      allowed_models: patch.allowed_models === undefined ? undefined : modelList(patch.allowed_models),
    });
    await this.#driver.run(`UPDATE users SET ${[...sets, 'updated_at = ?'].join(', ')} WHERE user_id = ?`, [...params, now, userId]);
    return this.get(userId);
  }

  /** Deletes a user and the keys it owns; usage rows stay (they name the user by id). */
  async delete(userId: string): Promise<boolean> {
    const [, users] = await this.#driver.transaction([
      { sql: 'DELETE FROM virtual_keys WHERE user_id = ?', params: [userId] },
      { sql: 'DELETE FROM users WHERE user_id = ?', params: [userId] },
    ]);
    return users > 0;
  }
}

function userOf(row: Row): UserRecord {
  return {
    user_id: String(row.user_id),
    alias: String(row.alias),
    metadata: parseJson(row.metadata),
    budget_id: (row.budget_id as string | null) ?? null,
    allowed_models: modelListOf(row.allowed_models),
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}
