import type { ResetAlignment } from '../budget-periods.ts';

/** What the store keeps, as the store returns it: times in epoch milliseconds, money in nano-dollars (BigInt: see money.ts). */
export type Metadata = Record<string, unknown>;

export interface UserRecord {
  user_id: string;
  alias: string;
  metadata: Metadata;
  budget_id: string | null;
  /** Models this user's calls may use (`provider:model` or `provider:*`); null: every model. */
  allowed_models: string[] | null;
  created_at: number;
  updated_at: number;
}

export interface KeyRecord {
  id: string;
  /** A short display prefix of the secret (`gw-` and four characters); the secret itself is never stored. */
  key_prefix: string;
  key_name: string;
  user_id: string | null;
  budget_id: string | null;
  metadata: Metadata;
  is_active: boolean;
  expires_at: number | null;
  /** Models this key may use (`provider:model` or `provider:*`); null: every model. */
  allowed_models: string[] | null;
  /** Whether a call may name another `user` than the key's owner (passed to the provider as an end-user id). */
  allow_user_override: boolean;
  created_at: number;
  updated_at: number;
}

export interface BudgetRecord {
  budget_id: string;
  /** A label for people (dashboards, listings); not unique, null: none. */
  name: string | null;
  max_budget_nanos: bigint;
  /** Spend at or above which calls are answered with a warning (still admitted); below max_budget; null: none. */
  soft_budget_nanos: bigint | null;
  /** Rolling periods; exclusive with reset_alignment. */
  reset_every_seconds: number | null;
  /** Calendar periods (daily, weekly, monthly) in reset_time_zone; exclusive with reset_every_seconds. */
  reset_alignment: ResetAlignment | null;
  reset_time_zone: string | null;
  period_started_at: number;
  /** When the current period ends and spend starts again from 0; null: never. */
  period_ends_at: number | null;
  spend_nanos: bigint;
  reserved_nanos: bigint;
  metadata: Metadata;
  created_at: number;
  updated_at: number;
}

export interface PricingRecord {
  model: string;
  input_cost_per_million: number;
  output_cost_per_million: number;
  /** Rerank models billed per search unit (Cohere): US dollars per thousand search units; 0 otherwise. */
  search_unit_cost_per_thousand: number;
  /**
   * Written from the configuration file, or through the API; `bundled`: from the table that ships with the gateway
   * (pricing-policy.ts), never stored.
   */
  source?: ConfigSource | 'bundled';
  updated_at: number;
}

/** The prices of a model as configured or PUT: any of them may be left out (0). */
export type PricingPrices = Partial<Pick<PricingRecord, 'input_cost_per_million' | 'output_cost_per_million' | 'search_unit_cost_per_thousand'>>;

export interface UsageRecord {
  id: string;
  request_id: string;
  created_at: number;
  user_id: string | null;
  key_id: string | null;
  endpoint: string;
  /** The target that answered (or failed last). */
  provider: string;
  model: string;
  /** The model route the client called (its public name); null or absent for a provider:model. */
  route?: string | null;
  /** Targets tried (1, or absent, without fallbacks). */
  attempts?: number;
  prompt_tokens: number;
  completion_tokens: number;
  /** Search units the provider billed (rerank; Cohere counts one per query and 100 documents); 0 for other calls. */
  search_units: number;
  cost_nanos: bigint;
  /** What the call cost beyond its budget hold (the provider ignored the output limit), charged all the same; 0n or absent: none. */
  overshoot_nanos?: bigint;
  /**
   * `success`, `error`, `cancelled` (the client went away), `refused` (before any provider: budget, allowed models,
   * rate limit, …), `pending` (written before the provider is called, until the call finishes) or `interrupted` (a
   * pending call whose gateway died, settled by the next one).
   */
  status: UsageStatus;
  status_code: number;
  duration_ms: number;
  /** Why a call was refused or failed: the error code answered (budget_exceeded, upstream_timeout, …); null otherwise. */
  reason?: string | null;
}

export type UsageStatus = 'success' | 'error' | 'cancelled' | 'refused' | 'pending' | 'interrupted';

/** A usage row as a model call writes it: with the budget holds its charge goes to and the instance that made it. */
export interface CallRow extends UsageRecord {
  holds: BudgetHold[];
  /** The gateway instance registration that made the call (PostgreSQL: whose reap interrupts it while pending). */
  instance_id: string | null;
}

/** What a stream has delivered so far, recorded now and then so that an interrupted stream is charged for it. */
export interface CallProgress {
  id: string;
  prompt_tokens: number;
  completion_tokens: number;
  cost_nanos: bigint;
  duration_ms: number;
}

export interface UsageTotals {
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost_nanos: bigint;
}

/** A reservation taken on a budget before a call. */
export interface BudgetHold {
  budget_id: string;
  reserved_nanos: bigint;
  /**
   * PostgreSQL: the registration of the gateway instance whose share of the holds counts it (an instance that was
   * taken for dead registers again under a new id, so calls from before and after the reap are told apart); null on
   * SQLite.
   */
  holder: string | null;
}

/** A hold just taken, with its budget as the hold left it (what soft budget warnings are made of). */
export interface BudgetAdmission {
  hold: BudgetHold;
  /** The budget's spend this period, before this call. */
  spend_nanos: bigint;
  soft_budget_nanos: bigint | null;
  max_budget_nanos: bigint;
}

/** A hold settled with the call's actual cost after the call. */
export interface BudgetSettlement extends BudgetHold {
  actual_nanos: bigint;
}

/** Where a runtime configuration entry (price, provider, model route) was last written from. */
export type ConfigSource = 'config' | 'api';

/** A provider's connection settings (table gateway_providers); `api_key` never leaves the gateway. */
export interface ProviderRecord {
  name: string;
  api_key: string | null;
  api_base: string | null;
  source: ConfigSource;
  created_at: number;
  updated_at: number;
}

/** One target of a model route, as the configuration file and PUT /v1/routes give it. */
export interface RouteTargetDefinition {
  model: string;
  weight?: number;
  priority?: number;
  api_key?: string;
  api_base?: string;
  timeout_seconds?: number;
}

export interface RouteDefinition {
  targets: RouteTargetDefinition[];
  timeout_seconds?: number;
}

/** A model route (table model_routes): a public model name and its targets. */
export interface RouteRecord {
  name: string;
  definition: RouteDefinition;
  source: ConfigSource;
  created_at: number;
  updated_at: number;
}

export type ConfigKind = 'pricing' | 'provider' | 'route';

/** One change of the runtime configuration, as the audit keeps it: `before`/`after` without secrets (null: none). */
export interface ConfigChange {
  kind: ConfigKind;
  name: string;
  action: 'create' | 'update' | 'delete';
  /** Who: `master_key` (an API call) or `config_file` (written at start from the configuration file). */
  actor: string;
  /** The client address of an API call. */
  client: string | null;
  request_id: string | null;
  before: unknown;
  after: unknown;
}

export interface ConfigChangeRecord extends ConfigChange {
  id: string;
  created_at: number;
}
