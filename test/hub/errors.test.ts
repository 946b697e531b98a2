import { describe, expect, it } from 'vitest';
import {
  AuthenticationError,
  BatchNotCompleteError,
  ContentFilterError,
  ContextLengthExceededError,
  GatewayTimeoutError,
  HUB_ERROR_TYPES,
  HubError,
  InsufficientFundsError,
  InvalidRequestError,
  MissingApiKeyError,
  ModelNotFoundError,
  ProviderError,
  RateLimitError,
  UnsupportedParameterError,
  UnsupportedProviderError,
  UpstreamProviderError,
  mapProviderFailure,
  parseRetryAfter,
} from '../../src/hub/errors.ts';

const SPEC_TYPES = [
  'AuthenticationError',
  'BatchNotCompleteError',
  'ContentFilterError',
  'ContentFilterFinishReasonError',
  'ContextLengthExceededError',
  'GatewayTimeoutError',
  'InsufficientFundsError',
  'InvalidRequestError',
  'LengthFinishReasonError',
  'MissingApiKeyError',
  'ModelNotFoundError',
  'ProviderError',
  'ProviderFileNotFoundError',
  'RateLimitError',
  'UnsupportedParameterError',
  'UnsupportedProviderError',
  'UpstreamProviderError',
  '_FinishReasonError',
];

describe('the HubError family', () => {
  it('has every type of the spec, each deriving directly from HubError and from no other type', () => {
    expect(Object.keys(HUB_ERROR_TYPES).sort()).toEqual([...SPEC_TYPES].sort());
    for (const [name, type] of Object.entries(HUB_ERROR_TYPES)) {
      expect(Object.getPrototypeOf(type), name).toBe(HubError);
      expect(type.name).toBe(name);
    }
  });

  it.each([
    [RateLimitError, 'Rate limit exceeded'],
    [AuthenticationError, 'Authentication failed'],
    [InvalidRequestError, 'Invalid request'],
    [ProviderError, 'Provider error'],
    [ContentFilterError, 'Content blocked by safety filter'],
    [ModelNotFoundError, 'Model not found'],
    [ContextLengthExceededError, 'Context length exceeded'],
  ])('%o has the spec default message', (type, text) => {
    const error = new type();
    expect(error.message).toBe(text);
    expect(error.raw_message).toBe(text);
    expect(error.provider_name).toBeNull();
    expect(error).toBeInstanceOf(HubError);
    expect(error).toBeInstanceOf(Error);
  });

  it('takes message, original_exception, provider_name and the keyword options; unset fields stay null', () => {
    const cause = new Error('low level');
    const error = new InvalidRequestError('bad field', cause, 'openai', { status_code: 400, code: 'bad', param: 'x', error_type: 'invalid_request_error' });
    expect(error.message).toBe('[openai] bad field');
    expect(String(error)).toBe('[openai] bad field');
    expect(error.raw_message).toBe('bad field');
    expect(error.original_exception).toBe(cause);
    expect(error.cause).toBe(cause);
    expect([error.status_code, error.code, error.param, error.error_type]).toEqual([400, 'bad', 'x', 'invalid_request_error']);
    const bare = new ProviderError('boom');
    expect([bare.original_exception, bare.provider_name, bare.status_code, bare.code, bare.param, bare.error_type]).toEqual([null, null, null, null, null, null]);
    expect(String(bare)).toBe('boom');
    expect(bare.name).toBe('ProviderError');
  });

  it('MissingApiKeyError(provider_name, env_var_name) names the variable and the provider', () => {
    const error = new MissingApiKeyError('groq', 'GROQ_API_KEY');
    expect(error.provider_name).toBe('groq');
    expect(error.env_var_name).toBe('GROQ_API_KEY');
    expect(error.message.startsWith('[groq] ')).toBe(true);
    expect(error.message).toContain('GROQ_API_KEY');
  });

  it('UnsupportedProviderError(provider_key, supported_providers) lists the supported ones', () => {
    const error = new UnsupportedProviderError('nope', ['a', 'b']);
    expect(error.provider_key).toBe('nope');
    expect(error.supported_providers).toEqual(['a', 'b']);
    expect(error.message).toContain("'nope'");
    expect(error.message).toContain('a, b');
  });

  it('UnsupportedParameterError(parameter_name, provider_name, additional_message?)', () => {
    const plain = new UnsupportedParameterError('top_k', 'openai');
    expect(plain.parameter_name).toBe('top_k');
    expect(plain.provider_name).toBe('openai');
    expect(plain.additional_message).toBeNull();
    expect(plain.message).toBe("[openai] Parameter 'top_k' is not supported by openai");
    const extra = new UnsupportedParameterError('thinking', 'groq', 'Use reasoning_effort.');
    expect(extra.message).toMatch(/Use reasoning_effort\.$/);
    expect(extra.additional_message).toBe('Use reasoning_effort.');
  });

  it('BatchNotCompleteError and RateLimitError carry their extras', () => {
    const batch = new BatchNotCompleteError(null, null, 'openai', { batch_id: 'b1', batch_status: 'in_progress' });
    expect(batch.message).toBe('[openai] Batch b1 is not complete (status: in_progress)');
    expect(new RateLimitError(null, null, 'x', { retry_after: 3 }).retry_after).toBe(3);
    expect(new RateLimitError().retry_after).toBeNull();
  });
});

