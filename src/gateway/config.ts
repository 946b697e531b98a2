import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { PROVIDERS } from '../hub/index.ts';
import type { PricingRequirement } from './pricing-policy.ts';
import type { RateLimits } from './rate-limit.ts';
import { GatewayConfigError } from './errors.ts';
import { DEFAULT_DATABASE_URL, type PricingPrices } from './storage/index.ts';

/** Shortest master key accepted without a warning. */
export const MIN_MASTER_KEY_LENGTH = 32;

const ProviderSettings = z.strictObject({
  api_key: z.string().optional(),
  api_base: z.string().url().optional(),
});

const Pricing = z
  .strictObject({
    // Same bounds as PUT /v1/pricing: above $1 per token (or search unit) is a typo, and costs must stay within BIGINT.
    input_cost_per_million: z.number().nonnegative().max(1e6).optional(),
    output_cost_per_million: z.number().nonnegative().max(1e6).optional(),
    /** Rerank models billed per search unit (Cohere): dollars per thousand search units. */
    search_unit_cost_per_thousand: z.number().nonnegative().max(1000).optional(),
  })
  .refine((price) => Object.keys(price).length > 0, 'give input_cost_per_million, output_cost_per_million or search_unit_cost_per_thousand (those left out are 0)');

const RateLimits = z
  .strictObject({
    /** Per virtual key (or per named user with the master key) and minute; shared by all instances on PostgreSQL. */
    requests_per_minute: z.number().int().positive().optional(),
    /** Prompt and completion tokens of finished calls, counted like requests; a call starts while the minute has some left. */
    tokens_per_minute: z.number().int().positive().optional(),
  })
  .refine((limits) => limits.requests_per_minute !== undefined || limits.tokens_per_minute !== undefined, 'give requests_per_minute, tokens_per_minute or both');

const PROVIDER_MODEL = /^[^:\s]+:.+$/;

/** A target of a model route; a bare `provider:model` string is short for `{model: "provider:model"}`. */
const RouteTarget = z.preprocess(
  (value) => (typeof value === 'string' ? { model: value } : value),
  z.strictObject({
    model: z.string().regex(PROVIDER_MODEL, 'a target is provider:model'),
    /** Share of the calls among the targets of equal priority (default 1). */
    weight: z.number().int().positive().max(1_000_000).optional(),
    /** Lower is tried first; targets of equal priority share the load by weight. Given on all targets of a route or none. */
    priority: z.number().int().min(0).max(1_000_000).optional(),
    /** This target's own credentials and address, instead of the provider's under `providers`. */
    api_key: z.string().optional(),
    api_base: z.string().url().optional(),
    /** How long one attempt on this target may wait for the answer (a stream: for each event), in seconds. */
    timeout_seconds: z.number().positive().optional(),
  }),
);

/** A model route; a bare list is short for `{targets: [...]}`. */
const ModelRoute = z.preprocess(
  (value) => (Array.isArray(value) ? { targets: value } : value),
  z.strictObject({
    targets: z.array(RouteTarget).min(1).max(32),
    /** The default of its targets' timeout_seconds. */
    timeout_seconds: z.number().positive().optional(),
  }),
);

