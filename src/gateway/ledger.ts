import { randomUUIDv7 } from 'node:crypto';
import type { Principal } from './auth.ts';
import { budgetWarningOf, type BudgetWarning } from './budget-warning.ts';
import { GatewayError, invalidRequest, notFound } from './errors.ts';
import type { GatewayMetrics } from './metrics.ts';
import { callNanos, dollars } from './money.ts';
import { PricingPolicy } from './pricing-policy.ts';
import type { RateLimiter, RateLimitState } from './rate-limit.ts';
import { pendingRowWithHold, type BudgetAdmission, type BudgetHold, type CallProgress, type CallRow, type GatewayStore, type KeyRecord, type PricingRecord, type UsageRecord } from './storage/index.ts';
import type { UsageRecorder } from './usage-recorder.ts';

/**
 * The most one call reserves: the largest budget (MAX_DOLLARS). A client's `max_tokens: 1e300` must not put a
 * number into `reserved` that PostgreSQL's BIGINT refuses (a 500) or SQLite turns into a float.
 */
const MAX_RESERVATION_NANOS = 1_000_000_000_000_000_000n;

/**
 * Token counts come from the provider; the usage columns are 32-bit integers. A fraction or an absurd count made
 * PostgreSQL refuse the row (and with it its whole group commit); it is rounded and capped instead.
 */
const tokenCount = (n: number) => (Number.isFinite(n) && n > 0 ? Math.min(2 ** 31 - 1, Math.round(n)) : 0);

/** How often what open streams have delivered is recorded on their pending rows (what an interrupted stream is charged). */
const PROGRESS_INTERVAL_MS = 1000;

/**
 * Refusals of callers without a key or user (authentication failures) written as rows per instance and minute; the
 * rest are only counted (gateway_auth_failures_total), so an unauthenticated flood cannot fill the database.
 */
export const ANONYMOUS_REFUSAL_ROWS_PER_MINUTE = 60;

/** A call refused before any provider was contacted (its row: status `refused`, the error's status and code). */
export interface Refusal {
  requestId: string;
  error: GatewayError;
  /** The endpoint called (chat.completions, embeddings, …). */
  endpoint: string;
  userId?: string | null;
  keyId?: string | null;
  /** The model asked for, when known. */
  provider?: string;
  model?: string;
  route?: string | null;
}

/** Errors that refuse a call before it reaches a provider, recorded as `refused` rows: 401, 402, 403, 429. */
const isRefusal = (error: unknown): error is GatewayError => error instanceof GatewayError && [401, 402, 403, 429].includes(error.status);

export interface CallStart {
  principal: Principal;
  /** The `user` field of the request (required with the master key). */
  user: unknown;
  endpoint: 'chat.completions' | 'embeddings' | 'messages' | 'responses' | 'rerank';
  /** The first target of the call. */
  provider: string;
  model: string;
  /** A call to a model route: its public name (what allowed_models must allow) and every target it may end on. */
  route?: { name: string; targets: readonly ModelRef[] } | null;
  requestId: string;
  /** Rough prompt size in tokens (characters / 4) and the most output tokens the call may produce. */
  estimatedPromptTokens: number;
  maxOutputTokens: number | null;
  /** Search units the call may be billed (rerank), reserved at the model's search unit price. */
  estimatedSearchUnits?: number;
}

export interface ModelRef {
  provider: string;
  model: string;
}

/** A model call between its budget reservation and its usage row. */
export interface CallTicket {
  readonly start: CallStart;
  /** The id of the call's usage row, written `pending` before the provider is called. */
  readonly id: string;
  readonly userId: string | null;
  readonly keyId: string | null;
  readonly reservations: BudgetHold[];
  readonly startedAt: number;
  readonly startedHr: bigint;
  /** Pricing of every target the call may end on, by `provider:model`. */
  readonly prices: ReadonlyMap<string, PricingRecord | null>;
  /** The target being tried, then the one that answered (or failed last): the row's provider, model and price. */
  target: ModelRef;
  /** Targets tried so far (1 for a call without fallbacks). */
  attempts: number;
  finished: boolean;
  /** What the call holds on each of its budgets (its estimated cost, nano-dollars); a cost above it is an overshoot. */
  readonly holdNanos: bigint;
  /**
   * The output tokens to send as the provider's limit: the reserved ones, for a call that holds a budget and set no
   * limit of its own (so the provider cannot answer beyond the hold); null otherwise.
   */
  readonly outputLimit: number | null;
  /** The key's (or named user's) rate-limit window after this call was counted; null without rate limits. */
  readonly rateLimit: RateLimitState | null;
  /** The call's budgets that had reached their soft budget when it was admitted (see budget-warning.ts). */
  readonly budgetWarnings: readonly BudgetWarning[];
}