describe('type selection (spec table)', () => {
  it.each([
    [401, 'whatever', AuthenticationError],
    [403, 'whatever', AuthenticationError],
    [402, 'whatever', InsufficientFundsError],
    [404, 'whatever', ModelNotFoundError],
    [429, 'whatever', RateLimitError],
    [502, 'whatever', UpstreamProviderError],
    [504, 'whatever', GatewayTimeoutError],
    [500, 'whatever', ProviderError],
    [503, 'whatever', ProviderError],
    [500, 'blocked by content policy', ProviderError],
    [529, 'overloaded', ProviderError],
  ])('status %i (%s) → %o', (status, message, type) => {
    const error = mapProviderFailure({ provider_name: 'p', status_code: status, message });
    expect(error).toBeInstanceOf(type);
    expect(error.constructor).toBe(type);
    expect(error.status_code).toBe(status);
    expect(error.message).toBe(`[p] ${message}`);
  });

  it.each([
    [400, "This model's maximum context length is 8192 tokens", ContextLengthExceededError],
    [400, 'prompt is too long: 300000 tokens > 200000 maximum', ContextLengthExceededError],
    [422, 'Input exceeds the context window', ContextLengthExceededError],
    [400, 'Your request was rejected by our content filter', ContentFilterError],
    [422, 'The response was flagged by the safety system', ContentFilterError],
    [400, 'API key not valid. Please pass a valid API key.', AuthenticationError],
    [400, 'Unknown field foo', InvalidRequestError],
    [422, 'value is not a valid integer', InvalidRequestError],
    [400, 'rate limit reached', InvalidRequestError],
  ])('status %i with message %j → %o', (status, message, type) => {
    expect(mapProviderFailure({ provider_name: 'p', status_code: status, message }).constructor).toBe(type);
  });

  it.each([
    [null, 'Rate limit reached for requests', RateLimitError],
    [null, 'maximum context length exceeded', ContextLengthExceededError],
    [null, 'content policy violation', ContentFilterError],
    [null, 'invalid api key', AuthenticationError],
    [null, 'insufficient balance on account', InsufficientFundsError],
    [null, 'The model `x` does not exist', ModelNotFoundError],
    [null, 'something odd happened', ProviderError],
    [409, 'conflict with the current state', InvalidRequestError],
    [413, 'request too large: too many tokens', ContextLengthExceededError],
    [409, 'rate limit on concurrent requests', RateLimitError],
  ])('no/unlisted status %o: the message %j decides → %o', (status, message, type) => {
    expect(mapProviderFailure({ provider_name: 'p', status_code: status, message }).constructor).toBe(type);
  });

  it('timeouts and connection errors → ProviderError with no status', () => {
    const error = mapProviderFailure({ provider_name: 'p', message: 'Connection error: rate limit', network: true });
    expect(error.constructor).toBe(ProviderError);
    expect(error.status_code).toBeNull();
  });

  it('keeps code, param, error_type and the original exception; RateLimitError carries retry_after', () => {
    const original = new Error('sdk');
    const error = mapProviderFailure({ provider_name: 'p', status_code: 429, message: 'slow down', code: 'rate', param: 'x', error_type: 'requests', retry_after: 7, original_exception: original });
    expect(error).toBeInstanceOf(RateLimitError);
    expect((error as RateLimitError).retry_after).toBe(7);
    expect([error.code, error.param, error.error_type, error.original_exception]).toEqual(['rate', 'x', 'requests', original]);
  });

  it('uses the default message when the provider gives none', () => {
    expect(mapProviderFailure({ provider_name: 'p', status_code: 429 }).message).toBe('[p] Rate limit exceeded');
  });
});

describe('parseRetryAfter', () => {
  const headers = (values: Record<string, string>) => new Headers(values);
  it.each([
    [{ 'retry-after': '3' }, 3],
    [{ 'retry-after': '0.5' }, 0.5],
    [{ 'retry-after-ms': '1500', 'retry-after': '9' }, 1.5],
    [{ 'retry-after': 'soon' }, null],
    [{}, null],
  ])('%o → %o', (values, expected) => {
    expect(parseRetryAfter(headers(values))).toBe(expected);
  });
  it('reads an HTTP date', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter(headers({ 'retry-after': 'Thu, 01 Jan 2026 00:00:10 GMT' }), now)).toBe(10);
  });
});
