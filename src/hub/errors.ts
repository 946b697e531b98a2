// The Hub's unified exceptions (spec 3, Area B, "Unified exceptions").
//
// Every type derives directly from HubError and from nothing else, so `instanceof HubError` catches them all and
// no type is mistaken for another (a ContentFilterFinishReasonError is not a _FinishReasonError).
// `message` (and `toString()`) start with "[provider] " when the provider is known; the unprefixed text stays in
// `raw_message`. API keys are never put into these messages.

/** Keyword-only part of the HubError constructor (spec: status_code, code, param, error_type). */
export interface HubErrorOptions {
  status_code?: number | null;
  code?: string | null;
  param?: string | null;
  error_type?: string | null;
}

export class HubError extends Error {
  static readonly defaultMessage: string = 'An error occurred';
  /** The human-readable text without the "[provider] " prefix. */
  readonly raw_message: string;
  readonly original_exception: unknown;
  readonly provider_name: string | null;
  readonly status_code: number | null;
  readonly code: string | null;
  readonly param: string | null;
  readonly error_type: string | null;

  constructor(
    message?: string | null,
    original_exception?: unknown,
    provider_name?: string | null,
    options: HubErrorOptions = {},
  ) {
    const text = message ?? (new.target as typeof HubError).defaultMessage;
    const provider = provider_name ?? null;
    super(provider ? `[${provider}] ${text}` : text, original_exception instanceof Error ? { cause: original_exception } : undefined);
    this.name = new.target.name;
    this.raw_message = text;
    this.original_exception = original_exception ?? null;
    this.provider_name = provider;
    this.status_code = options.status_code ?? null;
    this.code = options.code ?? null;
    this.param = options.param ?? null;
    this.error_type = options.error_type ?? null;
  }

  override toString(): string {
    return this.message;
  }
}

export class AuthenticationError extends HubError {
  static override readonly defaultMessage = 'Authentication failed';
}

export class BatchNotCompleteError extends HubError {
  static override readonly defaultMessage = 'Batch is not complete';
  readonly batch_id: string | null;
  readonly batch_status: string | null;
  constructor(
    message?: string | null,
    original_exception?: unknown,
    provider_name?: string | null,
    options: HubErrorOptions & { batch_id?: string | null; batch_status?: string | null } = {},
  ) {
    super(
      message ??
        (options.batch_id
          ? `Batch ${options.batch_id} is not complete (status: ${options.batch_status ?? 'unknown'})`
          : undefined),
      original_exception,
      provider_name,
      options,
    );
    this.batch_id = options.batch_id ?? null;
    this.batch_status = options.batch_status ?? null;
  }
}

export class ContentFilterError extends HubError {
  static override readonly defaultMessage = 'Content blocked by safety filter';
}

export class ContentFilterFinishReasonError extends HubError {
  static override readonly defaultMessage = 'Generation stopped by the content filter';
}

export class ContextLengthExceededError extends HubError {
  static override readonly defaultMessage = 'Context length exceeded';
}

export class GatewayTimeoutError extends HubError {
  static override readonly defaultMessage = 'Gateway timeout';
}

export class InsufficientFundsError extends HubError {
  static override readonly defaultMessage = 'Insufficient funds';
}

export class InvalidRequestError extends HubError {
  static override readonly defaultMessage = 'Invalid request';
}

export class LengthFinishReasonError extends HubError {
  static override readonly defaultMessage = 'Generation stopped at the length limit';
}

export class MissingApiKeyError extends HubError {
  static override readonly defaultMessage = 'No API key provided';
  readonly env_var_name: string;
  constructor(provider_name: string, env_var_name: string) {
    super(
      `No API key provided. Pass api_key or set the ${env_var_name} environment variable.`,
      null,
      provider_name,
    );
    this.env_var_name = env_var_name;
  }
}

export class ModelNotFoundError extends HubError {
  static override readonly defaultMessage = 'Model not found';
}

