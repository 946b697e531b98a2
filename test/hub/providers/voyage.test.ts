import { describe, expect, it } from 'vitest';
import { AuthenticationError, InvalidRequestError, ProviderError, RateLimitError, UnsupportedParameterError } from '../../../src/hub/errors.ts';
import type { Provider } from '../../../src/hub/provider.ts';
import { voyageProvider } from '../../../src/hub/providers/voyage/index.ts';
import { startVoyageFake, voyageError } from '../../fakes/voyage.ts';
import { bodyOf, fakeVector, type VendorServer } from '../../fakes/vendor-server.ts';
import { collect, failureOf, useVendorFake } from '../helpers.ts';

describe('voyage provider against the fake API', () => {
  let fake: VendorServer;
  let provider: Provider;
  const call = { extra: {} };
  useVendorFake(startVoyageFake, (started) => {
    fake = started;
    provider = voyageProvider.create({ api_key: 'vo-key', api_base: `${fake.url}/v1` });
  });

  it('metadata: embeddings only, key from VOYAGE_API_KEY', () => {
    expect(voyageProvider.metadata).toMatchObject({ name: 'voyage', env_key: 'VOYAGE_API_KEY', embedding: true, messages: false, streaming: false, list_models: false });
  });

  it('embedding: POST /v1/embeddings with the bearer key; extra options are Voyage fields', async () => {
    const response = await provider.embedding!({ model: 'voyage-3.5', inputs: ['first text', 'second'] }, { extra: { input_type: 'document', output_dimension: 256 } });
    expect(fake.lastRequest.path).toBe('/v1/embeddings');
    expect(fake.lastRequest.headers.authorization).toBe('Bearer vo-key');
    expect(bodyOf(fake.lastRequest)).toEqual({ input: ['first text', 'second'], model: 'voyage-3.5', input_type: 'document', output_dimension: 256 });
    expect(response.data.map((item) => item.embedding)).toEqual(['first text', 'second'].map((text) => fakeVector(text, 256)));
    expect(response.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 });
  });

  it('messages are not offered: UnsupportedParameterError', async () => {
    const params = { model: 'voyage-3.5', max_tokens: 5, messages: [{ role: 'user' as const, content: 'x' }] };
    expect(await failureOf(provider.messages(params, call))).toBeInstanceOf(UnsupportedParameterError);
    expect(await failureOf(collect(provider.messagesStream(params, call)))).toBeInstanceOf(UnsupportedParameterError);
  });

  it.each([
    ['401 bad key', voyageError(401, 'Provided API key is invalid.'), AuthenticationError],
    ['400 bad model', voyageError(400, 'Model voyage-0 is not supported.'), InvalidRequestError],
    ['429 with Retry-After', voyageError(429, 'Rate limit exceeded', { 'retry-after': '12' }), RateLimitError],
    ['500', voyageError(500, 'Internal server error'), ProviderError],
  ] as const)('error %s', async (_name, reply, type) => {
    fake.enqueue(reply);
    const mapped = provider.toHubError(await failureOf(provider.embedding!({ model: 'voyage-3.5', inputs: ['x'] }, call)));
    expect(mapped).toBeInstanceOf(type);
    expect(mapped?.message).toBe(`[voyage] ${(reply as { json: { detail: string } }).json.detail}`);
    if (mapped instanceof RateLimitError) expect(mapped.retry_after).toBe(12);
  });

  it('the fake checks the key like the API, and the key is not in the message', async () => {
    const bad = voyageProvider.create({ api_key: 'secret-wrong', api_base: `${fake.url}/v1` });
    const mapped = bad.toHubError(await failureOf(bad.embedding!({ model: 'voyage-3.5', inputs: ['x'] }, call)));
    expect(mapped).toBeInstanceOf(AuthenticationError);
    expect(mapped?.message).not.toContain('secret-wrong');
  });
});
