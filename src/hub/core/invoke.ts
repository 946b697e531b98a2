// Runs one provider operation with the Hub's single policy: per-attempt timeout, caller's AbortSignal, retries
// with exponential backoff that honour Retry-After, and the unified-exception conversion (opt-in).

import { HubError, ProviderError, RateLimitError } from '../errors.ts';
import type { CallOptions, Provider } from '../provider.ts';
import { whenLoaded } from '../providers/shared/lazy.ts';
import { redact } from './credentials.ts';

/** Statuses retried by default; 529 is Anthropic's overloaded_error (its SDK retries it, like a 503). */
const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504, 529]);
export const DEFAULT_MAX_RETRIES = 2;
export const DEFAULT_TIMEOUT_MS = 600_000;
const INITIAL_DELAY_MS = 500;
const MAX_DELAY_MS = 8_000;
/** A Retry-After longer than this is not waited for (the error is raised instead). */
const MAX_RETRY_AFTER_S = 60;

export interface InvokeSettings {
  provider: Provider;
  max_retries: number;
  /** Per attempt, in ms; 0 or Infinity turns it off. For streams it bounds each wait for an event (the first and every next one). */
  timeout: number;
  signal?: AbortSignal | undefined;
  unified: boolean;
  /** The API key in use, scrubbed from error messages. */
  secret?: string | undefined;
  extra: Record<string, unknown>;
}

/** HUB_UNIFIED_EXCEPTIONS=1 (or true) turns conversion on for every call; a Hub instance can turn it on for itself. */
export function unifiedFromEnv(): boolean {
  const value = process.env.HUB_UNIFIED_EXCEPTIONS;
  return value === '1' || value?.toLowerCase() === 'true';
}

interface Attempt {
  call: CallOptions;
  timedOut: () => boolean;
  /** Stops the timeout. */
  settle: () => void;
  /** Starts the timeout again (streams: before each wait for an event). */
  rearm: () => void;
  /** Rejects when the timeout fires (a stream's wait for its next event races it). */
  expired: Promise<never>;
  /** Stops the timeout and lets go of the caller's signal: the attempt is over. */
  end: () => void;
}

function startAttempt(settings: InvokeSettings): Attempt {
  const limited = settings.timeout > 0 && Number.isFinite(settings.timeout);
  if (!limited) {
    return {
      call: { signal: settings.signal, extra: settings.extra },
      timedOut: () => false,
      settle: () => {},
      rearm: () => {},
      expired: new Promise<never>(() => {}),
      end: () => {},
    };
  }
  const controller = new AbortController();
  let fired = false;
  let expire: (reason: Error) => void = () => {};
  const expired = new Promise<never>((_, reject) => (expire = reject));
  expired.catch(() => {});
  let timer: NodeJS.Timeout | undefined;
  const rearm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      fired = true;
      const reason = new Error(`timed out after ${settings.timeout} ms`);
      // Aborting the attempt's signal makes the SDK close the connection to the provider.
      controller.abort(reason);
      expire(reason);
    }, settings.timeout);
  };
  rearm();
  // The caller's abort is passed on by a listener the attempt removes when it ends: AbortSignal.any would cost ~10x
  // as much per call (weak references and a finalization registry), on every model call of a gateway.
  const caller = settings.signal;
  const passOn = () => controller.abort(caller!.reason);
  if (caller?.aborted) passOn();
  else caller?.addEventListener('abort', passOn, { once: true });
  const settle = () => clearTimeout(timer);
  return {
    call: { signal: controller.signal, extra: settings.extra },
    timedOut: () => fired,
    settle,
    rearm,
    expired,
    end: () => {
      settle();
      caller?.removeEventListener('abort', passOn);
    },
  };
}

function scrub(error: HubError, secret: string | undefined): HubError {
  if (!secret || !error.message.includes(secret)) return error;
  Object.defineProperty(error, 'message', { value: redact(error.message, secret), configurable: true, writable: true });
  Object.defineProperty(error, 'raw_message', { value: redact(error.raw_message, secret), configurable: true });
  return error;
}

/** Decides what a failure becomes: {retry delay} or the error to throw. */
function judge(
  error: unknown,
  attempt: Attempt,
  settings: InvokeSettings,
  attemptNumber: number,
  started = false,
): { retryInMs: number } | { throw: unknown } {
  const name = settings.provider.metadata.name;
  if (settings.signal?.aborted) return { throw: settings.signal.reason ?? error };
  if (attempt.timedOut()) {
    const text = started ? `Stream timed out after ${settings.timeout} ms without an event` : `Request timed out after ${settings.timeout} ms`;
    return { throw: new ProviderError(text, error, name, { error_type: 'timeout' }) };
  }
  let hub: HubError | undefined;
  try {
    hub = settings.provider.toHubError(error);
  } catch {
    hub = undefined;
  }
  if (hub) scrub(hub, settings.secret);
  scrubForeign(error, settings.secret);
  const status = hub?.status_code ?? null;
  if (status !== null && RETRY_STATUSES.has(status) && attemptNumber < settings.max_retries) {
    const retryAfter = hub instanceof RateLimitError ? hub.retry_after : retryAfterOf(hub);
    if (retryAfter === null || retryAfter <= MAX_RETRY_AFTER_S) {
      return { retryInMs: retryAfter !== null ? retryAfter * 1000 : backoff(attemptNumber) };
    }
  }
  // Hub's own errors (validation, stream cut, batch not complete) are always HubErrors.
  if (error instanceof HubError) return { throw: scrub(error, settings.secret) };
  if (settings.unified && hub) return { throw: hub };
  return { throw: scrubForeign(error, settings.secret) };
}