export class ProviderError extends HubError {
  static override readonly defaultMessage = 'Provider error';
}

export class ProviderFileNotFoundError extends HubError {
  static override readonly defaultMessage = 'File not found';
}

export class RateLimitError extends HubError {
  static override readonly defaultMessage = 'Rate limit exceeded';
  /** Seconds to wait before retrying, from the Retry-After (or retry-after-ms) response header; null if absent. */
  readonly retry_after: number | null;
  constructor(
    message?: string | null,
    original_exception?: unknown,
    provider_name?: string | null,
    options: HubErrorOptions & { retry_after?: number | null } = {},
  ) {
    super(message, original_exception, provider_name, options);
    this.retry_after = options.retry_after ?? null;
  }
}

export class UnsupportedParameterError extends HubError {
  static override readonly defaultMessage = 'Unsupported parameter';
  readonly parameter_name: string;
  readonly additional_message: string | null;
  constructor(parameter_name: string, provider_name: string, additional_message?: string | null) {
    super(
      `Parameter '${parameter_name}' is not supported by ${provider_name}` +
        (additional_message ? `. ${additional_message}` : ''),
      null,
      provider_name,
    );
    this.parameter_name = parameter_name;
    this.additional_message = additional_message ?? null;
  }
}

export class UnsupportedProviderError extends HubError {
  static override readonly defaultMessage = 'Unsupported provider';
  readonly provider_key: string;
  readonly supported_providers: string[];
  constructor(provider_key: string, supported_providers: readonly string[]) {
    super(`'${provider_key}' is not a supported provider. Supported providers: ${supported_providers.join(', ')}`);
    this.provider_key = provider_key;
    this.supported_providers = [...supported_providers];
  }
}

export class UpstreamProviderError extends HubError {
  static override readonly defaultMessage = 'Upstream provider error';
}

export class _FinishReasonError extends HubError {
  static override readonly defaultMessage = 'Generation stopped for an unexpected finish reason';
}

/** Every unified exception type, by name (used by tests and docs to check the family is complete). */
export const HUB_ERROR_TYPES = {
  AuthenticationError,
  BatchNotCompleteError,
  ContentFilterError,
  ContentFilterFinishReasonError,
  ContextLengthExceededError,
  GatewayTimeoutError,
  InsufficientFundsError,
  InvalidRequestError,
  LengthFinishReasonError,
  MissingApiKeyError,
  ModelNotFoundError,
  ProviderError,
  ProviderFileNotFoundError,
  RateLimitError,
  UnsupportedParameterError,
  UnsupportedProviderError,
  UpstreamProviderError,
  _FinishReasonError,
} as const;

// ---------------------------------------------------------------------------------------------------------------
// Type selection (spec table). Providers describe a failure as ProviderFailure; mapProviderFailure picks the type.

/** What a provider knows about a failed call, independent of its SDK. */
export interface ProviderFailure {
  provider_name: string;
  /** HTTP status; null/undefined for non-HTTP failures. */
  status_code?: number | null;
  message?: string | null;
  code?: string | null;
  param?: string | null;
  error_type?: string | null;
  /** Seconds, from Retry-After / retry-after-ms. */
  retry_after?: number | null;
  /** True for timeouts and connection failures (no response at all). */
  network?: boolean;
  original_exception?: unknown;
}

