import { ApiError } from '@google/genai';
import { mapProviderFailure, type HubError } from '../../errors.ts';
import { errorBodyFields, isAbortError, isNetworkError, networkFailure } from '../shared/error-body.ts';

/**
 * @google/genai ApiError → unified exceptions. The SDK puts the JSON error body in the message:
 * {error: {code, message, status, details: [{"@type": "...RetryInfo", retryDelay: "30s"}, {"@type": "...BadRequest", fieldViolations}]}}.
 */
export function geminiErrorToHub(error: unknown, provider = 'gemini'): HubError | undefined {
  if (isAbortError(error)) return undefined;
  if (error instanceof ApiError) {
    const body = parseBody(error.message);
    const fields = errorBodyFields(body ?? error.message);
    const details = detailsOf(body);
    return mapProviderFailure({
      provider_name: provider,
      status_code: error.status,
      message: fields.message ?? error.message,
      error_type: fields.type ?? null,
      code: reasonOf(details) ?? null,
      param: fieldOf(details) ?? null,
      retry_after: retryDelayOf(details),
      original_exception: error,
    });
  }
  if (isNetworkError(error)) {
    return networkFailure(provider, error);
  }
  return undefined;
}

function parseBody(text: string): unknown {
  const start = text.indexOf('{');
  if (start < 0) return undefined;
  try {
    return JSON.parse(text.slice(start));
  } catch {
    return undefined;
  }
}

type Detail = Record<string, unknown>;

function detailsOf(body: unknown): Detail[] {
  const details = (body as { error?: { details?: unknown } } | undefined)?.error?.details;
  return Array.isArray(details) ? (details as Detail[]) : [];
}

/** google.rpc.RetryInfo.retryDelay ("30s", "1.5s") in seconds. */
function retryDelayOf(details: Detail[]): number | null {
  for (const detail of details) {
    const delay = detail.retryDelay;
    if (typeof delay === 'string' && /^\d+(\.\d+)?s$/.test(delay)) return Number(delay.slice(0, -1));
  }
  return null;
}

/** google.rpc.ErrorInfo.reason (e.g. API_KEY_INVALID). */
function reasonOf(details: Detail[]): string | undefined {
  for (const detail of details) if (typeof detail.reason === 'string') return detail.reason;
  return undefined;
}

/** google.rpc.BadRequest.fieldViolations[0].field. */
function fieldOf(details: Detail[]): string | undefined {
  for (const detail of details) {
    const violations = detail.fieldViolations;
    if (Array.isArray(violations) && typeof violations[0]?.field === 'string') return violations[0].field as string;
  }
  return undefined;
}
