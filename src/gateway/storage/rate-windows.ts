import type { SqlDriver } from './driver.ts';

/** Rate limit windows shared by the instances on one database (table rate_limit_windows; src/gateway/rate-limit.ts). */
export class RateWindows {
  readonly #driver: SqlDriver;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
  }

  /**
   * Counts one call in a subject's window while the window holds fewer than `limits.requests` calls and fewer than
   * `limits.tokens` tokens: `counted` says whether it was, `requests` and `tokens` what the window holds after it
   * (for the X-RateLimit headers). One statement when counted: the upsert's WHERE leaves a full window unchanged, and
   * RETURNING says whether the row was written; a refused call reads the full window in a second one.
   */
  async count(subject: string, windowStart: number, limits: { requests: number; tokens: number }): Promise<{ counted: boolean; requests: number; tokens: number }> {
    const rows = await this.#driver.all(
      `INSERT INTO rate_limit_windows (subject, window_start, requests, tokens) VALUES (?, ?, 1, 0)
       ON CONFLICT (subject, window_start) DO UPDATE SET requests = rate_limit_windows.requests + 1
       WHERE rate_limit_windows.requests < ? AND rate_limit_windows.tokens < ?
       RETURNING requests, tokens`,
      [subject, windowStart, limits.requests, limits.tokens],
    );
    if (rows.length > 0) return { counted: true, requests: Number(rows[0].requests), tokens: Number(rows[0].tokens) };
    const [full] = await this.#driver.all('SELECT requests, tokens FROM rate_limit_windows WHERE subject = ? AND window_start = ?', [subject, windowStart]);
    return { counted: false, requests: Number(full?.requests ?? limits.requests), tokens: Number(full?.tokens ?? limits.tokens) };
  }

  /** Adds a finished call's tokens to the window it was counted in. */
  async addTokens(subject: string, windowStart: number, tokens: number): Promise<void> {
    await this.#driver.run('UPDATE rate_limit_windows SET tokens = tokens + ? WHERE subject = ? AND window_start = ?', [tokens, subject, windowStart]);
  }

  async forget(before: number): Promise<void> {
    await this.#driver.run('DELETE FROM rate_limit_windows WHERE window_start < ?', [before]);
  }
}
