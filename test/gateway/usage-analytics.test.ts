import { describe, expect, it } from 'vitest';
import type { SqlValue } from '../../src/gateway/storage/driver.ts';
import type { CallRow, UsageRecord } from '../../src/gateway/storage/records.ts';
import { SqliteDriver } from '../../src/gateway/storage/sqlite-driver.ts';
import { GatewayStore } from '../../src/gateway/storage/store.ts';
import { countTurns } from '../helpers/event-loop-turns.ts';
import { useBackends, useTestGateway, type TestGateway } from './helpers/gateway.ts';

// GET /v1/usage/summary, /v1/usage/series and /v1/usage.csv on both storage engines, over rows written with known
// times, tokens, costs and statuses.

const backends = await useBackends();

const DAY = 86_400_000;
const T0 = Date.UTC(2026, 10, 1); // 2026-11-01T00:00Z
let n = 0;

function row(fields: Partial<UsageRecord> & { created_at: number }): UsageRecord {
  n++;
  return {
    id: `u${String(n).padStart(6, '0')}`,
    request_id: `req-${n}`,
    user_id: 'alice',
    key_id: 'key-a',
    endpoint: 'chat.completions',
    provider: 'openai',
    model: 'gpt-4o', // as the ledger records it: the provider has its own column
    prompt_tokens: 10,
    completion_tokens: 5,
    search_units: 0,
    cost_nanos: 1_000_000n, // $0.001
    status: 'success',
    status_code: 200,
    duration_ms: 12.5,
    ...fields,
  };
}

/** 3 days of rows: alice on gpt-4o, bob on claude, one error, one row before and one after the range used below. */
const ROWS: UsageRecord[] = [
  row({ created_at: T0 - 1 }), // before the range
  row({ created_at: T0 + 1_000 }),
  row({ created_at: T0 + 3_600_000 + 5 }),
  row({ created_at: T0 + DAY + 10, user_id: 'bob', key_id: 'key-b', provider: 'anthropic', model: 'claude', cost_nanos: 5_000_000n, prompt_tokens: 100, completion_tokens: 50 }),
  row({ created_at: T0 + DAY + 20, user_id: 'bob', key_id: 'key-b', provider: 'anthropic', model: 'claude', status: 'error', status_code: 502, cost_nanos: 0n, prompt_tokens: 0, completion_tokens: 0 }),
  row({ created_at: T0 + 2 * DAY + 30 }),
  row({ created_at: T0 + 3 * DAY }), // at until: excluded
];
const RANGE = `since=${new Date(T0).toISOString()}&until=${new Date(T0 + 3 * DAY).toISOString()}`;

