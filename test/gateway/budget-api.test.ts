import OpenAI from 'openai';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { CHAT_USAGE } from '../fakes/openai-compatible.ts';
import { CHAT_COST, TEST_PRICING, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

/**
 * Budget names, calendar resets and soft budgets through the API and the real `openai` client, on both databases.
 * Calendar resets run on a fake clock: Date is faked (and only Date), so the gateway in this process sees it too.
 */
const backends = await useBackends();
const fake = await useFakeProvider();

/** A chat call whose hold ($0.02) fits a budget of one call's cost (CHAT_COST, $0.024). */
const CHAT = { model: 'openai:gpt-fake', messages: [{ role: 'user' as const, content: 'Hi' }], max_tokens: CHAT_USAGE.completion_tokens };

describe.each(backends)('budgets API on $name', (backend) => {
  let gateway: TestGateway;
  useTestGateway(
    backend,
    // a lease far beyond the test: the heartbeat must not run while Date jumps months ahead
    () => ({ providers: { openai: { api_key: 'sk-provider', api_base: fake.baseURL } }, pricing: { 'openai:gpt-fake': TEST_PRICING }, instanceLeaseSeconds: 3600 }),
    (started) => {
      gateway = started;
    },
  );
  afterAll(() => {
    vi.useRealTimers();
  });

  /** An OpenAI client with a new virtual key on `budget_id` (owned by `user_id` when given). */
  async function clientFor(budgetId: string | null, userId?: string): Promise<OpenAI> {
    const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'budgeted', budget_id: budgetId, user_id: userId ?? null } })).json;
    return new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  }
  /** Day of month, hour and minute of a response timestamp (UTC, no designator) on the clocks of `zone`. */
  const localClock = (timestamp: string, zone: string) => {
    const parts = new Intl.DateTimeFormat('en-US', { timeZone: zone, day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).formatToParts(Date.parse(`${timestamp}Z`));
    const part = (type: string) => parts.find((p) => p.type === type)!.value;
    return { day: part('day'), hour: part('hour'), minute: part('minute') };
  };
  const budgetOf = async (id: string) => (await gateway.call('GET', `/v1/budgets/${id}`)).json;

  it.skipIf(backend.skipReason)('names: set, listed, renamed, cleared; not unique', async () => {
    const team = (await gateway.call('POST', '/v1/budgets', { body: { name: 'Team Berlin', max_budget: 5 } })).json;
    expect(team).toMatchObject({ name: 'Team Berlin', max_budget: 5, soft_budget: null, soft_budget_exceeded: false, reset_alignment: null, reset_time_zone: null, next_reset_at: null });
    const twin = await gateway.call('POST', '/v1/budgets', { body: { name: 'Team Berlin', max_budget: 1 } });
    expect(twin.status).toBe(201);
    const listed = (await gateway.call('GET', '/v1/budgets')).json.data.filter((b: { name: string | null }) => b.name === 'Team Berlin');
    expect(listed.map((b: { budget_id: string }) => b.budget_id)).toEqual([team.budget_id, twin.json.budget_id]);
    expect((await gateway.call('PATCH', `/v1/budgets/${team.budget_id}`, { body: { name: 'Team Munich' } })).json).toMatchObject({ name: 'Team Munich', max_budget: 5 });
    expect((await gateway.call('PATCH', `/v1/budgets/${team.budget_id}`, { body: { max_budget: 6 } })).json.name).toBe('Team Munich');
    expect((await gateway.call('PATCH', `/v1/budgets/${team.budget_id}`, { body: { name: null } })).json.name).toBeNull();
    for (const name of ['', 'a\u0000b', 'x'.repeat(257)]) {
      const refused = await gateway.call('POST', '/v1/budgets', { body: { name, max_budget: 1 } });
      expect([refused.status, refused.json.error.param]).toEqual([400, 'name']);
    }
  });

  it.skipIf(backend.skipReason)('schedules: calendar with a time zone (canonical spelling), exclusive with seconds, switched in one PATCH', async () => {
    const monthly = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 5, reset_alignment: 'monthly', reset_time_zone: 'europe/berlin' } })).json;
    expect(monthly).toMatchObject({ reset_alignment: 'monthly', reset_time_zone: 'Europe/Berlin', reset_every_seconds: null });
    // the next local midnight of a 1st in Berlin (23:00 or 22:00 UTC the day before), within a month
    expect(localClock(monthly.next_reset_at, 'Europe/Berlin')).toEqual({ day: '1', hour: '00', minute: '00' });
    expect(Date.parse(`${monthly.next_reset_at}Z`) - Date.now()).toBeLessThanOrEqual(31 * 86_400_000);
    const daily = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 5, reset_alignment: 'daily' } })).json;
    expect(daily).toMatchObject({ reset_alignment: 'daily', reset_time_zone: 'UTC' });
    expect(daily.next_reset_at).toMatch(/T00:00:00\.000$/);

    const refusals: [string, string, object, string][] = [
      ['POST', '/v1/budgets', { max_budget: 1, reset_every_seconds: 60, reset_alignment: 'daily' }, 'reset_alignment'],
      ['POST', '/v1/budgets', { max_budget: 1, reset_alignment: 'daily', reset_time_zone: 'Mars/Olympus_Mons' }, 'reset_time_zone'],
      ['POST', '/v1/budgets', { max_budget: 1, reset_time_zone: 'Europe/Berlin' }, 'reset_time_zone'],
      ['POST', '/v1/budgets', { max_budget: 1, reset_alignment: 'yearly' }, 'reset_alignment'],
      ['POST', '/v1/budgets', { max_budget: 1, reset_every_seconds: 60, reset_time_zone: 'UTC' }, 'reset_time_zone'],
      // a rolling budget cannot gain an alignment without giving up its seconds
      ['PATCH', `/v1/budgets/${(await gateway.call('POST', '/v1/budgets', { body: { max_budget: 1, reset_every_seconds: 60 } })).json.budget_id}`, { reset_alignment: 'weekly' }, 'reset_alignment'],
      ['PATCH', `/v1/budgets/${monthly.budget_id}`, { reset_every_seconds: 60 }, 'reset_every_seconds'],
      ['PATCH', `/v1/budgets/${monthly.budget_id}`, { reset_time_zone: 'Europe/Nowhere' }, 'reset_time_zone'],
    ];
    for (const [method, path, body, param] of refusals) {
      const refused = await gateway.call(method, path, { body });
      expect([refused.status, refused.json.error.type, refused.json.error.param], JSON.stringify(body)).toEqual([400, 'invalid_request_error', param]);
    }
    expect((await budgetOf(monthly.budget_id)).reset_time_zone).toBe('Europe/Berlin');

    // switching kinds in one request; the zone is kept when only the alignment changes
    const rolling = (await gateway.call('PATCH', `/v1/budgets/${monthly.budget_id}`, { body: { reset_alignment: null, reset_every_seconds: 3600 } })).json;
    expect(rolling).toMatchObject({ reset_alignment: null, reset_time_zone: null, reset_every_seconds: 3600 });
    const weekly = (await gateway.call('PATCH', `/v1/budgets/${monthly.budget_id}`, { body: { reset_every_seconds: null, reset_alignment: 'weekly', reset_time_zone: 'America/New_York' } })).json;
    expect(weekly).toMatchObject({ reset_alignment: 'weekly', reset_time_zone: 'America/New_York', reset_every_seconds: null });
    const dailyNy = (await gateway.call('PATCH', `/v1/budgets/${monthly.budget_id}`, { body: { reset_alignment: 'daily' } })).json;
    expect(dailyNy).toMatchObject({ reset_alignment: 'daily', reset_time_zone: 'America/New_York' });
    expect(localClock(dailyNy.next_reset_at, 'America/New_York')).toMatchObject({ hour: '00', minute: '00' });
    expect((await gateway.call('PATCH', `/v1/budgets/${monthly.budget_id}`, { body: { reset_alignment: null } })).json).toMatchObject({ reset_alignment: null, reset_time_zone: null, next_reset_at: null });
  });

  it.skipIf(backend.skipReason)('soft budgets: below max_budget, flagged in the budget, x-budget-warning on calls past them (read with the openai client)', async () => {
    for (const [method, body] of [
      ['POST', { max_budget: 1, soft_budget: 1 }],
      ['POST', { max_budget: 1, soft_budget: 2 }],
      ['POST', { max_budget: 0, soft_budget: 0 }],
    ] as const) {
      const refused = await gateway.call(method, '/v1/budgets', { body });
      expect([refused.status, refused.json.error.param], JSON.stringify(body)).toEqual([400, 'soft_budget']);
    }
    // $0.03 soft: past it after two calls of $0.024
    const budget = (await gateway.call('POST', '/v1/budgets', { body: { name: 'app', max_budget: 1, soft_budget: 0.03 } })).json;
    expect(budget).toMatchObject({ soft_budget: 0.03, soft_budget_exceeded: false });
    const lowered = await gateway.call('PATCH', `/v1/budgets/${budget.budget_id}`, { body: { max_budget: 0.03 } });
    expect([lowered.status, lowered.json.error.param]).toEqual([400, 'soft_budget']);
    const client = await clientFor(budget.budget_id);
    const warnings: (string | null)[] = [];
    for (let i = 0; i < 3; i++) {
      const { data, response } = await client.chat.completions.create(CHAT).withResponse();
      expect(data.choices).toHaveLength(1);
      warnings.push(response.headers.get('x-budget-warning'));
    }
    expect(warnings.slice(0, 2)).toEqual([null, null]);
    expect(warnings[2]).toBe(`${budget.budget_id}; scope=key; spend=${2 * CHAT_COST}; soft_budget=0.03; max_budget=1`);
    expect(await budgetOf(budget.budget_id)).toMatchObject({ soft_budget_exceeded: true, soft_budget: 0.03 });
    // streams carry it too (the header goes out before the first event)
    const stream = await client.chat.completions.create({ ...CHAT, stream: true }).withResponse();
    for await (const chunk of stream.data) expect(chunk.object).toBe('chat.completion.chunk');
    expect(stream.response.headers.get('x-budget-warning')).toMatch(new RegExp(`^${budget.budget_id}; scope=key; spend=`));
    // raising the soft budget clears the warning
    await gateway.call('PATCH', `/v1/budgets/${budget.budget_id}`, { body: { soft_budget: 0.5 } });
    expect((await client.chat.completions.create(CHAT).withResponse()).response.headers.get('x-budget-warning')).toBeNull();
    expect((await budgetOf(budget.budget_id)).soft_budget_exceeded).toBe(false);

    // the owner's budget warns on its key's calls; a key of its own adds nothing while below its soft budget
    const owners = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 1, soft_budget: 0 } })).json;
    await gateway.call('POST', '/v1/users', { body: { user_id: 'soft-owner', alias: 'Owner', budget_id: owners.budget_id } });
    const keyBudget = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 1, soft_budget: 0.5 } })).json;
    const owned = await clientFor(keyBudget.budget_id, 'soft-owner');
    const { response } = await owned.chat.completions.create(CHAT).withResponse();
    expect(response.headers.get('x-budget-warning')).toBe(`${owners.budget_id}; scope=user; spend=0; soft_budget=0; max_budget=1`);
    // a refusal (budget exceeded) is not a warning
    const spent = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: CHAT_COST, soft_budget: 0.001 } })).json;
    const exhausted = await clientFor(spent.budget_id);
    await exhausted.chat.completions.create(CHAT);
    const refusal = await exhausted.chat.completions.create(CHAT).then(
      () => null,
      (error: unknown) => error as InstanceType<typeof OpenAI.APIError>,
    );
    expect(refusal).toMatchObject({ status: 403, code: 'budget_exceeded' });
    expect(refusal!.headers!.get('x-budget-warning')).toBeNull();
  });

  it.skipIf(backend.skipReason)('calendar resets on a fake clock: Berlin month end, New York DST (25-hour day), year end in UTC', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const expectRefused = async (client: OpenAI) => expect(client.chat.completions.create(CHAT)).rejects.toMatchObject({ status: 403, code: 'budget_exceeded' });

    // Europe/Berlin, monthly: January ends at 23:00 UTC on Jan 31
    vi.setSystemTime(new Date('2027-01-31T22:30:00Z'));
    const berlin = (await gateway.call('POST', '/v1/budgets', { body: { name: 'Berlin', max_budget: CHAT_COST, reset_alignment: 'monthly', reset_time_zone: 'Europe/Berlin' } })).json;
    expect([berlin.period_started_at, berlin.next_reset_at]).toEqual(['2026-12-31T23:00:00.000', '2027-01-31T23:00:00.000']);
    const berliner = await clientFor(berlin.budget_id);
    await berliner.chat.completions.create(CHAT);
    await expectRefused(berliner);
    vi.setSystemTime(new Date('2027-01-31T22:59:59.999Z'));
    await expectRefused(berliner);
    vi.setSystemTime(new Date('2027-01-31T23:00:00Z'));
    expect(await budgetOf(berlin.budget_id)).toMatchObject({ spend: 0, period_started_at: '2027-01-31T23:00:00.000', next_reset_at: '2027-02-28T23:00:00.000' });
    await berliner.chat.completions.create(CHAT);
    await expectRefused(berliner);
    expect((await budgetOf(berlin.budget_id)).spend).toBeCloseTo(CHAT_COST, 10);

    // America/New_York, daily: Nov 7, 2027 lasts 25 hours (04:00 UTC to 05:00 UTC the next day)
    vi.setSystemTime(new Date('2027-11-07T04:30:00Z'));
    const newYork = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: CHAT_COST, reset_alignment: 'daily', reset_time_zone: 'America/New_York' } })).json;
    expect([newYork.period_started_at, newYork.next_reset_at]).toEqual(['2027-11-07T04:00:00.000', '2027-11-08T05:00:00.000']);
    const newYorker = await clientFor(newYork.budget_id);
    await newYorker.chat.completions.create(CHAT);
    vi.setSystemTime(new Date('2027-11-08T04:30:00Z')); // 23:30 EST: 24.5 hours in, still Nov 7
    await expectRefused(newYorker);
    vi.setSystemTime(new Date('2027-11-08T05:00:00Z'));
    await newYorker.chat.completions.create(CHAT);
    expect((await budgetOf(newYork.budget_id)).next_reset_at).toBe('2027-11-09T05:00:00.000');

    // UTC, monthly: December ends at midnight of Jan 1
    vi.setSystemTime(new Date('2027-12-31T12:00:00Z'));
    const utc = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: CHAT_COST, reset_alignment: 'monthly' } })).json;
    const utcClient = await clientFor(utc.budget_id);
    await utcClient.chat.completions.create(CHAT);
    vi.setSystemTime(new Date('2027-12-31T23:59:59.999Z'));
    await expectRefused(utcClient);
    vi.setSystemTime(new Date('2028-01-01T00:00:00Z'));
    await utcClient.chat.completions.create(CHAT);
    expect(await budgetOf(utc.budget_id)).toMatchObject({ period_started_at: '2028-01-01T00:00:00.000', next_reset_at: '2028-02-01T00:00:00.000' });
    vi.useRealTimers();
  });
});
