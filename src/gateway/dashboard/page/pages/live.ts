import { SessionEnded, withQuery, type InFlightCall, type InFlightList } from '../api.ts';
import { dataTable, h, tableRow } from '../dom.ts';
import { age, modelLabel, money, utcShort } from '../format.ts';
import { readRecords, type Names } from '../names.ts';
import { heading, type Page, type PageContext } from '../page.ts';

/** How often the list is read again while the page is shown. */
export const LIVE_POLL_MS = 2000;
/** Calls listed at most (the longest running). */
const LIVE_ROWS = 200;

/**
 * The calls in flight (GET /v1/usage/in-flight: the usage rows written `pending` before the provider is called), the
 * longest running first, read again every 2 seconds until the page is left or the updates are paused. A call shows
 * here from the moment its provider is called until its answer is recorded, on every gateway instance that shares
 * the database.
 */
export const livePage: Page = {
  path: 'live',
  title: 'Live',
  async render(context: PageContext) {
    const read = () => context.api.call<InFlightList>('GET', withQuery('/v1/usage/in-flight', { limit: LIVE_ROWS }));
    let [list, { names }] = await Promise.all([read(), readRecords(context.api)]);
    const status = h('p', { class: 'live-status' });
    const region = h('div', {});
    const show = () => {
      region.replaceChildren(callTable(list.data, names));
      const more = list.has_more ? ` (the ${LIVE_ROWS} longest running shown)` : '';
      status.textContent = `${list.data.length === 1 ? '1 call' : `${list.data.length} calls`} in flight${more} · read at ${new Date().toISOString().slice(11, 19)} UTC${paused ? ' · updates paused' : ''}`;
    };
    let paused = false;
    const pause = h('button', { type: 'button', class: 'secondary' }, 'Pause updates');
    pause.addEventListener('click', () => {
      paused = !paused;
      pause.textContent = paused ? 'Resume updates' : 'Pause updates';
      show();
      if (!paused) void poll();
    });

    /** Ids the names were read again for. */
    const looked = new Set<string>();
    let failed = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    async function poll(): Promise<void> {
      clearTimeout(timer);
      if (context.signal.aborted || paused) return;
      try {
        const next = await read();
        // a call of a key or user made since the names were read: read them again, once per such id (a user the
        // master key names in its calls need not be a record, and would otherwise be looked up at every read)
        const users = next.data.map((call) => call.user_id).filter((id) => id !== null && !looked.has(id));
        const keys = next.data.map((call) => call.key_id).filter((id) => id !== null && !looked.has(id));
        if (!names.knows(users, keys)) {
          names = (await readRecords(context.api)).names;
          for (const id of [...users, ...keys]) looked.add(id!);
        }
        if (context.signal.aborted) return;
        list = next;
        show();
        if (failed) context.showError(null);
        failed = false;
      } catch (error) {
        if (error instanceof SessionEnded || context.signal.aborted) return;
        failed = true;
        context.showError(error);
      }
      if (!paused && !context.signal.aborted) timer = setTimeout(() => void poll(), LIVE_POLL_MS);
    }
    context.signal.addEventListener('abort', () => clearTimeout(timer));
    show();
    timer = setTimeout(() => void poll(), LIVE_POLL_MS);

    return h(
      'div',
      { class: 'page' },
      heading(
        'Live',
        `Calls in flight: sent to a provider and not finished yet, the longest running first, read again every ${LIVE_POLL_MS / 1000} seconds. Held: what the call holds on its budgets (a stream: what it has delivered so far), which it is charged if its gateway stops.`,
      ),
      h('div', { class: 'live-bar' }, status, pause),
      region,
    );
  },
};

function callTable(calls: InFlightCall[], names: Names): HTMLElement {
  if (calls.length === 0) return h('p', { class: 'empty' }, 'No call is in flight.');
  return dataTable(
    'Calls in flight',
    ['Running for', 'Started (UTC)', 'User', 'Key', 'Model', 'Endpoint', 'Held', 'Request id'],
    h(
      'tbody',
      {},
      ...calls.map((call) =>
        tableRow([
          age(call.age_ms),
          h('span', { class: 'nowrap' }, utcShort(call.created_at)),
          names.user(call.user_id),
          names.key(call.key_id),
          call.route ? `${call.route} → ${modelLabel(call.provider, call.model)}` : modelLabel(call.provider, call.model),
          call.endpoint,
          money(call.cost),
          h('code', {}, call.request_id),
        ]),
      ),
    ),
    'live',
  );
}
