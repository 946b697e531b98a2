import { MistralError } from '@mistralai/mistralai/models/errors';
import { ConnectionError, RequestTimeoutError } from '@mistralai/mistralai/models/errors';
import { mapProviderFailure, parseRetryAfter, type HubError } from '../../errors.ts';
import { errorBodyFields, isAbortError, isNetworkError, networkFailure } from '../shared/error-body.ts';

/**
 * Mistral SDK errors → unified exceptions. Bodies: {object: "error", message, type, param, code} and, for 422,
 * {detail: [{type, loc, msg}]} (HTTPValidationError).
 */
export function mistralErrorToHub(error: unknown, provider = 'mistral'): HubError | undefined {
  if (isAbortError(error)) return undefined;
  if (error instanceof MistralError) {
    const fields = errorBodyFields(error.body);
    return mapProviderFailure({
      provider_name: provider,
      status_code: error.statusCode,
      message: fields.message ?? (error.body || error.message),
      code: fields.code ?? null,
      param: fields.param ?? null,
      error_type: fields.type ?? null,
      retry_after: parseRetryAfter(error.headers),
      original_exception: error,
    });
  }
  if (error instanceof ConnectionError || error instanceof RequestTimeoutError || isNetworkError(error)) {
    return networkFailure(provider, error);
  }
  return undefined;
}
