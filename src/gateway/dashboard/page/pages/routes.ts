import { recordPath, type List, type ModelRoute, type RouteTarget } from '../api.ts';
import { field, formValues, h, table } from '../dom.ts';
import { utc } from '../format.ts';
import { deleteButton, formAction, heading, type Page, type PageContext } from '../page.ts';

/**
 * The model routes (GET /v1/routes) and their editor: PUT /v1/routes/{name} writes a route whole (its targets with
 * provider:model, priority, weight and timeout, and its default timeout), DELETE removes it. A target's own base
 * address and key are not edited here: they are sent back as GET gave them (the key as api_key_set), so the API keeps
 * them. The API's 400s are shown next to the field they name (`targets.1.model` is the second target's Model).
 */
export const routesPage: Page = {
  path: 'routes',
  title: 'Routes',
  async render(context: PageContext) {
    const routes = await context.api.call<List<ModelRoute>>('GET', '/v1/routes');
    return h(
      'div',
      { class: 'page' },
      heading(
        'Routes',
        'Public model names and the provider:model targets they send calls to. Targets are tried by priority (lowest first; equal priorities share calls by weight), or in list order when none has a priority; the next one is tried when one fails. A change applies to the next call on every gateway instance.',
      ),
      h('details', { class: 'panel add-route' }, h('summary', {}, 'Add a route'), routeForm(context, null)),
      routes.data.length === 0 ? h('p', { class: 'empty' }, 'No model route yet.') : null,
      ...routes.data.map((route) => routeCard(context, route)),
    );
  },
};

function routeCard(context: PageContext, route: ModelRoute): HTMLElement {
  const about = [
    route.timeout_seconds === null ? 'no default timeout' : `timeout ${route.timeout_seconds} s`,
    route.source === 'config' ? 'from the configuration file' : 'set here or by the API',
    `changed ${utc(route.updated_at)}`,
  ].join(' · ');
  return h(
    'section',
    { class: 'panel route', 'aria-label': `Route ${route.name}` },
    h('h2', {}, h('code', {}, route.name)),
    h('p', { class: 'hint' }, about),
    table(
      `Targets of ${route.name}`,
      ['#', 'Target', 'Priority', 'Weight', 'Timeout', 'Own address or key'],
      route.targets.map((target, i) => [
        i + 1,
        h('code', {}, target.model),
        target.priority ?? '—',
        target.weight ?? '—',
        target.timeout_seconds === undefined ? '—' : `${target.timeout_seconds} s`,
        [target.api_base, target.api_key_set ? 'own key' : ''].filter(Boolean).join(', ') || '—',
      ]),
      'No targets.',
    ),
    h(
      'div',
      { class: 'actions', role: 'group', 'aria-label': `Actions for ${route.name}` },
      h('details', {}, h('summary', {}, 'Edit'), routeForm(context, route)),
      deleteButton(context, recordPath('routes', route.name), `Delete the route ${route.name}? Calls to it are then refused (unknown model).`),
    ),
  );
}