export interface CallOutcome {
  status: UsageRecord['status'];
  statusCode: number;
  promptTokens: number;
  completionTokens: number;
  /** Search units the provider billed (rerank). */
  searchUnits?: number;
  /** The error code of a failed or cancelled call. */
  reason?: string;
}

/**
 * Budgets and usage around every model call: who pays (the named user with the master key; the key and its owner
 * with a virtual key), the reservation before the call, the usage row and the settlement after it.
 */
export class CallLedger {
  readonly #store: GatewayStore;
  readonly #recorder: UsageRecorder;
  readonly #metrics: GatewayMetrics;
  readonly #reserveOutputTokens: number;
  readonly #pricingTtlMs: number;
  readonly #pricing = new Map<string, { record: PricingRecord | null; at: number }>();
  readonly #rateLimiter: RateLimiter | null;
  readonly #pricingPolicy: PricingPolicy;
  /** Calls between `begin` and `finish`; a stop waits for them so that their rows are written. */
  readonly #open = new Set<CallTicket>();
  #idle: (() => void) | null = null;
  /** Streams in flight: what each has delivered so far, and the last value written to its row. */
  readonly #streams = new Map<CallTicket, { delivered: () => { promptTokens: number; completionTokens: number }; recorded: string }>();
  #progressTimer: NodeJS.Timeout | null = null;
  /** Who a refusal thrown by #refuse would have charged, for its row. */
  readonly #payers = new WeakMap<GatewayError, { userId: string | null; keyId: string | null }>();
  /** Rows of refusals without a key or user written in the current minute. */
  #anonymous = { minute: 0, rows: 0 };

  constructor(options: {
    store: GatewayStore;
    recorder: UsageRecorder;
    metrics: GatewayMetrics;
    reserveOutputTokens: number;
    /** Counts calls against the requests-per-minute limit; null: no limit. */
    rateLimiter?: RateLimiter | null;
    pricingTtlMs?: number;
    /** Which models need a price, and the bundled prices (default: every model, bundled table on). */
    pricingPolicy?: PricingPolicy;
  }) {
    this.#store = options.store;
    this.#recorder = options.recorder;
    this.#metrics = options.metrics;
    this.#reserveOutputTokens = options.reserveOutputTokens;
    this.#pricingTtlMs = options.pricingTtlMs ?? 2000;
    this.#rateLimiter = options.rateLimiter ?? null;
    this.#pricingPolicy = options.pricingPolicy ?? new PricingPolicy();
  }

  /** Pricing changes made through this instance apply at once; other instances see them within the TTL. */
  forgetPricing(model?: string): void {
    if (model === undefined) this.#pricing.clear();
    else this.#pricing.delete(model);
  }

