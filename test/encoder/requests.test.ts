import { describe, expect, it } from 'vitest';
import { InputError } from '../../src/encoder/errors.ts';
import { parsePredictRequest } from '../../src/encoder/requests.ts';

function reason(modelType: Parameters<typeof parsePredictRequest>[0], body: unknown): string {
  try {
    parsePredictRequest(modelType, body);
  } catch (error) {
    expect(error).toBeInstanceOf(InputError);
    return (error as Error).message;
  }
  throw new Error('expected an InputError');
}

describe('prediction requests', () => {
  it('accepts the spec request of each model type', () => {
    expect(parsePredictRequest('embedding', { inputs: ['a'], normalize: true, metadata: { k: 'v' } })).toEqual({
      inputs: ['a'],
      normalize: true,
      metadata: { k: 'v' },
    });
    expect(parsePredictRequest('sequence_classification', { inputs: ['a', 'b'] })).toEqual({ inputs: ['a', 'b'] });
    expect(parsePredictRequest('token_classification', { inputs: ['a'], metadata: {} })).toEqual({ inputs: ['a'], metadata: {} });
  });

  it('takes normalize on an embedding model only, optional there (default false, as encoderfile)', () => {
    expect(parsePredictRequest('embedding', { inputs: ['a'] })).toEqual({ inputs: ['a'] });
    expect(reason('embedding', { inputs: ['a'], normalize: 'yes' })).toBe('Invalid input: normalize must be a boolean, got string');
    expect(reason('sequence_classification', { inputs: ['a'], normalize: true })).toBe('Invalid input: unknown field "normalize"');
  });

  it('rejects an empty list, an empty string and a non-string', () => {
    expect(reason('sequence_classification', { inputs: [] })).toBe('Invalid input: inputs must not be empty');
    expect(reason('token_classification', { inputs: ['ok', ''] })).toBe('Invalid input: inputs[1] is an empty string');
    expect(reason('embedding', { inputs: ['ok', 3], normalize: false })).toBe('Invalid input: inputs[1] must be a string, got number');
    expect(reason('embedding', { inputs: 'text', normalize: false })).toBe('Invalid input: inputs must be a list, got string');
  });

  it('rejects a missing inputs field, a non-object body and bad metadata', () => {
    expect(reason('token_classification', {})).toBe('Invalid input: missing required field "inputs"');
    expect(reason('token_classification', null)).toBe('Invalid input: request body must be a JSON object, got null');
    expect(reason('token_classification', ['a'])).toBe('Invalid input: request body must be a JSON object, got a list');
    expect(reason('sequence_classification', { inputs: ['a'], metadata: { n: 1 } })).toBe(
      'Invalid input: metadata.n must be a string, got number',
    );
    expect(reason('sequence_classification', { inputs: ['a'], metadata: 'x' })).toBe('Invalid input: metadata must be an object, got string');
  });
});
