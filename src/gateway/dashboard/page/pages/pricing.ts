import { recordPath, type List, type Pricing } from '../api.ts';
import { field, formValues, h, table } from '../dom.ts';
import { money, utc } from '../format.ts';
import { deleteButton, formAction, heading, type Page, type PageContext } from '../page.ts';

/**
 * The price table (GET /v1/pricing) and its editor: PUT /v1/pricing/{provider:model} sets a model's prices (a new one,
 * or over a bundled price), DELETE removes the gateway's own price (a model with a bundled one falls back to it). A
 * change applies to the next call on every instance. The API's 400s are shown next to the field they name.
 */
export const pricingPage: Page = {
  path: 'pricing',
  title: 'Pricing',
  async render(context: PageContext) {
    const pricing = await context.api.call<List<Pricing>>('GET', '/v1/pricing');
    // the gateway's own prices (the ones an operator edits) above the bundled ones, each part in the API's order
    const prices = [...pricing.data.filter((price) => price.source !== 'bundled'), ...pricing.data.filter((price) => price.source === 'bundled')];
    return h(
      'div',
      { class: 'page' },
      heading(
        'Pricing',
        'What a call costs, in US$ per million tokens (rerank: per thousand search units). The next call is billed at a changed price, on every gateway instance. Bundled prices ship with the gateway; setting one overrides it, deleting the override brings it back.',
      ),
      priceForm(context, null),
      table(
        'Prices',
        ['Model', 'Input per 1M tokens', 'Output per 1M tokens', 'Per 1K search units', 'Source', 'Changed (UTC)', ''],
        prices.map((price) => [
          h('code', {}, price.model),
          money(price.input_cost_per_million),
          money(price.output_cost_per_million),
          money(price.search_unit_cost_per_thousand),
          SOURCES[price.source],
          price.source === 'bundled' ? '—' : utc(price.updated_at),
          priceActions(context, price),
        ]),
        'No model is priced.',
      ),
    );
  },
};

const SOURCES: Record<Pricing['source'], string> = { config: 'configuration file', api: 'set here or by the API', bundled: 'bundled' };

/** The form that PUTs a price: a new model's (`price` null, with a Model field) or the one of a row. */
function priceForm(context: PageContext, price: Pricing | null): HTMLFormElement {
  const form: HTMLFormElement = h(
    'form',
    {
      class: price ? 'stack' : 'inline-form',
      'aria-label': price ? `Prices of ${price.model}` : 'Set a price',
      onSubmit: formAction(context, () => {
        const values = formValues(form);
        const model = price?.model ?? values.model;
        return context.api.call('PUT', recordPath('pricing', model), {
          input_cost_per_million: Number(values.input_cost_per_million || 0),
          output_cost_per_million: Number(values.output_cost_per_million || 0),
          search_unit_cost_per_thousand: Number(values.search_unit_cost_per_thousand || 0),
        });
      }),
    },
    price ? null : field('Model', h('input', { name: 'model', required: true, maxlength: 512, placeholder: 'provider:model', spellcheck: 'false' })),
    field('Input (US$ per 1M tokens)', h('input', { name: 'input_cost_per_million', type: 'number', min: 0, step: 'any', value: price?.input_cost_per_million ?? '' })),
    field('Output (US$ per 1M tokens)', h('input', { name: 'output_cost_per_million', type: 'number', min: 0, step: 'any', value: price?.output_cost_per_million ?? '' })),
    field('Search units (US$ per 1K)', h('input', { name: 'search_unit_cost_per_thousand', type: 'number', min: 0, step: 'any', value: price?.search_unit_cost_per_thousand ?? '' })),
    h('button', { type: 'submit' }, price ? 'Save' : 'Set price'),
  );
  return form;
}

function priceActions(context: PageContext, price: Pricing): HTMLElement {
  const own = price.source !== 'bundled';
  return h(
    'div',
    { class: 'actions', role: 'group', 'aria-label': `Actions for ${price.model}` },
    h('details', {}, h('summary', {}, own ? 'Edit' : 'Override'), priceForm(context, price)),
    own ? deleteButton(context, recordPath('pricing', price.model), `Delete the price of ${price.model}? Its calls are then billed at its bundled price, or refused (402 pricing_missing) without one.`) : null,
  );
}
