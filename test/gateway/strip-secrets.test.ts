import { describe, expect, it } from 'vitest';
import { stripSecrets } from '../../src/gateway/upstream.ts';

describe('stripSecrets (provider messages that quote a key)', () => {
  it.each([
    ['Incorrect API key provided: sk-proj-abcDEF123456.', 'Incorrect API key provided: sk-***.'],
    ['invalid x-api-key sk-ant-api03-abcdefghij', 'invalid x-api-key sk-***'],
    ['Incorrect API key provided: xai-AbCdEf1234567890', 'Incorrect API key provided: xai-***'],
    ['Invalid API Key gsk_abcDEF1234567890', 'Invalid API Key gsk_***'],
    ['API key not valid: AIzaSyA1b2C3d4E5f6G7h8I9j0', 'API key not valid: AIza***'],
    ['key gw-0123456789abcdef and rk-live_123456789', 'key gw-*** and rk-***'],
  ])('%s', (message, expected) => {
    expect(stripSecrets(message)).toBe(expected);
  });

  it('leaves ordinary words alone', () => {
    const text = 'The model gpt-4o-mini is not available; ask a task-specific question (risk-free, max-tokens 12).';
    expect(stripSecrets(text)).toBe(text);
  });
});
