// AWS SDK v3 failures (Bedrock, SageMaker) → unified exceptions. Read by shape, not by class, so that mapping an
// error never loads an SDK: a service error has a `name` (ThrottlingException, ValidationException, …), `$fault`
// and `$metadata.httpStatusCode`; an error event inside an event stream has the name but no status.

import { AuthenticationError, mapProviderFailure, type HubError } from '../../errors.ts';
import { isAbortError, isNetworkError, networkFailure } from './error-body.ts';

/** Statuses of the errors AWS models, for those that arrive without one (event-stream exceptions). */
const STATUS_BY_NAME: Record<string, number> = {
  AccessDeniedException: 403,
  UnrecognizedClientException: 403,
  ExpiredTokenException: 403,
  InvalidSignatureException: 403,
  ResourceNotFoundException: 404,
  ValidationException: 400,
  ThrottlingException: 429,
  ServiceQuotaExceededException: 429,
  ModelNotReadyException: 429,
  ModelTimeoutException: 408,
  ModelErrorException: 424,
  ModelStreamErrorException: 424,
  InternalServerException: 500,
  InternalFailure: 500,
  ServiceUnavailableException: 503,
};

interface AwsServiceError extends Error {
  $fault?: 'client' | 'server';
  $metadata?: { httpStatusCode?: number };
  originalStatusCode?: number;
}

function isServiceError(error: unknown): error is AwsServiceError {
  return error instanceof Error && ('$fault' in error || '$metadata' in error);
}

export function awsErrorToHub(error: unknown, provider: string): HubError | undefined {
  if (isAbortError(error)) return undefined;
  // no credentials anywhere in the AWS chain: the call was never sent
  if (error instanceof Error && (error.name === 'CredentialsProviderError' || error.name === 'TokenProviderError')) {
    return new AuthenticationError(`No AWS credentials found: ${error.message}`, error, provider, { code: error.name });
  }
  if (isServiceError(error)) {
    // SageMaker's ModelError (424) carries the serving container's own status and message: those say what failed
    const modelError = error as { OriginalStatusCode?: unknown; OriginalMessage?: unknown };
    const original = error.name === 'ModelError' && typeof modelError.OriginalStatusCode === 'number' ? modelError.OriginalStatusCode : undefined;
    const status = original ?? error.$metadata?.httpStatusCode ?? STATUS_BY_NAME[error.name] ?? (error.$fault === 'server' ? 500 : null);
    return mapProviderFailure({
      provider_name: provider,
      status_code: status,
      message: original !== undefined && typeof modelError.OriginalMessage === 'string' ? modelError.OriginalMessage : error.message,
      code: error.name,
      error_type: error.name,
      original_exception: error,
    });
  }
  if (isNetworkError(error)) return networkFailure(provider, error);
  return undefined;
}