/** The route editor: a new route (`route` null, with a Name field) or the one of a card. */
function routeForm(context: PageContext, route: ModelRoute | null): HTMLFormElement {
  const targets = h('div', { class: 'targets' });
  const addTarget = (target: RouteTarget | null) => {
    targets.append(targetRow(target, renumber));
    renumber();
  };
  // names follow the API's params (targets.N.field), so a 400 lands on its field; renumbered after a removal
  const renumber = () =>
    [...targets.children].forEach((row, i) => {
      row.querySelector('legend')!.textContent = `Target ${i + 1}`;
      for (const control of row.querySelectorAll<HTMLInputElement>('[data-field]')) control.name = `targets.${i}.${control.dataset.field}`;
      row.querySelector('button.remove')!.setAttribute('aria-label', `Remove target ${i + 1}`);
      const up = row.querySelector<HTMLButtonElement>('button.move-up')!;
      up.setAttribute('aria-label', `Move up target ${i + 1}`);
      up.disabled = i === 0;
    });
  for (const target of route?.targets ?? [null]) addTarget(target);

  const form: HTMLFormElement = h(
    'form',
    {
      class: 'route-form',
      'aria-label': route ? `Edit route ${route.name}` : 'Add a route',
      onSubmit: formAction(context, () => {
        const values = formValues(form);
        const name = route?.name ?? values.name;
        return context.api.call('PUT', recordPath('routes', name), {
          targets: [...targets.children].map((_, i) => targetBody(values, `targets.${i}.`)),
          timeout_seconds: numberOrUndefined(values.timeout_seconds) ?? null,
        });
      }),
    },
    route ? null : field('Name', h('input', { name: 'name', required: true, maxlength: 256, spellcheck: 'false' }), 'the model name clients call'),
    field('Default timeout (s)', h('input', { name: 'timeout_seconds', type: 'number', min: 0, step: 'any', value: route?.timeout_seconds ?? '' }), "of targets without their own; empty: none"),
    h('fieldset', { class: 'target-list', 'data-param': 'targets' }, h('legend', {}, 'Targets'), targets),
    h('div', { class: 'actions' }, h('button', { type: 'button', class: 'secondary', onClick: () => addTarget(null) }, 'Add a target'), h('button', { type: 'submit' }, route ? 'Save route' : 'Add route')),
  );
  return form;
}

function targetRow(target: RouteTarget | null, renumber: () => void): HTMLFieldSetElement {
  const input = (fieldName: string, attributes: Record<string, string | number | boolean | undefined>) => h('input', { 'data-field': fieldName, ...attributes });
  const row: HTMLFieldSetElement = h(
    'fieldset',
    { class: 'target' },
    h('legend', {}),
    field('Model', input('model', { required: true, maxlength: 512, placeholder: 'provider:model', spellcheck: 'false', value: target?.model ?? '' })),
    field('Priority (0 first)', input('priority', { type: 'number', min: 0, step: 1, value: target?.priority ?? '' })),
    field('Weight', input('weight', { type: 'number', min: 1, step: 1, value: target?.weight ?? '' })),
    field('Timeout (s)', input('timeout_seconds', { type: 'number', min: 0, step: 'any', value: target?.timeout_seconds ?? '' })),
    // kept as GET gave them: the API keeps a stored key for api_key_set true
    target?.api_base ? input('api_base', { type: 'hidden', value: target.api_base }) : null,
    target?.api_key_set ? input('api_key_set', { type: 'hidden', value: 'true' }) : null,
    target?.api_base || target?.api_key_set ? h('p', { class: 'hint' }, `Keeps its own ${[target.api_base ? `address ${target.api_base}` : '', target.api_key_set ? 'key' : ''].filter(Boolean).join(' and ')}.`) : null,
    // list order is the fallback order of a route without priorities
    h(
      'button',
      {
        type: 'button',
        class: 'secondary move-up',
        onClick: (event: Event) => {
          const before = row.previousElementSibling;
          if (!before) return;
          before.before(row);
          renumber();
          (event.currentTarget as HTMLButtonElement).focus();
        },
      },
      'Move up',
    ),
    h(
      'button',
      {
        type: 'button',
        class: 'danger remove',
        onClick: () => {
          const list = row.parentElement!;
          if (list.children.length === 1) return;
          row.remove();
          renumber();
          list.querySelector<HTMLInputElement>('input:not([type=hidden])')?.focus();
        },
      },
      'Remove',
    ),
  );
  return row;
}

/** A target of the form as PUT takes it: only the fields given. */
function targetBody(values: Record<string, string>, prefix: string): Record<string, unknown> {
  const body: Record<string, unknown> = { model: values[`${prefix}model`] };
  for (const name of ['priority', 'weight', 'timeout_seconds']) {
    const value = numberOrUndefined(values[`${prefix}${name}`]);
    if (value !== undefined) body[name] = value;
  }
  if (values[`${prefix}api_base`]) body.api_base = values[`${prefix}api_base`];
  if (values[`${prefix}api_key_set`] === 'true') body.api_key_set = true;
  return body;
}

const numberOrUndefined = (value: string | undefined): number | undefined => (value ? Number(value) : undefined);