const ConfigFile = z.strictObject({
  master_key: z.string().min(1).optional(),
  database_url: z.string().min(1).optional(),
  host: z.string().min(1).optional(),
  port: z.number().int().min(0).max(65535).optional(),
  providers: z.record(z.string(), ProviderSettings).optional(),
  pricing: z.record(z.string().regex(PROVIDER_MODEL, 'pricing keys are provider:model'), Pricing).optional(),
  /**
   * Refuse (402 pricing_missing) a call to a model without a price: true (the default) or false for every model, or
   * per `provider:model`, `provider:*` and `*` (the most specific entry decides; unnamed models: true).
   */
  require_pricing: z
    .union([z.boolean(), z.record(z.string().regex(/^(\*|[^:\s]+:.+)$/), z.boolean())], {
      error: 'require_pricing is true, false, or a map from provider:model, provider:* or * to true or false',
    })
    .optional(),
  /** Prices of well-known models bundled with the gateway (src/gateway/pricing-table.ts), below `pricing`. Default true. */
  bundled_pricing: z.boolean().optional(),
  /** Public model names, each an ordered list of provider:model targets tried in turn (see docs/gateway.md, Model routes). */
  models: z.record(z.string(), ModelRoute).optional(),
  rate_limits: RateLimits.optional(),
  /**
   * Output tokens reserved for a call that sets no max_tokens; a call that holds a budget is sent them as its limit.
   */
  reserve_output_tokens: z.number().int().positive().optional(),
  /** Timeout for one upstream call, in seconds. */
  upstream_timeout_seconds: z.number().positive().optional(),
  /** PostgreSQL: an instance silent for this long is taken for dead and its budget holds are given back. */
  instance_lease_seconds: z.number().positive().optional(),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).optional(),
  /** Web origins whose pages may call the API from a browser (CORS); "*" for any. Empty or absent: none. */
  cors_allow_origins: z
    .array(
      z.string().refine((origin) => origin === '*' || (originOf(origin) === origin && !origin.includes('*')), {
        message: 'an origin is "*" or scheme://host[:port] with nothing after it and no pattern, e.g. https://app.example.com',
      }),
    )
    .max(256)
    .optional(),
});
export type GatewayConfigFile = z.infer<typeof ConfigFile>;

/** One model route as validated: `{targets: [{model, weight?, priority?, api_key?, api_base?, timeout_seconds?}], timeout_seconds?}`. */
export type ModelRouteConfig = z.infer<typeof ModelRoute>;

export interface GatewayConfig {
  masterKey: string;
  databaseUrl: string;
  host: string;
  port: number;
  providers: Record<string, { api_key?: string; api_base?: string }>;
  pricing: Record<string, PricingPrices>;
  /** Which models must have a price to be called (see PricingPolicy). */
  requirePricing: PricingRequirement;
  /** Whether the bundled price table applies where the gateway's own has no entry. */
  bundledPricing: boolean;
  /** Model routes by public name (the `models:` section). */
  models: Record<string, ModelRouteConfig>;
  rateLimits: RateLimits | null;
  reserveOutputTokens: number;
  upstreamTimeoutSeconds: number;
  instanceLeaseSeconds: number;
  /** Origins allowed to call from a browser (CORS); empty: CORS off. */
  corsAllowOrigins: string[];
  logLevel: string;
  /** Things the operator should know at start (a short master key). */
  warnings: string[];
}

export interface ConfigOverrides {
  config?: string;
  host?: string;
  port?: number;
  databaseUrl?: string;
  masterKey?: string;
}

const ENV_REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/**
 * `${NAME}` in any string of the file becomes the environment variable's value; `${NAME:-default}` falls back to
 * the default. An unset variable without a default is an error naming it and where it is used. Substitution
 * happens on parsed values, so a value cannot inject YAML.
 */
export function substituteEnv(value: unknown, env: NodeJS.ProcessEnv, at = ''): unknown {
  if (typeof value === 'string') {
    return value.replace(ENV_REFERENCE, (_match, name: string, fallback: string | undefined) => {
      const found = env[name];
      if (found !== undefined) return found;
      if (fallback !== undefined) return fallback;
      throw new GatewayConfigError(`environment variable ${name} is not set (used by ${at || 'the configuration'})`);
    });
  }
  if (Array.isArray(value)) return value.map((item, i) => substituteEnv(item, env, `${at}[${i}]`));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, substituteEnv(item, env, at ? `${at}.${key}` : key)]));
  }
  return value;
}

export function parseConfigText(text: string, source: string, env: NodeJS.ProcessEnv = process.env): GatewayConfigFile {
  let raw: unknown;
  try {
    raw = parseYaml(text) ?? {};
  } catch (error) {
    throw new GatewayConfigError(`${source}: not valid YAML: ${(error as Error).message}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new GatewayConfigError(`${source}: expected a mapping at the top level`);
  const substituted = substituteEnv(raw, env);
  const parsed = ConfigFile.safeParse(substituted);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(top level)'}: ${issue.message}`);
    throw new GatewayConfigError(`${source}: ${problems.join('; ')}`);
  }
  const problems = routeProblems(parsed.data);
  if (problems.length > 0) throw new GatewayConfigError(`${source}: ${problems.join('; ')}`);
  return parsed.data;
}