describe.each(backends)('usage analytics on $name', (backend) => {
  let gateway: TestGateway;

  useTestGateway(backend, () => ({}), async (started) => {
    gateway = started;
    await gateway.store.usage.record(ROWS, []);
  });

  it.skipIf(backend.skipReason)('totals a range by model, user, key and provider, most cost first, with errors', async () => {
    const summary = await gateway.call('GET', `/v1/usage/summary?${RANGE}`);
    expect(summary.status).toBe(200);
    expect(summary.json).toMatchObject({ object: 'usage_summary', since: '2026-11-01T00:00:00.000', until: '2026-11-04T00:00:00.000' });
    expect(summary.json.totals).toEqual({ requests: 5, errors: 1, refused: 0, prompt_tokens: 130, completion_tokens: 65, total_tokens: 195, cost: 0.008 });
    expect(summary.json.by_model).toEqual([
      { model: 'anthropic:claude', requests: 2, errors: 1, refused: 0, prompt_tokens: 100, completion_tokens: 50, total_tokens: 150, cost: 0.005 },
      { model: 'openai:gpt-4o', requests: 3, errors: 0, refused: 0, prompt_tokens: 30, completion_tokens: 15, total_tokens: 45, cost: 0.003 },
    ]);
    expect(summary.json.by_user.map((entry: { user_id: string; requests: number }) => [entry.user_id, entry.requests])).toEqual([
      ['bob', 2],
      ['alice', 3],
    ]);
    expect(summary.json.by_key.map((entry: { key_id: string }) => entry.key_id)).toEqual(['key-b', 'key-a']);
    expect(summary.json.by_provider.map((entry: { provider: string }) => entry.provider)).toEqual(['anthropic', 'openai']);

    const alice = await gateway.call('GET', `/v1/usage/summary?${RANGE}&user_id=alice&model=openai:gpt-4o`);
    expect(alice.json.totals).toMatchObject({ requests: 3, cost: 0.003 });
    expect(alice.json.by_user).toHaveLength(1);
    const nobody = await gateway.call('GET', `/v1/usage/summary?${RANGE}&provider=mistral`);
    expect(nobody.json.totals).toEqual({ requests: 0, errors: 0, refused: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost: 0 });
    expect(nobody.json.by_model).toEqual([]);
  });

  it.skipIf(backend.skipReason)('gives a series per day or hour with every bucket of the range, empty ones included', async () => {
    const days = await gateway.call('GET', `/v1/usage/series?${RANGE}&interval=day`);
    expect(days.status).toBe(200);
    expect(days.json.data.map((bucket: { start: string; requests: number; cost: number }) => [bucket.start, bucket.requests, bucket.cost])).toEqual([
      ['2026-11-01T00:00:00.000', 2, 0.002],
      ['2026-11-02T00:00:00.000', 2, 0.005],
      ['2026-11-03T00:00:00.000', 1, 0.001],
    ]);
    const hours = await gateway.call('GET', `/v1/usage/series?since=2026-11-01T00:00:00Z&until=2026-11-01T03:00:00Z&interval=hour`);
    expect(hours.json).toMatchObject({ object: 'usage_series', interval: 'hour' });
    expect(hours.json.data.map((bucket: { requests: number }) => bucket.requests)).toEqual([1, 1, 0]);
    expect(hours.json.data[2]).toEqual({ start: '2026-11-01T02:00:00.000', requests: 0, errors: 0, refused: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost: 0 });
  });

  it.skipIf(backend.skipReason)('lists rows newest first, filtered, a page at a time until the cursor runs out', async () => {
    const all = await gateway.call('GET', `/v1/usage?${RANGE}`);
    expect(all.status).toBe(200);
    const inRange = ROWS.slice(1, 6).reverse();
    expect(all.json.data.map((usage: { id: string }) => usage.id)).toEqual(inRange.map((record) => record.id));
    expect(all.json).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect(all.json.data[1]).toMatchObject({ object: 'usage', user_id: 'bob', status: 'error', status_code: 502, cost: 0 });

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { status: number; json: { data: { id: string }[]; has_more: boolean; next_cursor: string | null } } = await gateway.call(
        'GET',
        `/v1/usage?${RANGE}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expect(page.status).toBe(200);
      expect(page.json.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.json.data.map((usage) => usage.id));
      expect(page.json.has_more).toBe(page.json.next_cursor !== null);
      cursor = page.json.next_cursor;
    } while (cursor);
    expect(seen).toEqual(inRange.map((record) => record.id));

    const bob = await gateway.call('GET', `/v1/usage?${RANGE}&user_id=bob&model=anthropic:claude`);
    expect(bob.json.data.map((usage: { id: string }) => usage.id)).toEqual([ROWS[4].id, ROWS[3].id]);
    // without since: every row up to until
    const upTo = await gateway.call('GET', `/v1/usage?until=${new Date(T0).toISOString()}`);
    expect(upTo.json.data.map((usage: { id: string }) => usage.id)).toEqual([ROWS[0].id]);
  });

  it.skipIf(backend.skipReason)('streams every row as CSV, oldest first, quoted, across pages', async () => {
    const extra: UsageRecord[] = [];
    for (let i = 0; i < 2_500; i++) extra.push(row({ created_at: T0 + 10 * DAY + i, user_id: i === 7 ? '=HYPERLINK("x"),"y"' : 'carol', key_id: null }));
    await gateway.store.usage.record(extra, []);
    // The event-loop turn each page is read on.
    const counter = countTurns();
    const pageTurns: number[] = [];
    const page = gateway.store.usage.page.bind(gateway.store.usage);
    gateway.store.usage.page = (...args) => {
      pageTurns.push(counter.turns);
      return page(...args);
    };
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${gateway.url}/v1/usage.csv?since=2026-11-11T00:00:00Z`, { headers: { 'x-hub-key': `Bearer ${(await import('./helpers/gateway.ts')).MASTER_KEY}` } });
      text = await response.text();
    } finally {
      counter.stop();
      gateway.store.usage.page = page;
    }
    // Each page is read on a later turn than the one before: whatever else the gateway has to do runs between pages
    // (on SQLite a page is a synchronous query, and loopback sockets take the writes at once).
    expect(pageTurns).toHaveLength(3);
    expect(pageTurns[1]).toBeGreaterThan(pageTurns[0]);
    expect(pageTurns[2]).toBeGreaterThan(pageTurns[1]);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(response.headers.get('content-disposition')).toBe('attachment; filename="usage.csv"');
    const lines = text.split('\r\n');
    expect(lines.at(-1)).toBe('');
    expect(lines[0]).toBe('id,request_id,created_at,user_id,key_id,endpoint,provider,model,prompt_tokens,completion_tokens,total_tokens,search_units,cost,status,status_code,duration_ms,route,attempts,overshoot,reason');
    const data = lines.slice(1, -1);
    expect(data).toHaveLength(2_500);
    expect(data.map((line) => line.split(',')[0])).toEqual(extra.map((record) => record.id));
    expect(data[0]).toBe(`${extra[0].id},${extra[0].request_id},2026-11-11T00:00:00.000,carol,,chat.completions,openai,gpt-4o,10,5,15,0,0.001,success,200,12.5,,1,0,`);
    // a formula is defused and the field quoted
    expect(data[7]).toContain(`,"'=HYPERLINK(""x""),""y""",`);

    const filtered = await gateway.call('GET', `/v1/usage.csv?${RANGE}&user_id=bob`);
    expect((filtered.json as string).trim().split('\r\n')).toHaveLength(3);
  });

  it.skipIf(backend.skipReason)('refuses bad ranges and filters with 400, and anyone but the master key', async () => {
    const cases: [string, string, string][] = [
      ['/v1/usage/summary?since=2026-11-03T00:00:00Z&until=2026-11-01T00:00:00Z', 'invalid_range', 'since'],
      ['/v1/usage/series?since=2026-11-01T00:00:00Z&until=2026-11-01T00:00:00Z', 'invalid_range', 'since'],
      ['/v1/usage/summary?since=yesterday', 'invalid_request', 'since'],
      ['/v1/usage/summary?until=2026-02-30T00:00:00Z', 'invalid_request', 'until'],
      ['/v1/usage/series?interval=week', 'invalid_request', 'interval'],
      ['/v1/usage/series?since=2020-01-01T00:00:00Z&until=2026-01-01T00:00:00Z&interval=hour', 'invalid_request', 'since'],
      ['/v1/usage.csv?colour=red', 'invalid_request', 'colour'],
      ['/v1/usage?cursor=not-a-cursor', 'invalid_cursor', 'cursor'],
      ['/v1/usage?limit=1001', 'invalid_request', 'limit'],
      ['/v1/usage?limit=0', 'invalid_request', 'limit'],
    ];
    for (const [url, code, param] of cases) {
      const response = await gateway.call('GET', url);
      expect(response.status, url).toBe(400);
      expect(response.json.error, url).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    const key = await gateway.call('POST', '/v1/keys', { body: { key_name: 'not-master' } });
    for (const url of ['/v1/usage', '/v1/usage/summary', '/v1/usage/series', '/v1/usage.csv']) {
      expect((await gateway.call('GET', url, { key: key.json.key })).json.error.code, url).toBe('master_key_required');
      expect((await gateway.call('GET', url, { key: null })).status, url).toBe(401);
    }
  });

  // last: its rows are of today, after every range above
  it.skipIf(backend.skipReason)('lists the calls in flight (pending rows) oldest first with their age, and drops a call once it finishes', async () => {
    const now = Date.now();
    const pending = (id: string, ageMs: number, fields: Partial<CallRow> = {}): CallRow => ({
      ...row({ created_at: now - ageMs, id, status: 'pending', status_code: 0, duration_ms: 0, cost_nanos: 2_000_000n }),
      holds: [],
      instance_id: gateway.store.instanceId,
      ...fields,
    });
    const calls = [pending('fly-b', 5_000, { route: 'smart', user_id: 'bob', key_id: null }), pending('fly-a', 60_000), pending('fly-c', 1_000, { endpoint: 'embeddings' })];
    await gateway.store.usage.open(calls);

    const listed = await gateway.call('GET', '/v1/usage/in-flight');
    expect(listed.status).toBe(200);
    expect(listed.json.has_more).toBe(false);
    expect(listed.json.data.map((call: { id: string }) => call.id)).toEqual(['fly-a', 'fly-b', 'fly-c']);
    const [a, b] = listed.json.data;
    expect(a).toMatchObject({ object: 'in_flight_call', request_id: calls[1].request_id, user_id: 'alice', key_id: 'key-a', endpoint: 'chat.completions', provider: 'openai', model: 'gpt-4o', route: null, cost: 0.002 });
    expect(a.age_ms).toBeGreaterThanOrEqual(60_000);
    expect(a.age_ms).toBeLessThan(120_000);
    expect(b).toMatchObject({ route: 'smart', user_id: 'bob', key_id: null });
    expect(b.age_ms).toBeGreaterThanOrEqual(5_000);
    expect(b.age_ms).toBeLessThan(a.age_ms);

    const first = await gateway.call('GET', '/v1/usage/in-flight?limit=2');
    expect(first.json.data.map((call: { id: string }) => call.id)).toEqual(['fly-a', 'fly-b']);
    expect(first.json.has_more).toBe(true);

    await gateway.store.usage.complete([{ ...calls[1], status: 'success', status_code: 200, duration_ms: 60_000 }]);
    expect((await gateway.call('GET', '/v1/usage/in-flight')).json.data.map((call: { id: string }) => call.id)).toEqual(['fly-b', 'fly-c']);

    for (const query of ['limit=0', 'limit=1001', 'limit=two', 'since=2026-11-01T00:00:00Z']) {
      const refused = await gateway.call('GET', `/v1/usage/in-flight?${query}`);
      expect(refused.status, query).toBe(400);
      expect(refused.json.error, query).toMatchObject({ type: 'invalid_request_error', code: 'invalid_request' });
    }
    const key = await gateway.call('POST', '/v1/keys', { body: { key_name: 'not-master-either' } });
    expect((await gateway.call('GET', '/v1/usage/in-flight', { key: key.json.key })).json.error.code).toBe('master_key_required');
    expect((await gateway.call('GET', '/v1/usage/in-flight', { key: null })).status).toBe(401);
    await gateway.store.usage.complete([calls[0], calls[2]].map((call) => ({ ...call, status: 'success' as const, status_code: 200 })));
    expect((await gateway.call('GET', '/v1/usage/in-flight')).json.data).toEqual([]);
  });
});

