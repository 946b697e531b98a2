import { MistralError } from '@mistralai/mistralai/models/errors';
import { ConnectionError, RequestTimeoutError } from '@mistralai/mistralai/models/errors';
import type { HubError } from '../../errors.ts';
import { answerFailure, isAbortError, isNetworkError, networkFailure } from '../shared/error-body.ts';

/**
 * Mistral SDK errors → unified exceptions. Bodies: {object: "error", message, type, param, code} and, for 422,
 * {detail: [{type, loc, msg}]} (HTTPValidationError).
 */
export function mistralErrorToHub(error: unknown, provider = 'mistral'): HubError | undefined {
  if (isAbortError(error)) return undefined;
  if (error instanceof MistralError) {
    return answerFailure(provider, { status: error.statusCode, body: error.body, headers: error.headers, fallback_message: error.body || error.message }, error);
  }
  if (error instanceof ConnectionError || error instanceof RequestTimeoutError || isNetworkError(error)) {
    return networkFailure(provider, error);
  }
  return undefined;
}
