import { describe, expect, it } from 'vitest';
import { canonicalTimeZone, periodAt, type ResetAlignment } from '../../src/gateway/budget-periods.ts';

/** The calendar period containing `at` (ISO, UTC), as ISO instants. */
function period(alignment: ResetAlignment, zone: string, at: string): [string, string] {
  const { start, end } = periodAt({ alignment, time_zone: zone }, Date.parse(at));
  return [new Date(start).toISOString(), new Date(end!).toISOString()];
}

const HOUR = 3_600_000;

describe('calendar periods in UTC', () => {
  it('a month ends at the first of the next, whatever its length (Jan 31 → Feb 1, Feb 28 → Mar 1, leap Feb 29 → Mar 1)', () => {
    expect(period('monthly', 'UTC', '2027-01-31T23:59:59.999Z')).toEqual(['2027-01-01T00:00:00.000Z', '2027-02-01T00:00:00.000Z']);
    expect(period('monthly', 'UTC', '2027-02-01T00:00:00.000Z')).toEqual(['2027-02-01T00:00:00.000Z', '2027-03-01T00:00:00.000Z']);
    expect(period('monthly', 'UTC', '2027-02-28T23:59:59.999Z')).toEqual(['2027-02-01T00:00:00.000Z', '2027-03-01T00:00:00.000Z']);
    expect(period('monthly', 'UTC', '2028-02-29T12:00:00.000Z')).toEqual(['2028-02-01T00:00:00.000Z', '2028-03-01T00:00:00.000Z']);
    expect(period('daily', 'UTC', '2027-02-28T18:00:00.000Z')).toEqual(['2027-02-28T00:00:00.000Z', '2027-03-01T00:00:00.000Z']);
    expect(period('daily', 'UTC', '2028-02-28T18:00:00.000Z')).toEqual(['2028-02-28T00:00:00.000Z', '2028-02-29T00:00:00.000Z']);
  });

  it('a year ends at midnight of January 1st; an ISO week (Monday to Monday) runs across it', () => {
    expect(period('monthly', 'UTC', '2027-12-31T23:59:59.999Z')).toEqual(['2027-12-01T00:00:00.000Z', '2028-01-01T00:00:00.000Z']);
    expect(period('daily', 'UTC', '2028-01-01T00:00:00.000Z')).toEqual(['2028-01-01T00:00:00.000Z', '2028-01-02T00:00:00.000Z']);
    // Friday 2027-12-31 and Saturday 2028-01-01 are in the week of Monday 2027-12-27
    expect(period('weekly', 'UTC', '2027-12-31T12:00:00.000Z')).toEqual(['2027-12-27T00:00:00.000Z', '2028-01-03T00:00:00.000Z']);
    expect(period('weekly', 'UTC', '2028-01-01T12:00:00.000Z')).toEqual(['2027-12-27T00:00:00.000Z', '2028-01-03T00:00:00.000Z']);
  });

  it('a week starts on Monday: Sunday belongs to the week before, Monday 00:00 to the next', () => {
    expect(period('weekly', 'UTC', '2027-01-03T23:59:59.999Z')).toEqual(['2026-12-28T00:00:00.000Z', '2027-01-04T00:00:00.000Z']);
    expect(period('weekly', 'UTC', '2027-01-04T00:00:00.000Z')).toEqual(['2027-01-04T00:00:00.000Z', '2027-01-11T00:00:00.000Z']);
  });
});

