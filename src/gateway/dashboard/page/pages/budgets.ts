import { recordPath, type Budget, type List } from '../api.ts';
import { field, formValues, h, table } from '../dom.ts';
import { money, period, utc } from '../format.ts';
import { budgetName } from '../names.ts';
import { action, budgetUse, deleteButton, heading, overspent, overspentBanner, type Page, type PageContext } from '../page.ts';

const PERIODS: [string, string][] = [
  ['', 'never'],
  ['3600', 'every hour'],
  ['86400', 'every day'],
  ['604800', 'every week'],
  ['2592000', 'every 30 days'],
];

export const budgetsPage: Page = {
  path: 'budgets',
  title: 'Budgets',
  async render(context: PageContext) {
    const budgets = await context.api.call<List<Budget>>('GET', '/v1/budgets');
    const create: HTMLFormElement = h(
      'form',
      {
        class: 'inline-form',
        'aria-label': 'Create a budget',
        onSubmit: action(context, () => {
          const values = formValues(create);
          return context.api.call('POST', '/v1/budgets', { max_budget: Number(values.max_budget), reset_every_seconds: values.reset_every_seconds ? Number(values.reset_every_seconds) : null });
        }),
      },
      field('Limit (US$)', h('input', { name: 'max_budget', type: 'number', min: 0, step: 'any', required: true })),
      field('Starts again', h('select', { name: 'reset_every_seconds' }, ...PERIODS.map(([value, label]) => h('option', { value }, label)))),
      h('button', { type: 'submit' }, 'Create budget'),
    );
    return h(
      'div',
      { class: 'page' },
      heading('Budgets', 'Spend limits in US dollars, attached to users and keys. A call is refused (403 budget_exceeded) once its budget is spent.'),
      overspentBanner(budgets.data),
      create,
      table(
        'Budgets',
        ['Budget', 'Used', 'Reserved', 'Remaining', 'Resets', 'Next reset', ''],
        budgets.data.map((budget) => [
          budgetLabel(budget),
          budgetUse(budget),
          money(budget.reserved),
          money(budget.remaining),
          period(budget.reset_every_seconds),
          utc(budget.next_reset_at),
          budgetActions(context, budget),
        ]),
        'No budgets yet.',
      ),
    );
  },
};

/** Its name, and under it the id the API takes (when the name is not the id). */
function budgetLabel(budget: Budget): HTMLElement {
  const name = budgetName(budget);
  return h('span', { class: overspent(budget) ? 'record-name overspent' : 'record-name' }, name, name === budget.budget_id ? null : h('code', { class: 'record-id' }, budget.budget_id));
}

function budgetActions(context: PageContext, budget: Budget): HTMLElement {
  const path = recordPath('budgets', budget.budget_id);
  const name = budgetName(budget);
  const edit: HTMLFormElement = h(
    'form',
    { class: 'stack', onSubmit: action(context, () => context.api.call('PATCH', path, { max_budget: Number(formValues(edit).max_budget) })) },
    field('Limit (US$)', h('input', { name: 'max_budget', type: 'number', min: 0, step: 'any', value: budget.max_budget, required: true })),
    h('button', { type: 'submit' }, 'Save'),
  );
  const remove = deleteButton(context, path, `Delete budget ${name}? Users and keys using it are no longer limited by it.`);
  return h('div', { class: 'actions', role: 'group', 'aria-label': `Actions for ${name}` }, h('details', {}, h('summary', {}, 'Edit'), edit), remove);
}
