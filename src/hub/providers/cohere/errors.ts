import { CohereError, CohereTimeoutError } from 'cohere-ai';
import { mapProviderFailure, parseRetryAfter, type HubError } from '../../errors.ts';
import { errorBodyFields, isAbortError, isNetworkError, networkFailure } from '../shared/error-body.ts';

/** cohere-ai errors → unified exceptions. Body: {id, message}; 498 is Cohere's "invalid token". */
export function cohereErrorToHub(error: unknown, provider = 'cohere'): HubError | undefined {
  if (isAbortError(error)) return undefined;
  if (error instanceof CohereTimeoutError) {
    return networkFailure(provider, error);
  }
  if (error instanceof CohereError) {
    const fields = errorBodyFields(error.body);
    // 498 (invalid token) is Cohere's own status for a bad key
    const status = error.statusCode === 498 ? 401 : (error.statusCode ?? null);
    if (status === null) {
      return mapProviderFailure({ provider_name: provider, message: fields.message ?? error.message, network: true, original_exception: error });
    }
    return mapProviderFailure({
      provider_name: provider,
      status_code: status,
      message: fields.message ?? error.message,
      code: fields.code ?? null,
      param: fields.param ?? null,
      error_type: fields.type ?? null,
      retry_after: parseRetryAfter(error.rawResponse?.headers),
      original_exception: error,
    });
  }
  if (isNetworkError(error)) {
    return networkFailure(provider, error);
  }
  return undefined;
}
