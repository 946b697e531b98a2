import { ApiError, SessionEnded, type Api } from './api.ts';
import { h } from './dom.ts';

/** What a page gets from the shell. */
export interface PageContext {
  api: Api;
  /** Shows an error above the page (or clears it with null). */
  showError(error: unknown): void;
  /** Renders the current page again (after a change). */
  refresh(): Promise<void>;
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
export function idSelect(name: string, ids: { value: string; label: string }[], none: string, selected: string | null = null): HTMLSelectElement {
  return h(
    'select',
    { name },
    h('option', { value: '', selected: selected === null }, none),
    ...ids.map((id) => h('option', { value: id.value, selected: id.value === selected }, id.label)),
  );
}

/** Budget use as a meter (green, amber from 80%, red at 100%) with the numbers beside it. */
export function budgetMeter(spend: number, max: number, text: string): HTMLElement {
  return h('span', { class: 'meter' }, h('meter', { min: 0, max: max || 1, low: (max || 1) * 0.8, high: (max || 1) * 0.999, optimum: 0, value: Math.min(spend, max || 1) }), ' ', text);
}
