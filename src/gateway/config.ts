import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { PROVIDERS } from '../hub/index.ts';
import type { PricingRequirement } from './pricing-policy.ts';
import type { RateLimits } from './rate-limit.ts';
import { GatewayConfigError } from './errors.ts';
import { defaultFrontDoor, type FrontDoorSettings } from './front-door-settings.ts';
import { DEFAULT_DATABASE_URL, type PricingPrices } from './storage/index.ts';

/** Shortest master key the gateway starts with: anything shorter could be guessed through the throttle. */
const MIN_MASTER_KEY_LENGTH = 16;
/** Shortest master key accepted without a warning (the spec recommends 32 characters). */
const RECOMMENDED_MASTER_KEY_LENGTH = 32;

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

/** Failed credentials per client address before the client is refused with 429 (see docs/gateway.md, Front door). */
const AuthThrottle = z.union([
  z.literal(false),
  z.strictObject({
    max_failures: z.number().int().positive().max(1_000_000),
    window_seconds: z.number().positive().max(86_400),
  }),
]);

/** fastify's trustProxy: whose X-Forwarded-For names the client (true: any peer's; a list: those addresses or CIDR ranges). */
const TrustProxy = z.union([z.boolean(), z.array(z.string().min(1)).max(256)]);

/** The fields of a model route's target (PUT /v1/routes adds one). */
export const RouteTargetFields = z.strictObject({
  model: z
    .string()
    .regex(PROVIDER_MODEL, 'a target is provider:model')
    .refine((text) => !text.includes('\u0000'), 'must not contain NUL characters'),
  /** Share of the calls among the targets of equal priority (default 1). */
  weight: z.number().int().positive().max(1_000_000).optional(),
  /** Lower is tried first; targets of equal priority share the load by weight. Given on all targets of a route or none. */
  priority: z.number().int().min(0).max(1_000_000).optional(),
  /** This target's own credentials and address, instead of the provider's under `providers`. */
  api_key: z.string().optional(),
  api_base: z.string().url().optional(),
  /** How long one attempt on this target may wait for the answer (a stream: for each event), in seconds. */
  timeout_seconds: z.number().positive().optional(),
});

/** A bare `provider:model` string is short for `{model: "provider:model"}`. */
export const targetShorthand = (value: unknown) => (typeof value === 'string' ? { model: value } : value);

/** A target of a model route. */
const RouteTarget = z.preprocess(targetShorthand, RouteTargetFields);

/** The fields of a model route (PUT /v1/routes takes them with its own targets). */
export const ModelRouteFields = z.strictObject({
  targets: z.array(RouteTarget).min(1).max(32),
  /** The default of its targets' timeout_seconds. */
  timeout_seconds: z.number().positive().optional(),
});

/** A model route; a bare list is short for `{targets: [...]}`. */
const ModelRoute = z.preprocess((value) => (Array.isArray(value) ? { targets: value } : value), ModelRouteFields);

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
  /** The whole request (headers and body) must arrive within this many seconds, else the connection is closed (408). */
  request_timeout_seconds: z.number().positive().max(86_400).optional(),
  /** The request line and headers must arrive within this many seconds (at most request_timeout_seconds). */
  headers_timeout_seconds: z.number().positive().max(86_400).optional(),
  /** Open client connections at most; more are closed as they arrive. Default: what the open-file limit allows. */
  max_connections: z.number().int().positive().optional(),
  /** Open connections of one client address at most (default: half of max_connections). */
  max_connections_per_client: z.number().int().positive().optional(),
  /** Largest body of a model call, in bytes (413 beyond). */
  body_limit_bytes: z.number().int().positive().max(2 ** 30).optional(),
  /** Largest body of a management call (users, keys, budgets, pricing), in bytes (413 beyond). */
  management_body_limit_bytes: z.number().int().positive().max(2 ** 30).optional(),
  /** How deep arrays and objects of a JSON body may nest (400 beyond). */
  max_json_depth: z.number().int().min(2).max(10_000).optional(),
  auth_throttle: AuthThrottle.optional(),
  trust_proxy: TrustProxy.optional(),
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
  /** Timeouts, connection and body bounds, the failed-credential throttle (docs/gateway.md, Front door). */
  frontDoor: FrontDoorSettings;
  /** Things the operator should know at start (a short master key). */
  warnings: string[];
}

