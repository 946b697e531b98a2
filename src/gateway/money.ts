import type { PricingRecord } from './storage/records.ts';

/**
 * Money inside the gateway: integer nano-dollars as BigInt, from the database to the API's edge, where it becomes a
 * dollar number (`dollars`). A number holds integers exactly only up to 2^53 (9.0e15 nano-dollars, $9.0M), below the
 * largest budget ($1e9 = 1e18 nano-dollars) and far below what a sum of usage rows can reach; the columns are BIGINT
 * (int64, up to 9.2e18). docs/gateway.md, "Money", gives the bounds.
 */
const NANOS_PER_DOLLAR = 1_000_000_000n;

/** Nano-dollars (never negative) as the API's dollars: the double nearest to the exact value, as `n / 1e9` is below 2^53. */
export function dollars(nanos: bigint): number {
  if (nanos <= MAX_SAFE) return Number(nanos) / 1e9;
  // decimal text → double is correctly rounded; Number(nanos) / 1e9 would round twice
  return Number(`${nanos / NANOS_PER_DOLLAR}.${String(nanos % NANOS_PER_DOLLAR).padStart(9, '0')}`);
}

/** Dollars given to the API (at most MAX_DOLLARS, nonnegative) as nano-dollars, rounded to the nearest. */
export function nanosOf(value: number): bigint {
  const whole = Math.trunc(value);
  // the fraction of a double is exact, and so is its whole part as a BigInt: only the nano-dollar rounding remains
  return BigInt(whole) * NANOS_PER_DOLLAR + BigInt(Math.round((value - whole) * 1e9));
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const MILLION = 1_000_000n;

/** A price in dollars as integer nano-dollars (per million tokens, or per thousand search units): exact to 1e-9. */
const priceNanos = (price: number) => BigInt(Math.round(price * 1e9));

/**
 * What a call costs at a model's prices, in nano-dollars: tokens × price per million and search units × price per
 * thousand, added up exactly (BigInt) and rounded once, to the nearest (`round`) or up (`ceil`, for holds).
 * Counts that are not whole (estimates) are rounded up first.
 */
export function callNanos(pricing: PricingRecord, prompt: number, completion: number, searchUnits: number, rounding: 'round' | 'ceil' = 'round'): bigint {
  const count = (n: number) => BigInt(Math.ceil(n));
  // in millionths of a nano-dollar: a thousand search units cost the price, so one costs price × 1,000 of these
  const micro =
    count(prompt) * priceNanos(pricing.input_cost_per_million) +
    count(completion) * priceNanos(pricing.output_cost_per_million) +
    count(searchUnits) * priceNanos(pricing.search_unit_cost_per_thousand) * 1000n;
  return (micro + (rounding === 'ceil' ? MILLION - 1n : MILLION / 2n)) / MILLION;
}
