import { z } from 'zod';
import { RESET_ALIGNMENTS } from '../budget-periods.ts';
import { ModelRouteFields, RouteTargetFields, targetShorthand } from '../config.ts';

/** Request bodies of the management endpoints; also the source of their OpenAPI schemas. */
/** How deep metadata may nest: far beyond any real use, far below what JSON.stringify survives when answering. */
export const MAX_METADATA_DEPTH = 32;
const Metadata = z
  .record(z.string(), z.unknown())
  .refine((value) => depthOf(value) <= MAX_METADATA_DEPTH, `must not nest deeper than ${MAX_METADATA_DEPTH} levels`)
  .describe('Free-form string-keyed entries');

/** Nesting depth of a parsed JSON value, without recursion (the value may be nested 100,000 deep). */
function depthOf(value: unknown): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (item === null || typeof item !== 'object') continue;
    deepest = Math.max(deepest, depth);
    if (deepest > MAX_METADATA_DEPTH) return deepest;
    for (const child of Object.values(item)) stack.push([child, depth + 1]);
  }
  return deepest;
}
const Timestamp = z.string().describe('ISO 8601 timestamp, e.g. 2026-05-18T12:00:00Z (no designator = UTC)');
/**
 * PostgreSQL text cannot hold NUL; refusing it everywhere keeps both databases answering alike (400, not 500). A lone
 * UTF-16 surrogate (JSON allows "\ud800") is stored as U+FFFD, after which the record cannot be named by the id that
 * created it: refused too.
 */
const Name = z
  .string()
  .min(1)
  .max(256)
  .refine((text) => !text.includes('\u0000'), 'must not contain NUL characters')
  .refine((text) => text.isWellFormed(), 'must not contain lone surrogates (malformed UTF-16)');
const Id = Name;
/** A user id chosen by the caller becomes a path segment (`/v1/users/{id}`), which browsers and most clients resolve when it is "." or "..". */
const UserId = Id.refine((id) => id !== '.' && id !== '..', 'must not be "." or ".." (clients read them as directory steps in /v1/users/{user_id})');
/** The most money the gateway handles: a budget of this in nano-dollars (1e18) still fits PostgreSQL's BIGINT. */
export const MAX_DOLLARS = 1e9;
const Dollars = z.number().nonnegative().max(MAX_DOLLARS);
/** A price per million tokens above $1 per token is a typo; bounded so that costs stay within BIGINT. */
const PricePerMillion = z.number().nonnegative().max(1e6);
/** A century: longer periods are "never"; bounded so that period arithmetic stays within BIGINT and Date. */
const ResetSeconds = z.number().int().positive().max(100 * 365.25 * 24 * 3600);

/**
 * An allowed-models list: exact `provider:model` names, `provider:*`, or model route names (checked against the
 * configuration by the routes); null (or absent at creation): every model.
 */
const AllowedModels = z
  .array(
    z
      .string()
      .max(512)
      .regex(/^([^:\s]+:\S(.*\S)?|[^:\s]+)$/, 'must be provider:model, provider:* or a model route name')
      .refine((value) => !value.includes('\u0000'), 'must not contain NUL characters'),
  )
  .max(1000)
  .nullable()
  .describe('Models these calls may use: exact provider:model names, provider:* or model route names (null: every model)');

export const CreateUserBody = z.strictObject({
  user_id: UserId.describe('Identifier chosen by the caller'),
  alias: Name.describe('Display name (required)'),
  metadata: Metadata.optional(),
  budget_id: Id.nullable().optional().describe('A budget this user spends from'),
  allowed_models: AllowedModels.optional(),
});

export const UpdateUserBody = z.strictObject({
  alias: Name.optional(),
  metadata: Metadata.optional(),
  budget_id: Id.nullable().optional().describe('null detaches the budget'),
  allowed_models: AllowedModels.optional(),
});

const AllowUserOverride = z
  .boolean()
  .describe('true: a call may name any "user", passed to the provider as an end-user id (still charged to this key and its owner); false (the default): another "user" than the owner is 403 user_mismatch');

