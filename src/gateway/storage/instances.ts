import type { SqlDriver } from './driver.ts';
import { newId } from './rows.ts';
import { INTERRUPTED_ROWS } from './usage.ts';

/**
 * This process's row in gateway_instances (PostgreSQL), which its budget holds name. The store owns it and hands it
 * to the budgets (a hold needs a registered instance) and to the instances (the heartbeat registers).
 */
export class InstanceRegistration {
  readonly #driver: SqlDriver;
  #id = newId('instance');
  /** How often this store registered its instance; a registration after the first takes a new id. */
  #count = 0;
  #registering: Promise<void> | null = null;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
  }

  /** New after the instance was taken for dead. */
  get id(): string {
    return this.#id;
  }

  get count(): number {
    return this.#count;
  }

  /** Registers this instance (again), unless that happened since the caller saw `seen` registrations. */
  register(seen: number, now: number): Promise<void> {
    if (this.#count !== seen) return Promise.resolve();
    this.#registering ??= (async () => {
      // A new id after a reap: holds of calls from before it were given back already and must not be given back
      // again from the holds taken after it.
      const id = this.#count === 0 ? this.#id : newId('instance');
      await this.#driver.run('INSERT INTO gateway_instances (instance_id, started_at, heartbeat_at) VALUES (?, ?, ?)', [id, now, now]);
      this.#id = id;
      this.#count++;
    })().finally(() => {
      this.#registering = null;
    });
    return this.#registering;
  }
}

/**
 * The gateway instances sharing one PostgreSQL (table gateway_instances): heartbeats, and the holds of dead ones
 * given back. On SQLite (one gateway per file) every method does nothing.
 */
export class Instances {
  readonly #driver: SqlDriver;
  readonly #shared: boolean;
  readonly #registration: InstanceRegistration;

  constructor(driver: SqlDriver, shared: boolean, registration: InstanceRegistration) {
    this.#driver = driver;
    this.#shared = shared;
    this.#registration = registration;
  }

  /**
   * Announces this instance (PostgreSQL) and refreshes its heartbeat; call it every few seconds. True when the
   * instance had been taken for dead (it registered again under a new id).
   */
  async heartbeat(now = Date.now()): Promise<boolean> {
    if (!this.#shared) return false;
    const seen = this.#registration.count;
    if (seen > 0 && (await this.#driver.runRelaxed('UPDATE gateway_instances SET heartbeat_at = ? WHERE instance_id = ?', [now, this.#registration.id])) > 0) {
      return false;
    }
    await this.#registration.register(seen, now);
    return seen > 0;
  }

  /**
   * Gives back the holds of instances whose heartbeat is older than `staleBefore` (they died without settling)
   * and forgets them; the budgets they held become usable again. The number of instances reaped.
   */
  async reapDead(staleBefore: number): Promise<number> {
    if (!this.#shared) return 0;
    const dead = await this.#driver.all('SELECT instance_id FROM gateway_instances WHERE heartbeat_at < ? ORDER BY instance_id', [staleBefore]);
    let reaped = 0;
    for (const row of dead) reaped += await this.#giveBackAll(String(row.instance_id), staleBefore);
    return reaped;
  }

  /** A clean stop: this instance's remaining holds (none once every call settled) are given back, and it leaves. */
  async leave(): Promise<void> {
    if (!this.#shared) return;
    await this.#giveBackAll(this.#registration.id, null);
  }

  /**
   * Gives back all holds of one instance, settles its pending calls and removes it (if its heartbeat is still older
   * than `staleBefore`, when given); 1 if it did. One transaction per instance, locking the instance row, then its
   * pending calls (in id order, before any budget, as gateway_complete_calls locks them), then the rows of the
   * budgets it holds or its pending calls charge (in budget_id order), then reading its shares: a reservation needs the instance row only
   * when it holds a budget it held nothing on (the foreign key), a budget this transaction does not wait for, so the
   * two cannot deadlock. Two reapers queue on the instance row; the second finds it gone.
   *
   * A pending call of a dead instance never finishes: it gets its usage row, `interrupted`, charged what it was last
   * recorded at (its hold, or what its stream had delivered) on each budget it held. If the instance was only paused
   * and finishes the call after all, gateway_complete_calls corrects the row and charges just the difference.
   */
  async #giveBackAll(instanceId: string, staleBefore: number | null): Promise<number> {
    const stale = staleBefore === null ? '' : ' AND heartbeat_at < ?';
    const which = staleBefore === null ? [instanceId] : [instanceId, staleBefore];
    const [reaped] = await this.#driver.transaction([
      { sql: `SELECT instance_id FROM gateway_instances WHERE instance_id = ?${stale} FOR UPDATE`, params: which },
      {
        sql: `SELECT id FROM pending_calls WHERE instance_id = ? AND EXISTS (SELECT 1 FROM gateway_instances WHERE instance_id = ?${stale}) ORDER BY id FOR UPDATE`,
        params: [instanceId, ...which],
      },
      {
        sql: `SELECT budget_id FROM budgets WHERE budget_id IN (
                SELECT r.budget_id FROM budget_reservations r JOIN gateway_instances i USING (instance_id) WHERE i.instance_id = ?${stale}
                UNION SELECT hs.budget_id FROM pending_calls p, json_to_recordset(CAST(p.holds AS json)) AS hs (budget_id TEXT)
                  WHERE p.instance_id = ? AND p.holds IS NOT NULL AND EXISTS (SELECT 1 FROM gateway_instances WHERE instance_id = ?${stale}))
              ORDER BY budget_id FOR NO KEY UPDATE`,
        params: [...which, instanceId, ...which],
      },
      {
        sql: `WITH gone AS (DELETE FROM gateway_instances WHERE instance_id = ?${stale} RETURNING instance_id),
              freed AS (DELETE FROM budget_reservations r USING gone WHERE r.instance_id = gone.instance_id RETURNING r.budget_id, r.reserved_nanos),
              cut AS (DELETE FROM pending_calls p USING gone WHERE p.instance_id = gone.instance_id RETURNING p.*),
              written AS (${INTERRUPTED_ROWS('cut')}),
              charged AS (SELECT hs.budget_id, cut.cost_nanos FROM cut, json_to_recordset(CAST(COALESCE(cut.holds, '[]') AS json)) AS hs (budget_id TEXT)),
              deltas AS (SELECT budget_id, SUM(freed) AS freed, SUM(charge) AS charge FROM (
                           SELECT budget_id, reserved_nanos AS freed, 0 AS charge FROM freed
                           UNION ALL SELECT budget_id, 0, cost_nanos FROM charged) AS d GROUP BY budget_id),
              given AS (UPDATE budgets b SET reserved_nanos = b.reserved_nanos - d.freed, spend_nanos = b.spend_nanos + d.charge
                        FROM deltas d WHERE b.budget_id = d.budget_id RETURNING 1)
              SELECT (SELECT COUNT(*) FROM gone) AS gone, (SELECT COUNT(*) FROM given) AS given, (SELECT COUNT(*) FROM cut) AS cut`,
        params: [...which, 'instance_reaped'],
      },
    ]);
    return reaped;
  }
}
