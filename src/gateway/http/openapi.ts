import { z } from 'zod';
import {
  CreateBudgetBody,
  CreateKeyBody,
  CreateUserBody,
  PricingBody,
  ProviderBody,
  RotateKeyBody,
  RouteBody,
  UpdateBudgetBody,
  UpdateKeyBody,
  UpdateUserBody,
} from './management-schemas.ts';
import { RERANK_REQUEST_SCHEMA, RERANK_RESPONSE_SCHEMA } from './rerank-body.ts';

type Schema = Record<string, unknown>;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const bodySchema = (schema: z.ZodType) => z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' }) as Schema;
const nullable = (type: string, extra: Schema = {}) => ({ type: [type, 'null'], ...extra });
const allowedModels = { type: ['array', 'null'], items: { type: 'string' }, description: 'provider:model names, provider:* or model route names (null: every model)' };
const configSource = { enum: ['config', 'api'], description: 'config: written from the configuration file; api: written (or last changed) through the API' };
const time = { type: 'string', description: 'ISO 8601, UTC, no zone designator', examples: ['2026-05-18T12:00:00.000'] };

const err = (description: string) => ({ description, content: { 'application/json': { schema: ref('Error') } } });
const ok = (description: string, schema: Schema) => ({ description, content: { 'application/json': { schema } } });
const listOf = (item: string, extra: Schema = {}) => ({
  type: 'object',
  required: ['object', 'data'],
  properties: { object: { const: 'list' }, data: { type: 'array', items: ref(item) }, ...extra },
});
const deleted = (object: string, idField: string) => ({
  type: 'object',
  required: ['object', idField, 'deleted'],
  properties: { object: { const: object }, [idField]: { type: 'string' }, deleted: { const: true } },
});

const RETRY_AFTER = { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } };
const THROTTLED = 'too many invalid keys came from this client address (too_many_auth_failures; every credential from it is refused until Retry-After)';
const AUTH_ERRORS = {
  401: err('Missing credential (missing_api_key), malformed header (malformed_api_key), unknown key (invalid_api_key), inactive key (key_inactive) or expired key (key_expired).'),
  429: { ...err(`The credential was not looked at: ${THROTTLED}.`), headers: RETRY_AFTER },
};
const MANAGEMENT_ERRORS = { ...AUTH_ERRORS, 403: err('A virtual key was used on a management endpoint (master_key_required).') };
const BODY_ERRORS = {
  400: err('Invalid JSON (invalid_json), nested deeper than the bound, 64 levels by default (json_too_deep), or a field missing or of the wrong type (param names it).'),
  413: err("The body is larger than the route's limit (body_too_large): by default 64 KiB for management calls, 16 MiB for model calls."),
  415: err('The body is not application/json (unsupported_media_type).'),
};
const MODEL_CALL_ERRORS = {
  ...BODY_ERRORS,
  ...AUTH_ERRORS,
  400: err('Invalid body (param names the field); `user` missing with the master key (missing_user); model neither a model route nor provider:model (or provider/model) of a configured provider (unknown_provider); the provider refused the request as invalid.'),
  402: err('The model (or a target of the model route) has no price and require_pricing is on: the call could not be billed (pricing_missing, param "model"). Nothing was sent to the provider.'),
  403: err(
    'A budget of the key or the user cannot hold what the call may cost — it is exhausted, or what is left is less than the hold (budget_exceeded); the model (route name or provider:model) is not in an allowed_models list (model_not_allowed); a virtual key named another "user" than its owner, or a user that does not exist, without allow_user_override (user_mismatch, param "user").',
  ),
  404: err('The user named with the master key does not exist (user_not_found).'),
  429: {
    ...err(`The provider rate-limited the call (upstream_rate_limited; through a model route: its last target), the gateway rate limit was hit (rate_limit_exceeded), or ${THROTTLED}.`),
    headers: {
      ...RETRY_AFTER,
      'x-ratelimit-remaining-requests': { description: 'With rate_limit_exceeded (and on every model call of a rate-limited key): what is left of the window; also x-ratelimit-limit-*, x-ratelimit-reset-* (e.g. "37s") and the -tokens set', schema: { type: 'string' } },
    },
  },
  502: err("The provider failed, could not be reached, or refused the gateway's credentials (through a model route: every target failed, or one refused the credentials)."),
  503: {
    ...err('The call\'s usage row could not be written before the provider was called (usage_unavailable): nothing was sent to the provider.'),
    headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } },
  },
  504: err('The provider did not answer in time (through a model route: the last target).'),
};

const id = (name: string, description: string) => ({ name, in: 'path', required: true, schema: { type: 'string' }, description });
const usageQuery = [
  { name: 'since', in: 'query', schema: { type: 'string' }, description: 'ISO 8601; rows at or after' },
  { name: 'until', in: 'query', schema: { type: 'string' }, description: 'ISO 8601; rows before' },
  { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 10000, default: 100 } },
];

