import { keyStatus } from '../auth.ts';
import type { PricedModel } from '../pricing-policy.ts';
import { publicPricing, publicProvider, publicRoute } from '../runtime-config.ts';
import type { BudgetRecord, ConfigChangeRecord, KeyRecord, ProviderRecord, RouteRecord, UsageRecord, UsageTotals, UserRecord } from '../storage/index.ts';
import type { InFlightCall } from '../storage/usage.ts';
import { dollars } from '../money.ts';
import { isoTime, isoTimeOrNull } from '../time.ts';

// How records leave the gateway: ISO times without zone designator, money in US dollars (money.ts).

export function userResource(user: UserRecord) {
  return {
    object: 'user' as const,
    user_id: user.user_id,
    alias: user.alias,
    metadata: user.metadata,
    budget_id: user.budget_id,
    allowed_models: user.allowed_models,
    created_at: isoTime(user.created_at),
    updated_at: isoTime(user.updated_at),
  };
}

export function keyResource(key: KeyRecord, now = Date.now()) {
  return {
    object: 'virtual_key' as const,
    id: key.id,
    key_name: key.key_name,
    key_prefix: key.key_prefix,
    user_id: key.user_id,
    budget_id: key.budget_id,
    created_at: isoTime(key.created_at),
    updated_at: isoTime(key.updated_at),
    expires_at: isoTimeOrNull(key.expires_at),
    is_active: key.is_active,
    status: keyStatus(key, now),
    metadata: key.metadata,
    allowed_models: key.allowed_models,
    allow_user_override: key.allow_user_override,
  };
}

export function budgetResource(budget: BudgetRecord) {
  return {
    object: 'budget' as const,
    budget_id: budget.budget_id,
    name: budget.name,
    max_budget: dollars(budget.max_budget_nanos),
    soft_budget: budget.soft_budget_nanos === null ? null : dollars(budget.soft_budget_nanos),
    soft_budget_exceeded: budget.soft_budget_nanos !== null && budget.spend_nanos >= budget.soft_budget_nanos,
    spend: dollars(budget.spend_nanos),
    reserved: dollars(budget.reserved_nanos),
    remaining: dollars(budget.max_budget_nanos > budget.spend_nanos ? budget.max_budget_nanos - budget.spend_nanos : 0n),
    reset_every_seconds: budget.reset_every_seconds,
    reset_alignment: budget.reset_alignment,
    reset_time_zone: budget.reset_time_zone,
    period_started_at: isoTime(budget.period_started_at),
    next_reset_at: isoTimeOrNull(budget.period_ends_at),
    metadata: budget.metadata,
    created_at: isoTime(budget.created_at),
    updated_at: isoTime(budget.updated_at),
  };
}

export function pricingResource(pricing: PricedModel) {
  return { object: 'model_pricing' as const, ...publicPricing(pricing), source: pricing.source, updated_at: isoTime(pricing.updated_at) };
}

/** A provider as the API shows it: its key only as `api_key_set`. */
export function providerResource(provider: ProviderRecord) {
  return { object: 'provider' as const, ...publicProvider(provider), created_at: isoTime(provider.created_at), updated_at: isoTime(provider.updated_at) };
}

/** A model route as the API shows it: each target's key only as `api_key_set`. */
export function routeResource(route: RouteRecord) {
  return { object: 'model_route' as const, ...publicRoute(route.name, route.definition, route.source), created_at: isoTime(route.created_at), updated_at: isoTime(route.updated_at) };
}

export function configChangeResource(change: ConfigChangeRecord) {
  return {
    object: 'config_change' as const,
    id: change.id,
    created_at: isoTime(change.created_at),
    actor: change.actor,
    client: change.client,
    request_id: change.request_id,
    action: change.action,
    kind: change.kind,
    name: change.name,
    before: change.before,
    after: change.after,
  };
}

export function usageResource(row: UsageRecord) {
  return {
    object: 'usage' as const,
    id: row.id,
    request_id: row.request_id,
    created_at: isoTime(row.created_at),
    user_id: row.user_id,
    key_id: row.key_id,
    endpoint: row.endpoint,
    provider: row.provider,
    model: row.model,
    route: row.route ?? null,
    attempts: row.attempts ?? 1,
    prompt_tokens: row.prompt_tokens,
    completion_tokens: row.completion_tokens,
    total_tokens: row.prompt_tokens + row.completion_tokens,
    search_units: row.search_units,
    cost: dollars(row.cost_nanos),
    overshoot: dollars(row.overshoot_nanos ?? 0n),
    status: row.status,
    status_code: row.status_code,
    duration_ms: row.duration_ms,
    reason: row.reason ?? null,
  };
}

/** A call in flight as GET /v1/usage/in-flight answers it: who, what, since when (its age at `now`). */
export function inFlightResource(call: InFlightCall, now: number) {
  return {
    object: 'in_flight_call' as const,
    id: call.id,
    request_id: call.request_id,
    created_at: isoTime(call.created_at),
    age_ms: Math.max(0, now - call.created_at),
    user_id: call.user_id,
    key_id: call.key_id,
    endpoint: call.endpoint,
    provider: call.provider,
    model: call.model,
    route: call.route ?? null,
    cost: dollars(call.cost_nanos),
    instance_id: call.instance_id,
  };
}

export function usageTotals(totals: UsageTotals) {
  return {
    requests: totals.requests,
    prompt_tokens: totals.prompt_tokens,
    completion_tokens: totals.completion_tokens,
    total_tokens: totals.prompt_tokens + totals.completion_tokens,
    cost: dollars(totals.cost_nanos),
  };
}