  async pricingOf(model: string, now = Date.now()): Promise<PricingRecord | null> {
    const cached = this.#pricing.get(model);
    if (cached && now - cached.at < this.#pricingTtlMs) return cached.record;
    const record = this.#pricingPolicy.resolve(await this.#store.pricing.get(model), model);
    this.#pricing.set(model, { record, at: now });
    return record;
  }

  /** Every refusal of `begin` is recorded as a refused row (recordRefusal) before it is thrown on. */
  async begin(start: CallStart): Promise<CallTicket> {
    const now = Date.now();
    try {
      return await this.#begin(start, now);
    } catch (error) {
      if (isRefusal(error)) {
        // #refuse names who would have paid; otherwise (the rate limit, after the user was found) the principal does
        const payer = this.#payers.get(error) ?? (start.principal.kind === 'virtual' ? { userId: start.principal.key.user_id, keyId: start.principal.key.id } : { userId: String(start.user), keyId: null });
        await this.recordRefusal({ requestId: start.requestId, error, endpoint: start.endpoint, ...payer, provider: start.provider, model: start.model, route: start.route?.name ?? null }, now);
      }
      throw error;
    }
  }

  async #begin(start: CallStart, now: number): Promise<CallTicket> {
    let userId: string | null = null;
    let keyId: string | null = null;
    const budgets: { id: string; scope: 'user' | 'key' }[] = [];
    if (start.principal.kind === 'master') {
      if (start.user === undefined || start.user === null || start.user === '') {
        throw invalidRequest('The "user" field is required with the master key: it names the user whose budget and usage this call counts against', 'user', 'missing_user');
      }
      if (typeof start.user !== 'string') throw invalidRequest('"user" must be a string (a user_id)', 'user');
      // No user_id holds NUL (PostgreSQL text cannot); asking the database would fail there instead of saying so.
      const user = start.user.includes('\u0000') ? null : await this.#store.users.get(start.user);
      if (!user) throw notFound('user', start.user);
      userId = user.user_id;
      const refused = modelRefusal(callName(start), user.allowed_models, `user "${user.user_id}"`);
      if (refused) this.#refuse(start, { userId, keyId }, refused);
      if (user.budget_id) budgets.push({ id: user.budget_id, scope: 'user' });
    } else {
      const key = start.principal.key;
      keyId = key.id;
      const mismatch = userMismatch(key, start.user);
      if (mismatch) this.#refuse(start, { userId: key.user_id, keyId }, mismatch);
      const refused = keyModelRefusal(start.principal, callName(start));
      if (refused) this.#refuse(start, { userId: key.user_id, keyId }, refused);
      if (key.budget_id) budgets.push({ id: key.budget_id, scope: 'key' });
      if (key.user_id) {
        userId = key.user_id;
        // Read with the key (Authenticator), not here: one database round trip less on every call.
        if (start.principal.ownerBudgetId) budgets.push({ id: start.principal.ownerBudgetId, scope: 'user' });
      }
    }
    // Every target the call may end on must be priced (or exempt): a fallback must not run where no hold reaches.
    const prices = new Map<string, PricingRecord | null>();
    for (const target of start.route?.targets ?? [start]) {
      const model = `${target.provider}:${target.model}`;
      if (prices.has(model)) continue;
      const pricing = await this.pricingOf(model, now);
      prices.set(model, pricing);
      if (!pricing && this.#pricingPolicy.required(model)) this.#refuse(start, { userId, keyId }, pricingMissing(model, start.route?.name));
    }
    const rateLimit = (await this.#rateLimiter?.take(keyId ?? `user:${userId}`, now)) ?? null;
    // One hold per call, whichever target answers: it is sized for the dearest, so a fallback stays covered.
    let estimate = 0n;
    for (const pricing of prices.values()) {
      if (!pricing) continue;
      const cost = callNanos(pricing, start.estimatedPromptTokens, start.maxOutputTokens ?? this.#reserveOutputTokens, start.estimatedSearchUnits ?? 0, 'ceil');
      const capped = cost < MAX_RESERVATION_NANOS ? cost : MAX_RESERVATION_NANOS;
      if (capped > estimate) estimate = capped;
    }
    // Write-ahead: the call's row, pending with its holds, is committed before any provider is called; a gateway that
    // dies from here on leaves it to be settled as interrupted (settleInterrupted, or the reap of its instance).
    const id = newUsageId();
    const reservations: BudgetHold[] = [];
    const budgetWarnings: BudgetWarning[] = [];
    const pending = (holds: BudgetHold[]): CallRow => ({
      id,
      request_id: start.requestId,
      created_at: now,
      user_id: userId,
      key_id: keyId,
      endpoint: start.endpoint,
      provider: start.provider,
      model: start.model,
      route: start.route?.name ?? null,
      attempts: 1,
      prompt_tokens: tokenCount(start.estimatedPromptTokens),
      completion_tokens: tokenCount(start.maxOutputTokens ?? this.#reserveOutputTokens),
      search_units: tokenCount(start.estimatedSearchUnits ?? 0),
      cost_nanos: estimate,
      status: 'pending',
      status_code: 0,
      duration_ms: 0,
      reason: null,
      holds,
      instance_id: holds.at(-1)?.holder ?? this.#store.instanceId,
    });
    const releaseTaken = async () => {
      for (const taken of reservations) await this.#store.budgets.release(taken);
    };
    // PostgreSQL: the pending row rides in the statement of the call's last hold (no round trip of its own).
    const carried = budgets.length > 0 && this.#store.budgets.holdsCarryWrites;
    for (const [i, budget] of budgets.entries()) {
      let admitted: BudgetAdmission | null;
      const withRow = carried && i === budgets.length - 1 ? (hold: BudgetHold) => pendingRowWithHold(pending([...reservations, hold])) : undefined;
      try {
        admitted = await this.#store.budgets.admit(budget.id, estimate, now, withRow);
      } catch (error) {
        // A hold already taken would otherwise stay reserved for good (on PostgreSQL, as long as this instance lives).
        await releaseTaken().catch(() => {});
        throw error;
      }
      if (admitted) {
        reservations.push(admitted.hold);
        const warning = budgetWarningOf(admitted, budget.scope);
        if (warning) budgetWarnings.push(warning);
        continue;
      }
      await releaseTaken();
      this.#metrics.budgetRejections.inc({ scope: budget.scope });
      const owner = budget.scope === 'key' ? `virtual key ${keyId}` : `user "${userId}"`;
      this.#refuse(
        start,
        { userId, keyId },
        new GatewayError(
          403,
          'permission_error',
          'budget_exceeded',
          `Budget exceeded: budget ${budget.id} of ${owner} has not enough left for this period to hold what this call may cost ($${dollars(estimate)})`,
        ),
      );
    }
    if (!carried) {
      const row = pending(reservations);
      try {
        await this.#recorder.open(row);
      } catch (error) {
        await releaseTaken().catch(() => {});
        // No provider is called without its row: the call is refused, not served unbilled.
        this.#metrics.usageWriteFailures.inc();
        this.onWriteError?.(error, row);
        throw new GatewayError(503, 'api_error', 'usage_unavailable', 'The call was not sent to the provider: its usage row could not be written; retry shortly', { retryAfter: 1, cause: error });
      }
    }
    const ticket: CallTicket = {
      start,
      id,
      userId,
      keyId,
      reservations,
      startedAt: now,
      startedHr: process.hrtime.bigint(),
      prices,
      target: { provider: start.provider, model: start.model },
      attempts: 1,
      finished: false,
      holdNanos: estimate,
      outputLimit: start.maxOutputTokens === null && reservations.length > 0 ? this.#reserveOutputTokens : null,
      rateLimit,
      budgetWarnings,
    };
    this.#open.add(ticket);
    return ticket;
  }

  /**
   * Refuses a call before any provider is contacted: every refusal of `begin` (402 pricing_missing, 403
   * user_mismatch, model_not_allowed, budget_exceeded) passes here; `begin` records it with its payer.
   */
  #refuse(_start: CallStart, payer: { userId: string | null; keyId: string | null }, error: GatewayError): never {
    this.#payers.set(error, payer);
    throw error;
  }

  /** Resolves when every call begun so far has finished (its row handed to the recorder), or after `timeoutMs`. */
  async whenIdle(timeoutMs: number): Promise<void> {
    if (this.#open.size === 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeoutMs).unref();
      this.#idle = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.#idle = null;
  }

  /** Told about usage rows that could not be written (the gateway logs them; null: a stream's progress). */
  onWriteError: ((error: unknown, row: UsageRecord | null) => void) | null = null;

  /**
   * Records the call's usage row and settles its reservations; resolves once both are committed (or the write
   * failed, see onWriteError). Safe to call
   * twice (the second call does nothing), so a stream's end and its cut can both report.
   */
  async finish(ticket: CallTicket, outcome: CallOutcome): Promise<void> {
    if (ticket.finished) return;
    ticket.finished = true;
    this.#open.delete(ticket);
    this.#streams.delete(ticket);
    const searchUnits = tokenCount(outcome.searchUnits ?? 0);
    outcome = { ...outcome, promptTokens: tokenCount(outcome.promptTokens), completionTokens: tokenCount(outcome.completionTokens) };
    const { start, target } = ticket;
    const pricing = ticket.prices.get(`${target.provider}:${target.model}`) ?? null;
    const cost = pricing ? callNanos(pricing, outcome.promptTokens, outcome.completionTokens, searchUnits) : 0n;
    const labels = { provider: target.provider, model: target.model };
    // Charged in full all the same: the provider answered beyond the limit it was sent (or the prompt beyond its estimate).
    const overshoot = ticket.reservations.length > 0 && cost > ticket.holdNanos ? cost - ticket.holdNanos : 0n;
    if (overshoot > 0n) this.#metrics.budgetOvershoots.inc(labels);
    if (outcome.promptTokens > 0) this.#metrics.tokens.inc({ ...labels, kind: 'prompt' }, outcome.promptTokens);
    if (outcome.completionTokens > 0) this.#metrics.tokens.inc({ ...labels, kind: 'completion' }, outcome.completionTokens);
    if (cost > 0n) this.#metrics.cost.inc(labels, dollars(cost));
    this.#rateLimiter?.spend(ticket.keyId ?? `user:${ticket.userId}`, ticket.startedAt, outcome.promptTokens + outcome.completionTokens);
    this.#metrics.upstreamCalls.inc({ provider: target.provider, endpoint: start.endpoint, status: outcome.status });
    const row: CallRow = {
      id: ticket.id,
      request_id: start.requestId,
      created_at: ticket.startedAt,
      user_id: ticket.userId,
      key_id: ticket.keyId,
      endpoint: start.endpoint,
      provider: target.provider,
      model: target.model,
      route: start.route?.name ?? null,
      attempts: ticket.attempts,
      prompt_tokens: outcome.promptTokens,
      completion_tokens: outcome.completionTokens,
      search_units: searchUnits,
      cost_nanos: cost,
      overshoot_nanos: overshoot,
      status: outcome.status,
      status_code: outcome.statusCode,
      duration_ms: Number(process.hrtime.bigint() - ticket.startedHr) / 1e6,
      reason: outcome.reason ?? null,
      holds: ticket.reservations,
      instance_id: ticket.reservations.at(-1)?.holder ?? this.#store.instanceId,
    };
    // The row is queued synchronously here, so a stop that waits for idle and then drains the recorder writes it.
    const recorded = this.#recorder.complete(row);
    if (this.#open.size === 0) this.#idle?.();
    try {
      await recorded;
    } catch (error) {
      // The provider has answered (and been paid); the client still gets the answer. The failure is visible in
      // the logs and metrics.
      this.#metrics.usageWriteFailures.inc();
      this.onWriteError?.(error, row);
    }
  }

  /**
   * A stream has begun: what it has delivered (`delivered`, the counts its row would get now) is written to its
   * pending row every PROGRESS_INTERVAL_MS while it runs, so that a stream whose gateway dies is charged what it
   * delivered up to then rather than its whole hold.
   */
  streaming(ticket: CallTicket, delivered: () => { promptTokens: number; completionTokens: number }): void {
    if (ticket.finished) return;
    this.#streams.set(ticket, { delivered, recorded: '' });
    this.#progressTimer ??= setInterval(() => this.#recordProgress(), PROGRESS_INTERVAL_MS).unref();
  }

  #recordProgress(): void {
    if (this.#streams.size === 0) {
      clearInterval(this.#progressTimer!);
      this.#progressTimer = null;
      return;
    }
    const updates: CallProgress[] = [];
    for (const [ticket, stream] of this.#streams) {
      const delivered = stream.delivered();
      const prompt = tokenCount(delivered.promptTokens);
      const completion = tokenCount(delivered.completionTokens);
      const fingerprint = `${prompt}/${completion}`;
      if (fingerprint === stream.recorded) continue;
      stream.recorded = fingerprint;
      const pricing = ticket.prices.get(`${ticket.target.provider}:${ticket.target.model}`) ?? null;
      const cost = pricing ? callNanos(pricing, prompt, completion, 0) : 0n;
      updates.push({ id: ticket.id, prompt_tokens: prompt, completion_tokens: completion, cost_nanos: cost, duration_ms: Number(process.hrtime.bigint() - ticket.startedHr) / 1e6 });
    }
    this.#store.usage.progress(updates).catch((error: unknown) => this.onWriteError?.(error, null));
  }

  /**
   * Records a call refused before any provider was contacted: a usage row with status `refused`, the error's status
   * code and its code as the reason, no tokens and no cost. Refusals without a key or user (authentication failures)
   * are written up to ANONYMOUS_REFUSAL_ROWS_PER_MINUTE per instance and minute. Never throws: a row that cannot be
   * written is reported to onWriteError and the refusal is answered all the same.
   */
  async recordRefusal(refusal: Refusal, now = Date.now()): Promise<void> {
    const userId = refusal.userId ?? null;
    const keyId = refusal.keyId ?? null;
    if (userId === null && keyId === null) {
      const minute = Math.floor(now / 60_000);
      if (this.#anonymous.minute !== minute) this.#anonymous = { minute, rows: 0 };
      if (++this.#anonymous.rows > ANONYMOUS_REFUSAL_ROWS_PER_MINUTE) return;
    }
    const row: CallRow = {
      id: newUsageId(),
      request_id: refusal.requestId,
      created_at: now,
      user_id: userId,
      key_id: keyId,
      endpoint: refusal.endpoint,
      provider: refusal.provider ?? '',
      model: refusal.model ?? '',
      route: refusal.route ?? null,
      attempts: 0,
      prompt_tokens: 0,
      completion_tokens: 0,
      search_units: 0,
      cost_nanos: 0n,
      status: 'refused',
      status_code: refusal.error.status,
      duration_ms: Math.max(0, Date.now() - now),
      reason: refusal.error.code,
      holds: [],
      instance_id: this.#store.instanceId,
    };
    try {
      await this.#recorder.complete(row);
    } catch (error) {
      this.#metrics.usageWriteFailures.inc();
      this.onWriteError?.(error, row);
    }
  }
}

/**
 * A usage row's id: time-ordered (UUIDv7: milliseconds, then 74 random bits), so each new row lands at the end of the
 * primary-key index instead of on a random page of it, and a batch writes a few pages however large the table has
 * grown (docs/benchmarks.md). It draws from a cached entropy pool, cheaper than newId's randomBytes on this hot path.
 */
export function newUsageId(): string {
  return `usage_${randomUUIDv7()}`;
}

/**
 * Whether a model (`provider:model`, or a route's public name) is in an allowed-models list: an exact name, or
 * `provider:*` for all of a provider's (a route name with a ':' counts as of the provider before it).
 */
export function modelAllowed(model: string, allowed: readonly string[] | null): boolean {
  if (allowed === null || allowed === undefined) return true;
  const colon = model.indexOf(':');
  const pattern = colon > 0 ? `${model.slice(0, colon)}:*` : null;
  return allowed.some((entry) => entry === model || entry === pattern);
}

/**
 * A virtual key is bound to its owner (or to no user): a `user` naming anyone else — another user, one that does not
 * exist — would put the call on someone else's name. 403 user_mismatch, unless the key allows any `user` (passed to
 * the provider as an end-user id; the call is charged to the key and its owner all the same). Whether the named user
 * exists is not told: a key holder must not learn user ids by trying them.
 */
function userMismatch(key: KeyRecord, user: unknown): GatewayError | null {
  if (user === undefined || user === null || user === '' || key.allow_user_override || user === key.user_id) return null;
  const bound = key.user_id === null ? 'belongs to no user' : `belongs to user "${key.user_id}"`;
  return new GatewayError(
    403,
    'permission_error',
    'user_mismatch',
    `Virtual key ${key.id} ${bound} and cannot make calls for another "user"; leave "user" out, or let the master key holder set allow_user_override on the key to pass "user" to the provider as an end-user id`,
    { param: 'user' },
  );
}

/** 402 pricing_missing: a model the gateway cannot price is a call no budget can hold (fail closed). */
function pricingMissing(model: string, route: string | undefined): GatewayError {
  const via = route ? ` (a target of model route "${route}")` : '';
  return new GatewayError(
    402,
    'invalid_request_error',
    'pricing_missing',
    `Model "${model}"${via} has no pricing on this gateway, so its calls cannot be billed; price it (pricing in the configuration, or PUT /v1/pricing/${model}) or exempt it (require_pricing)`,
    { param: 'model' },
  );
}

/** A route is allowed by its public name (what the client called), not by its targets. */
const callName = (start: CallStart) => start.route?.name ?? `${start.provider}:${start.model}`;

/**
 * 403 model_not_allowed for a virtual key whose allowed_models, or whose owner's, leave `model` out (null: allowed,
 * and always for the master key): before any provider is contacted or any budget held.
 */
export function keyModelRefusal(principal: Principal, model: string): GatewayError | null {
  if (principal.kind !== 'virtual') return null;
  const { key } = principal;
  return modelRefusal(model, key.allowed_models, `virtual key ${key.id}`) ?? (key.user_id ? modelRefusal(model, principal.ownerAllowedModels, `user "${key.user_id}" (the key's owner)`) : null);
}

function modelRefusal(model: string, allowed: string[] | null, whose: string): GatewayError | null {
  if (modelAllowed(model, allowed)) return null;
  return new GatewayError(403, 'permission_error', 'model_not_allowed', `Model "${model}" is not allowed for ${whose} (allowed_models: ${allowed!.join(', ') || 'none'})`);
}