const CONTEXT_LENGTH_PATTERNS = [
  /context[ _-]?length/i,
  /context[ _-]?window/i,
  /maximum context/i,
  /too many tokens/i,
  /prompt is too long/i,
  /input is too long/i,
  /token limit/i,
  /reduce the length/i,
  /exceeds the maximum number of tokens/i, // Gemini
  /maximum prompt length/i, // xAI
  /context size/i, // llama.cpp
  /maximum model length/i, // vLLM
];
const CONTENT_FILTER_PATTERNS = [
  /content[ _-]?(filter|policy|management)/i,
  /safety (filter|system|settings)/i,
  /flagged/i,
  /moderation/i,
  /responsible ai/i,
];
const AUTH_PATTERNS = [
  /api[ _-]?key/i,
  /unauthori[sz]ed/i,
  /authentication/i,
  /invalid[ _-]?(token|credentials)/i,
  /permission denied/i,
  /forbidden/i,
];
const RATE_LIMIT_PATTERNS = [/rate[ _-]?limit/i, /too many requests/i, /quota/i];
const NOT_FOUND_PATTERNS = [/model .*not (found|exist)/i, /does not exist/i, /not[ _-]found/i, /unknown model/i];
const FUNDS_PATTERNS = [/insufficient (funds|balance|credit)/i, /billing/i, /payment required/i, /credit balance/i];

function matches(patterns: RegExp[], text: string): boolean {
  return patterns.some((p) => p.test(text));
}

type HubErrorClass = new (
  message?: string | null,
  original_exception?: unknown,
  provider_name?: string | null,
  options?: HubErrorOptions,
) => HubError;

/** Status-code → type, exactly the rows of the spec's table (400/422 and unlisted statuses go by message). */
export function errorTypeForStatus(status: number): HubErrorClass | undefined {
  if (status === 401 || status === 403) return AuthenticationError;
  if (status === 402) return InsufficientFundsError;
  if (status === 404) return ModelNotFoundError;
  if (status === 429) return RateLimitError;
  if (status === 502) return UpstreamProviderError;
  if (status === 504) return GatewayTimeoutError;
  if (status >= 500 && status <= 599) return ProviderError;
  return undefined;
}

/** The message rules: for 400/422 (and unlisted statuses, or no status) the text decides. */
export function errorTypeForMessage(text: string, status: number | null): HubErrorClass {
  if (matches(CONTEXT_LENGTH_PATTERNS, text)) return ContextLengthExceededError;
  if (matches(CONTENT_FILTER_PATTERNS, text)) return ContentFilterError;
  if (matches(AUTH_PATTERNS, text)) return AuthenticationError;
  // A 400/422 is the client's fault: only the three rules above refine it.
  if (status === 400 || status === 422) return InvalidRequestError;
  if (matches(RATE_LIMIT_PATTERNS, text)) return RateLimitError;
  if (matches(FUNDS_PATTERNS, text)) return InsufficientFundsError;
  if (matches(NOT_FOUND_PATTERNS, text)) return ModelNotFoundError;
  if (status !== null && status >= 400 && status < 500) return InvalidRequestError;
  return ProviderError;
}

/** Builds the unified exception for a provider failure, following the spec's type-selection rules. */
export function mapProviderFailure(failure: ProviderFailure): HubError {
  const status = failure.status_code ?? null;
  const text = failure.message ?? '';
  const options = {
    status_code: status,
    code: failure.code ?? null,
    param: failure.param ?? null,
    error_type: failure.error_type ?? null,
  };
  let type: HubErrorClass;
  if (failure.network && status === null) type = ProviderError;
  else type = (status !== null ? errorTypeForStatus(status) : undefined) ?? errorTypeForMessage(text, status);
  const message = text || null;
  if (type === RateLimitError) {
    return new RateLimitError(message, failure.original_exception, failure.provider_name, {
      ...options,
      retry_after: failure.retry_after ?? null,
    });
  }
  return new type(message, failure.original_exception, failure.provider_name, options);
}

/** Parses a Retry-After header value (seconds or HTTP date) or retry-after-ms; returns seconds or null. */
export function parseRetryAfter(
  headers: { get(name: string): string | null } | null | undefined,
  now: number = Date.now(),
): number | null {
  if (!headers) return null;
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '' && Number.isFinite(Number(ms))) return Math.max(0, Number(ms) / 1000);
  const value = headers.get('retry-after');
  if (value === null || value.trim() === '') return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const date = Date.parse(value);
  if (Number.isNaN(date)) return null;
  return Math.max(0, (date - now) / 1000);
}
