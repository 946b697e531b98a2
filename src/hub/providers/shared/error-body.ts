// Reads vendors' failures for the unified exceptions: the fields (message, code, param, type) of their error bodies,
// and whether a failure is the caller's abort or a network failure.

import { mapProviderFailure, parseRetryAfter, type HubError } from '../../errors.ts';

/** The error fields found in a vendor's JSON error body; absent fields stay undefined. */
export interface ErrorBodyFields {
  message?: string;
  code?: string;
  param?: string;
  type?: string;
}

function str(value: unknown): string | undefined {
  if (typeof value === 'string' && value !== '') return value;
  if (typeof value === 'number') return String(value);
  return undefined;
}

/**
 * Understands the shapes of the vendors in this folder's neighbours: `{error: {message, type, code, param}}`
 * (Anthropic, OpenAI-style, Mistral), `{error: {code, message, status}}` (Google), `{message}` (Cohere, Mistral),
 * `{error: "text"}` (Ollama), `{detail: "text" | [{msg, loc}]}` (FastAPI-style validation errors, Voyage, Mistral 422).
 */
export function errorBodyFields(body: unknown): ErrorBodyFields {
  if (typeof body === 'string') {
    const trimmed = body.trim();
    if (trimmed.startsWith('{')) {
      try {
        return errorBodyFields(JSON.parse(trimmed));
      } catch {
        return { message: trimmed };
      }
    }
    return trimmed ? { message: trimmed } : {};
  }
  if (typeof body !== 'object' || body === null) return {};
  const record = body as Record<string, unknown>;
  const error = record.error;
  if (typeof error === 'string') return { message: error, ...pick(record, ['code', 'type', 'param']) };
  if (typeof error === 'object' && error !== null) {
    const inner = error as Record<string, unknown>;
    const fields: ErrorBodyFields = { ...pick(inner, ['message', 'code', 'param', 'type']) };
    // Google: {error: {code: 429, message, status: "RESOURCE_EXHAUSTED"}}
    if (fields.type === undefined && str(inner.status)) fields.type = str(inner.status);
    return fields;
  }
  const detail = record.detail;
  if (typeof detail === 'string') return { message: detail, ...pick(record, ['code', 'type']) };
  if (Array.isArray(detail) && detail.length > 0) {
    const first = detail[0] as Record<string, unknown>;
    const loc = Array.isArray(first.loc) ? first.loc.filter((part) => part !== 'body').join('.') : undefined;
    return { message: str(first.msg) ?? JSON.stringify(detail), ...(loc ? { param: loc } : {}), ...pick(first, ['type']) };
  }
  return pick(record, ['message', 'code', 'param', 'type']);
}

function pick(record: Record<string, unknown>, keys: (keyof ErrorBodyFields)[]): ErrorBodyFields {
  const fields: ErrorBodyFields = {};
  for (const key of keys) {
    const value = str(record[key]);
    if (value !== undefined) fields[key] = value;
  }
  return fields;
}

/** True for the errors fetch and Node raise when no response arrived (connection refused, reset, timeout). */
export function isNetworkError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code ?? (error.cause as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|UND_ERR_\w+)$/.test(code)) return true;
  return (error.name === 'TypeError' && /fetch failed|terminated/i.test(error.message)) || error.name === 'TimeoutError';
}

/** True for an abort the caller asked for (AbortSignal), which is not the provider's failure. */
export function isAbortError(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'APIUserAbortError' || error.name === 'RequestAbortedError');
}

/** The unified exception of a failure without an answer (refused, reset, timed out): a ProviderError. */
export function networkFailure(provider_name: string, error: unknown): HubError {
  return mapProviderFailure({ provider_name, message: (error as Error).message, network: true, original_exception: error });
}

/** An HTTP error answer as a provider's SDK hands it over. */
export interface ErrorAnswer {
  status: number | null;
  /** The error body (text or parsed JSON), read by errorBodyFields. */
  body: unknown;
  headers?: { get(name: string): string | null } | null;
  /** The message when the body has none. */
  fallback_message: string;
  /** An error code the SDK read elsewhere (it wins over the body's). */
  code?: string | null;
}

/** The unified exception of an HTTP error answer: its status, the body's fields and Retry-After. */
export function answerFailure(provider_name: string, answer: ErrorAnswer, error: unknown): HubError {
  const fields = errorBodyFields(answer.body);
  return mapProviderFailure({
    provider_name,
    status_code: answer.status,
    message: fields.message ?? answer.fallback_message,
    code: answer.code ?? fields.code ?? null,
    param: fields.param ?? null,
    error_type: fields.type ?? null,
    retry_after: parseRetryAfter(answer.headers),
    original_exception: error,
  });
}
