import { CohereError, CohereTimeoutError } from 'cohere-ai';
import { mapProviderFailure, type HubError } from '../../errors.ts';
import { answerFailure, errorBodyFields, isAbortError, isNetworkError, networkFailure } from '../shared/error-body.ts';

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
    return answerFailure(provider, { status, body: error.body, headers: error.rawResponse?.headers, fallback_message: error.message }, error);
  }
  if (isNetworkError(error)) {
    return networkFailure(provider, error);
  }
  return undefined;
}
