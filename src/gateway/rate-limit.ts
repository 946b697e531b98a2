import { GatewayError } from './errors.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { GatewayStore } from './storage/store.ts';

const MINUTE = 60_000;

/** The configured limits per subject and minute; an absent one does not limit. */
export interface RateLimits {
  requests_per_minute?: number;
  tokens_per_minute?: number;
}

/**
 * Per subject (a virtual key, or `user:<id>` with the master key) and minute: `take` counts a call, or refuses it
 * with 429 when the subject's window has its requests, or has used its tokens; `spend` adds a finished call's
 * tokens to the window the call was counted in.
 */
export interface RateLimiter {
  take(subject: string, now: number): Promise<void>;
  spend(subject: string, startedAt: number, tokens: number): void;
  close(): void;
}

function describe(limits: RateLimits): string {
  const parts = [];
  if (limits.requests_per_minute !== undefined) parts.push(`${limits.requests_per_minute} requests`);
  if (limits.tokens_per_minute !== undefined) parts.push(`${limits.tokens_per_minute} tokens`);
  return `${parts.join(' or ')} per minute`;
}

function limited(limits: RateLimits, windowEnd: number, now: number, metrics: GatewayMetrics): GatewayError {
  metrics.rateLimited.inc();
  const retryAfter = Math.max(1, Math.ceil((windowEnd - now) / 1000));
  return new GatewayError(429, 'rate_limit_error', 'rate_limit_exceeded', `Rate limit exceeded: ${describe(limits)}; retry in ${retryAfter} s`, { retryAfter });
}

/** One instance's own count (SQLite: one process owns the database): a window per subject from its first call. */
export class LocalRateLimiter implements RateLimiter {
  readonly #limits: RateLimits;
  readonly #metrics: GatewayMetrics;
  readonly #windows = new Map<string, { start: number; requests: number; tokens: number }>();

  constructor(limits: RateLimits, metrics: GatewayMetrics) {
    this.#limits = limits;
    this.#metrics = metrics;
  }

  async take(subject: string, now: number): Promise<void> {
    let window = this.#windows.get(subject);
    if (!window || now - window.start >= MINUTE) {
      window = { start: now, requests: 0, tokens: 0 };
      this.#windows.set(subject, window);
      if (this.#windows.size > 100_000) this.#windows.clear();
    }
    const { requests_per_minute: requests = Infinity, tokens_per_minute: tokens = Infinity } = this.#limits;
    if (window.requests >= requests || window.tokens >= tokens) throw limited(this.#limits, window.start + MINUTE, now, this.#metrics);
    window.requests++;
  }

  spend(subject: string, startedAt: number, tokens: number): void {
    const window = this.#windows.get(subject);
    if (window && startedAt >= window.start && startedAt < window.start + MINUTE) window.tokens += tokens;
  }

  close(): void {}
}

/**
 * A count every instance on the database shares (PostgreSQL): fixed windows aligned to the minute, one atomic
 * upsert per call that counts it only while the window is under both limits — one round trip, no lost or double
 * counts whatever the concurrency. A finished call's tokens are added in the background (off the answer's path).
 * Windows older than two minutes are deleted once a minute.
 */
export class SharedRateLimiter implements RateLimiter {
  readonly #limits: RateLimits;
  readonly #metrics: GatewayMetrics;
  readonly #store: GatewayStore;
  readonly #sweeper: NodeJS.Timeout;
  readonly #onError: (error: unknown) => void;

  constructor(limits: RateLimits, store: GatewayStore, metrics: GatewayMetrics, onError: (error: unknown) => void = () => {}) {
    this.#limits = limits;
    this.#store = store;
    this.#metrics = metrics;
    this.#onError = onError;
    this.#sweeper = setInterval(() => void store.rateWindows.forget(Date.now() - 2 * MINUTE).catch(onError), MINUTE);
    this.#sweeper.unref();
  }

  async take(subject: string, now: number): Promise<void> {
    const windowStart = Math.floor(now / MINUTE) * MINUTE;
    const { requests_per_minute: requests = Number.MAX_SAFE_INTEGER, tokens_per_minute: tokens = Number.MAX_SAFE_INTEGER } = this.#limits;
    if (!(await this.#store.rateWindows.count(subject, windowStart, { requests, tokens }))) {
      throw limited(this.#limits, windowStart + MINUTE, now, this.#metrics);
    }
  }

  spend(subject: string, startedAt: number, tokens: number): void {
    if (this.#limits.tokens_per_minute === undefined || tokens <= 0) return;
    this.#store.rateWindows.addTokens(subject, Math.floor(startedAt / MINUTE) * MINUTE, tokens).catch(this.#onError);
  }

  close(): void {
    clearInterval(this.#sweeper);
  }
}
