import { recordPath, type CreatedKey, type VirtualKey } from '../api.ts';
import { field, formValues, h, table } from '../dom.ts';
import { modelList, parseModelList, utc } from '../format.ts';
import { readRecords } from '../names.ts';
import { action, budgetChoices, deleteButton, heading, idSelect, userChoices, type Choice, type Page, type PageContext } from '../page.ts';

/**
 * The secret of a key just created or rotated: handed from the action to the next render, which puts it into one
 * panel and forgets it. Closing the panel removes it from the page; nothing else ever holds it.
 */
let freshSecret: { title: string; key: CreatedKey } | null = null;

const GRACE_CHOICES: [number, string][] = [
  [0, 'stops at once'],
  [3_600, 'works 1 more hour'],
  [86_400, 'works 1 more day'],
  [604_800, 'works 1 more week'],
];

export const keysPage: Page = {
  path: 'keys',
  title: 'Keys',
  async render(context: PageContext) {
    const { users, keys, budgets, names } = await readRecords(context.api);
    const budgetList = budgetChoices(budgets);
    const secret = freshSecret;
    freshSecret = null;

    const create = h(
      'form',
      {
        class: 'inline-form',
        'aria-label': 'Create a key',
        onSubmit: action(context, async () => {
          const values = formValues(create);
          const key = await context.api.call<CreatedKey>('POST', '/v1/keys', {
            key_name: values.key_name,
            user_id: values.user_id || null,
            budget_id: values.budget_id || null,
            expires_at: values.expires_at ? `${values.expires_at}:00Z` : null,
            allowed_models: parseModelList(values.allowed_models ?? ''),
            allow_user_override: values.allow_user_override === 'true',
          });
          freshSecret = { title: `Key "${key.key_name}" created`, key };
        }),
      },
      field('Name', h('input', { name: 'key_name', required: true, maxlength: 256 })),
      field('User', idSelect('user_id', userChoices(users), 'no user')),
      field('Budget', idSelect('budget_id', budgetList, 'no budget')),
      field('Expires (UTC)', h('input', { name: 'expires_at', type: 'datetime-local' })),
      field('Allowed models', h('input', { name: 'allowed_models', placeholder: 'all models', size: 28 }), 'provider:model or provider:*, comma-separated'),
      userOverrideField(false),
      h('button', { type: 'submit' }, 'Create key'),
    );

    return h(
      'div',
      { class: 'page' },
      heading('Keys', 'Virtual keys: create, deactivate, rotate, and set their budget and allowed models. A secret is shown once.'),
      secret ? secretPanel(secret.title, secret.key) : null,
      create,
      table(
        'Keys',
        ['Name', 'Key', 'User', 'Budget', 'Status', 'Allowed models', 'Created', 'Expires', ''],
        keys.map((key) => [
          key.key_name,
          h('code', {}, `${key.key_prefix}…`),
          names.user(key.user_id),
          names.budget(key.budget_id),
          h('span', { class: `status ${key.status}` }, key.status),
          modelList(key.allowed_models),
          utc(key.created_at),
          utc(key.expires_at),
          keyActions(context, key, budgetList),
        ]),
        'No keys yet.',
      ),
    );
  },
};

/** Whether calls with the key may name another "user" than its owner (allow_user_override). */
function userOverrideField(allowed: boolean): HTMLLabelElement {
  return field(
    'On behalf of others',
    h('select', { name: 'allow_user_override' }, h('option', { value: 'false', selected: !allowed }, 'refused (403)'), h('option', { value: 'true', selected: allowed }, 'passed to the provider')),
    'calls for someone other than the owner',
  );
}

function secretPanel(title: string, key: CreatedKey): HTMLElement {
  const copy = h('button', { type: 'button' }, 'Copy');
  copy.addEventListener('click', () => {
    navigator.clipboard.writeText(key.key).then(
      () => (copy.textContent = 'Copied'),
      () => (copy.textContent = 'Copy failed: select the text'),
    );
  });
  const panel = h(
    'section',
    { class: 'secret', role: 'region', 'aria-label': 'New secret' },
    h('h2', {}, title),
    h('p', {}, 'Copy the secret now. It is shown only this once: the gateway keeps only its hash.'),
    h('div', { class: 'secret-row' }, h('code', { class: 'secret-value' }, key.key), copy),
    key.previous_key_expires_at ? h('p', {}, `The previous secret works until ${utc(key.previous_key_expires_at)}.`) : null,
    h('button', { type: 'button', class: 'secondary', onClick: () => panel.remove() }, 'Done'),
  );
  return panel;
}

function keyActions(context: PageContext, key: VirtualKey, budgetList: Choice[]): HTMLElement {
  const path = recordPath('keys', key.id);
  const toggle = h(
    'button',
    { type: 'button', onClick: action(context, () => context.api.call('PATCH', path, { is_active: !key.is_active })) },
    key.is_active ? 'Deactivate' : 'Activate',
  );
  const edit: HTMLFormElement = h(
    'form',
    {
      class: 'stack',
      onSubmit: action(context, () => {
        const values = formValues(edit);
        return context.api.call('PATCH', path, {
          budget_id: values.budget_id || null,
          allowed_models: parseModelList(values.allowed_models ?? ''),
          allow_user_override: values.allow_user_override === 'true',
        });
      }),
    },
    field('Budget', idSelect('budget_id', budgetList, 'no budget', key.budget_id)),
    field('Allowed models', h('input', { name: 'allowed_models', value: key.allowed_models?.join(', ') ?? '', placeholder: 'all models' })),
    userOverrideField(key.allow_user_override),
    h('button', { type: 'submit' }, 'Save'),
  );
  const rotate: HTMLFormElement = h(
    'form',
    {
      class: 'stack',
      onSubmit: action(context, async () => {
        const grace = Number(formValues(rotate).grace_period_seconds);
        const rotated = await context.api.call<CreatedKey>('POST', `${path}/rotate`, { grace_period_seconds: grace });
        freshSecret = { title: `Key "${rotated.key_name}" rotated`, key: rotated };
      }),
    },
    field('Old secret', h('select', { name: 'grace_period_seconds' }, ...GRACE_CHOICES.map(([seconds, label]) => h('option', { value: seconds }, label)))),
    h('button', { type: 'submit' }, 'Rotate now'),
  );
  const remove = deleteButton(context, path, `Delete key "${key.key_name}"? Calls with it stop at once; its usage rows stay.`);
  return h(
    'div',
    { class: 'actions', role: 'group', 'aria-label': `Actions for ${key.key_name}` },
    toggle,
    h('details', {}, h('summary', {}, 'Edit'), edit),
    h('details', {}, h('summary', {}, 'Rotate'), rotate),
    remove,
  );
}
