import { BUNDLED_PRICES, BUNDLED_PRICES_DATE } from './pricing-table.ts';
import type { PricingRecord } from './storage/index.ts';

/** `require_pricing`: one switch for every model, or a switch per `provider:model`, `provider:*` and `*`. */
export type PricingRequirement = boolean | Readonly<Record<string, boolean>>;

/**
 * A model's prices and where they come from: the gateway's own table — written from the configuration file (`config`)
 * or through PUT /v1/pricing (`api`) — or the bundled one.
 */
export type PricedModel = PricingRecord & { source: 'config' | 'api' | 'bundled' };

const BUNDLED_AT = Date.parse(`${BUNDLED_PRICES_DATE}T00:00:00Z`);

/**
 * Which models must be priced before they are called (fail closed: a call the gateway cannot price is a call no
 * budget can hold) and the bundled price table behind the gateway's own.
 */
export class PricingPolicy {
  readonly #requirement: PricingRequirement;
  readonly #bundled: boolean;

  constructor(options: { requirePricing?: PricingRequirement; bundledPricing?: boolean } = {}) {
    this.#requirement = options.requirePricing ?? true;
    this.#bundled = options.bundledPricing ?? true;
  }

  /** Whether a call to `model` (provider:model) without a price is refused: the most specific entry decides, default true. */
  required(model: string): boolean {
    const rule = this.#requirement;
    if (typeof rule === 'boolean') return rule;
    const colon = model.indexOf(':');
    for (const key of [model, `${model.slice(0, colon)}:*`, '*']) {
      if (Object.hasOwn(rule, key)) return rule[key];
    }
    return true;
  }

  /** The bundled prices of a model, when the table is on and has it. */
  bundled(model: string): PricedModel | null {
    const prices = this.#bundled && Object.hasOwn(BUNDLED_PRICES, model) ? BUNDLED_PRICES[model] : undefined;
    if (!prices) return null;
    return {
      model,
      input_cost_per_million: prices.input_cost_per_million ?? 0,
      output_cost_per_million: prices.output_cost_per_million ?? 0,
      search_unit_cost_per_thousand: prices.search_unit_cost_per_thousand ?? 0,
      updated_at: BUNDLED_AT,
      source: 'bundled',
    };
  }

  /** A stored price if there is one, else the bundled one. */
  resolve(stored: PricingRecord | null, model: string): PricedModel | null {
    return stored ? { ...stored, source: stored.source ?? 'api' } : this.bundled(model);
  }

  /** The stored prices and the bundled ones they do not override, by model name. */
  list(stored: PricingRecord[]): PricedModel[] {
    const own = new Set(stored.map((record) => record.model));
    const bundled = this.#bundled ? Object.keys(BUNDLED_PRICES).filter((model) => !own.has(model)) : [];
    return [...stored.map((record) => ({ ...record, source: record.source ?? 'api' })), ...bundled.map((model) => this.bundled(model)!)].sort((a, b) =>
      a.model < b.model ? -1 : a.model > b.model ? 1 : 0,
    );
  }
}
