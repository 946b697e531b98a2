import { PROVIDERS } from '../hub/index.ts';
import { routeProblems } from './config.ts';
import { conflict, invalidRequest } from './errors.ts';
import type { CallLedger } from './ledger.ts';
import type { ModelRouter } from './model-router.ts';
import type {
  ConfigChange,
  ConfigSource,
  GatewayStore,
  PricingPrices,
  PricingRecord,
  ProviderRecord,
  RouteDefinition,
  RouteRecord,
  RouteTargetDefinition,
} from './storage/index.ts';
import type { Statement } from './storage/driver.ts';
import { isUniqueViolation } from './storage/rows.ts';
import type { ProviderSettings, Upstream } from './upstream.ts';

/** How often an instance asks the database whether the runtime configuration changed (one indexed one-row read). */
export const CONFIG_POLL_MS = 250;

/** Who makes a change: `master_key` through the API (with the client's address and request id), `config_file` at start. */
export interface ChangeAuthor {
  actor: 'master_key' | 'config_file';
  client: string | null;
  request_id: string | null;
}

/** A route target as PUT /v1/routes takes it: `api_key_set: true` without `api_key` keeps the stored target's key. */
export type RouteTargetInput = RouteTargetDefinition & { api_key_set?: boolean };
export type RouteInput = { targets: RouteTargetInput[]; timeout_seconds?: number | null };

/** A provider without its secret: what the API answers and the audit keeps. */
export function publicProvider(provider: Pick<ProviderRecord, 'name' | 'api_key' | 'api_base' | 'source'>) {
  return { name: provider.name, api_base: provider.api_base, api_key_set: provider.api_key !== null, source: provider.source };
}

/** A route without its targets' secrets: each target's `api_key` becomes `api_key_set`. */
export function publicRoute(name: string, definition: RouteDefinition, source: ConfigSource) {
  return {
    name,
    targets: definition.targets.map(({ api_key, ...target }) => ({ ...target, api_key_set: api_key !== undefined })),
    timeout_seconds: definition.timeout_seconds ?? null,
    source,
  };
}

/** A model's prices as stored: those left out are 0. */
export function pricingRecord(model: string, prices: PricingPrices, source: ConfigSource, now: number): PricingRecord {
  return {
    model,
    input_cost_per_million: prices.input_cost_per_million ?? 0,
    output_cost_per_million: prices.output_cost_per_million ?? 0,
    search_unit_cost_per_thousand: prices.search_unit_cost_per_thousand ?? 0,
    source,
    updated_at: now,
  };
}

export function publicPricing(pricing: PricingRecord) {
  return {
    model: pricing.model,
    input_cost_per_million: pricing.input_cost_per_million,
    output_cost_per_million: pricing.output_cost_per_million,
    search_unit_cost_per_thousand: pricing.search_unit_cost_per_thousand,
    source: pricing.source ?? 'api',
  };
}

/**
 * Providers, model routes and prices as the database holds them, shared by every instance on it: each change is
 * written with its audit row and a raise of the change counter in one transaction, and every instance polls the
 * counter (every CONFIG_POLL_MS) and reloads its router, its provider clients and its price cache when it moved.
 * The instance that made a change reloads at once. The configuration file seeds the tables (seed-config.ts).
 */
export class RuntimeConfig {
  readonly #store: GatewayStore;
  readonly #router: ModelRouter;
  readonly #upstream: Upstream;
  readonly #ledger: CallLedger;
  #version = -1;
  #queue: Promise<unknown> = Promise.resolve();
  #timer: NodeJS.Timeout | null = null;
  #polling = false;
  #failing = false;
  /** Told when a poll fails (once per run of failures) and when it works again. */
  onPollError: (error: unknown) => void = () => {};
  onPollRecovered: () => void = () => {};

  constructor(parts: { store: GatewayStore; router: ModelRouter; upstream: Upstream; ledger: CallLedger }) {
    this.#store = parts.store;
    this.#router = parts.router;
    this.#upstream = parts.upstream;
    this.#ledger = parts.ledger;
  }

  /** The change counter this instance last loaded. */
  get version(): number {
    return this.#version;
  }

  /** Reloads providers, routes and prices if the counter moved since the last load; true if it reloaded. */
  refresh(): Promise<boolean> {
    const run = this.#queue.then(() => this.#refreshOnce());
    this.#queue = run.catch(() => {});
    return run;
  }

