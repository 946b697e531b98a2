// Checks of the Messages parameters made before any provider is called (always HubErrors).

import { InvalidRequestError } from '../errors.ts';

function invalid(param: string, message: string, provider: string | null): InvalidRequestError {
  return new InvalidRequestError(message, null, provider, { param });
}

export function validateMessagesParams(params: Record<string, unknown>, provider: string | null): void {
  if (typeof params.model !== 'string' || params.model === '') throw invalid('model', 'model is required (a string)', provider);
  if (!Array.isArray(params.messages)) throw invalid('messages', 'messages is required (a list of messages)', provider);
  const maxTokens = params.max_tokens;
  if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 0) {
    throw invalid('max_tokens', 'max_tokens is required (an integer ≥ 0)', provider);
  }
  const range = (name: string, low: number, high: number) => {
    const value = params[name];
    if (value === undefined || value === null) return;
    if (typeof value !== 'number' || Number.isNaN(value) || value < low || value > high) {
      throw invalid(name, `${name} must be a number between ${low.toFixed(1)} and ${high.toFixed(1)}`, provider);
    }
  };
  range('temperature', 0, 1);
  range('top_p', 0, 1);
  const topK = params.top_k;
  if (topK !== undefined && topK !== null && (typeof topK !== 'number' || !Number.isInteger(topK) || topK < 0)) {
    throw invalid('top_k', 'top_k must be an integer ≥ 0', provider);
  }
}
