import { ApiError, SessionEnded, type Api } from './api.ts';
import { h } from './dom.ts';
import { money, percent } from './format.ts';
import type { Budget, User } from './api.ts';
import { budgetName } from './names.ts';

/** What a page gets from the shell. */
export interface PageContext {
  api: Api;
  /** Shows an error above the page (or clears it with null). */
  showError(error: unknown): void;
  /** Renders the current page again (after a change). */
  refresh(): Promise<void>;
  /** Aborted when the page is left (another page, sign-out): a page that polls stops then. */
  signal: AbortSignal;
}

export interface Page {
  /** The path after #/ and the navigation label. */
  path: string;
  title: string;
  render(context: PageContext): Promise<Node>;
}

/** An error in words: the API's status, code and message, and the request id to find it in the gateway's log. */
export function describeError(error: unknown): string {
  if (error instanceof ApiError) {
    const status = error.status === 0 ? 'No answer from the gateway' : `The gateway answered ${error.status}${error.code ? ` (${error.code})` : ''}`;
    return `${status}: ${error.message}${error.requestId ? ` — request id ${error.requestId}` : ''}`;
  }
  return `Something went wrong in the page: ${error instanceof Error ? error.message : String(error)}`;
}

export const errorBanner = (error: unknown): HTMLElement => h('div', { class: 'banner error', role: 'alert' }, describeError(error));

/**
 * Runs a user's action (a button, a form): its error goes to the banner, the page is rendered again after success.
 * A SessionEnded needs nothing more: the shell is already back at sign-in.
 */
export function action(context: PageContext, run: () => Promise<unknown>, options: { refresh?: boolean } = {}): (event?: Event) => void {
  return (event) => {
    event?.preventDefault();
    const target = event?.currentTarget;
    const button = target instanceof HTMLButtonElement ? target : target instanceof HTMLFormElement ? target.querySelector<HTMLButtonElement>('button[type=submit]') : null;
    if (button) button.disabled = true;
    context.showError(null);
    run()
      .then(() => (options.refresh === false ? undefined : context.refresh()))
      .catch((error: unknown) => {
        if (!(error instanceof SessionEnded)) context.showError(error);
      })
      .finally(() => {
        if (button) button.disabled = false;
      });
  };
}

/**
 * A form's submit (its onSubmit) as an action whose 400 naming a field (`param`) is shown next to that field: the control named
 * `param` (or the element with data-param="`param`") is marked invalid, described by the message, and focused. An
 * error naming no field of the form goes to the banner, as `action` does. The marks of the last try are cleared first.
 */
export function formAction(context: PageContext, run: () => Promise<unknown>): (event: Event) => void {
  return (event) => {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    clearFieldErrors(form);
    const button = form.querySelector<HTMLButtonElement>('button[type=submit]');
    if (button) button.disabled = true;
    context.showError(null);
    run()
      .then(() => context.refresh())
      .catch((error: unknown) => {
        if (error instanceof SessionEnded) return;
        if (!(error instanceof ApiError && error.param !== null && showFieldError(form, error))) context.showError(error);
      })
      .finally(() => {
        if (button) button.disabled = false;
      });
  };
}

let fieldErrors = 0;

function showFieldError(form: HTMLFormElement, error: ApiError): boolean {
  const param = error.param!;
  const target = [...form.querySelectorAll<HTMLElement>('[name], [data-param]')].find((element) => element.getAttribute('name') === param || element.dataset.param === param);
  if (!target || (target instanceof HTMLInputElement && target.type === 'hidden')) return false;
  const id = `field-error-${++fieldErrors}`;
  const message = h('p', { class: 'field-error', id }, `${error.message}${error.requestId ? ` (request id ${error.requestId})` : ''}`);
  (target.closest('label.field') ?? target).after(message);
  target.setAttribute('aria-invalid', 'true');
  target.setAttribute('aria-describedby', id);
  (target.matches('input, select, textarea') ? target : target.querySelector<HTMLElement>('input, select, textarea'))?.focus();
  return true;
}

