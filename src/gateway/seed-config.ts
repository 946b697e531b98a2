import { createHash } from 'node:crypto';
import type { GatewayConfig } from './config.ts';
import { commitChange, pricingRecord, publicPricing, publicProvider, publicRoute, type ChangeAuthor } from './runtime-config.ts';
import type { ConfigKind, GatewayStore } from './storage/index.ts';
import type { Statement } from './storage/driver.ts';

const FILE: ChangeAuthor = { actor: 'config_file', client: null, request_id: null };

/** How one kind of entry goes from the file to its table. */
interface Kind {
  kind: ConfigKind;
  /** The file's entries by name. */
  entries: Record<string, unknown>;
  /** The entry's row as stored now, as the audit shows it (null: none) and whether the file wrote it last. */
  current(name: string): Promise<{ view: unknown; fromFile: boolean } | null>;
  put(name: string, value: unknown, now: number): { statement: Statement; view: unknown };
  remove(name: string): Statement;
}

/**
 * Writes the configuration file's providers, prices and model routes into the database (marked `source: config`),
 * entry by entry, where the file's text of an entry differs from what it was when the gateway last wrote it: an entry
 * the file did not change keeps what the API made of it (an edit, a deletion) across restarts; an entry the file
 * changed is the file's again. An entry the file no longer has is deleted unless the API edited it since. Each write
 * is audited (actor `config_file`). Runs under the migration lock, so instances starting together write once.
 * The number of entries written or deleted.
 */
export async function seedRuntimeConfig(store: GatewayStore, config: Pick<GatewayConfig, 'providers' | 'pricing' | 'models'>, now = Date.now()): Promise<number> {
  const kinds: Kind[] = [
    {
      kind: 'provider',
      entries: config.providers,
      async current(name) {
        const row = await store.providers.get(name);
        return row && { view: publicProvider(row), fromFile: row.source === 'config' };
      },
      put(name, value, at) {
        const settings = value as GatewayConfig['providers'][string];
        const provider = { name, api_key: settings.api_key ?? null, api_base: settings.api_base ?? null, source: 'config' as const };
        return { statement: store.providers.putStatement(provider, 'config', at), view: publicProvider(provider) };
      },
      remove: (name) => store.providers.deleteStatement(name),
    },
    {
      kind: 'pricing',
      entries: config.pricing,
      async current(name) {
        const row = await store.pricing.get(name);
        return row && { view: publicPricing(row), fromFile: row.source === 'config' };
      },
      put(name, value, at) {
        const record = pricingRecord(name, value as GatewayConfig['pricing'][string], 'config', at);
        return { statement: store.pricing.putStatement(record, 'config', at), view: publicPricing(record) };
      },
      remove: (name) => store.pricing.deleteStatement(name),
    },
    {
      kind: 'route',
      entries: config.models,
      async current(name) {
        const row = await store.routes.get(name);
        return row && { view: publicRoute(name, row.definition, row.source), fromFile: row.source === 'config' };
      },
      put(name, value, at) {
        const definition = value as GatewayConfig['models'][string];
        return { statement: store.routes.putStatement(name, definition, 'config', at), view: publicRoute(name, definition, 'config') };
      },
      remove: (name) => store.routes.deleteStatement(name),
    },
  ];
  return store.driver.withMigrationLock(async () => {
    const seeds = await store.seeds.all();
    let changes = 0;
    for (const kind of kinds) {
      const seeded = seeds.get(kind.kind) ?? new Map<string, string>();
      // Providers before the routes that use them; the file's order kept in created_at (routes list in it).
      let order = 0;
      for (const [name, value] of Object.entries(kind.entries)) {
        const digest = digestOf(value);
        const at = now + ++order;
        if (seeded.get(name) === digest) continue;
        await commitChange(
          store,
          async () => {
            const before = await kind.current(name);
            const { statement, view } = kind.put(name, value, at);
            return { writes: [statement, store.seeds.setStatement(kind.kind, name, digest)], change: { kind: kind.kind, name, action: before ? 'update' : 'create', before: before?.view ?? null, after: view } };
          },
          FILE,
          now,
        );
        changes++;
      }
      for (const name of seeded.keys()) {
        if (Object.hasOwn(kind.entries, name)) continue;
        const deleted = await commitChange(
          store,
          async () => {
            const before = await kind.current(name);
            return before?.fromFile ? { writes: [kind.remove(name), store.seeds.forgetStatement(kind.kind, name)], change: { kind: kind.kind, name, action: 'delete', before: before.view, after: null } } : null;
          },
          FILE,
          now,
        );
        if (deleted) changes++;
        // An entry the API changed since stays; the file no longer speaks for it.
        else await store.driver.transaction([store.seeds.forgetStatement(kind.kind, name)]);
      }
    }
    return changes;
  });
}

/** SHA-256 of an entry's JSON with its keys sorted: the same entry written in another order is the same entry. */
function digestOf(value: unknown): string {
  const sorted = (item: unknown): unknown =>
    Array.isArray(item)
      ? item.map(sorted)
      : item !== null && typeof item === 'object'
        ? Object.fromEntries(Object.entries(item).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([key, inner]) => [key, sorted(inner)]))
        : item;
  return createHash('sha256').update(JSON.stringify(sorted(value))).digest('hex');
}
