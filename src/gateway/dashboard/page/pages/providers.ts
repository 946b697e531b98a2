import { recordPath, type List, type Provider } from '../api.ts';
import { field, formValues, h, table } from '../dom.ts';
import { utc } from '../format.ts';
import { deleteButton, formAction, heading, type Page, type PageContext } from '../page.ts';

/**
 * The providers (GET /v1/providers) and their editor: PUT /v1/providers/{name} sets or clears a provider's base address
 * and key, DELETE removes it. The key is write-only: the page shows whether one is set, never the key, and an empty key
 * field keeps the stored one. The API's 400s are shown next to the field they name.
 */
export const providersPage: Page = {
  path: 'providers',
  title: 'Providers',
  async render(context: PageContext) {
    const providers = await context.api.call<List<Provider>>('GET', '/v1/providers');
    return h(
      'div',
      { class: 'page' },
      heading(
        'Providers',
        'The model providers the gateway calls (provider:model), with their base address and key. A change applies to the next call on every gateway instance. Keys are write-only: shown as set or not set.',
      ),
      providerForm(context, null),
      table(
        'Providers',
        ['Provider', 'Base address', 'API key', 'Source', 'Changed (UTC)', ''],
        providers.data.map((provider) => [
          h('code', {}, provider.name),
          provider.api_base ?? "the provider's default",
          h('span', { class: provider.api_key_set ? 'status active' : 'status inactive' }, provider.api_key_set ? 'set' : 'not set'),
          provider.source === 'config' ? 'configuration file' : 'set here or by the API',
          utc(provider.updated_at),
          providerActions(context, provider),
        ]),
        'No provider is configured.',
      ),
    );
  },
};

/** The form that PUTs a provider: a new one (`provider` null, with a Name field) or the one of a row. */
function providerForm(context: PageContext, provider: Provider | null): HTMLFormElement {
  const form: HTMLFormElement = h(
    'form',
    {
      class: provider ? 'stack' : 'inline-form',
      'aria-label': provider ? `Settings of ${provider.name}` : 'Add a provider',
      onSubmit: formAction(context, () => {
        const values = formValues(form);
        const name = provider?.name ?? values.name;
        // an empty base address is the provider's default (cleared when editing); an empty key keeps the stored one
        const body: { api_base?: string | null; api_key?: string | null } = {};
        if (values.api_base || provider) body.api_base = values.api_base || null;
        if (values.api_key) body.api_key = values.api_key;
        else if (values.remove_key === 'true') body.api_key = null;
        return context.api.call('PUT', recordPath('providers', name), body);
      }),
    },
    provider ? null : field('Name', h('input', { name: 'name', required: true, maxlength: 64, placeholder: 'openai, anthropic, mistral, …', spellcheck: 'false' })),
    field('Base address', h('input', { name: 'api_base', inputmode: 'url', maxlength: 2048, size: 30, spellcheck: 'false', value: provider?.api_base ?? '', placeholder: "the provider's default" })),
    field(
      provider?.api_key_set ? 'New API key' : 'API key',
      h('input', { name: 'api_key', type: 'password', autocomplete: 'off', maxlength: 4096 }),
      provider?.api_key_set ? 'empty: keep the one set' : undefined,
    ),
    provider?.api_key_set
      ? field('Stored key', h('select', { name: 'remove_key' }, h('option', { value: 'false' }, 'keep (or replace)'), h('option', { value: 'true' }, 'remove')))
      : null,
    h('button', { type: 'submit' }, provider ? 'Save' : 'Add provider'),
  );
  return form;
}

function providerActions(context: PageContext, provider: Provider): HTMLElement {
  return h(
    'div',
    { class: 'actions', role: 'group', 'aria-label': `Actions for ${provider.name}` },
    h('details', {}, h('summary', {}, 'Edit'), providerForm(context, provider)),
    deleteButton(context, recordPath('providers', provider.name), `Delete the provider ${provider.name}? Its models can no longer be called (a route using it must be changed first).`),
  );
}
