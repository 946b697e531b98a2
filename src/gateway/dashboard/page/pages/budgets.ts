import { recordPath, type Budget, type List } from '../api.ts';
import { field, formValues, h, table } from '../dom.ts';
import { money, resetSchedule, utc } from '../format.ts';
import { budgetName } from '../names.ts';
import { budgetUse, deleteButton, formAction, heading, overspent, overspentBanner, type Page, type PageContext } from '../page.ts';

/** Rolling periods (seconds) and calendar ones, at midnight in the form's time zone (UTC when none is given). */
const PERIODS: [string, string][] = [
  ['', 'never'],
  ['3600', 'every hour'],
  ['86400', 'every day'],
  ['604800', 'every week'],
  ['2592000', 'every 30 days'],
  ['daily', 'daily at midnight'],
  ['weekly', 'weekly, Monday midnight'],
  ['monthly', 'monthly, on the 1st at midnight'],
];

/**
 * The create form's period choice and time zone as the API's fields. The zone is sent as typed: the API checks it
 * (an IANA name it knows, and only with a calendar period), and its 400 is shown next to the field.
 */
function schedule(value: string | undefined, zone: string | undefined): { reset_every_seconds: number | null; reset_alignment?: string; reset_time_zone?: string } {
  const timeZone = zone ? { reset_time_zone: zone } : {};
  if (!value) return { reset_every_seconds: null, ...timeZone };
  return /^\d+$/.test(value) ? { reset_every_seconds: Number(value), ...timeZone } : { reset_every_seconds: null, reset_alignment: value, ...timeZone };
}

const timeZoneField = (value: string | null) =>
  field('Time zone', h('input', { name: 'reset_time_zone', maxlength: 64, placeholder: 'UTC', spellcheck: 'false', value: value ?? '' }), 'of a daily, weekly or monthly reset (IANA), e.g. Europe/Paris; empty: UTC');

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
        onSubmit: formAction(context, () => {
          const values = formValues(create);
          return context.api.call('POST', '/v1/budgets', {
            name: values.name || null,
            max_budget: Number(values.max_budget),
            soft_budget: dollarsOrNull(values.soft_budget),
            ...schedule(values.reset_every_seconds, values.reset_time_zone),
          });
        }),
      },
      field('Name', h('input', { name: 'name', maxlength: 256 })),
      field('Limit (US$)', h('input', { name: 'max_budget', type: 'number', min: 0, step: 'any', required: true })),
      field('Warn at (US$)', h('input', { name: 'soft_budget', type: 'number', min: 0, step: 'any' }), 'optional soft limit, below the limit'),
      field('Starts again', h('select', { name: 'reset_every_seconds', 'data-param': 'reset_alignment' }, ...PERIODS.map(([value, label]) => h('option', { value }, label)))),
      timeZoneField(null),
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
      onSubmit: formAction(context, () => {
        const values = formValues(edit);
        const zone = budget.reset_alignment === null ? {} : { reset_time_zone: values.reset_time_zone || null };
        return context.api.call('PATCH', path, { name: values.name || null, max_budget: Number(values.max_budget), soft_budget: dollarsOrNull(values.soft_budget), ...zone });
      }),
    },
    field('Name', h('input', { name: 'name', maxlength: 256, value: budget.name ?? '' })),
    field('Limit (US$)', h('input', { name: 'max_budget', type: 'number', min: 0, step: 'any', value: budget.max_budget, required: true })),
    field('Warn at (US$)', h('input', { name: 'soft_budget', type: 'number', min: 0, step: 'any', value: budget.soft_budget ?? '' })),
    budget.reset_alignment === null ? null : timeZoneField(budget.reset_time_zone),
    h('button', { type: 'submit' }, 'Save'),
  );
  const remove = deleteButton(context, path, `Delete budget ${name}? Users and keys using it are no longer limited by it.`);
  return h('div', { class: 'actions', role: 'group', 'aria-label': `Actions for ${name}` }, h('details', {}, h('summary', {}, 'Edit'), edit), remove);
}
