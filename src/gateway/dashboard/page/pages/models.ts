import { ApiError, SessionEnded, type List, type Model, type Pricing } from '../api.ts';
import { h, table } from '../dom.ts';
import { money } from '../format.ts';
import { errorBanner, heading, type Page, type PageContext } from '../page.ts';

/**
 * What models this gateway serves and what they cost: GET /v1/models (the configured providers' models) joined with
 * GET /v1/pricing. A priced model no provider listed is still shown.
 *
 * Model routes (public names → provider targets, the gateway's `models:` configuration) hook in at `routeOf`: an
 * entry of /v1/models that carries `targets` shows them in the Route column.
 */
export const modelsPage: Page = {
  path: 'models',
  title: 'Models',
  async render(context: PageContext) {
    const [models, pricing] = await Promise.all([
      // providers can fail (502) while pricing is still worth showing: that error goes above the table
      context.api.call<List<Model>>('GET', '/v1/models').catch((error: unknown) => {
        if (error instanceof SessionEnded || !(error instanceof ApiError)) throw error;
        return error;
      }),
      context.api.call<List<Pricing>>('GET', '/v1/pricing'),
    ]);
    const prices = new Map(pricing.data.map((entry) => [entry.model, entry]));
    const listed = models instanceof ApiError ? [] : models.data;
    const ids = [...new Set([...listed.map((model) => model.id), ...prices.keys()])].sort();
    const byId = new Map(listed.map((model) => [model.id, model]));
    return h(
      'div',
      { class: 'page' },
      heading(
        'Models',
        'The model routes and the models of the configured providers (GET /v1/models), and their prices (US$ per million tokens; a route costs what the target that answers costs). Calls to a model without a price are refused (402 pricing_missing) unless require_pricing exempts it; then they cost $0. Prices, routes and providers are edited on their own pages.',
      ),
      models instanceof ApiError ? errorBanner(models) : null,
      table(
        'Models and prices',
        ['Model', 'Provider', 'Route', 'Input per 1M tokens', 'Output per 1M tokens', 'Source'],
        ids.map((id) => {
          const price = prices.get(id);
          const model = byId.get(id);
          return [
            h('code', {}, id),
            isRoute(model) ? 'model route' : id.slice(0, Math.max(0, id.indexOf(':'))),
            routeOf(model),
            price ? money(price.input_cost_per_million) : isRoute(model) ? 'its targets\' prices' : 'not priced',
            price ? money(price.output_cost_per_million) : isRoute(model) ? 'its targets\' prices' : 'not priced',
            model ? (isRoute(model) ? 'gateway configuration' : price ? `provider, ${pricingSource(price)}` : 'provider') : `${pricingSource(price!)} only`,
          ];
        }),
        'No provider is configured and no model is priced.',
      ),
    );
  },
};

/** Where a price comes from: the gateway's own table (configuration, PUT) or the one bundled with it. */
function pricingSource(price: Pricing): string {
  return price.source === 'bundled' ? 'bundled pricing' : 'pricing';
}

/** A model route's public name (the gateway's `models:` section), as /v1/models lists them. */
function isRoute(model: Model | undefined): boolean {
  return model?.owned_by === 'gateway';
}

/** The route hook: the targets a model route sends a public name to, when /v1/models gives them. */
function routeOf(model: Model | undefined): string {
  if (!model || model.targets === undefined) return 'direct';
  const targets = Array.isArray(model.targets) ? model.targets : [model.targets];
  return `→ ${targets.map(targetText).join(', ')}`;
}

/** A target as /v1/models gives it to the master key: `{model, priority, weight}` (priority 0 is tried first). */
function targetText(target: unknown): string {
  if (typeof target === 'string') return target;
  const { model, priority, weight } = target as { model?: unknown; priority?: unknown; weight?: unknown };
  if (typeof model !== 'string') return JSON.stringify(target);
  const details = [typeof priority === 'number' && priority > 0 ? `fallback ${priority}` : '', typeof weight === 'number' && weight !== 1 ? `weight ${weight}` : ''].filter(Boolean);
  return details.length ? `${model} (${details.join(', ')})` : model;
}
