import type { FastifyInstance, FastifyRequest } from 'fastify';
import { GatewayError, invalidRequest, notFound } from '../errors.ts';
import { displayPrefix, generateVirtualKey, hashSecret } from '../keys.ts';
import { nanosOf } from '../money.ts';
import { isoTime, parseTimestamp } from '../time.ts';
import { budgetChanges } from './budget-body.ts';
import type { GatewayContext } from './context.ts';
import {
  CreateBudgetBody,
  CreateKeyBody,
  CreateUserBody,
  KeyListQuery,
  RotateKeyBody,
  UpdateBudgetBody,
  UpdateKeyBody,
  UpdateUserBody,
  UsageQuery,
} from './management-schemas.ts';
import { registerConfigRoutes } from './config-routes.ts';
import { budgetResource, keyResource, usageResource, usageTotals, userResource } from './resources.ts';
import { parseWith } from './validation.ts';

type Params = { id: string; '*': string };

/** What every management route is registered with: the master key, a small body limit, no NUL in path parameters. */
export interface ManagementRouteOptions {
  bodyLimit: number;
  config: { credential: 'master' };
  preHandler: (request: FastifyRequest) => Promise<void>;
}

/**
 * Users, virtual keys, budgets, usage, and the runtime configuration (config-routes.ts): master key only (checked before the body is read, front-door.ts),
 * with a small body limit: none of these bodies needs more than a few KiB.
 */
