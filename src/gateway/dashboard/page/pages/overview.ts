import { withQuery, type Budget, type UsageSeries, type UsageSummary, type VirtualKey } from '../api.ts';
import { barList, columnChart } from '../chart.ts';
import { h, table } from '../dom.ts';
import { apiTime, count, money, percent } from '../format.ts';
import { readRecords, type Names } from '../names.ts';
import { budgetUse, heading, overspentBanner, type Page, type PageContext } from '../page.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Each range is whole UTC hours or days, the current one last, so every column of a chart covers a full bucket. */
const RANGES = {
  '24h': { label: 'Last 24 hours', buckets: 24, interval: 'hour', size: HOUR },
  '7d': { label: 'Last 7 days', buckets: 7, interval: 'day', size: DAY },
  '30d': { label: 'Last 30 days', buckets: 30, interval: 'day', size: DAY },
} as const;
type Range = keyof typeof RANGES;

/** The range chosen last, kept while the tab lives. */
let range: Range = '24h';

/** How many keys the "nearest their budget" list shows. */
const NEAR_BUDGET = 5;

export const overviewPage: Page = {
  path: 'overview',
  title: 'Overview',
  async render(context: PageContext) {
    const { buckets, interval, size, label } = RANGES[range];
    const since = new Date((Math.floor(Date.now() / size) - buckets + 1) * size).toISOString();
    const [summary, series, { keys, budgets, names }] = await Promise.all([
      context.api.call<UsageSummary>('GET', withQuery('/v1/usage/summary', { since })),
      context.api.call<UsageSeries>('GET', withQuery('/v1/usage/series', { since, interval })),
      readRecords(context.api),
    ]);
    const totals = summary.totals;
    const errorRate = totals.requests === 0 ? 0 : totals.errors / totals.requests;
    const per = interval === 'hour' ? 'per hour' : 'per day';
    const starts = series.data.map((bucket) => new Date(apiTime(bucket.start)).toISOString());
    const every = Math.ceil(starts.length / 8);
    const axisLabel = (i: number) => (i % every !== 0 ? null : interval === 'hour' ? `${starts[i].slice(11, 16)}` : starts[i].slice(5, 10));
    const labels = starts.map((start) => (interval === 'hour' ? `${start.slice(0, 10)} ${start.slice(11, 16)} UTC` : start.slice(0, 10)));

    const picker = h(
      'select',
      {
        name: 'range',
        'aria-label': 'Time range',
        onChange: (event: Event) => {
          range = (event.target as HTMLSelectElement).value as Range;
          void context.refresh();
        },
      },
      ...Object.entries(RANGES).map(([value, entry]) => h('option', { value, selected: value === range }, entry.label)),
    );

    return h(
      'div',
      { class: 'page overview' },
      h('div', { class: 'page-head-row' }, heading('Overview', `Model calls through this gateway, ${label.toLowerCase()} (UTC).`), picker),
      overspentBanner(budgets, true),
      h(
        'div',
        { class: 'tiles' },
        tile('Spend', money(totals.cost), 'US dollars'),
        tile('Requests', count(totals.requests), `${count(totals.total_tokens)} tokens`),
        tile('Error rate', percent(errorRate), `${count(totals.errors)} failed, cancelled or refused (${count(totals.refused)} refused)`, errorRate > 0.05 ? 'bad' : undefined),
      ),
      h(
        'div',
        { class: 'charts' },
        columnChart({ title: `Spend (US$ ${per})`, labels, axisLabel, format: money, series: [{ name: 'Spend', className: 'series-a', values: series.data.map((bucket) => bucket.cost) }] }),
        columnChart({
          title: `Requests (${per})`,
          labels,
          axisLabel,
          format: count,
          series: [
            { name: 'Succeeded', className: 'series-a', values: series.data.map((bucket) => bucket.requests - bucket.errors) },
            { name: 'Failed, cancelled or refused', className: 'series-error', values: series.data.map((bucket) => bucket.errors) },
          ],
        }),
        barList(
          'Spend by model (US$)',
          summary.by_model.map((entry) => ({ label: entry.model === ':' ? '(refused before a model)' : entry.model, value: entry.cost, detail: `${count(entry.requests)} requests` })),
          money,
        ),
        barList(
          'Spend by user (US$)',
          summary.by_user.map((entry) => ({ label: entry.user_id === null ? '(no user)' : names.user(entry.user_id), value: entry.cost, detail: `${count(entry.requests)} requests` })),
          money,
        ),
      ),
      h('h2', {}, 'Keys nearest their budget'),
      nearBudget(keys, budgets, names),
    );
  },
};

function tile(title: string, value: string, detail: string, tone?: string): HTMLElement {
  return h('div', { class: `tile${tone ? ` ${tone}` : ''}` }, h('div', { class: 'tile-title' }, title), h('div', { class: 'tile-value' }, value), h('div', { class: 'tile-detail' }, detail));
}

/** Active keys with a budget, most used share first. */
function nearBudget(keys: VirtualKey[], budgets: Budget[], names: Names): HTMLElement {
  const byId = new Map(budgets.map((budget) => [budget.budget_id, budget]));
  const rows = keys
    .filter((key) => key.status === 'active' && key.budget_id !== null && byId.has(key.budget_id))
    .map((key) => ({ key, budget: byId.get(key.budget_id!)! }))
    .map((entry) => ({ ...entry, used: entry.budget.max_budget === 0 ? 1 : entry.budget.spend / entry.budget.max_budget }))
    .sort((a, b) => b.used - a.used)
    .slice(0, NEAR_BUDGET);
  return table(
    'Keys nearest their budget',
    ['Key', 'Budget', 'Used'],
    rows.map(({ key, budget }) => [key.key_name, names.budget(budget.budget_id), budgetUse(budget)]),
    'No active key has a budget.',
  );
}