export const CreateKeyBody = z.strictObject({
  key_name: Name.describe('Descriptive name'),
  expires_at: Timestamp.nullable().optional(),
  metadata: Metadata.optional(),
  user_id: Id.nullable().optional().describe('Owner: usage also counts against this user and its budget'),
  budget_id: Id.nullable().optional().describe('A budget this key spends from'),
  allowed_models: AllowedModels.optional(),
  allow_user_override: AllowUserOverride.optional(),
});

export const UpdateKeyBody = z.strictObject({
  is_active: z.boolean().optional().describe('false deactivates the key; true reactivates it'),
  key_name: Name.optional(),
  expires_at: Timestamp.nullable().optional().describe('null: never expires'),
  metadata: Metadata.optional(),
  user_id: Id.nullable().optional(),
  budget_id: Id.nullable().optional(),
  allowed_models: AllowedModels.optional(),
  allow_user_override: AllowUserOverride.optional(),
});

const BudgetName = Name.nullable().describe('A label for people (not unique); null: none');
const SoftBudget = Dollars.nullable().describe('Spend in US dollars from which calls are answered with an x-budget-warning header (still served); below max_budget; null: none');
const ResetAlignmentField = z
  .enum(RESET_ALIGNMENTS)
  .nullable()
  .describe('Spend starts again from 0 at the start of each day, ISO week (Monday) or month in reset_time_zone; exclusive with reset_every_seconds; null: none');
/** Checked and made canonical (Intl's spelling) by the route; any IANA zone name Node knows, or a fixed offset such as +01:00. */
const TimeZone = z.string().min(1).max(64).nullable().describe('IANA time zone of reset_alignment, e.g. Europe/Berlin (default UTC)');

export const CreateBudgetBody = z.strictObject({
  name: BudgetName.optional(),
  max_budget: Dollars.describe('Spend limit in US dollars per period'),
  soft_budget: SoftBudget.optional(),
  reset_every_seconds: ResetSeconds.nullable().optional().describe('Spend starts again from 0 every N seconds after the last reset; exclusive with reset_alignment; null: never'),
  reset_alignment: ResetAlignmentField.optional(),
  reset_time_zone: TimeZone.optional(),
  metadata: Metadata.optional(),
});

/** Fields left out keep their value; the schedule that results (stored fields and given ones) must hold together. */
export const UpdateBudgetBody = z.strictObject({
  name: BudgetName.optional(),
  max_budget: Dollars.optional(),
  soft_budget: SoftBudget.optional(),
  reset_every_seconds: ResetSeconds.nullable().optional(),
  reset_alignment: ResetAlignmentField.optional(),
  reset_time_zone: TimeZone.optional(),
  metadata: Metadata.optional(),
});

/** A price per thousand search units above $1 per search unit is a typo; bounded so that costs stay within BIGINT. */
const PricePerThousand = z.number().nonnegative().max(1000);

/** Prices left out are 0 (a rerank model billed per search unit needs no token prices); at least one is given. */
export const PricingBody = z
  .strictObject({
    input_cost_per_million: PricePerMillion.optional().describe('US dollars per million prompt tokens (default 0)'),
    output_cost_per_million: PricePerMillion.optional().describe('US dollars per million completion tokens (default 0)'),
    search_unit_cost_per_thousand: PricePerThousand.optional().describe('Rerank billed per search unit (Cohere): US dollars per thousand search units (default 0)'),
  })
  .refine((price) => Object.keys(price).length > 0, 'give input_cost_per_million, output_cost_per_million or search_unit_cost_per_thousand');

export const UsageQuery = z.strictObject({
  since: Timestamp.optional().describe('Only rows at or after this time'),
  until: Timestamp.optional().describe('Only rows before this time'),
  limit: z.coerce.number().int().min(1).max(10_000).optional().describe('Most rows returned (default 100); totals cover all rows in range'),
});

