import { mapProviderFailure, parseRetryAfter, type HubError } from '../../errors.ts';
import { isAbortError, isNetworkError, networkFailure } from '../shared/error-body.ts';

/** The ollama SDK's ResponseError (not exported by the package): `error` is the body's "error" text. */
interface ResponseErrorLike extends Error {
  error: string;
  status_code: number;
  /** Set by the provider from the response it saw (the SDK drops the headers). */
  headers?: Headers;
}

export function isOllamaResponseError(error: unknown): error is ResponseErrorLike {
  return error instanceof Error && error.name === 'ResponseError' && typeof (error as Partial<ResponseErrorLike>).status_code === 'number';
}

/** ollama errors → unified exceptions. Body: {"error": "model 'x' not found"}; errors inside a stream have no status. */
export function ollamaErrorToHub(error: unknown, provider = 'ollama'): HubError | undefined {
  if (isAbortError(error)) return undefined;
  if (isOllamaResponseError(error)) {
    return mapProviderFailure({
      provider_name: provider,
      status_code: error.status_code,
      message: error.error || error.message,
      retry_after: parseRetryAfter(error.headers),
      original_exception: error,
    });
  }
  if (isNetworkError(error)) {
    return networkFailure(provider, error);
  }
  return undefined;
}
