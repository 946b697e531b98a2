// OpenAI SDK errors → unified exceptions (through the spec's type-selection rules in ../../errors.ts).

import OpenAI from 'openai';
import { HubError, mapProviderFailure, parseRetryAfter } from '../../errors.ts';
import { networkFailure } from '../shared/error-body.ts';

/** The vendor's own message: the body's error.message, else the SDK message without its "<status> " prefix. */
function vendorMessage(error: InstanceType<typeof OpenAI.APIError>): string {
  const body = error.error as { message?: unknown } | string | undefined;
  if (body && typeof body === 'object' && typeof body.message === 'string') return body.message;
  if (typeof body === 'string') return body;
  return error.message.replace(/^\d{3} /, '');
}

export function openAIErrorToHub(error: unknown, provider_name: string): HubError | undefined {
  if (error instanceof HubError) return error;
  if (error instanceof OpenAI.APIUserAbortError) return undefined;
  if (error instanceof OpenAI.APIConnectionError) {
    return networkFailure(provider_name, error);
  }
  if (error instanceof OpenAI.APIError) {
    return mapProviderFailure({
      provider_name,
      status_code: error.status ?? null,
      message: vendorMessage(error),
      code: error.code ?? null,
      param: error.param ?? null,
      error_type: error.type ?? null,
      retry_after: parseRetryAfter(error.headers),
      original_exception: error,
    });
  }
  if (error instanceof TypeError && /fetch failed|terminated|socket/i.test(error.message)) {
    return networkFailure(provider_name, error);
  }
  return undefined;
}