  async #refreshOnce(): Promise<boolean> {
    // The counter first: a change landing between it and the lists is loaded now and again at the next poll.
    const version = await this.#store.audit.version();
    if (version === this.#version) return false;
    const [providers, routes] = await Promise.all([this.#store.providers.list(), this.#store.routes.list()]);
    const settings: Record<string, ProviderSettings> = {};
    for (const provider of providers) {
      settings[provider.name] = { ...(provider.api_key !== null ? { api_key: provider.api_key } : {}), ...(provider.api_base !== null ? { api_base: provider.api_base } : {}) };
    }
    this.#router.load(Object.fromEntries(routes.map((route) => [route.name, route.definition])), settings);
    this.#upstream.reconfigure?.(settings);
    this.#ledger.forgetPricing();
    this.#version = version;
    return true;
  }

  /** Polls the change counter until `stop`. */
  start(pollMs = CONFIG_POLL_MS): void {
    this.#timer ??= setInterval(() => {
      if (this.#polling) return;
      this.#polling = true;
      this.refresh()
        .then(() => {
          if (this.#failing) this.onPollRecovered();
          this.#failing = false;
        })
        .catch((error: unknown) => {
          if (!this.#failing) this.onPollError(error);
          this.#failing = true;
        })
        .finally(() => {
          this.#polling = false;
        });
    }, pollMs).unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** Makes a change (see `commitChange`), then reloads this instance; false when `prepare` found nothing to change. */
  async #change(prepare: () => Promise<PreparedChange | null>, author: ChangeAuthor, now: number): Promise<boolean> {
    if (!(await commitChange(this.#store, prepare, author, now))) return false;
    await this.refresh();
    return true;
  }

  // Prices

  async putPricing(model: string, prices: PricingPrices, author: ChangeAuthor, now = Date.now()): Promise<PricingRecord> {
    const record = pricingRecord(model, prices, 'api', now);
    await this.#change(
      async () => {
        const before = await this.#store.pricing.get(model);
        return {
          writes: [this.#store.pricing.putStatement(record, 'api', now)],
          change: { kind: 'pricing', name: model, action: before ? 'update' : 'create', before: before && publicPricing(before), after: publicPricing(record) },
        };
      },
      author,
      now,
    );
    return (await this.#store.pricing.get(model))!;
  }

  /** False when the model has no price of the gateway's own. */
  deletePricing(model: string, author: ChangeAuthor, now = Date.now()): Promise<boolean> {
    return this.#change(
      async () => {
        const before = await this.#store.pricing.get(model);
        return before && { writes: [this.#store.pricing.deleteStatement(model)], change: { kind: 'pricing', name: model, action: 'delete', before: publicPricing(before), after: null } };
      },
      author,
      now,
    );
  }

  // Providers

  /** Creates or changes a provider: fields left out keep their value (none at creation), null clears one. */
  async putProvider(name: string, patch: { api_key?: string | null; api_base?: string | null }, author: ChangeAuthor, now = Date.now()): Promise<ProviderRecord> {
    if (!Object.hasOwn(PROVIDERS, name)) throw invalidRequest(`Unknown provider "${name}" (known: ${Object.keys(PROVIDERS).join(', ')})`, 'name', 'unknown_provider');
    await this.#change(
      async () => {
        const before = await this.#store.providers.get(name);
        const after = {
          name,
          api_key: patch.api_key === undefined ? (before?.api_key ?? null) : patch.api_key,
          api_base: patch.api_base === undefined ? (before?.api_base ?? null) : patch.api_base,
          source: 'api' as const,
        };
        return {
          writes: [this.#store.providers.putStatement(after, 'api', now)],
          change: { kind: 'provider', name, action: before ? 'update' : 'create', before: before && publicProvider(before), after: publicProvider(after) },
        };
      },
      author,
      now,
    );
    return (await this.#store.providers.get(name))!;
  }

  /** Refused (409 provider_in_use) while a route sends calls to it with its settings. False when there is no such provider. */
  deleteProvider(name: string, author: ChangeAuthor, now = Date.now()): Promise<boolean> {
    return this.#change(
      async () => {
        const before = await this.#store.providers.get(name);
        if (!before) return null;
        const users = (await this.#store.routes.list()).filter((route) => route.definition.targets.some((target) => providerOf(target) === name && !ownSettings(target)));
        if (users.length > 0) {
          throw conflict(`Provider "${name}" is used by the model route(s) ${users.map((route) => `"${route.name}"`).join(', ')}; change or delete them first`, 'provider_in_use');
        }
        return { writes: [this.#store.providers.deleteStatement(name)], change: { kind: 'provider', name, action: 'delete', before: publicProvider(before), after: null } };
      },
      author,
      now,
    );
  }

  // Model routes

  /** Creates or replaces a route, checked as the configuration file's routes are (400 naming the field). */
  async putRoute(name: string, input: RouteInput, author: ChangeAuthor, now = Date.now()): Promise<RouteRecord> {
    await this.#change(
      async () => {
        const before = await this.#store.routes.get(name);
        const definition: RouteDefinition = {
          targets: input.targets.map((target, i) => keepKey(target, i, before)),
          ...(input.timeout_seconds !== undefined && input.timeout_seconds !== null ? { timeout_seconds: input.timeout_seconds } : {}),
        };
        const providers = new Set((await this.#store.providers.list()).map((provider) => provider.name));
        const problem = routeProblems(name, definition, providers)[0];
        if (problem) throw invalidRequest(`${problem.path || 'name'}: ${problem.message}`, problem.path || 'name', problem.code);
        return {
          writes: [this.#store.routes.putStatement(name, definition, 'api', now)],
          change: {
            kind: 'route',
            name,
            action: before ? 'update' : 'create',
            before: before && publicRoute(name, before.definition, before.source),
            after: publicRoute(name, definition, 'api'),
          },
        };
      },
      author,
      now,
    );
    return (await this.#store.routes.get(name))!;
  }

  deleteRoute(name: string, author: ChangeAuthor, now = Date.now()): Promise<boolean> {
    return this.#change(
      async () => {
        const before = await this.#store.routes.get(name);
        return before && { writes: [this.#store.routes.deleteStatement(name)], change: { kind: 'route', name, action: 'delete', before: publicRoute(name, before.definition, before.source), after: null } };
      },
      author,
      now,
    );
  }
}

/** What one change writes, and how the audit describes it (without its author). */
export interface PreparedChange {
  writes: Statement[];
  change: Omit<ConfigChange, keyof ChangeAuthor>;
}

/**
 * Attempts of a change whose reads another change overtook, before it is refused (409 concurrent_change): each round
 * of competing changes lets at least one through, so this many edits at once all land.
 */
const CHANGE_ATTEMPTS = 32;

/**
 * Reads what a change needs (`prepare`: null when there is nothing to change) and writes it with its audit row in one
 * transaction that holds only if no other change landed since the reads (ConfigAudit.changeTransaction); otherwise
 * reads and tries again. So `before` in the audit is what the change replaced, and a provider PUT that keeps a field
 * keeps its latest value, even with edits on several instances at once. False when there was nothing to change.
 */
export async function commitChange(store: GatewayStore, prepare: () => Promise<PreparedChange | null>, author: ChangeAuthor, now: number): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    const seen = await store.audit.version();
    const prepared = await prepare();
    if (!prepared) return false;
    try {
      await store.driver.transaction(store.audit.changeTransaction(prepared.writes, { ...prepared.change, ...author }, seen, now));
      return true;
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      if (attempt === CHANGE_ATTEMPTS) throw conflict('The configuration kept changing while this change was being made; send it again', 'concurrent_change');
      // a little apart, so that the competitors of this round do not meet again in the next
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt));
    }
  }
}

/** A target's stored form: `api_key_set: true` without `api_key` takes the key of the stored target with the same model and address. */
function keepKey(target: RouteTargetInput, i: number, before: RouteRecord | null): RouteTargetDefinition {
  const { api_key_set: keep, ...definition } = target;
  if (!keep || definition.api_key !== undefined) return definition;
  const stored = before?.definition.targets.find((old) => old.model === definition.model && old.api_base === definition.api_base && old.api_key !== undefined);
  if (!stored) {
    throw invalidRequest(
      `targets.${i}.api_key_set: the route has no stored target ${definition.model}${definition.api_base ? ` at ${definition.api_base}` : ''} with a key to keep; give api_key`,
      `targets.${i}.api_key_set`,
    );
  }
  return { ...definition, api_key: stored.api_key };
}

function providerOf(target: RouteTargetDefinition): string {
  return target.model.slice(0, target.model.indexOf(':'));
}

function ownSettings(target: RouteTargetDefinition): boolean {
  return target.api_key !== undefined || target.api_base !== undefined;
}
