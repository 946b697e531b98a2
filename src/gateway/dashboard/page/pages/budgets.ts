import { recordPath, type Budget, type List } from '../api.ts';
import { field, formValues, h, table } from '../dom.ts';
import { money, resetSchedule, utc } from '../format.ts';
import { budgetName } from '../names.ts';
import { action, budgetUse, deleteButton, heading, overspent, overspentBanner, type Page, type PageContext } from '../page.ts';

/** Rolling periods (seconds) and calendar ones in UTC (the API also takes a time zone). */
const PERIODS: [string, string][] = [
  ['', 'never'],
  ['3600', 'every hour'],
  ['86400', 'every day'],
  ['604800', 'every week'],
  ['2592000', 'every 30 days'],
  ['daily', 'daily at 00:00 UTC'],
  ['weekly', 'weekly, Monday 00:00 UTC'],
  ['monthly', 'monthly, on the 1st, 00:00 UTC'],
];

/** The create form's period choice as the API's fields. */
function schedule(value: string | undefined): { reset_every_seconds: number | null; reset_alignment?: string } {
  if (!value) return { reset_every_seconds: null };
  return /^\d+$/.test(value) ? { reset_every_seconds: Number(value) } : { reset_every_seconds: null, reset_alignment: value };
}

const dollarsOrNull = (value: string | undefined): number | null => (value ? Number(value) : null);

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
          return context.api.call('POST', '/v1/budgets', {
            name: values.name || null,
            max_budget: Number(values.max_budget),
            soft_budget: dollarsOrNull(values.soft_budget),
            ...schedule(values.reset_every_seconds),
          });
        }),
      },
      field('Name', h('input', { name: 'name', maxlength: 256 })),
      field('Limit (US$)', h('input', { name: 'max_budget', type: 'number', min: 0, step: 'any', required: true })),
      field('Warn at (US$)', h('input', { name: 'soft_budget', type: 'number', min: 0, step: 'any' }), 'optional soft limit, below the limit'),
      field('Starts again', h('select', { name: 'reset_every_seconds' }, ...PERIODS.map(([value, label]) => h('option', { value }, label)))),
      h('button', { type: 'submit' }, 'Create budget'),
    );
    return h(
      'div',
      { class: 'page' },
      heading('Budgets', 'Spend limits in US dollars, attached to users and keys. A call is refused (403 budget_exceeded) once its budget is spent; past the soft limit calls carry an x-budget-warning header.'),
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
          resetSchedule(budget),
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
    {
      class: 'stack',
      onSubmit: action(context, () => {
        const values = formValues(edit);
        return context.api.call('PATCH', path, { name: values.name || null, max_budget: Number(values.max_budget), soft_budget: dollarsOrNull(values.soft_budget) });
      }),
    },
    field('Name', h('input', { name: 'name', maxlength: 256, value: budget.name ?? '' })),
    field('Limit (US$)', h('input', { name: 'max_budget', type: 'number', min: 0, step: 'any', value: budget.max_budget, required: true })),
    field('Warn at (US$)', h('input', { name: 'soft_budget', type: 'number', min: 0, step: 'any', value: budget.soft_budget ?? '' })),
    h('button', { type: 'submit' }, 'Save'),
  );
  const remove = deleteButton(context, path, `Delete budget ${name}? Users and keys using it are no longer limited by it.`);
  return h('div', { class: 'actions', role: 'group', 'aria-label': `Actions for ${name}` }, h('details', {}, h('summary', {}, 'Edit'), edit), remove);
}
