import { AuthenticationError, type HubError } from '../../errors.ts';
import { geminiErrorToHub } from '../gemini/errors.ts';

/**
 * Vertex AI failures: the API's answers are Gemini's (ApiError with Google's error body); a failure to obtain an
 * access token (no Application Default Credentials, a refused token exchange) comes from google-auth-library — a
 * gaxios error carrying the token request's `config` and `response`, or "Could not load the default credentials" —
 * and is an AuthenticationError: the model call was never sent.
 */
export function vertexErrorToHub(error: unknown, provider: string): HubError | undefined {
  const mapped = geminiErrorToHub(error, provider);
  if (mapped || !(error instanceof Error)) return mapped;
  const failure = error as Error & { config?: unknown; response?: { status?: number }; code?: unknown };
  const tokenRequest = typeof failure.config === 'object' && failure.config !== null && 'response' in failure;
  if (tokenRequest || /default credentials/i.test(error.message)) {
    return new AuthenticationError(`Google Cloud credentials failed: ${error.message}`, error, provider, {
      status_code: failure.response?.status ?? null,
      code: typeof failure.code === 'string' ? failure.code : null,
    });
  }
  return undefined;
}