describe('calendar periods in a time zone', () => {
  it('Europe/Berlin: a month starts at local midnight (23:00 UTC in winter, 22:00 in summer)', () => {
    // 23:59 on Jan 31 in Berlin is still January; a minute later it is February
    expect(period('monthly', 'Europe/Berlin', '2027-01-31T22:59:00.000Z')).toEqual(['2026-12-31T23:00:00.000Z', '2027-01-31T23:00:00.000Z']);
    expect(period('monthly', 'Europe/Berlin', '2027-01-31T23:00:00.000Z')).toEqual(['2027-01-31T23:00:00.000Z', '2027-02-28T23:00:00.000Z']);
    // March starts in winter time and ends in summer time
    expect(period('monthly', 'Europe/Berlin', '2027-03-15T12:00:00.000Z')).toEqual(['2027-02-28T23:00:00.000Z', '2027-03-31T22:00:00.000Z']);
  });

  it('Europe/Berlin: the day clocks go forward (last Sunday of March) lasts 23 hours, the day they go back (October) 25', () => {
    const spring = period('daily', 'Europe/Berlin', '2027-03-28T12:00:00.000Z');
    expect(spring).toEqual(['2027-03-27T23:00:00.000Z', '2027-03-28T22:00:00.000Z']);
    expect(Date.parse(spring[1]) - Date.parse(spring[0])).toBe(23 * HOUR);
    const autumn = period('daily', 'Europe/Berlin', '2027-10-31T12:00:00.000Z');
    expect(autumn).toEqual(['2027-10-30T22:00:00.000Z', '2027-10-31T23:00:00.000Z']);
    expect(Date.parse(autumn[1]) - Date.parse(autumn[0])).toBe(25 * HOUR);
    // the hour that happens twice (02:00–03:00 local, 00:00–02:00 UTC) is in that one day
    expect(period('daily', 'Europe/Berlin', '2027-10-31T00:30:00.000Z')).toEqual(autumn);
    expect(period('daily', 'Europe/Berlin', '2027-10-31T01:30:00.000Z')).toEqual(autumn);
    // a week across the change: Monday 00:00 CET to Monday 00:00 CEST, 167 hours
    const week = period('weekly', 'Europe/Berlin', '2027-03-24T12:00:00.000Z');
    expect(week).toEqual(['2027-03-21T23:00:00.000Z', '2027-03-28T22:00:00.000Z']);
    expect(Date.parse(week[1]) - Date.parse(week[0])).toBe(167 * HOUR);
  });

  it('America/New_York: DST in March and November, and the year ending five hours after UTC', () => {
    expect(period('daily', 'America/New_York', '2027-03-14T12:00:00.000Z')).toEqual(['2027-03-14T05:00:00.000Z', '2027-03-15T04:00:00.000Z']);
    expect(period('daily', 'America/New_York', '2027-11-07T12:00:00.000Z')).toEqual(['2027-11-07T04:00:00.000Z', '2027-11-08T05:00:00.000Z']);
    // 22:00 on Dec 31 in New York is 03:00 on Jan 1 in UTC: still December there
    expect(period('monthly', 'America/New_York', '2028-01-01T03:00:00.000Z')).toEqual(['2027-12-01T05:00:00.000Z', '2028-01-01T05:00:00.000Z']);
    expect(period('monthly', 'America/New_York', '2028-01-01T05:00:00.000Z')).toEqual(['2028-01-01T05:00:00.000Z', '2028-02-01T05:00:00.000Z']);
  });

  it('a zone that skips midnight (Chile, São Paulo in 2018) starts that day at the end of the skipped hour', () => {
    // 2027-09-05 00:00 in Santiago does not exist: clocks go from 23:59:59 (UTC−4) to 01:00 (UTC−3)
    expect(period('daily', 'America/Santiago', '2027-09-05T12:00:00.000Z')).toEqual(['2027-09-05T04:00:00.000Z', '2027-09-06T03:00:00.000Z']);
    expect(period('daily', 'America/Santiago', '2027-09-04T12:00:00.000Z')).toEqual(['2027-09-04T04:00:00.000Z', '2027-09-05T04:00:00.000Z']);
    expect(period('daily', 'America/Sao_Paulo', '2018-11-04T12:00:00.000Z')).toEqual(['2018-11-04T03:00:00.000Z', '2018-11-05T02:00:00.000Z']);
    // and one whose clock went back across midnight (2019-02-17 00:00 → 02-16 23:00): the repeated hour is still Feb 16
    expect(period('daily', 'America/Sao_Paulo', '2019-02-17T02:30:00.000Z')).toEqual(['2019-02-16T02:00:00.000Z', '2019-02-17T03:00:00.000Z']);
  });

  it('periods tile time: each contains its instant and ends where the next starts (a year, every 7 hours, in four zones)', () => {
    for (const zone of ['UTC', 'Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe']) {
      for (const alignment of ['daily', 'weekly', 'monthly'] as const) {
        for (let t = Date.parse('2027-01-01T00:00:00Z'); t < Date.parse('2028-01-01T00:00:00Z'); t += 7 * HOUR) {
          const { start, end } = periodAt({ alignment, time_zone: zone }, t);
          expect(start <= t && t < end!, `${zone} ${alignment} ${new Date(t).toISOString()}`).toBe(true);
          expect(periodAt({ alignment, time_zone: zone }, end!).start).toBe(end);
        }
      }
    }
  });
});

describe('rolling periods and none', () => {
  it('a rolling period runs its seconds from the instant it starts; no schedule never ends', () => {
    expect(periodAt({ every_seconds: 90 }, 1_000)).toEqual({ start: 1_000, end: 91_000 });
    expect(periodAt(null, 1_000)).toEqual({ start: 1_000, end: null });
  });
});

it('time zones: Intl spelling accepted and made canonical, unknown ones refused', () => {
  expect(canonicalTimeZone('europe/berlin')).toBe('Europe/Berlin');
  expect(canonicalTimeZone('UTC')).toBe('UTC');
  expect(canonicalTimeZone('Mars/Olympus_Mons')).toBeNull();
  expect(canonicalTimeZone('')).toBeNull();
});