/** Filters of the usage analytics endpoints (/v1/usage/summary, /v1/usage/series, /v1/usage.csv). */
export const UsageAnalyticsQuery = z.strictObject({
  since: Timestamp.optional().describe('Rows at or after this time (summary and series: default 30 days before until)'),
  until: Timestamp.optional().describe('Rows before this time (default: now)'),
  user_id: Id.optional().describe('Only this user'),
  key_id: Id.optional().describe('Only this virtual key'),
  model: z.string().min(1).optional().describe('Only this model: provider:model, or a bare model name (that model of every provider)'),
  provider: z.string().min(1).optional().describe('Only this provider'),
  status: z.enum(['success', 'error', 'cancelled', 'refused', 'pending', 'interrupted']).optional().describe('Only rows of this status'),
});

export const UsageSeriesQuery = UsageAnalyticsQuery.extend({
  interval: z.enum(['hour', 'day']).optional().describe('Bucket size (default day), in UTC'),
});

/** Rows of one page of GET /v1/usage at most. */
export const MAX_USAGE_PAGE = 1000;

export const UsageListQuery = UsageAnalyticsQuery.extend({
  limit: z.coerce.number().int().min(1).max(MAX_USAGE_PAGE).optional().describe('Rows per page (default 100)'),
  cursor: z.string().min(1).max(600).optional().describe('next_cursor of the previous page: the rows after it, newest first'),
});

/** Calls GET /v1/usage/in-flight lists at most. */
export const MAX_IN_FLIGHT_LIST = 1000;

export const InFlightQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(MAX_IN_FLIGHT_LIST).optional().describe('Most calls listed, oldest first (default 100)'),
});

/** Longest grace period of a rotation: a week to roll the new secret out. */
export const MAX_ROTATION_GRACE_SECONDS = 7 * 24 * 3600;

export const RotateKeyBody = z.strictObject({
  grace_period_seconds: z
    .number()
    .int()
    .min(0)
    .max(MAX_ROTATION_GRACE_SECONDS)
    .optional()
    .describe('How long the old secret keeps working (default 0: it stops at once; at most a week)'),
});

export const KeyListQuery = z.strictObject({ user_id: Id.optional() });

/** PUT /v1/providers/{name}: fields left out keep their value (none when the provider is new), null clears one. */
export const ProviderBody = z.strictObject({
  api_key: z
    .string()
    .min(1)
    .max(4096)
    .refine((text) => !text.includes('\u0000'), 'must not contain NUL characters')
    .nullable()
    .optional()
    .describe('The provider API key; write-only (answers say only api_key_set)'),
  api_base: z.string().url().max(2048).nullable().optional().describe("The provider's base address, e.g. https://eu.example.com/v1 (null: the provider's default)"),
});

/** A target of PUT /v1/routes/{name}: the configuration file's fields, and api_key_set to keep a stored key. */
const RouteTargetBody = z.preprocess(
  targetShorthand,
  RouteTargetFields.extend({
    api_key_set: z
      .boolean()
      .optional()
      .describe('true without api_key: keep the key of the stored target with the same model and api_base (what GET answers, sent back unchanged)'),
  }),
);

/** PUT /v1/routes/{name}: the whole route, as the configuration file's `models.<name>` (the targets in trial order). */
export const RouteBody = ModelRouteFields.extend({
  targets: z.array(RouteTargetBody).min(1).max(32),
  timeout_seconds: z.number().positive().nullable().optional().describe("Default of the targets' timeout_seconds (null or absent: none)"),
});

export const AuditQuery = z.strictObject({
  kind: z.enum(['pricing', 'provider', 'route']).optional().describe('Only changes of this kind of entry'),
  name: z.string().min(1).max(512).optional().describe('Only changes of this entry (a provider:model for pricing)'),
  since: Timestamp.optional().describe('Changes at or after this time'),
  until: Timestamp.optional().describe('Changes before this time'),
  limit: z.coerce.number().int().min(1).max(1000).optional().describe('Changes per page (default 100)'),
  cursor: z.string().min(1).max(600).optional().describe('next_cursor of the previous page: the changes before it, newest first'),
});
