/**
 * When a budget's period ends: after a fixed number of seconds (rolling, from its last reset), or at a calendar
 * boundary (the start of a day, ISO week or month) in UTC or an IANA time zone. Zone arithmetic uses Intl (the
 * time zone data built into Node): a day is from one local midnight to the next, so it lasts 23 or 25 hours across
 * a daylight-saving change, and a month starts at local midnight of its 1st.
 */

export const RESET_ALIGNMENTS = ['daily', 'weekly', 'monthly'] as const;
export type ResetAlignment = (typeof RESET_ALIGNMENTS)[number];

/** How a budget's spend starts again from 0; null: never. */
export type ResetSchedule = { every_seconds: number } | { alignment: ResetAlignment; time_zone: string } | null;

export interface Period {
  start: number;
  /** The instant the next period starts (epoch ms); null: the period never ends. */
  end: number | null;
}

const DAY_MS = 86_400_000;

/**
 * The period a budget enters when it (re)starts at `now`: a rolling one runs from `now` for its seconds; a calendar
 * one is the day, week or month that contains `now` in its zone.
 */
export function periodAt(schedule: ResetSchedule, now: number): Period {
  if (schedule === null) return { start: now, end: null };
  if ('every_seconds' in schedule) return { start: now, end: now + schedule.every_seconds * 1000 };
  return calendarPeriod(schedule.alignment, schedule.time_zone, now);
}

/** The canonical name of a time zone Intl knows ("europe/berlin" → "Europe/Berlin"), or null for an unknown one. */
export function canonicalTimeZone(zone: string): string | null {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

function calendarPeriod(alignment: ResetAlignment, zone: string, now: number): Period {
  // A local date as the UTC midnight of the same calendar date, so that Date.UTC does the calendar arithmetic.
  const today = localDate(now, zone);
  const date = new Date(today);
  let first: number;
  let next: number;
  if (alignment === 'daily') {
    first = today;
    next = today + DAY_MS;
  } else if (alignment === 'weekly') {
    // ISO 8601 weeks: Monday to Sunday
    first = today - ((date.getUTCDay() + 6) % 7) * DAY_MS;
    next = first + 7 * DAY_MS;
  } else {
    first = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
    next = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
  }
  const start = startOfLocalDay(first, zone);
  const end = startOfLocalDay(next, zone);
  // Only where a zone's clock went back across midnight can `now` read as a date whose period already ended.
  return end > now ? { start: Math.min(start, now), end } : calendarPeriod(alignment, zone, end);
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let format = formatters.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(zone, format);
  }
  return format;
}

/** The wall-clock time in `zone` at instant `t`, written as the UTC instant that shows the same digits. */
function wallClock(t: number, zone: string): number {
  const parts: Record<string, number> = {};
  for (const { type, value } of formatter(zone).formatToParts(t)) parts[type] = Number(value);
  const { year, month, day, hour, minute, second } = parts;
  return Date.UTC(year, month - 1, day, hour, minute, second) + (((t % 1000) + 1000) % 1000);
}

function localDate(t: number, zone: string): number {
  const wall = wallClock(t, zone);
  return wall - (((wall % DAY_MS) + DAY_MS) % DAY_MS);
}

/**
 * The first instant of a local calendar date (given as the UTC midnight of that date): local midnight, or where the
 * zone skips midnight (a daylight-saving change at 00:00, as in Chile) the end of the skipped hour.
 */
function startOfLocalDay(date: number, zone: string): number {
  const offset = (t: number) => wallClock(t, zone) - t;
  let t = date - offset(date);
  t = date - offset(t);
  if (wallClock(t, zone) === date) return t;
  // Midnight does not exist: the day starts at the transition, the first instant whose wall clock is past midnight.
  let low = date - offset(date + DAY_MS); // before the transition (the later, larger offset read early)
  let high = date - offset(date - DAY_MS); // after it
  if (low > high) [low, high] = [high, low];
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (wallClock(middle, zone) >= date) high = middle;
    else low = middle;
  }
  return high;
}