const analyticsQuery = [
  { name: 'since', in: 'query', schema: { type: 'string' }, description: 'ISO 8601; rows at or after (summary and series: default 30 days before until; CSV: all)' },
  { name: 'until', in: 'query', schema: { type: 'string' }, description: 'ISO 8601; rows before (default: now); must be after since' },
  { name: 'user_id', in: 'query', schema: { type: 'string' } },
  { name: 'key_id', in: 'query', schema: { type: 'string' } },
  { name: 'model', in: 'query', schema: { type: 'string' }, description: 'provider:model as the summary and the dashboard show it, or a bare model name (that model of every provider)' },
  { name: 'provider', in: 'query', schema: { type: 'string' } },
  { name: 'status', in: 'query', schema: { enum: ['success', 'error', 'cancelled', 'refused', 'pending', 'interrupted'] } },
];
/** What a usage row and a call in flight both say of a call. */
const callProperties = {
  id: { type: 'string' },
  request_id: { type: 'string' },
  created_at: time,
  user_id: nullable('string'),
  key_id: nullable('string'),
  endpoint: { enum: ['chat.completions', 'embeddings', 'messages', 'responses', 'rerank'] },
};
const aggregateProperties = {
  requests: { type: 'integer' },
  errors: { type: 'integer', description: 'Calls that did not succeed (error, cancelled, interrupted or refused); calls in flight have no row yet' },
  refused: { type: 'integer', description: 'Calls refused before any provider (budget, allowed models, rate limit, …); counted in errors too' },
  prompt_tokens: { type: 'integer' },
  completion_tokens: { type: 'integer' },
  total_tokens: { type: 'integer' },
  cost: { type: 'number', description: 'US dollars' },
};
const aggregate = (extra: Schema = {}) => ({ type: 'object', required: Object.keys({ ...aggregateProperties, ...extra }), properties: { ...aggregateProperties, ...extra } });

const json = (schema: z.ZodType) => ({ required: true, content: { 'application/json': { schema: bodySchema(schema) } } });
const passThrough = (description: string, required: string[]) => ({
  required: true,
  content: { 'application/json': { schema: { type: 'object', required, additionalProperties: true, description } } },
});

