import { withQuery, type UsagePage, type UsageRow } from '../api.ts';
import { dataTable, field, formValues, h, tableRow } from '../dom.ts';
import { count, modelLabel, money, utcShort } from '../format.ts';
import { readRecords, type Names } from '../names.ts';
import { action, heading, idSelect, userChoices, type Page, type PageContext } from '../page.ts';

/** The filters of the table and the CSV, kept while the tab lives. Times are UTC, as in the API. */
let filters: Record<string, string> = {};

const PAGE_ROWS = 100;
const FILTERS = ['since', 'until', 'user_id', 'key_id', 'model', 'provider', 'status'] as const;
const STATUSES = ['success', 'error', 'cancelled', 'refused', 'interrupted', 'pending'];

/** The API's query of the filters: a datetime-local value ("2026-05-18T12:00") is read as UTC. */
function query(): Record<string, string> {
  const result: Record<string, string> = {};
  for (const name of FILTERS) {
    const value = filters[name];
    if (value) result[name] = name === 'since' || name === 'until' ? `${value}:00Z` : value;
  }
  return result;
}

export const usagePage: Page = {
  path: 'usage',
  title: 'Usage',
  async render(context: PageContext) {
    const [first, { users, keys, names }] = await Promise.all([context.api.call<UsagePage>('GET', withQuery('/v1/usage', { ...query(), limit: PAGE_ROWS })), readRecords(context.api)]);
    const body = h('tbody');
    const more = h('button', { type: 'button', class: 'secondary' }, 'Load more');
    let cursor = first.next_cursor;
    const append = (rows: UsageRow[]) => body.append(...rows.map((row) => usageRow(row, names)));
    append(first.data);
    more.hidden = !first.has_more;
    more.addEventListener(
      'click',
      action(
        context,
        async () => {
          const next = await context.api.call<UsagePage>('GET', withQuery('/v1/usage', { ...query(), limit: PAGE_ROWS, cursor }));
          append(next.data);
          cursor = next.next_cursor;
          more.hidden = !next.has_more;
        },
        { refresh: false },
      ),
    );

    const form: HTMLFormElement = h(
      'form',
      {
        class: 'inline-form',
        'aria-label': 'Filter usage',
        onSubmit: action(context, async () => {
          filters = formValues(form);
        }),
      },
      field('Since (UTC)', h('input', { name: 'since', type: 'datetime-local', value: filters.since ?? '' })),
      field('Until (UTC)', h('input', { name: 'until', type: 'datetime-local', value: filters.until ?? '' })),
      field('User', idSelect('user_id', userChoices(users), 'any user', filters.user_id || null)),
      field('Key', idSelect('key_id', keys.map((key) => ({ value: key.id, label: key.key_name })), 'any key', filters.key_id || null)),
      field('Model', h('input', { name: 'model', value: filters.model ?? '', placeholder: 'e.g. openai:gpt-4o-mini' }), 'provider:model as in the table, or a bare name for every provider'),
      field('Provider', h('input', { name: 'provider', value: filters.provider ?? '', size: 10 })),
      field('Status', idSelect('status', STATUSES.map((status) => ({ value: status, label: status })), 'any status', filters.status || null)),
      h('button', { type: 'submit' }, 'Apply'),
      h(
        'button',
        {
          type: 'button',
          class: 'secondary',
          onClick: action(
            context,
            async () => {
              const csv = await context.api.download(withQuery('/v1/usage.csv', query()));
              const link = h('a', { href: URL.createObjectURL(csv), download: 'usage.csv' });
              link.click();
              setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
            },
            { refresh: false },
          ),
        },
        'Download CSV',
      ),
    );
    const headers = ['Time (UTC)', 'User', 'Key', 'Model', 'Route', 'Attempts', 'Endpoint', 'Tokens in / out', 'Cost', 'Status', 'Reason', 'Duration'];
    return h(
      'div',
      { class: 'page' },
      heading(
        'Usage',
        'One row per model call, newest first: the model that answered, the route the client called and how many of its targets were tried (more than one: it fell back), and why a call was refused or failed. The CSV holds every row the filters select.',
      ),
      form,
      first.data.length === 0
        ? h('p', { class: 'empty' }, 'No calls match these filters.')
        : dataTable('Usage rows', headers, body, 'usage'),
      more,
    );
  },
};

function usageRow(row: UsageRow, names: Names): HTMLTableRowElement {
  const fellBack = row.attempts > 1;
  return tableRow(
    [
      h('span', { class: 'nowrap' }, utcShort(row.created_at)),
      names.user(row.user_id),
      names.key(row.key_id),
      modelLabel(row.provider, row.model),
      row.route ?? '—',
      fellBack ? h('span', { class: 'badge warn' }, `${row.attempts}: fell back`) : String(row.attempts),
      row.endpoint,
      `${count(row.prompt_tokens)} / ${count(row.completion_tokens)}`,
      money(row.cost),
      h('span', { class: `status ${row.status}` }, row.status_code === null || row.status_code === 0 ? row.status : `${row.status} (${row.status_code})`),
      row.reason ? h('code', {}, row.reason) : '—',
      row.duration_ms === null ? '—' : `${count(row.duration_ms)} ms`,
    ],
    fellBack ? 'fell-back' : undefined,
  );
}