/** `scheme://host[:port]` of an http(s) address, as browsers send it in Origin; null for anything else. */
function originOf(text: string): string | null {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : null;
  } catch {
    return null;
  }
}

/** The configuration of `gateway serve` and `migrate`: flags over environment over file over defaults. */
export function loadGatewayConfig(overrides: ConfigOverrides, env: NodeJS.ProcessEnv = process.env, options: { requireMasterKey?: boolean } = {}): GatewayConfig {
  let file: GatewayConfigFile = {};
  if (overrides.config) {
    let text: string;
    try {
      text = readFileSync(overrides.config, 'utf8');
    } catch (error) {
      throw new GatewayConfigError(`cannot read ${overrides.config}: ${(error as Error).message}`);
    }
    file = parseConfigText(text, overrides.config, env);
  }
  const masterKey = overrides.masterKey ?? nonEmpty(env.GATEWAY_MASTER_KEY) ?? file.master_key ?? '';
  const warnings: string[] = [];
  if (options.requireMasterKey !== false) {
    if (!masterKey) {
      throw new GatewayConfigError(
        'no master key: set GATEWAY_MASTER_KEY, master_key in the configuration file, or --master-key. ' +
          'Make one with `encoder gateway keygen` (32 random bytes, URL-safe).',
      );
    }
    if (masterKey.length < MIN_MASTER_KEY_LENGTH) {
      warnings.push(`the master key is ${masterKey.length} characters long; at least ${MIN_MASTER_KEY_LENGTH} are recommended (make one with \`encoder gateway keygen\`)`);
    }
  }
  return {
    masterKey,
    databaseUrl: overrides.databaseUrl ?? nonEmpty(env.GATEWAY_DATABASE_URL) ?? file.database_url ?? DEFAULT_DATABASE_URL,
    host: overrides.host ?? file.host ?? '0.0.0.0',
    port: overrides.port ?? file.port ?? 8000,
    providers: file.providers ?? {},
    pricing: file.pricing ?? {},
    requirePricing: file.require_pricing ?? true,
    bundledPricing: file.bundled_pricing ?? true,
    models: file.models ?? {},
    rateLimits: file.rate_limits ?? null,
    reserveOutputTokens: file.reserve_output_tokens ?? 1024,
    upstreamTimeoutSeconds: file.upstream_timeout_seconds ?? 600,
    instanceLeaseSeconds: file.instance_lease_seconds ?? 30,
    corsAllowOrigins: file.cors_allow_origins ?? [],
    logLevel: file.log_level ?? 'info',
    warnings,
  };
}

/**
 * What the schema cannot say about routes: a target's provider must be configured under `providers` or the target
 * must bring its own `api_key`/`api_base` for a provider Hub knows; `priority` goes on every target or none; a
 * `weight` needs priorities (it shares load among targets of equal priority).
 */
function routeProblems(file: GatewayConfigFile): string[] {
  const problems: string[] = [];
  const configured = new Set(Object.keys(file.providers ?? {}));
  for (const [name, route] of Object.entries(file.models ?? {})) {
    if (!/^\S{1,256}$/.test(name) || name.includes('\u0000')) problems.push(`models.${name}: a model name is 1 to 256 characters without white space or NUL`);
    const withPriority = route.targets.filter((target) => target.priority !== undefined).length;
    if (withPriority !== 0 && withPriority !== route.targets.length) problems.push(`models.${name}: give priority to every target or to none`);
    route.targets.forEach((target, i) => {
      const at = `models.${name}.targets.${i}`;
      const provider = target.model.slice(0, target.model.indexOf(':'));
      if (!configured.has(provider)) {
        if (target.api_key === undefined && target.api_base === undefined) {
          problems.push(`${at}: provider "${provider}" is not configured under providers (configure it, or give the target its own api_key or api_base)`);
        } else if (!Object.hasOwn(PROVIDERS, provider)) {
          problems.push(`${at}: unknown provider "${provider}" (known: ${Object.keys(PROVIDERS).join(', ')})`);
        }
      }
      if (target.weight !== undefined && withPriority === 0) {
        problems.push(`${at}: weight shares the calls among targets of equal priority; give the route's targets a priority`);
      }
    });
  }
  return problems;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