export interface ConfigOverrides {
  config?: string;
  host?: string;
  port?: number;
  databaseUrl?: string;
  masterKey?: string;
  requestTimeoutSeconds?: number;
  headersTimeoutSeconds?: number;
  maxConnections?: number;
  maxConnectionsPerClient?: number;
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
  const problems = fileRouteProblems(parsed.data);
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
    checkMasterKey(masterKey);
    if (masterKey.length < RECOMMENDED_MASTER_KEY_LENGTH) {
      warnings.push(`the master key is ${masterKey.length} characters long; at least ${RECOMMENDED_MASTER_KEY_LENGTH} are recommended (make one with \`encoder gateway keygen\`)`);
    }
  }
  const defaults = defaultFrontDoor();
  const maxConnections = overrides.maxConnections ?? file.max_connections ?? defaults.maxConnections;
  const requestTimeoutSeconds = overrides.requestTimeoutSeconds ?? file.request_timeout_seconds ?? defaults.requestTimeoutSeconds;
  const headersTimeoutSeconds = overrides.headersTimeoutSeconds ?? file.headers_timeout_seconds ?? Math.min(defaults.headersTimeoutSeconds, requestTimeoutSeconds);
  if (headersTimeoutSeconds > requestTimeoutSeconds) {
    throw new GatewayConfigError(`headers_timeout_seconds (${headersTimeoutSeconds}) must not be longer than request_timeout_seconds (${requestTimeoutSeconds}): the headers are part of the request`);
  }
  const throttle = file.auth_throttle;
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
    frontDoor: {
      requestTimeoutSeconds,
      headersTimeoutSeconds,
      maxConnections,
      maxConnectionsPerClient: overrides.maxConnectionsPerClient ?? file.max_connections_per_client ?? Math.max(1, Math.floor(maxConnections / 2)),
      bodyLimitBytes: file.body_limit_bytes ?? defaults.bodyLimitBytes,
      managementBodyLimitBytes: file.management_body_limit_bytes ?? defaults.managementBodyLimitBytes,
      maxJsonDepth: file.max_json_depth ?? defaults.maxJsonDepth,
      authThrottle: throttle === undefined ? defaults.authThrottle : throttle === false ? null : { maxFailures: throttle.max_failures, windowSeconds: throttle.window_seconds },
      trustProxy: file.trust_proxy ?? defaults.trustProxy,
    },
    warnings,
  };
}

/** One thing wrong with a model route that its schema cannot see; `path` is within the route (`targets.0.model`). */
export interface RouteProblem {
  path: string;
  message: string;
  code: 'invalid_request' | 'unknown_provider';
}

/**
 * What the schema cannot say about a route: its name is 1 to 256 characters without white space or NUL; a target's
 * provider must be one of `providers` or the target must bring its own `api_key`/`api_base` for a provider Hub
 * knows; `priority` goes on every target or none; a `weight` needs priorities (it shares load among targets of equal
 * priority). The configuration file and PUT /v1/routes check the same rules.
 */
export function routeProblems(name: string, route: ModelRouteConfig, providers: ReadonlySet<string>): RouteProblem[] {
  const problems: RouteProblem[] = [];
  if (!/^\S{1,256}$/.test(name) || name.includes('\u0000')) problems.push({ path: '', message: 'a model name is 1 to 256 characters without white space or NUL', code: 'invalid_request' });
  const withPriority = route.targets.filter((target) => target.priority !== undefined).length;
  if (withPriority !== 0 && withPriority !== route.targets.length) problems.push({ path: 'targets', message: 'give priority to every target or to none', code: 'invalid_request' });
  route.targets.forEach((target, i) => {
    const provider = target.model.slice(0, target.model.indexOf(':'));
    if (!providers.has(provider)) {
      if (target.api_key === undefined && target.api_base === undefined) {
        problems.push({
          path: `targets.${i}.model`,
          message: `provider "${provider}" is not configured under providers (configure it, or give the target its own api_key or api_base)`,
          code: 'unknown_provider',
        });
      } else if (!Object.hasOwn(PROVIDERS, provider)) {
        problems.push({ path: `targets.${i}.model`, message: `unknown provider "${provider}" (known: ${Object.keys(PROVIDERS).join(', ')})`, code: 'unknown_provider' });
      }
    }
    if (target.weight !== undefined && withPriority === 0) {
      problems.push({ path: `targets.${i}.weight`, message: "weight shares the calls among targets of equal priority; give the route's targets a priority", code: 'invalid_request' });
    }
  });
  return problems;
}

/** The routes of a configuration file, each checked against the file's providers. */
function fileRouteProblems(file: GatewayConfigFile): string[] {
  const configured = new Set(Object.keys(file.providers ?? {}));
  return Object.entries(file.models ?? {}).flatMap(([name, route]) =>
    routeProblems(name, route, configured).map((problem) => `models.${name}${problem.path ? `.${problem.path}` : ''}: ${problem.message}`),
  );
}

/** Refuses a master key too short to withstand guessing; `serve` exits with this message (code 2). */
export function checkMasterKey(masterKey: string): void {
  if (masterKey.length < MIN_MASTER_KEY_LENGTH) {
    throw new GatewayConfigError(
      `the master key is ${masterKey.length} characters long; the gateway needs at least ${MIN_MASTER_KEY_LENGTH} (${RECOMMENDED_MASTER_KEY_LENGTH} or more recommended). ` +
        'Make one with `encoder gateway keygen` (32 random bytes, URL-safe).',
    );
  }
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