it("a page of rows seeks to its cursor: SQLite searches usage_created instead of walking it from the start (the CSV export's pages stay as fast however far in)", async () => {
  class RecordingDriver extends SqliteDriver {
    readonly queries: { sql: string; params: SqlValue[] }[] = [];
    override async all(sql: string, params: SqlValue[] = []) {
      this.queries.push({ sql, params });
      return super.all(sql, params);
    }
  }
  const driver = new RecordingDriver(':memory:');
  const store = new GatewayStore(driver);
  try {
    await store.migrate();
    await store.usage.record(ROWS, []);
    for (const [filter, order] of [[{ until: T0 + 3 * DAY }, 'oldest'], [{ since: T0, until: T0 + 3 * DAY }, 'newest'], [{}, 'oldest']] as const) {
      const pages: string[][] = [];
      let after: { created_at: number; id: string } | undefined;
      for (;;) {
        const page = await store.usage.page(filter, after, 2, order);
        pages.push(page.map((r) => r.id));
        const { sql, params } = driver.queries.at(-1)!;
        if (after) {
          const plan = (await driver.all(`EXPLAIN QUERY PLAN ${sql}`, params)).map((step) => String(step.detail));
          expect(plan.some((step) => step.startsWith('SEARCH usage USING INDEX usage_created'))).toBe(true);
          expect(plan.filter((step) => step.startsWith('SCAN'))).toEqual([]);
        }
        if (page.length < 2) break;
        after = page.at(-1);
      }
      // every row of the filter once, in order
      const inRange = ROWS.filter((r) => (!('since' in filter) || r.created_at >= filter.since) && (!('until' in filter) || r.created_at < filter.until));
      const expected = inRange.map((r) => r.id);
      expect(pages.flat()).toEqual(order === 'oldest' ? expected : [...expected].reverse());
    }
  } finally {
    await store.close();
  }
});