/** A provider's own error can echo the key too (e.g. "Incorrect API key provided: …"). */
function scrubForeign(error: unknown, secret: string | undefined): unknown {
  if (secret && error instanceof Error) {
    if (error.message.includes(secret)) {
      Object.defineProperty(error, 'message', { value: redact(error.message, secret), configurable: true, writable: true });
    }
    if (error.stack?.includes(secret)) Object.defineProperty(error, 'stack', { value: redact(error.stack, secret), configurable: true, writable: true });
    // The error body the SDKs keep, raw or parsed, at any depth (OpenAI's `error.error.message`, Anthropic's
    // `error.error.error.message`, Mistral's `body` text, Ollama's `error` text, Cohere's `body.message`).
    redactStrings(error, secret, 0);
  }
  return error;
}

function redactStrings(value: unknown, secret: string, depth: number): void {
  if (!value || typeof value !== 'object' || depth > 8) return;
  const record = value as Record<string, unknown>;
  for (const [key, inner] of Object.entries(record)) {
    if (typeof inner === 'string') {
      if (!inner.includes(secret)) continue;
      try {
        record[key] = redact(inner, secret);
      } catch {
        // a read-only field: nothing more can be done
      }
    } else redactStrings(inner, secret, depth + 1);
  }
}

/** Retry-After of non-429 errors (503 often carries one); providers expose it on RateLimitError only. */
function retryAfterOf(hub: HubError | undefined): number | null {
  const original = hub?.original_exception as { headers?: { get?(n: string): string | null } } | null | undefined;
  const get = original?.headers?.get;
  if (typeof get !== 'function') return null;
  const value = get.call(original!.headers, 'retry-after');
  if (value === null || value === undefined) return null;
  const seconds = Number(value);
  return Number.isFinite(seconds) ? Math.max(0, seconds) : null;
}

function backoff(attemptNumber: number): number {
  const delay = Math.min(MAX_DELAY_MS, INITIAL_DELAY_MS * 2 ** attemptNumber);
  return delay * (0.75 + Math.random() * 0.25);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Loads a lazily loaded provider before the first attempt, so the timeout bounds the call and not the SDK's load. A
 * failed load is left to the first attempt, which loads again and reports the failure like any other.
 */
async function loaded(provider: Provider): Promise<void> {
  try {
    await whenLoaded(provider);
  } catch {
    // raised again by the attempt
  }
}

export async function invoke<T>(settings: InvokeSettings, operation: (call: CallOptions) => Promise<T>): Promise<T> {
  await loaded(settings.provider);
  for (let attemptNumber = 0; ; attemptNumber++) {
    if (settings.signal?.aborted) throw settings.signal.reason;
    const attempt = startAttempt(settings);
    try {
      return await operation(attempt.call);
    } catch (error) {
      const verdict = judge(error, attempt, settings, attemptNumber);
      if ('throw' in verdict) throw verdict.throw;
      await sleep(verdict.retryInMs, settings.signal);
    } finally {
      attempt.end();
    }
  }
}

/**
 * Streams with the same policy. Retries happen only before the first event (after it, a retry would repeat
 * events). The timeout bounds each wait for an event — the first one and every one after it — so a provider that
 * stalls mid-stream fails the stream (and its connection is closed) instead of holding the caller forever; the time
 * the consumer takes between two events does not count. Errors later in the stream are converted the same way.
 */
export async function* invokeStream<T>(
  settings: InvokeSettings,
  operation: (call: CallOptions) => AsyncIterable<T>,
): AsyncGenerator<T> {
  await loaded(settings.provider);
  for (let attemptNumber = 0; ; attemptNumber++) {
    if (settings.signal?.aborted) throw settings.signal.reason;
    const attempt = startAttempt(settings);
    let iterator: AsyncIterator<T> | undefined;
    let started = false;
    const nextEvent = (): Promise<IteratorResult<T>> => {
      attempt.rearm();
      const next = iterator!.next();
      // When the timeout wins the race, the provider's own failure (if it ever comes) is not wanted.
      next.catch(() => {});
      return Promise.race([next, attempt.expired]).finally(attempt.settle);
    };
    try {
      iterator = operation(attempt.call)[Symbol.asyncIterator]();
      let step = await nextEvent();
      started = true;
      while (!step.done) {
        yield step.value;
        step = await nextEvent();
      }
      return;
    } catch (error) {
      attempt.settle();
      const verdict = judge(error, attempt, started ? { ...settings, max_retries: 0 } : settings, attemptNumber, started);
      if ('throw' in verdict) throw verdict.throw;
      await sleep(verdict.retryInMs, settings.signal);
    } finally {
      attempt.settle();
      // The consumer stopped early (break/return), or the stream timed out: let the provider close its connection.
      // After a timeout the provider may still be inside its pending step (an async generator queues return() behind
      // it), so that close is not waited for: the aborted signal has already closed the connection.
      if (iterator?.return && (started || attempt.timedOut())) {
        const closing = Promise.resolve()
          .then(() => iterator!.return!())
          .catch(() => {});
        if (!attempt.timedOut()) await closing;
      }
      attempt.end();
    }
  }
}
