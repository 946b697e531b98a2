import { GatewayError } from './errors.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { GatewayStore } from './storage/store.ts';

const MINUTE = 60_000;

/** Counts one call of a subject (a virtual key, or `user:<id>` with the master key); 429 beyond the limit. */
export interface RateLimiter {
  take(subject: string, now: number): Promise<void>;
  close(): void;
}

function limited(perMinute: number, windowEnd: number, now: number, metrics: GatewayMetrics): GatewayError {
  metrics.rateLimited.inc();
  const retryAfter = Math.max(1, Math.ceil((windowEnd - now) / 1000));
  return new GatewayError(429, 'rate_limit_error', 'rate_limit_exceeded', `Rate limit exceeded: ${perMinute} requests per minute; retry in ${retryAfter} s`, { retryAfter });
}

/** One instance's own count (SQLite: one process owns the database): a window per subject from its first call. */
export class LocalRateLimiter implements RateLimiter {
  readonly #perMinute: number;
  readonly #metrics: GatewayMetrics;
  readonly #windows = new Map<string, { start: number; count: number }>();

  constructor(perMinute: number, metrics: GatewayMetrics) {
    this.#perMinute = perMinute;
    this.#metrics = metrics;
  }

  async take(subject: string, now: number): Promise<void> {
    let window = this.#windows.get(subject);
    if (!window || now - window.start >= MINUTE) {
      window = { start: now, count: 0 };
      this.#windows.set(subject, window);
      if (this.#windows.size > 100_000) this.#windows.clear();
    }
    if (window.count >= this.#perMinute) throw limited(this.#perMinute, window.start + MINUTE, now, this.#metrics);
    window.count++;
  }

  close(): void {}
}

/**
 * A count every instance on the database shares (PostgreSQL): fixed windows aligned to the minute, one atomic
 * upsert per call that counts the call only while the window is under the limit — one round trip, no lost or
 * double counts whatever the concurrency. Windows older than two minutes are deleted once a minute.
 */
export class SharedRateLimiter implements RateLimiter {
  readonly #perMinute: number;
  readonly #metrics: GatewayMetrics;
  readonly #store: GatewayStore;
  readonly #sweeper: NodeJS.Timeout;

  constructor(perMinute: number, store: GatewayStore, metrics: GatewayMetrics) {
    this.#perMinute = perMinute;
    this.#store = store;
    this.#metrics = metrics;
    this.#sweeper = setInterval(() => void store.forgetRateWindows(Date.now() - 2 * MINUTE).catch(() => {}), MINUTE);
    this.#sweeper.unref();
  }

  async take(subject: string, now: number): Promise<void> {
    const windowStart = Math.floor(now / MINUTE) * MINUTE;
    if (!(await this.#store.countRateWindow(subject, windowStart, this.#perMinute))) {
      throw limited(this.#perMinute, windowStart + MINUTE, now, this.#metrics);
    }
  }

  close(): void {
    clearInterval(this.#sweeper);
  }
}