function clearFieldErrors(form: HTMLFormElement): void {
  for (const message of form.querySelectorAll('.field-error')) message.remove();
  for (const element of form.querySelectorAll('[aria-invalid]')) {
    element.removeAttribute('aria-invalid');
    element.removeAttribute('aria-describedby');
  }
}

/** A Delete button that asks `question` first, then sends DELETE `path` as an action. */
export function deleteButton(context: PageContext, path: string, question: string): HTMLElement {
  return h(
    'button',
    {
      type: 'button',
      class: 'danger',
      onClick: (event: Event) => {
        if (confirm(question)) action(context, () => context.api.call('DELETE', path))(event);
      },
    },
    'Delete',
  );
}

/** A page's heading row: title and what it shows. */
export const heading = (title: string, about: string): HTMLElement => h('header', { class: 'page-head' }, h('h1', {}, title), h('p', {}, about));

/** <select> of ids with a "none" choice; `selected` preselects. */
export function idSelect(name: string, ids: Choice[], none: string, selected: string | null = null): HTMLSelectElement {
  return h(
    'select',
    { name },
    h('option', { value: '', selected: selected === null }, none),
    ...ids.map((id) => h('option', { value: id.value, selected: id.value === selected }, id.label)),
  );
}

export type Choice = { value: string; label: string };

/** Budgets to choose from, by name and limit. */
export const budgetChoices = (budgets: Budget[]): Choice[] => budgets.map((budget) => ({ value: budget.budget_id, label: `${budgetName(budget)} (${money(budget.max_budget)})` }));

/** Users to choose from, by name and id (two users may share a name). */
export const userChoices = (users: User[]): Choice[] => users.map((user) => ({ value: user.user_id, label: user.alias === user.user_id ? user.user_id : `${user.alias} (${user.user_id})` }));

/** Whether a budget has spent more than its limit (a provider overran its output limit, or the limit was lowered). */
export const overspent = (budget: Budget): boolean => budget.spend > budget.max_budget;

/**
 * A budget's use: a meter (green, amber from 80%, red at 100%) with the numbers beside it, and a warning badge once it
 * is past its soft limit, used up or overspent, so a budget past its limit reads as a
 * warning and not only as "112%". The meter is hidden
 * from screen readers: the text says the same.
 */
export function budgetUse(budget: Budget): HTMLElement {
  const max = budget.max_budget;
  const text = `${money(budget.spend)} of ${money(max)} (${percent(max === 0 ? 1 : budget.spend / max)})`;
  const badge = overspent(budget)
    ? h('span', { class: 'badge bad' }, `Overspent by ${money(budget.spend - max)}`)
    : budget.spend === max
      ? h('span', { class: 'badge warn' }, 'Used up')
      : budget.soft_budget_exceeded
        ? h('span', { class: 'badge warn' }, `Past soft limit ${money(budget.soft_budget ?? 0)}`)
        : null;
  return h(
    'span',
    { class: 'budget-use' },
    h('span', { class: 'meter' }, h('meter', { min: 0, max: max || 1, low: (max || 1) * 0.8, high: (max || 1) * 0.999, optimum: 0, value: Math.min(budget.spend, max || 1), 'aria-hidden': 'true' }), ' ', text),
    badge ? ' ' : null,
    badge,
  );
}

/**
 * A warning above a page when budgets are overspent, naming each with its spend and limit; `link` adds a link to the
 * Budgets page. Nothing when none is.
 */
export function overspentBanner(budgets: Budget[], link = false): HTMLElement | null {
  const over = budgets.filter(overspent);
  if (over.length === 0) return null;
  const list = over.map((budget) => `${budgetName(budget)} (${money(budget.spend)} of ${money(budget.max_budget)})`).join(', ');
  return h(
    'div',
    { class: 'banner warn' },
    h('span', { class: 'badge bad' }, 'Warning'),
    ' ',
    over.length === 1
      ? `1 budget is overspent: ${list}. Calls charged to it are refused until it resets or its limit is raised.`
      : `${over.length} budgets are overspent: ${list}. Calls charged to them are refused until they reset or their limits are raised.`,
    link ? ' ' : null,
    link ? h('a', { href: '#/budgets' }, 'See Budgets') : null,
  );
}