it('the summary of random rows equals totals computed from the rows one grouping at a time (ties: most calls, then by name, none first)', async () => {
  const store = new GatewayStore(new SqliteDriver(':memory:'));
  try {
    await store.migrate();
    let seed = 7;
    const random = (n: number) => (seed = (seed * 48271) % 2147483647) % n;
    const rows: UsageRecord[] = Array.from({ length: 400 }, () => {
      const provider = ['openai', 'anthropic'][random(2)];
      return row({
        created_at: T0 + random(DAY),
        provider,
        model: `m${random(3)}`,
        user_id: [null, 'u1', 'u2', 'u3'][random(4)],
        key_id: [null, 'k1', 'k2'][random(3)],
        cost_nanos: [0n, 1_000n, 2_000n][random(3)], // many ties
        prompt_tokens: random(50),
        completion_tokens: random(50),
        status: random(10) === 0 ? 'error' : random(10) === 0 ? 'refused' : 'success',
      });
    });
    await store.usage.record(rows, []);
    const { totals, groups } = await store.usage.summarize({ since: T0, until: T0 + DAY });
    const sum = (of: UsageRecord[]) => ({
      requests: of.length,
      errors: of.filter((r) => r.status !== 'success').length,
      refused: of.filter((r) => r.status === 'refused').length,
      prompt_tokens: of.reduce((n, r) => n + r.prompt_tokens, 0),
      completion_tokens: of.reduce((n, r) => n + r.completion_tokens, 0),
      cost_nanos: of.reduce((n, r) => n + r.cost_nanos, 0n),
    });
    expect(totals).toEqual(sum(rows));
    for (const group of ['model', 'user_id', 'key_id', 'provider'] as const) {
      // models are grouped as provider:model
      const valueOf = (r: UsageRecord) => (group === 'model' ? `${r.provider}:${r.model}` : (r[group] ?? null));
      const values = [...new Set(rows.map(valueOf))];
      const expected = values
        .map((value) => ({ group: value, ...sum(rows.filter((r) => valueOf(r) === value)) }))
        .sort((a, b) => Number(b.cost_nanos - a.cost_nanos) || b.requests - a.requests || (a.group === null ? -1 : b.group === null ? 1 : a.group < b.group ? -1 : 1));
      expect(groups[group]).toEqual(expected);
    }
  } finally {
    await store.close();
  }
});