export function registerManagementRoutes(app: FastifyInstance, context: GatewayContext, bodyLimit: number): void {
  const { store } = context;

  /** A list entry without ':' can only be a model route's public name; any other is a typo (the schema allows both). */
  function checkRouteNames(allowed: string[] | null | undefined): void {
    allowed?.forEach((entry, i) => {
      if (!entry.includes(':') && !context.router.names.includes(entry)) {
        throw invalidRequest(`allowed_models[${i}]: "${entry}" must be provider:model, provider:* or the name of a configured model route`, `allowed_models.${i}`);
      }
    });
  }

  // No stored id holds NUL (refused at creation; PostgreSQL text cannot): such a path names nothing.
  const noNulInPath = async (request: FastifyRequest) => {
    for (const value of Object.values((request.params ?? {}) as Record<string, string>)) {
      if (value.includes('\u0000')) throw new GatewayError(404, 'not_found_error', 'not_found', 'No record has an id containing a NUL character');
    }
  };
  const master: ManagementRouteOptions = { bodyLimit, config: { credential: 'master' }, preHandler: noNulInPath };

  const budgetMustExist = async (budgetId: string | null | undefined, param: string) => {
    if (budgetId && !(await store.budgets.get(budgetId))) throw invalidRequest(`No budget with id "${budgetId}"`, param, 'budget_not_found');
  };
  const userMustExist = async (userId: string | null | undefined, param: string) => {
    if (userId && !(await store.users.get(userId))) throw invalidRequest(`No user with id "${userId}"`, param, 'user_not_found');
  };
  const expiresAt = (value: string | null | undefined, now: number): number | null | undefined => {
    if (value === undefined || value === null) return value;
    const ms = parseTimestamp(value, 'expires_at');
    if (ms <= now) throw invalidRequest(`expires_at must be in the future, got ${value}`, 'expires_at');
    return ms;
  };

  // Users

  app.post('/v1/users', master, async (request, reply) => {
    const body = parseWith(CreateUserBody, request.body);
    checkRouteNames(body.allowed_models);
    await budgetMustExist(body.budget_id, 'budget_id');
    const user = await store.users.create(body);
    return reply.code(201).send(userResource(user));
  });

  app.get('/v1/users', master, async () => ({ object: 'list', data: (await store.users.list()).map(userResource) }));

  app.get<{ Params: Params }>('/v1/users/:id', master, async (request) => {
    const user = await store.users.get(request.params.id);
    if (!user) throw notFound('user', request.params.id);
    return userResource(user);
  });

  app.patch<{ Params: Params }>('/v1/users/:id', master, async (request) => {
    const body = parseWith(UpdateUserBody, request.body);
    checkRouteNames(body.allowed_models);
    if (!(await store.users.get(request.params.id))) throw notFound('user', request.params.id);
    await budgetMustExist(body.budget_id, 'budget_id');
    return userResource((await store.users.update(request.params.id, body))!);
  });

  app.delete<{ Params: Params }>('/v1/users/:id', master, async (request) => {
    if (!(await store.users.delete(request.params.id))) throw notFound('user', request.params.id);
    return { object: 'user', user_id: request.params.id, deleted: true };
  });

  app.get<{ Params: Params }>('/v1/users/:id/usage', master, async (request) => {
    if (!(await store.users.get(request.params.id))) throw notFound('user', request.params.id);
    return usageListing(context, { user_id: request.params.id }, request.query);
  });

  // Virtual keys

  app.post('/v1/keys', master, async (request, reply) => {
    const body = parseWith(CreateKeyBody, request.body);
    checkRouteNames(body.allowed_models);
    const now = Date.now();
    await userMustExist(body.user_id, 'user_id');
    await budgetMustExist(body.budget_id, 'budget_id');
    const secret = generateVirtualKey();
    const key = await store.keys.create(
      {
        key_hash: hashSecret(secret),
        key_prefix: displayPrefix(secret),
        key_name: body.key_name,
        user_id: body.user_id,
        budget_id: body.budget_id,
        metadata: body.metadata,
        expires_at: expiresAt(body.expires_at, now),
        allowed_models: body.allowed_models,
        allow_user_override: body.allow_user_override,
      },
      now,
    );
    return reply.code(201).send({ ...keyResource(key, now), key: secret });
  });

  app.get('/v1/keys', master, async (request) => {
    const query = parseWith(KeyListQuery, request.query, 'query');
    const now = Date.now();
    return { object: 'list', data: (await store.keys.list(query)).map((key) => keyResource(key, now)) };
  });

  app.get<{ Params: Params }>('/v1/keys/:id', master, async (request) => {
    const key = await store.keys.get(request.params.id);
    if (!key) throw notFound('virtual key', request.params.id, 'key_not_found');
    return keyResource(key);
  });

  app.patch<{ Params: Params }>('/v1/keys/:id', master, async (request) => {
    const body = parseWith(UpdateKeyBody, request.body);
    checkRouteNames(body.allowed_models);
    const now = Date.now();
    if (!(await store.keys.get(request.params.id))) throw notFound('virtual key', request.params.id, 'key_not_found');
    await userMustExist(body.user_id, 'user_id');
    await budgetMustExist(body.budget_id, 'budget_id');
    const key = await store.keys.update(request.params.id, { ...body, expires_at: expiresAt(body.expires_at, now) }, now);
    return keyResource(key!, now);
  });

  app.post<{ Params: Params }>('/v1/keys/:id/rotate', master, async (request) => {
    const body = parseWith(RotateKeyBody, request.body ?? {});
    const now = Date.now();
    const graceMs = (body.grace_period_seconds ?? 0) * 1000;
    const secret = generateVirtualKey();
    const key = await store.keys.rotate(request.params.id, { key_hash: hashSecret(secret), key_prefix: displayPrefix(secret) }, graceMs, now);
    if (!key) throw notFound('virtual key', request.params.id, 'key_not_found');
    return { ...keyResource(key, now), key: secret, previous_key_expires_at: graceMs > 0 ? isoTime(now + graceMs) : null };
  });

  app.delete<{ Params: Params }>('/v1/keys/:id', master, async (request) => {
    if (!(await store.keys.delete(request.params.id))) throw notFound('virtual key', request.params.id, 'key_not_found');
    return { object: 'virtual_key', id: request.params.id, deleted: true };
  });

  app.get<{ Params: Params }>('/v1/keys/:id/usage', master, async (request) => {
    if (!(await store.keys.get(request.params.id))) throw notFound('virtual key', request.params.id, 'key_not_found');
    return usageListing(context, { key_id: request.params.id }, request.query);
  });

  // Budgets

  app.post('/v1/budgets', master, async (request, reply) => {
    const body = parseWith(CreateBudgetBody, request.body);
    const budget = await store.budgets.create({ ...budgetChanges(body, null), max_budget_nanos: nanosOf(body.max_budget) });
    return reply.code(201).send(budgetResource(budget));
  });

  app.get('/v1/budgets', master, async () => ({ object: 'list', data: (await store.budgets.list()).map(budgetResource) }));

  app.get<{ Params: Params }>('/v1/budgets/:id', master, async (request) => {
    const budget = await store.budgets.get(request.params.id);
    if (!budget) throw notFound('budget', request.params.id);
    return budgetResource(budget);
  });

  app.patch<{ Params: Params }>('/v1/budgets/:id', master, async (request) => {
    const body = parseWith(UpdateBudgetBody, request.body);
    const stored = await store.budgets.get(request.params.id);
    if (!stored) throw notFound('budget', request.params.id);
    const budget = await store.budgets.update(request.params.id, budgetChanges(body, stored));
    if (!budget) throw notFound('budget', request.params.id);
    return budgetResource(budget);
  });

  app.delete<{ Params: Params }>('/v1/budgets/:id', master, async (request) => {
    if (!(await store.budgets.delete(request.params.id))) throw notFound('budget', request.params.id);
    return { object: 'budget', budget_id: request.params.id, deleted: true };
  });

  registerConfigRoutes(app, context, master);
}

async function usageListing(context: GatewayContext, subject: { user_id?: string; key_id?: string }, rawQuery: unknown) {
  const query = parseWith(UsageQuery, rawQuery ?? {}, 'query');
  const { data, totals } = await context.store.usage.list({
    ...subject,
    since: query.since === undefined ? undefined : parseTimestamp(query.since, 'since'),
    until: query.until === undefined ? undefined : parseTimestamp(query.until, 'until'),
    limit: query.limit ?? 100,
  });
  return { object: 'list', data: data.map(usageResource), totals: usageTotals(totals) };
}
