import type { FastifyInstance, FastifyRequest } from 'fastify';
import { invalidRequest, notFound } from '../errors.ts';
import type { ChangeAuthor } from '../runtime-config.ts';
import { parseTimestamp } from '../time.ts';
import type { GatewayContext } from './context.ts';
import type { ManagementRouteOptions } from './management-routes.ts';
import { AuditQuery, PricingBody, ProviderBody, RouteBody } from './management-schemas.ts';
import { configChangeResource, pricingResource, providerResource, routeResource } from './resources.ts';
import { parseWith } from './validation.ts';

type Params = { name: string; '*': string };

/**
 * The runtime configuration: prices, providers and model routes, each change audited and seen by every instance on
 * the database within CONFIG_POLL_MS (runtime-config.ts); and the audit. Pricing and route names contain ':' and
 * may contain '/', hence the wildcards.
 */
export function registerConfigRoutes(app: FastifyInstance, context: GatewayContext, master: ManagementRouteOptions): void {
  const { store, pricing: pricingPolicy, runtimeConfig } = context;
  const author = (request: FastifyRequest): ChangeAuthor => ({ actor: 'master_key', client: request.ip, request_id: request.id });

  // Pricing: the gateway's own prices (configuration file, PUT) and, below them, the bundled ones (source: "bundled").

  app.get('/v1/pricing', master, async () => ({ object: 'list', data: pricingPolicy.list(await store.pricing.list()).map(pricingResource) }));

  app.get<{ Params: Params }>('/v1/pricing/*', master, async (request) => {
    const model = modelParam(request.params['*']);
    const pricing = pricingPolicy.resolve(await store.pricing.get(model), model);
    if (!pricing) throw notFound('pricing for model', request.params['*'], 'pricing_not_found');
    return pricingResource(pricing);
  });

  app.put<{ Params: Params }>('/v1/pricing/*', master, async (request) => {
    const model = modelParam(request.params['*']);
    const body = parseWith(PricingBody, request.body);
    return pricingResource(pricingPolicy.resolve(await runtimeConfig.putPricing(model, body, author(request)), model)!);
  });

  app.delete<{ Params: Params }>('/v1/pricing/*', master, async (request) => {
    const model = modelParam(request.params['*']);
    if (!(await runtimeConfig.deletePricing(model, author(request)))) throw notFound('pricing for model', model, 'pricing_not_found');
    return { object: 'model_pricing', model, deleted: true };
  });

  // Providers (their keys are write-only: answers and the audit say only api_key_set)

  app.get('/v1/providers', master, async () => ({ object: 'list', data: (await store.providers.list()).map(providerResource) }));

  app.get<{ Params: Params }>('/v1/providers/:name', master, async (request) => {
    const provider = await store.providers.get(request.params.name);
    if (!provider) throw notFound('provider', request.params.name);
    return providerResource(provider);
  });

  app.put<{ Params: Params }>('/v1/providers/:name', master, async (request) => {
    const body = parseWith(ProviderBody, request.body);
    return providerResource(await runtimeConfig.putProvider(request.params.name, body, author(request)));
  });

  app.delete<{ Params: Params }>('/v1/providers/:name', master, async (request) => {
    if (!(await runtimeConfig.deleteProvider(request.params.name, author(request)))) throw notFound('provider', request.params.name);
    return { object: 'provider', name: request.params.name, deleted: true };
  });

  // Model routes

  app.get('/v1/routes', master, async () => ({ object: 'list', data: (await store.routes.list()).map(routeResource) }));

  app.get<{ Params: Params }>('/v1/routes/*', master, async (request) => {
    const route = await store.routes.get(request.params['*']);
    if (!route) throw notFound('model route', request.params['*'], 'route_not_found');
    return routeResource(route);
  });

  app.put<{ Params: Params }>('/v1/routes/*', master, async (request) => {
    const body = parseWith(RouteBody, request.body);
    return routeResource(await runtimeConfig.putRoute(request.params['*'], body, author(request)));
  });

  app.delete<{ Params: Params }>('/v1/routes/*', master, async (request) => {
    const name = request.params['*'];
    if (!(await runtimeConfig.deleteRoute(name, author(request)))) throw notFound('model route', name, 'route_not_found');
    return { object: 'model_route', name, deleted: true };
  });

  // The audit of the three

  app.get('/v1/audit', master, async (request) => {
    const query = parseWith(AuditQuery, request.query ?? {}, 'query');
    const { data, next_cursor } = await store.audit.list({
      kind: query.kind,
      name: query.name,
      since: query.since === undefined ? undefined : parseTimestamp(query.since, 'since'),
      until: query.until === undefined ? undefined : parseTimestamp(query.until, 'until'),
      limit: query.limit ?? 100,
      cursor: query.cursor === undefined ? undefined : cursorOf(query.cursor),
    });
    return { object: 'list', data: data.map(configChangeResource), next_cursor: next_cursor && `${next_cursor.created_at}.${next_cursor.id}` };
  });
}

/** The wildcard parameter arrives decoded (find-my-way decodes it once); decoding again broke names with '%'. */
function modelParam(model: string): string {
  if (!/^[^:\s]+:.+$/.test(model)) throw invalidRequest(`Pricing is per provider:model, got "${model}"`, 'model');
  return model;
}

/** `next_cursor` is `<created_at ms>.<change id>`. */
function cursorOf(cursor: string): { created_at: number; id: string } {
  const dot = cursor.indexOf('.');
  const createdAt = Number(cursor.slice(0, dot));
  if (dot <= 0 || !Number.isSafeInteger(createdAt) || dot === cursor.length - 1) throw invalidRequest('cursor: not a next_cursor of this list', 'cursor');
  return { created_at: createdAt, id: cursor.slice(dot + 1) };
}
