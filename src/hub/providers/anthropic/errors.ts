import Anthropic from '@anthropic-ai/sdk';
import { mapProviderFailure, parseRetryAfter, type HubError } from '../../errors.ts';
import { errorBodyFields, isAbortError, isNetworkError, networkFailure } from '../shared/error-body.ts';

/** Anthropic SDK errors → unified exceptions. Body: {type: "error", error: {type, message, details?: {error_code}}}. */
export function anthropicErrorToHub(error: unknown, provider = 'anthropic'): HubError | undefined {
  if (error instanceof Anthropic.APIUserAbortError || isAbortError(error)) return undefined;
  if (error instanceof Anthropic.APIConnectionError) {
    return networkFailure(provider, error);
  }
  if (error instanceof Anthropic.APIError) {
    const fields = errorBodyFields(error.error);
    return mapProviderFailure({
      provider_name: provider,
      status_code: error.status ?? null,
      message: fields.message ?? error.message,
      code: error.errorCode ?? fields.code ?? null,
      error_type: fields.type ?? null,
      param: fields.param ?? null,
      retry_after: parseRetryAfter(error.headers),
      original_exception: error,
    });
  }
  if (isNetworkError(error)) {
    return networkFailure(provider, error);
  }
  return undefined;
}
