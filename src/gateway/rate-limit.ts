import { GatewayError } from './errors.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { GatewayStore } from './storage/store.ts';

const MINUTE = 60_000;

/** The configured limits per subject and minute; an absent one does not limit. */
export interface RateLimits {
  requests_per_minute?: number;
  tokens_per_minute?: number;
}

/** A subject's window after a call was counted (or refused): what the X-RateLimit-* headers report. */
export interface RateLimitState {
  limits: RateLimits;
  /** Calls counted in the window, this one included. */
  requests: number;
  /** Tokens of the window's finished calls. */
  tokens: number;
  /** When the window ends (ms since the epoch). */
  resetAt: number;
}

/**
 * Per subject (a virtual key, or `user:<id>` with the master key) and minute: `take` counts a call and answers the
 * window's state, or refuses it with 429 when the subject's window has its requests, or has used its tokens;
 * `spend` adds a finished call's tokens to the window the call was counted in.
 */
export interface RateLimiter {
  take(subject: string, now: number): Promise<RateLimitState>;
  spend(subject: string, startedAt: number, tokens: number): void;
  close(): void;
}

/**
 * OpenAI's rate-limit headers for a window: limit, remaining and reset (a duration such as `37s`, as OpenAI writes
 * it) for requests and for tokens, each pair only when that limit is configured.
 */
export function rateLimitHeaders(state: RateLimitState, now: number): Record<string, string> {
  const headers: Record<string, string> = {};
  const reset = `${Math.max(0, Math.ceil((state.resetAt - now) / 1000))}s`;
  const { requests_per_minute: requests, tokens_per_minute: tokens } = state.limits;
  if (requests !== undefined) {
    headers['x-ratelimit-limit-requests'] = String(requests);
    headers['x-ratelimit-remaining-requests'] = String(Math.max(0, requests - state.requests));
    headers['x-ratelimit-reset-requests'] = reset;
  }
  if (tokens !== undefined) {
    headers['x-ratelimit-limit-tokens'] = String(tokens);
    headers['x-ratelimit-remaining-tokens'] = String(Math.max(0, tokens - state.tokens));
    headers['x-ratelimit-reset-tokens'] = reset;
  }
  return headers;
}

function describe(limits: RateLimits): string {
  const parts = [];
  if (limits.requests_per_minute !== undefined) parts.push(`${limits.requests_per_minute} requests`);
  if (limits.tokens_per_minute !== undefined) parts.push(`${limits.tokens_per_minute} tokens`);
  return `${parts.join(' or ')} per minute`;
}

function limited(state: RateLimitState, now: number, metrics: GatewayMetrics): GatewayError {
  metrics.rateLimited.inc();
  const retryAfter = Math.max(1, Math.ceil((state.resetAt - now) / 1000));
  return new GatewayError(429, 'rate_limit_error', 'rate_limit_exceeded', `Rate limit exceeded: ${describe(state.limits)}; retry in ${retryAfter} s`, {
    retryAfter,
    headers: rateLimitHeaders(state, now),
  });
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

  async take(subject: string, now: number): Promise<RateLimitState> {
    let window = this.#windows.get(subject);
    if (!window || now - window.start >= MINUTE) {
      window = { start: now, requests: 0, tokens: 0 };
      this.#windows.set(subject, window);
      if (this.#windows.size > 100_000) this.#windows.clear();
    }
    const { requests_per_minute: requests = Infinity, tokens_per_minute: tokens = Infinity } = this.#limits;
    const state = () => ({ limits: this.#limits, requests: window.requests, tokens: window.tokens, resetAt: window.start + MINUTE });
    if (window.requests >= requests || window.tokens >= tokens) throw limited(state(), now, this.#metrics);
    window.requests++;
    return state();
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

  async take(subject: string, now: number): Promise<RateLimitState> {
    const windowStart = Math.floor(now / MINUTE) * MINUTE;
    const { requests_per_minute: requests = Number.MAX_SAFE_INTEGER, tokens_per_minute: tokens = Number.MAX_SAFE_INTEGER } = this.#limits;
    const window = await this.#store.rateWindows.count(subject, windowStart, { requests, tokens });
    const state = { limits: this.#limits, requests: window.requests, tokens: window.tokens, resetAt: windowStart + MINUTE };
    if (!window.counted) throw limited(state, now, this.#metrics);
    return state;
  }

  spend(subject: string, startedAt: number, tokens: number): void {
    if (this.#limits.tokens_per_minute === undefined || tokens <= 0) return;
    this.#store.rateWindows.addTokens(subject, Math.floor(startedAt / MINUTE) * MINUTE, tokens).catch(this.#onError);
  }

  close(): void {
    clearInterval(this.#sweeper);
  }
}
