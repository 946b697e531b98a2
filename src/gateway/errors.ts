/**
 * Every failure the gateway answers, in the OpenAI error shape `{"error":{"message","type","code","param"}}` that
 * OpenAI-compatible clients show to their users. Layers below the HTTP front end throw these; the front end only
 * serialises them.
 */
export type GatewayErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'conflict_error'
  | 'rate_limit_error'
  | 'upstream_error'
  | 'timeout_error'
  | 'api_error';

export class GatewayError extends Error {
  readonly status: number;
  readonly type: GatewayErrorType;
  readonly code: string;
  readonly param: string | null;
  /** Seconds, sent as Retry-After (429 and 503). */
  readonly retryAfter: number | null;
  /** More response headers (the X-RateLimit-* of a rate-limited key's 429). */
  readonly headers: Record<string, string>;
  constructor(
    status: number,
    type: GatewayErrorType,
    code: string,
    message: string,
    options: { param?: string | null; retryAfter?: number | null; cause?: unknown; headers?: Record<string, string> } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'GatewayError';
    this.status = status;
    this.type = type;
    this.code = code;
    this.param = options.param ?? null;
    this.retryAfter = options.retryAfter ?? null;
    this.headers = options.headers ?? {};
  }

  body(): { error: { message: string; type: string; code: string; param: string | null } } {
    return { error: { message: this.message, type: this.type, code: this.code, param: this.param } };
  }
}

export const invalidRequest = (message: string, param: string | null = null, code = 'invalid_request') =>
  new GatewayError(400, 'invalid_request_error', code, message, { param });

export const notFound = (what: string, id: string, code = `${what.replace(/ /g, '_')}_not_found`) =>
  new GatewayError(404, 'not_found_error', code, `No ${what} with id "${id}"`);

export const conflict = (message: string, code: string) => new GatewayError(409, 'conflict_error', code, message);

/** A configuration that cannot be used: the CLI prints the message and exits with 2. */
export class GatewayConfigError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'GatewayConfigError';
  }
}
