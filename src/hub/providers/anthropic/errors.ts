import Anthropic from '@anthropic-ai/sdk';
import type { HubError } from '../../errors.ts';
import { answerFailure, isAbortError, isNetworkError, networkFailure } from '../shared/error-body.ts';

/** Anthropic SDK errors → unified exceptions. Body: {type: "error", error: {type, message, details?: {error_code}}}. */
export function anthropicErrorToHub(error: unknown, provider = 'anthropic'): HubError | undefined {
  if (error instanceof Anthropic.APIUserAbortError || isAbortError(error)) return undefined;
  if (error instanceof Anthropic.APIConnectionError) {
    return networkFailure(provider, error);
  }
  if (error instanceof Anthropic.APIError) {
    return answerFailure(provider, { status: error.status ?? null, body: error.error, headers: error.headers, fallback_message: error.message, code: error.errorCode }, error);
  }
  if (isNetworkError(error)) {
    return networkFailure(provider, error);
  }
  return undefined;
}