/** The OpenAPI 3.1 document of the gateway: every path, every status it answers and the body of each. */
export function gatewayOpenApi(version: string): Schema {
  const managed = (summary: string, extra: Schema) => ({ summary, security: [{ hubKey: [] }, { bearer: [] }, { anthropicKey: [] }], ...extra });
  return {
    openapi: '3.1.0',
    info: {
      title: 'encoder gateway',
      version,
      description:
        'An LLM gateway in front of model providers (spec 1). Credentials: X-Hub-Key: Bearer <key> (wins), Authorization: Bearer <key>, or x-api-key: <key> (as Anthropic clients send it; last); ' +
        'the master key for everything, virtual keys for model calls. Errors are {"error":{"message","type","code","param"}} ' +
        '(on /v1/messages with "type":"error" added for Anthropic clients). With rate_limits configured, model calls answer OpenAI\'s x-ratelimit-{limit,remaining,reset}-{requests,tokens} headers; a call whose budget has reached its soft_budget answers x-budget-warning. Timestamps are ISO 8601 UTC without zone designator; money is US dollars. ' +
        'Deprecated: the gateway bundled with the client library is scheduled for removal on 2026-05-18.',
    },
    components: {
      securitySchemes: {
        hubKey: { type: 'apiKey', in: 'header', name: 'X-Hub-Key', description: 'Bearer <key>' },
        bearer: { type: 'http', scheme: 'bearer' },
        anthropicKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'The raw key (no Bearer), as Anthropic clients send it; used when neither X-Hub-Key nor Authorization is present' },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          properties: {
            type: { const: 'error', description: 'Only on /v1/messages' },
            error: {
              type: 'object',
              required: ['message', 'type', 'code', 'param'],
              properties: { message: { type: 'string' }, type: { type: 'string' }, code: { type: 'string' }, param: nullable('string') },
            },
          },
        },
        User: {
          type: 'object',
          required: ['object', 'user_id', 'alias', 'metadata', 'budget_id', 'allowed_models', 'created_at', 'updated_at'],
          properties: {
            object: { const: 'user' },
            user_id: { type: 'string' },
            alias: { type: 'string' },
            metadata: { type: 'object' },
            budget_id: nullable('string'),
            allowed_models: allowedModels,
            created_at: time,
            updated_at: time,
          },
        },
        VirtualKey: {
          type: 'object',
          required: ['object', 'id', 'key_name', 'key_prefix', 'user_id', 'budget_id', 'created_at', 'updated_at', 'expires_at', 'is_active', 'status', 'metadata', 'allowed_models', 'allow_user_override'],
          properties: {
            object: { const: 'virtual_key' },
            id: { type: 'string' },
            key_name: { type: 'string' },
            key_prefix: { type: 'string', description: 'gw- and the first 4 characters of the secret' },
            user_id: nullable('string'),
            budget_id: nullable('string'),
            created_at: time,
            updated_at: time,
            expires_at: nullable('string', { description: 'ISO 8601, UTC, no zone designator' }),
            is_active: { type: 'boolean' },
            status: { enum: ['active', 'inactive', 'expired'] },
            metadata: { type: 'object' },
            allowed_models: allowedModels,
            allow_user_override: {
              type: 'boolean',
              description: 'true: a call may name any "user" (passed to the provider as an end-user id, still charged to this key and its owner); false: another "user" than the owner is 403 user_mismatch',
            },
          },
        },
        CreatedVirtualKey: { allOf: [ref('VirtualKey'), { type: 'object', required: ['key'], properties: { key: { type: 'string', description: 'The secret (gw-…); returned only here' } } }] },
        Budget: {
          type: 'object',
          required: [
            'object', 'budget_id', 'name', 'max_budget', 'soft_budget', 'soft_budget_exceeded', 'spend', 'reserved', 'remaining', 'reset_every_seconds',
            'reset_alignment', 'reset_time_zone', 'period_started_at', 'next_reset_at', 'metadata', 'created_at', 'updated_at',
          ],
          properties: {
            object: { const: 'budget' },
            budget_id: { type: 'string' },
            name: nullable('string', { description: 'A label for people (not unique)' }),
            max_budget: { type: 'number' },
            soft_budget: nullable('number', { description: 'Spend from which model calls carry an x-budget-warning header' }),
            soft_budget_exceeded: { type: 'boolean', description: 'spend ≥ soft_budget in this period' },
            spend: { type: 'number', description: 'Settled spend in this period' },
            reserved: { type: 'number', description: 'Held by calls in flight' },
            remaining: { type: 'number' },
            reset_every_seconds: nullable('integer'),
            reset_alignment: { enum: ['daily', 'weekly', 'monthly', null], description: 'Calendar periods in reset_time_zone (weeks start on Monday)' },
            reset_time_zone: nullable('string', { description: 'IANA time zone of reset_alignment (null without one)' }),
            period_started_at: time,
            next_reset_at: nullable('string'),
            metadata: { type: 'object' },
            created_at: time,
            updated_at: time,
          },
        },
        ModelPricing: {
          type: 'object',
          required: ['object', 'model', 'input_cost_per_million', 'output_cost_per_million', 'source', 'updated_at'],
          properties: {
            object: { const: 'model_pricing' },
            model: { type: 'string' },
            input_cost_per_million: { type: 'number' },
            output_cost_per_million: { type: 'number' },
            search_unit_cost_per_thousand: { type: 'number', description: 'Rerank billed per search unit: US dollars per thousand (0: not)' },
            source: {
              enum: ['config', 'api', 'bundled'],
              description: "config: the gateway's own, written from the configuration file; api: the gateway's own, written (or last changed) by PUT; bundled: the table that ships with the gateway, below its own",
            },
            updated_at: time,
          },
        },
        InFlightCall: {
          type: 'object',
          required: ['object', 'id', 'request_id', 'created_at', 'age_ms', 'user_id', 'key_id', 'endpoint', 'provider', 'model', 'route', 'cost', 'instance_id'],
          properties: {
            object: { const: 'in_flight_call' },
            ...callProperties,
            id: { type: 'string', description: 'The id its usage row will keep' },
            age_ms: { type: 'number', description: 'How long it has run, by the gateway clock' },
            provider: { type: 'string', description: 'The provider of the (first) target' },
            model: { type: 'string', description: 'The model of the (first) target, without provider' },
            route: nullable('string', { description: 'The model route the client called; null for a provider:model call' }),
            cost: { type: 'number', description: 'US dollars it is charged if its gateway dies now: its budget hold, or what its stream has delivered' },
            instance_id: nullable('string', { description: 'PostgreSQL: the gateway instance making the call; null on SQLite' }),
          },
        },
        Provider: {
          type: 'object',
          required: ['object', 'name', 'api_base', 'api_key_set', 'source', 'created_at', 'updated_at'],
          properties: {
            object: { const: 'provider' },
            name: { type: 'string', description: 'A provider Hub knows (openai, anthropic, mistral, …): the prefix of provider:model' },
            api_base: nullable('string', { description: "The provider's base address (null: its default)" }),
            api_key_set: { type: 'boolean', description: 'Whether a key is stored; the key itself is write-only' },
            source: configSource,
            created_at: time,
            updated_at: time,
          },
        },
        ModelRoute: {
          type: 'object',
          required: ['object', 'name', 'targets', 'timeout_seconds', 'source', 'created_at', 'updated_at'],
          properties: {
            object: { const: 'model_route' },
            name: { type: 'string', description: 'The public model name clients call' },
            targets: {
              type: 'array',
              description: 'In the order they are tried (by priority, then list order)',
              items: {
                type: 'object',
                required: ['model', 'api_key_set'],
                properties: {
                  model: { type: 'string', description: 'provider:model' },
                  weight: { type: 'integer', minimum: 1 },
                  priority: { type: 'integer', minimum: 0 },
                  api_base: { type: 'string' },
                  api_key_set: { type: 'boolean', description: "Whether the target has its own key (write-only); send the target back with api_key_set true to keep it" },
                  timeout_seconds: { type: 'number' },
                },
              },
            },
            timeout_seconds: nullable('number', { description: "Default of the targets' timeout_seconds" }),
            source: configSource,
            created_at: time,
            updated_at: time,
          },
        },
        ConfigChange: {
          type: 'object',
          required: ['object', 'id', 'created_at', 'actor', 'client', 'request_id', 'action', 'kind', 'name', 'before', 'after'],
          properties: {
            object: { const: 'config_change' },
            id: { type: 'string' },
            created_at: time,
            actor: { enum: ['master_key', 'config_file'], description: 'master_key: an API call; config_file: written at start from the configuration file' },
            client: nullable('string', { description: 'The client address of the API call' }),
            request_id: nullable('string', { description: 'x-request-id of the API call' }),
            action: { enum: ['create', 'update', 'delete'] },
            kind: { enum: ['pricing', 'provider', 'route'] },
            name: { type: 'string', description: 'provider:model (pricing), the provider name, or the route name' },
            before: { type: ['object', 'null'], description: 'The entry before the change, as GET shows it without object and times (keys only as api_key_set); null when created' },
            after: { type: ['object', 'null'], description: 'The entry after the change; null when deleted' },
          },
        },
        Usage: {
          type: 'object',
          required: ['object', 'id', 'request_id', 'created_at', 'user_id', 'key_id', 'endpoint', 'provider', 'model', 'route', 'attempts', 'prompt_tokens', 'completion_tokens', 'total_tokens', 'search_units', 'cost', 'overshoot', 'status', 'status_code', 'duration_ms', 'reason'],
          properties: {
            object: { const: 'usage' },
            ...callProperties,
            provider: { type: 'string', description: 'The provider of the target that answered (or failed last)' },
            model: { type: 'string', description: 'The model of the target that answered (or failed last), without provider' },
            route: nullable('string', { description: 'The model route the client called (its public name); null for a provider:model call' }),
            attempts: { type: 'integer', minimum: 0, description: 'Targets tried: 1 unless a model route fell back; 0 for a refusal' },
            prompt_tokens: { type: 'integer' },
            completion_tokens: { type: 'integer' },
            total_tokens: { type: 'integer' },
            search_units: { type: 'integer', description: 'Search units the provider billed (rerank); 0 otherwise' },
            cost: { type: 'number' },
            overshoot: { type: 'number', description: 'US dollars the call cost beyond its budget hold (the provider ignored the output limit it was sent), charged all the same; 0: none' },
            status: {
              enum: ['success', 'error', 'cancelled', 'refused', 'pending', 'interrupted'],
              description: 'refused: before any provider; interrupted: its gateway died, settled at its hold or what its stream had delivered; pending: no row has it since migration 12 (a call in flight has no row until it ends)',
            },
            status_code: { type: 'integer', description: 'The status answered; 0 when interrupted' },
            duration_ms: { type: 'number' },
            reason: nullable('string', { description: 'Why the call was refused, failed or interrupted (an error code, e.g. budget_exceeded, upstream_timeout, gateway_restarted); null on success' }),
          },
        },
        ChatCompletion: {
          type: 'object',
          description: "The provider's OpenAI chat completion, unchanged",
          required: ['id', 'object', 'created', 'model', 'choices'],
          properties: {
            id: { type: 'string' },
            object: { const: 'chat.completion' },
            created: { type: 'integer' },
            model: { type: 'string' },
            choices: {
              type: 'array',
              items: {
                type: 'object',
                required: ['index', 'message', 'finish_reason'],
                properties: { index: { type: 'integer' }, message: { type: 'object', properties: { role: { type: 'string' }, content: nullable('string') } }, finish_reason: nullable('string') },
              },
            },
            usage: { type: 'object', properties: { prompt_tokens: { type: 'integer' }, completion_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } } },
          },
        },
        Embeddings: {
          type: 'object',
          required: ['object', 'data', 'model'],
          properties: {
            object: { const: 'list' },
            model: { type: 'string' },
            data: {
              type: 'array',
              items: {
                type: 'object',
                required: ['object', 'index', 'embedding'],
                properties: {
                  object: { const: 'embedding' },
                  index: { type: 'integer' },
                  embedding: { oneOf: [{ type: 'array', items: { type: 'number' } }, { type: 'string', description: 'base64 of little-endian float32 (encoding_format base64)' }] },
                },
              },
            },
            usage: { type: 'object', properties: { prompt_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } } },
          },
        },
        RerankRequest: RERANK_REQUEST_SCHEMA,
        Rerank: RERANK_RESPONSE_SCHEMA,
        ModelList: {
          type: 'object',
          required: ['object', 'data'],
          properties: {
            object: { const: 'list' },
            data: { type: 'array', items: { type: 'object', required: ['id'], properties: { id: { type: 'string', description: 'A model route name (owned_by gateway) or provider:model' }, object: { const: 'model' }, created: { type: 'integer' }, owned_by: { type: 'string' } } } },
          },
        },
        AnthropicMessage: {
          type: 'object',
          description: 'An Anthropic Messages API message',
          required: ['id', 'type', 'role', 'content', 'model', 'usage'],
          properties: {
            id: { type: 'string' },
            type: { const: 'message' },
            role: { const: 'assistant' },
            content: { type: 'array', items: { type: 'object' } },
            model: { type: 'string' },
            stop_reason: nullable('string'),
            usage: { type: 'object', properties: { input_tokens: { type: 'integer' }, output_tokens: { type: 'integer' } } },
          },
        },
        UsageList: listOf('Usage', {
          totals: {
            type: 'object',
            required: ['requests', 'prompt_tokens', 'completion_tokens', 'total_tokens', 'cost'],
            properties: { requests: { type: 'integer' }, prompt_tokens: { type: 'integer' }, completion_tokens: { type: 'integer' }, total_tokens: { type: 'integer' }, cost: { type: 'number' } },
          },
        }),
      },
    },
    paths: {
      '/health': { get: { summary: 'Liveness (the same as /health/liveness)', responses: { 200: ok('Up', { type: 'object', properties: { status: { const: 'ok' } } }) } } },
      '/health/liveness': { get: { summary: 'Liveness: 200 while the process runs (no database query)', responses: { 200: ok('Up', { type: 'object', properties: { status: { const: 'ok' } } }) } } },
      '/health/readiness': {
        get: {
          summary: 'Readiness: the database answers and the gateway is not shutting down',
          responses: { 200: ok('Ready', { type: 'object', properties: { status: { const: 'ok' }, database: { enum: ['sqlite', 'postgres'] } } }), 503: { ...err('The database did not answer SELECT 1 within 2 s (database_unavailable), or the gateway is shutting down (shutting_down).'), headers: RETRY_AFTER } },
        },
      },
      '/metrics': { get: { summary: 'Prometheus metrics', responses: { 200: { description: 'Prometheus text format', content: { 'text/plain': { schema: { type: 'string' } } } } } } },
      '/openapi.json': { get: { summary: 'This document', responses: { 200: ok('OpenAPI 3.1', { type: 'object' }) } } },
      '/v1/users': {
        post: managed('Create a user', { requestBody: json(CreateUserBody), responses: { 201: ok('Created', ref('User')), ...BODY_ERRORS, ...MANAGEMENT_ERRORS, 409: err('A user with this user_id exists (user_exists).') } }),
        get: managed('List users', { responses: { 200: ok('Users', listOf('User')), ...MANAGEMENT_ERRORS } }),
      },
      '/v1/users/{user_id}': {
        parameters: [id('user_id', 'The user')],
        get: managed('Get a user', { responses: { 200: ok('The user', ref('User')), ...MANAGEMENT_ERRORS, 404: err('No such user.') } }),
        patch: managed('Update a user', { requestBody: json(UpdateUserBody), responses: { 200: ok('Updated', ref('User')), ...BODY_ERRORS, ...MANAGEMENT_ERRORS, 404: err('No such user.') } }),
        delete: managed('Delete a user and its keys (usage rows stay)', { responses: { 200: ok('Deleted', deleted('user', 'user_id')), ...MANAGEMENT_ERRORS, 404: err('No such user.') } }),
      },
      '/v1/users/{user_id}/usage': {
        parameters: [id('user_id', 'The user')],
        get: managed("A user's usage, newest first, with totals", { parameters: usageQuery, responses: { 200: ok('Usage', ref('UsageList')), 400: err('Bad query.'), ...MANAGEMENT_ERRORS, 404: err('No such user.') } }),
      },
      '/v1/keys': {
        post: managed('Create a virtual key (the secret is in this response only)', {
          requestBody: json(CreateKeyBody),
          responses: { 201: ok('Created', ref('CreatedVirtualKey')), ...BODY_ERRORS, ...MANAGEMENT_ERRORS },
        }),
        get: managed('List virtual keys (never the secret)', {
          parameters: [{ name: 'user_id', in: 'query', schema: { type: 'string' }, description: 'Only keys owned by this user' }],
          responses: { 200: ok('Keys', listOf('VirtualKey')), 400: err('Bad query.'), ...MANAGEMENT_ERRORS },
        }),
      },
      '/v1/keys/{key_id}': {
        parameters: [id('key_id', 'The key record id')],
        get: managed('Get a virtual key', { responses: { 200: ok('The key', ref('VirtualKey')), ...MANAGEMENT_ERRORS, 404: err('No such key (key_not_found).') } }),
        patch: managed('Update a key: deactivate (is_active false), reactivate (true), rename, change expiry, owner, budget', {
          requestBody: json(UpdateKeyBody),
          responses: { 200: ok('Updated', ref('VirtualKey')), ...BODY_ERRORS, ...MANAGEMENT_ERRORS, 404: err('No such key (key_not_found).') },
        }),
        delete: managed('Delete a key', { responses: { 200: ok('Deleted', deleted('virtual_key', 'id')), ...MANAGEMENT_ERRORS, 404: err('No such key (key_not_found).') } }),
      },
      '/v1/keys/{key_id}/rotate': {
        parameters: [id('key_id', 'The key record id')],
        post: managed('Give the key a new secret (shown once); the old one stops at once or after a grace period', {
          requestBody: { required: false, content: { 'application/json': { schema: bodySchema(RotateKeyBody) } } },
          responses: {
            200: ok('The key with its new secret', {
              allOf: [
                ref('VirtualKey'),
                {
                  type: 'object',
                  required: ['key', 'previous_key_expires_at'],
                  properties: { key: { type: 'string', description: 'The new secret; not shown again' }, previous_key_expires_at: nullable('string', { description: 'Until when the old secret works (null: it stopped at once)' }) },
                },
              ],
            }),
            ...BODY_ERRORS,
            ...MANAGEMENT_ERRORS,
            404: err('No such key.'),
          },
        }),
      },
      '/v1/keys/{key_id}/usage': {
        parameters: [id('key_id', 'The key record id')],
        get: managed("A key's usage, newest first, with totals", { parameters: usageQuery, responses: { 200: ok('Usage', ref('UsageList')), 400: err('Bad query.'), ...MANAGEMENT_ERRORS, 404: err('No such key.') } }),
      },
      '/v1/usage': {
        get: managed('Usage rows, newest first, a page at a time (filters as the summary; no default range)', {
          parameters: [
            ...analyticsQuery,
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
            { name: 'cursor', in: 'query', schema: { type: 'string' }, description: 'next_cursor of the previous page' },
          ],
          responses: {
            200: ok('A page of rows', listOf('Usage', { has_more: { type: 'boolean' }, next_cursor: nullable('string', { description: 'Pass as cursor for the next page' }) })),
            400: err('Bad query: a malformed time or cursor (invalid_cursor), since not before until (invalid_range), an unknown parameter.'),
            ...MANAGEMENT_ERRORS,
          },
        }),
      },
      '/v1/usage/in-flight': {
        get: managed('The calls in flight (written before their provider was called, not yet finished), oldest first', {
          parameters: [{ name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } }],
          responses: {
            200: ok('Calls in flight', listOf('InFlightCall', { has_more: { type: 'boolean', description: 'More calls are in flight than listed' } })),
            400: err('Bad query: limit out of range, an unknown parameter.'),
            ...MANAGEMENT_ERRORS,
          },
        }),
      },
      '/v1/usage/summary': {
        get: managed('Usage totals over a time range, and by model, user, key and provider (most cost first)', {
          parameters: analyticsQuery,
          responses: {
            200: ok('Summary', {
              type: 'object',
              required: ['object', 'since', 'until', 'totals', 'by_model', 'by_user', 'by_key', 'by_provider'],
              properties: {
                object: { const: 'usage_summary' },
                since: time,
                until: time,
                totals: aggregate(),
                by_model: { type: 'array', items: aggregate({ model: { type: 'string', description: 'provider:model: one entry per provider of a model name' } }) },
                by_user: { type: 'array', items: aggregate({ user_id: nullable('string') }) },
                by_key: { type: 'array', items: aggregate({ key_id: nullable('string') }) },
                by_provider: { type: 'array', items: aggregate({ provider: { type: 'string' } }) },
              },
            }),
            400: err('Bad query: a malformed time, since not before until (invalid_range), an unknown parameter.'),
            ...MANAGEMENT_ERRORS,
          },
        }),
      },
      '/v1/usage/series': {
        get: managed('Usage per hour or day (UTC) over a time range, every bucket included', {
          parameters: [...analyticsQuery, { name: 'interval', in: 'query', schema: { enum: ['hour', 'day'], default: 'day' } }],
          responses: {
            200: ok('Series', {
              type: 'object',
              required: ['object', 'interval', 'since', 'until', 'data'],
              properties: { object: { const: 'usage_series' }, interval: { enum: ['hour', 'day'] }, since: time, until: time, data: { type: 'array', items: aggregate({ start: time }) } },
            }),
            400: err('Bad query, or more than 10,000 buckets.'),
            ...MANAGEMENT_ERRORS,
          },
        }),
      },
      '/v1/usage.csv': {
        get: managed('Every usage row in the range as CSV, oldest first, streamed', {
          parameters: analyticsQuery,
          responses: {
            200: { description: 'RFC 4180 CSV with a header row; columns as the Usage object, cost in dollars.', content: { 'text/csv': { schema: { type: 'string' } } } },
            400: err('Bad query.'),
            ...MANAGEMENT_ERRORS,
          },
        }),
      },
      '/v1/budgets': {
        post: managed('Create a budget', { requestBody: json(CreateBudgetBody), responses: { 201: ok('Created', ref('Budget')), ...BODY_ERRORS, ...MANAGEMENT_ERRORS } }),
        get: managed('List budgets', { responses: { 200: ok('Budgets', listOf('Budget')), ...MANAGEMENT_ERRORS } }),
      },
      '/v1/budgets/{budget_id}': {
        parameters: [id('budget_id', 'The budget')],
        get: managed('Get a budget', { responses: { 200: ok('The budget', ref('Budget')), ...MANAGEMENT_ERRORS, 404: err('No such budget.') } }),
        patch: managed('Update a budget', { requestBody: json(UpdateBudgetBody), responses: { 200: ok('Updated', ref('Budget')), ...BODY_ERRORS, ...MANAGEMENT_ERRORS, 404: err('No such budget.') } }),
        delete: managed('Delete a budget (detached from users and keys)', { responses: { 200: ok('Deleted', deleted('budget', 'budget_id')), ...MANAGEMENT_ERRORS, 404: err('No such budget.') } }),
      },
      '/v1/pricing': { get: managed('List model pricing', { responses: { 200: ok('Pricing', listOf('ModelPricing')), ...MANAGEMENT_ERRORS } }) },
      '/v1/pricing/{model}': {
        parameters: [id('model', 'provider:model')],
        get: managed('Get the pricing of a model', { responses: { 200: ok('Pricing', ref('ModelPricing')), 400: err('Not provider:model.'), ...MANAGEMENT_ERRORS, 404: err('No pricing for this model.') } }),
        put: managed('Set the pricing of a model', { requestBody: json(PricingBody), responses: { 200: ok('Pricing', ref('ModelPricing')), ...BODY_ERRORS, ...MANAGEMENT_ERRORS } }),
        delete: managed('Remove the pricing of a model (its calls then cost 0)', { responses: { 200: ok('Deleted', deleted('model_pricing', 'model')), 400: err('Not provider:model.'), ...MANAGEMENT_ERRORS, 404: err('No pricing for this model.') } }),
      },
      '/v1/providers': { get: managed('List the providers and their settings (keys only as api_key_set)', { responses: { 200: ok('Providers', listOf('Provider')), ...MANAGEMENT_ERRORS } }) },
      '/v1/providers/{name}': {
        parameters: [id('name', 'The provider, e.g. openai')],
        get: managed('Get a provider', { responses: { 200: ok('The provider', ref('Provider')), ...MANAGEMENT_ERRORS, 404: err('No such provider (provider_not_found).') } }),
        put: managed('Create or change a provider (fields left out keep their value, null clears one); every instance uses it within a second', {
          requestBody: json(ProviderBody),
          responses: {
            200: ok('The provider', ref('Provider')),
            ...BODY_ERRORS,
            400: err('Invalid JSON (invalid_json), a provider Hub does not know (unknown_provider, param "name"), or a bad field (param names it).'),
            ...MANAGEMENT_ERRORS,
            409: err('Other changes kept landing while this one was retried (concurrent_change); send it again.'),
          },
        }),
        delete: managed('Delete a provider', {
          responses: {
            200: ok('Deleted', deleted('provider', 'name')),
            ...MANAGEMENT_ERRORS,
            404: err('No such provider (provider_not_found).'),
            409: err('A model route sends calls to it with its settings (provider_in_use; the message names the routes).'),
          },
        }),
      },
      '/v1/routes': { get: managed('List the model routes', { responses: { 200: ok('Model routes', listOf('ModelRoute')), ...MANAGEMENT_ERRORS } }) },
      '/v1/routes/{name}': {
        parameters: [id('name', 'The public model name')],
        get: managed('Get a model route', { responses: { 200: ok('The route', ref('ModelRoute')), ...MANAGEMENT_ERRORS, 404: err('No such route (route_not_found).') } }),
        put: managed('Create or replace a model route; every instance uses it within a second', {
          requestBody: json(RouteBody),
          responses: {
            200: ok('The route', ref('ModelRoute')),
            ...BODY_ERRORS,
            400: err('Invalid JSON (invalid_json); a target of a provider that is not configured and has no api_key/api_base of its own, or that Hub does not know (unknown_provider, param targets.N.model); a weight or priority out of range, a weight without priorities, priority on some targets only, api_key_set with no stored key to keep (param names the field).'),
            ...MANAGEMENT_ERRORS,
            409: err('Other changes kept landing while this one was retried (concurrent_change); send it again.'),
          },
        }),
        delete: managed('Delete a model route', { responses: { 200: ok('Deleted', deleted('model_route', 'name')), ...MANAGEMENT_ERRORS, 404: err('No such route (route_not_found).') } }),
      },
      '/v1/audit': {
        get: managed('Changes of prices, providers and model routes, newest first', {
          parameters: [
            { name: 'kind', in: 'query', schema: { enum: ['pricing', 'provider', 'route'] } },
            { name: 'name', in: 'query', schema: { type: 'string' }, description: 'Only changes of this entry' },
            { name: 'since', in: 'query', schema: { type: 'string' }, description: 'ISO 8601; changes at or after' },
            { name: 'until', in: 'query', schema: { type: 'string' }, description: 'ISO 8601; changes before' },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
            { name: 'cursor', in: 'query', schema: { type: 'string' }, description: 'next_cursor of the previous page' },
          ],
          responses: { 200: ok('Changes', listOf('ConfigChange', { next_cursor: nullable('string', { description: 'Pass as cursor for the next (older) page; null: no more' }) })), 400: err('Bad query.'), ...MANAGEMENT_ERRORS },
        }),
      },
      '/v1/chat/completions': {
        post: managed('OpenAI chat completion through the provider named in model (provider:model) or the targets of a model route', {
          requestBody: passThrough('An OpenAI chat completion request; model is a model route name or provider:model; user is required with the master key. Other fields are passed on.', ['model', 'messages']),
          responses: {
            200: {
              description: 'An OpenAI ChatCompletion, or with stream true Server-Sent Events of ChatCompletionChunk ending in data: [DONE]; a failure mid-stream ends with a data: {"error":…} event.',
              content: { 'application/json': { schema: ref('ChatCompletion') }, 'text/event-stream': { schema: { type: 'string' } } },
            },
            ...MODEL_CALL_ERRORS,
          },
        }),
      },
      '/v1/responses': {
        post: managed('OpenAI Responses API through Hub, for providers that offer it', {
          requestBody: passThrough('An OpenAI Responses request; model is a model route name or provider:model; input (string or array) is required; user is required with the master key. Other fields are passed on.', ['model', 'input']),
          responses: {
            200: {
              description:
                'An OpenAI Response, or with stream true its Server-Sent Events (event: response.created … response.completed); usage is recorded from response.usage; a failure mid-stream ends with event: error.',
              content: { 'application/json': { schema: { type: 'object', required: ['id', 'object'], properties: { id: { type: 'string' }, object: { const: 'response' } }, additionalProperties: true } }, 'text/event-stream': { schema: { type: 'string' } } },
            },
            ...MODEL_CALL_ERRORS,
          },
        }),
      },
      '/v1/embeddings': {
        post: managed('OpenAI embeddings', {
          requestBody: passThrough('model (a model route name or provider:model), input (string or array of strings), encoding_format (float or base64), dimensions (positive integer, for providers that shorten vectors), user (with the master key).', ['model', 'input']),
          responses: { 200: ok('An OpenAI CreateEmbeddingResponse', ref('Embeddings')), ...MODEL_CALL_ERRORS },
        }),
      },
      '/v1/rerank': {
        post: managed("Cohere's rerank through the provider named in model (cohere, voyage, encoder cross-encoder servers)", {
          requestBody: { required: true, content: { 'application/json': { schema: ref('RerankRequest') } } },
          responses: { 200: ok('The documents most relevant first', ref('Rerank')), ...MODEL_CALL_ERRORS },
        }),
      },
      '/v2/rerank': {
        post: managed('The same as /v1/rerank, at the path of the Cohere v2 client', {
          requestBody: { required: true, content: { 'application/json': { schema: ref('RerankRequest') } } },
          responses: { 200: ok('The documents most relevant first', ref('Rerank')), ...MODEL_CALL_ERRORS },
        }),
      },
      '/v1/models': {
        get: managed('The model routes (public names, owned_by gateway), then the models of every configured provider, ids as provider:model; a virtual key sees those it may call', {
          parameters: [{ name: 'provider', in: 'query', schema: { type: 'string' }, description: 'Only this provider (no model routes)' }],
          responses: { 200: ok('An OpenAI model list', ref('ModelList')), 400: err('Unknown provider.'), ...AUTH_ERRORS, 429: MODEL_CALL_ERRORS[429], 502: MODEL_CALL_ERRORS[502], 504: MODEL_CALL_ERRORS[504] },
        }),
      },
      '/v1/models/{model}': {
        parameters: [id('model', 'A model route name, or provider:model or provider/model (the separator and any / in the model may be sent unencoded or percent-encoded)')],
        get: managed('One model as GET /v1/models lists it (OpenAI\'s models.retrieve); provider/model is answered with the id provider:model', {
          responses: {
            200: ok('An OpenAI model object', { type: 'object', required: ['id', 'object'], properties: { id: { type: 'string' }, object: { const: 'model' }, created: { type: 'integer' }, owned_by: { type: 'string' } }, additionalProperties: true }),
            ...AUTH_ERRORS,
            404: err('No such model route or provider model, the provider is not configured, or the key may not call it (model_not_found, param "model").'),
            429: MODEL_CALL_ERRORS[429],
            502: MODEL_CALL_ERRORS[502],
            504: MODEL_CALL_ERRORS[504],
          },
        }),
      },
      '/v1/messages/count_tokens': {
        post: managed("Anthropic's count_tokens: the input tokens of a Messages request; not billed, no usage row; held to allowed_models", {
          requestBody: passThrough('model (a model route name, provider:model or provider/model), messages, and optionally system, tools, tool_choice, thinking; other fields are not sent.', ['model', 'messages']),
          responses: {
            200: {
              ...ok('Counted by the provider (Anthropic), or estimated (a token per 4 characters) for providers that cannot count', { type: 'object', required: ['input_tokens'], properties: { input_tokens: { type: 'integer' } } }),
              headers: { 'x-token-count-estimate': { description: '"true" when input_tokens is the gateway\'s estimate, absent when the provider counted', schema: { const: 'true' } } },
            },
            400: MODEL_CALL_ERRORS[400],
            ...AUTH_ERRORS,
            403: err('The model (route name or provider:model) is not in an allowed_models list of the key or its owner (model_not_allowed).'),
            413: BODY_ERRORS[413],
            415: BODY_ERRORS[415],
            429: MODEL_CALL_ERRORS[429],
            502: MODEL_CALL_ERRORS[502],
            504: MODEL_CALL_ERRORS[504],
          },
        }),
      },
      '/v1/messages': {
        post: {
          summary: 'Anthropic Messages format; user from user or metadata.user_id with the master key',
          security: [{ hubKey: [] }, { bearer: [] }, { anthropicKey: [] }],
          requestBody: passThrough('An Anthropic Messages request; model is a model route name or provider:model.', ['model', 'messages', 'max_tokens']),
          responses: {
            200: {
              description: 'An Anthropic Message, or with stream true its Server-Sent Events; a failure mid-stream ends with event: error.',
              content: { 'application/json': { schema: ref('AnthropicMessage') }, 'text/event-stream': { schema: { type: 'string' } } },
            },
            ...MODEL_CALL_ERRORS,
          },
        },
      },
    },
  };
}
