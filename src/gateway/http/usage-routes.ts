import { Readable } from 'node:stream';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { invalidRequest } from '../errors.ts';
import { emptyAggregate, type UsageAggregate, type UsageCursor, type UsageFilter, type UsageGroup } from '../storage/usage.ts';
import { isoTime, parseTimestamp } from '../time.ts';
import type { GatewayContext } from './context.ts';
import { InFlightQuery, UsageAnalyticsQuery, UsageListQuery, UsageSeriesQuery } from './management-schemas.ts';
import { inFlightResource, usageResource, usageTotals } from './resources.ts';
import { parseWith } from './validation.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const DEFAULT_SPAN = 30 * DAY;
/** Buckets one series answers at most (a year by hour is 8,760). */
export const MAX_SERIES_BUCKETS = 10_000;
/** Rows read per query while a CSV streams: memory stays bounded whatever the range holds. */
const CSV_PAGE = 1000;

const GROUPS: [UsageGroup, string][] = [
  ['model', 'by_model'],
  ['user_id', 'by_user'],
  ['key_id', 'by_key'],
  ['provider', 'by_provider'],
];

const aggregate = (totals: UsageAggregate) => ({ ...usageTotals(totals), errors: totals.errors, refused: totals.refused });

/**
 * Usage analytics for operators: the rows, newest first, a page at a time; the calls in flight; totals by model, user,
 * key and provider; a time series; every row as CSV. Master key only.
 */
export function registerUsageRoutes(app: FastifyInstance, context: GatewayContext, bodyLimit: number): void {
  const { store } = context;
  const master = { bodyLimit, config: { credential: 'master' } } as const;

  app.get('/v1/usage', master, async (request) => {
    const query = parseWith(UsageListQuery, request.query ?? {}, 'query');
    const filter = filterOf(query, undefined);
    const limit = query.limit ?? 100;
    // one row more than asked says whether another page follows
    const rows = await store.usage.page(filter, query.cursor === undefined ? undefined : parseCursor(query.cursor), limit + 1, 'newest');
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return { object: 'list', data: page.map(usageResource), has_more: rows.length > limit, next_cursor: rows.length > limit && last ? `${last.created_at}.${last.id}` : null };
  });

  // The calls in flight (their pending rows), oldest first: one more than asked says whether more are running.
  app.get('/v1/usage/in-flight', master, async (request) => {
    const limit = parseWith(InFlightQuery, request.query ?? {}, 'query').limit ?? 100;
    const calls = await store.usage.listInFlight(limit + 1);
    const now = Date.now();
    return { object: 'list', data: calls.slice(0, limit).map((call) => inFlightResource(call, now)), has_more: calls.length > limit };
  });

  app.get('/v1/usage/summary', master, async (request) => {
    const filter = filterOf(parseWith(UsageAnalyticsQuery, request.query ?? {}, 'query'), DEFAULT_SPAN);
    const { totals, groups } = await store.usage.summarize(filter);
    return {
      object: 'usage_summary',
      since: isoTime(filter.since!),
      until: isoTime(filter.until!),
      totals: aggregate(totals),
      ...Object.fromEntries(GROUPS.map(([group, field]) => [field, groups[group].map((row) => ({ [group]: row.group, ...aggregate(row) }))])),
    };
  });

  app.get('/v1/usage/series', master, async (request) => {
    const query = parseWith(UsageSeriesQuery, request.query ?? {}, 'query');
    const interval = query.interval ?? 'day';
    const size = interval === 'hour' ? HOUR : DAY;
    const filter = filterOf(query, DEFAULT_SPAN);
    const first = Math.floor(filter.since! / size) * size;
    const buckets = Math.ceil((filter.until! - first) / size);
    if (buckets > MAX_SERIES_BUCKETS) {
      throw invalidRequest(`the range holds ${buckets} ${interval}s; at most ${MAX_SERIES_BUCKETS} per series (narrow since/until or use interval=day)`, 'since');
    }
    const rows = new Map((await store.usage.series(filter, size)).map((row) => [row.bucket, row]));
    const empty = emptyAggregate();
    return {
      object: 'usage_series',
      interval,
      since: isoTime(filter.since!),
      until: isoTime(filter.until!),
      // every bucket of the range, empty ones included, so a chart's time axis needs no gaps filled in
      data: Array.from({ length: buckets }, (_, index) => {
        const start = first + index * size;
        return { start: isoTime(start), ...aggregate(rows.get(start) ?? empty) };
      }),
    };
  });

  app.get('/v1/usage.csv', master, async (request, reply) => {
    const filter = filterOf(parseWith(UsageAnalyticsQuery, request.query ?? {}, 'query'), undefined);
    async function* lines(): AsyncGenerator<string> {
      yield `${CSV_COLUMNS.join(',')}\r\n`;
      let after: { created_at: number; id: string } | undefined;
      for (;;) {
        const page = await store.usage.page(filter, after, CSV_PAGE);
        if (page.length > 0) yield page.map((row) => `${csvRow(row)}\r\n`).join('');
        if (page.length < CSV_PAGE) return;
        after = page[page.length - 1];
        // A SQLite page is a synchronous query and a loopback socket takes every write at once, so without this turn
        // the whole export would run in one turn of the event loop, with every model call in flight waiting.
        await yieldToEventLoop();
      }
    }
    return reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', 'attachment; filename="usage.csv"')
      .send(Readable.from(lines()));
  });
}

/** The filter of a query: times parsed and checked (since before until); `defaultSpan` fills a missing since. */
function filterOf(
  query: { since?: string; until?: string; user_id?: string; key_id?: string; model?: string; provider?: string; status?: UsageFilter['status'] },
  defaultSpan: number | undefined,
): UsageFilter {
  const until = query.until === undefined ? Date.now() : parseTimestamp(query.until, 'until');
  const since = query.since === undefined ? (defaultSpan === undefined ? undefined : until - defaultSpan) : parseTimestamp(query.since, 'since');
  if (since !== undefined && since >= until) throw invalidRequest(`since (${isoTime(since)}) must be before until (${isoTime(until)})`, 'since', 'invalid_range');
  return { since, until, user_id: query.user_id, key_id: query.key_id, model: query.model, provider: query.provider, status: query.status };
}

/** A cursor is `<created_at ms>.<row id>` of the last row of a page: opaque to clients, checked here. */
function parseCursor(cursor: string): UsageCursor {
  const match = /^(\d{1,16})\.(.+)$/.exec(cursor);
  if (!match) throw invalidRequest('cursor must be the next_cursor of a previous page', 'cursor', 'invalid_cursor');
  return { created_at: Number(match[1]), id: match[2] };
}

const CSV_COLUMNS = ['id', 'request_id', 'created_at', 'user_id', 'key_id', 'endpoint', 'provider', 'model', 'prompt_tokens', 'completion_tokens', 'total_tokens', 'search_units', 'cost', 'status', 'status_code', 'duration_ms', 'route', 'attempts', 'overshoot', 'reason'] as const;

function csvRow(row: Parameters<typeof usageResource>[0]): string {
  const resource = usageResource(row);
  return CSV_COLUMNS.map((column) => csvField(resource[column])).join(',');
}

/**
 * RFC 4180 quoting; a text that a spreadsheet would run as a formula (= + - @, tab, carriage return first) gets a
 * leading apostrophe, as OWASP advises against CSV injection: user ids and names are chosen by API callers.
 */
function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text = String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
