import { ConfigAudit } from './audit.ts';
import { Budgets } from './budgets.ts';
import { ConfigSeeds } from './config-seeds.ts';
import type { SqlDriver } from './driver.ts';
import { InstanceRegistration, Instances } from './instances.ts';
import { VirtualKeys } from './keys.ts';
import { MIGRATIONS, SCHEMA_MIGRATIONS_TABLE } from './migrations.ts';
import { Pricing } from './pricing.ts';
import { Providers } from './providers.ts';
import { RateWindows } from './rate-windows.ts';
import { Routes } from './routes.ts';
import { UsageLog } from './usage.ts';
import { Users } from './users.ts';

/**
 * The gateway's state in SQL, the same statements on SQLite and PostgreSQL: one aggregate per table group over one
 * driver. Budget reservations are single conditional UPDATEs, so concurrent requests (in one process or in several on
 * one PostgreSQL) cannot all pass the check on the same headroom.
 *
 * On PostgreSQL, where several instances share the budgets, each instance also keeps the sum of its own holds per
 * budget in budget_reservations (in the same statement as the hold) and a heartbeat in gateway_instances, so that
 * the holds of an instance that died (SIGKILL, lost machine) can be given back by the others (`instances.reapDead`).
 * A hold's row must name a registered instance (a foreign key): an instance that was taken for dead registers again,
 * under a new id, before it holds anything more. Whatever changes a budget's `reserved` and an instance's share of it
 * locks the budget row first (rows in budget_id order), and reads the shares only after that lock, so a reap and a
 * settlement of the same hold cannot both give it back. SQLite has one gateway per file, which clears all holds at
 * start instead.
 */
export class GatewayStore {
  readonly driver: SqlDriver;
  readonly #registration: InstanceRegistration;
  readonly users: Users;
  readonly keys: VirtualKeys;
  readonly budgets: Budgets;
  readonly instances: Instances;
  readonly pricing: Pricing;
  readonly providers: Providers;
  readonly routes: Routes;
  readonly audit: ConfigAudit;
  readonly seeds: ConfigSeeds;
  readonly usage: UsageLog;
  readonly rateWindows: RateWindows;

  constructor(driver: SqlDriver) {
    this.driver = driver;
    // Several instances share the budgets only on PostgreSQL.
    const shared = driver.dialect === 'postgres';
    this.#registration = new InstanceRegistration(driver);
    this.users = new Users(driver);
    this.keys = new VirtualKeys(driver);
    this.budgets = new Budgets(driver, shared, this.#registration);
    this.instances = new Instances(driver, shared, this.#registration);
    this.pricing = new Pricing(driver);
    this.providers = new Providers(driver);
    this.routes = new Routes(driver);
    this.audit = new ConfigAudit(driver);
    this.seeds = new ConfigSeeds(driver);
    this.usage = new UsageLog(driver, this.budgets);
    this.rateWindows = new RateWindows(driver);
  }

  /** This process's identity in gateway_instances (PostgreSQL); new after the instance was taken for dead. */
  get instanceId(): string {
    return this.#registration.id;
  }

  get dialect(): 'sqlite' | 'postgres' {
    return this.driver.dialect;
  }

  /** Applies the migrations this database lacks (up to version `through`: tests make older schemas); the versions applied now. */
  async migrate(now = Date.now(), through = Infinity): Promise<number[]> {
    return this.driver.withMigrationLock(async () => {
      await this.driver.run(SCHEMA_MIGRATIONS_TABLE);
      const applied = new Set((await this.driver.all('SELECT version FROM schema_migrations')).map((row) => Number(row.version)));
      const done: number[] = [];
      for (const migration of MIGRATIONS) {
        if (applied.has(migration.version) || migration.version > through) continue;
        const statements = [
          ...(migration.onlyOn === undefined || migration.onlyOn === this.dialect ? migration.statements : []),
          ...(this.dialect === 'postgres' ? (migration.postgresStatements ?? []) : []),
        ];
        await this.driver.transaction([
          ...statements.map((sql) => ({ sql, params: [] })),
          { sql: 'INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', params: [migration.version, migration.name, now] },
        ]);
        done.push(migration.version);
      }
      return done;
    });
  }

  async schemaVersion(): Promise<number> {
    const rows = await this.driver.all('SELECT MAX(version) AS version FROM schema_migrations');
    return Number(rows[0]?.version ?? 0);
  }

  async ping(): Promise<void> {
    await this.driver.all('SELECT 1 AS ok');
  }

  close(): Promise<void> {
    return this.driver.close();
  }
}
