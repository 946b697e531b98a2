import { recordPath, type Budget, type List, type User } from '../api.ts';
import { Names } from '../names.ts';
import { field, formValues, h, table } from '../dom.ts';
import { modelList, parseModelList, utc } from '../format.ts';
import { action, budgetChoices, deleteButton, heading, idSelect, type Choice, type Page, type PageContext } from '../page.ts';

export const usersPage: Page = {
  path: 'users',
  title: 'Users',
  async render(context: PageContext) {
    const [users, budgets] = await Promise.all([context.api.call<List<User>>('GET', '/v1/users'), context.api.call<List<Budget>>('GET', '/v1/budgets')]);
    const budgetList = budgetChoices(budgets.data);
    const names = new Names([], [], budgets.data);
    const create: HTMLFormElement = h(
      'form',
      {
        class: 'inline-form',
        'aria-label': 'Create a user',
        onSubmit: action(context, () => {
          const values = formValues(create);
          return context.api.call('POST', '/v1/users', {
            user_id: values.user_id,
            alias: values.alias,
            budget_id: values.budget_id || null,
            allowed_models: parseModelList(values.allowed_models ?? ''),
          });
        }),
      },
      field('User id', h('input', { name: 'user_id', required: true, maxlength: 256 })),
      field('Name', h('input', { name: 'alias', required: true, maxlength: 256 })),
      field('Budget', idSelect('budget_id', budgetList, 'no budget')),
      field('Allowed models', h('input', { name: 'allowed_models', placeholder: 'all models' }), 'provider:model or provider:*, comma-separated'),
      h('button', { type: 'submit' }, 'Create user'),
    );
    return h(
      'div',
      { class: 'page' },
      heading('Users', 'Whom calls are charged to: with the master key a call names its user; a key with an owner charges the owner too.'),
      create,
      table(
        'Users',
        ['User id', 'Name', 'Budget', 'Allowed models', 'Created', ''],
        users.data.map((user) => [user.user_id, user.alias, names.budget(user.budget_id), modelList(user.allowed_models), utc(user.created_at), userActions(context, user, budgetList)]),
        'No users yet.',
      ),
    );
  },
};

function userActions(context: PageContext, user: User, budgetList: Choice[]): HTMLElement {
  const path = recordPath('users', user.user_id);
  const edit: HTMLFormElement = h(
    'form',
    {
      class: 'stack',
      onSubmit: action(context, () => {
        const values = formValues(edit);
        return context.api.call('PATCH', path, { alias: values.alias, budget_id: values.budget_id || null, allowed_models: parseModelList(values.allowed_models ?? '') });
      }),
    },
    field('Name', h('input', { name: 'alias', value: user.alias, required: true })),
    field('Budget', idSelect('budget_id', budgetList, 'no budget', user.budget_id)),
    field('Allowed models', h('input', { name: 'allowed_models', value: user.allowed_models?.join(', ') ?? '', placeholder: 'all models' })),
    h('button', { type: 'submit' }, 'Save'),
  );
  const remove = deleteButton(context, path, `Delete user "${user.user_id}" and its keys? Its usage rows stay.`);
  return h('div', { class: 'actions', role: 'group', 'aria-label': `Actions for ${user.user_id}` }, h('details', {}, h('summary', {}, 'Edit'), edit), remove);
}
