// Claude on other clouds: azureanthropic (@anthropic-ai/foundry-sdk against the Anthropic fake) and
// vertexaianthropic (@anthropic-ai/vertex-sdk against the Vertex fake, through the ADC token exchange).

import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { alist_models, amessages } from '../../../src/hub/index.ts';
import { AuthenticationError, InvalidRequestError, MissingApiKeyError, RateLimitError, UnsupportedParameterError } from '../../../src/hub/errors.ts';
import type { MessagesParams, MessagesStreamEvent, Provider } from '../../../src/hub/provider.ts';
import { azureanthropicProvider } from '../../../src/hub/providers/azureanthropic/index.ts';
import { vertexaianthropicProvider } from '../../../src/hub/providers/vertexaianthropic/index.ts';
import { createVertexAIAnthropic } from '../../../src/hub/providers/vertexaianthropic/provider.ts';
import { anthropicError, fakeMessageEvents, startAnthropicFake, type AnthropicFake } from '../../fakes/anthropic.ts';
import { googleError } from '../../fakes/gemini.ts';
import { bodyOf } from '../../fakes/vendor-server.ts';
import { startVertexFake, stubAdcEnvironment, VERTEX_PROJECT, type VertexFake } from '../../fakes/vertexai.ts';
import { collect, failureOf, useVendorFake } from '../helpers.ts';

const base: MessagesParams = { model: 'claude-sonnet-4-6', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] };
const call = { extra: {} };
const textOf = (events: MessagesStreamEvent[]) => events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? [e.delta.text] : [])).join('');

describe('azureanthropic (Claude on Microsoft Foundry)', () => {
  let fake: AnthropicFake;
  let provider: Provider;
  useVendorFake(startAnthropicFake, (started) => {
    fake = started;
    provider = azureanthropicProvider.create({ api_key: 'foundry-key', api_base: fake.server.url });
  });
  afterAll(() => vi.unstubAllEnvs());

  it('messages: POST /v1/messages with the key in x-api-key, the request unchanged', async () => {
    const message = await provider.messages({ ...base, system: 'sys', temperature: 0.3 }, { extra: { service_tier: 'auto' } });
    expect(fake.server.lastRequest.path).toBe('/v1/messages');
    expect(fake.server.lastRequest.headers['x-api-key']).toBe('foundry-key');
    expect(bodyOf(fake.server.lastRequest)).toMatchObject({ model: 'claude-sonnet-4-6', system: 'sys', temperature: 0.3, service_tier: 'auto', max_tokens: 64 });
    expect(message).toMatchObject({ content: [{ type: 'text', text: 'echo: hi' }], stop_reason: 'end_turn' });
  });

  it('messagesStream: the SSE events pass through; a stream without message_stop fails', async () => {
    const events = await collect(provider.messagesStream({ ...base, messages: [{ role: 'user', content: 'stream' }] }, call));
    expect(textOf(events)).toBe('echo: stream');
    fake.server.enqueue({ sse: fakeMessageEvents({ messages: [{ role: 'user', content: 'cut here' }] }), endEarly: 4 });
    expect(await failureOf(collect(provider.messagesStream(base, call)))).toMatchObject({ name: 'ProviderError', provider_name: 'azureanthropic' });
  });

  it('the resource name makes the address; neither resource nor api_base is an InvalidRequestError', async () => {
    vi.stubEnv('AZURE_ANTHROPIC_RESOURCE', undefined);
    const failure = await failureOf(amessages({ ...base, provider: 'azureanthropic', api_key: 'k' }));
    expect(failure).toBeInstanceOf(InvalidRequestError);
    expect((failure as Error).message).toMatch(/AZURE_ANTHROPIC_RESOURCE/);
    // with a resource the SDK builds https://<resource>.services.ai.azure.com/anthropic/; a fetch records it
    const urls: string[] = [];
    const recording = azureanthropicProvider.create({
      api_key: 'k',
      client_args: { resource: 'my-res', fetch: async (url: string) => (urls.push(String(url)), new Response(JSON.stringify({ type: 'error', error: { type: 'x', message: 'no' } }), { status: 400 })) },
    });
    await failureOf(recording.messages(base, call));
    expect(urls).toEqual(['https://my-res.services.ai.azure.com/anthropic/v1/messages']);
  });

  it('the key comes from AZURE_ANTHROPIC_API_KEY; without it MissingApiKeyError', async () => {
    vi.stubEnv('AZURE_ANTHROPIC_API_KEY', 'env-foundry-key');
    await amessages({ ...base, provider: 'azureanthropic', api_base: fake.server.url });
    expect(fake.server.lastRequest.headers['x-api-key']).toBe('env-foundry-key');
    vi.stubEnv('AZURE_ANTHROPIC_API_KEY', undefined);
    expect(await failureOf(amessages({ ...base, provider: 'azureanthropic', api_base: fake.server.url }))).toBeInstanceOf(MissingApiKeyError);
  });

  it('errors map like Anthropic\'s, named azureanthropic; listing models is not offered', async () => {
    fake.server.enqueue(anthropicError(429, 'rate_limit_error', 'Number of requests has exceeded your rate limit', { 'retry-after': '7' }));
    const mapped = provider.toHubError(await failureOf(provider.messages(base, call)));
    expect(mapped).toBeInstanceOf(RateLimitError);
    expect(mapped).toMatchObject({ provider_name: 'azureanthropic', retry_after: 7 });
    const bad = azureanthropicProvider.create({ api_key: 'bad-key', api_base: fake.server.url });
    expect(bad.toHubError(await failureOf(bad.messages(base, call)))).toBeInstanceOf(AuthenticationError);
    expect(await failureOf(alist_models({ provider: 'azureanthropic', api_key: 'k', api_base: fake.server.url }))).toBeInstanceOf(UnsupportedParameterError);
  });
});

describe('vertexaianthropic (Claude on Vertex AI)', () => {
  let fake: VertexFake;
  let provider: Provider;
  useVendorFake(startVertexFake, (started) => {
    fake = started;
    stubAdcEnvironment(fake, 'us-east5');
    provider = vertexaianthropicProvider.create({ api_base: `${fake.server.url}/v1` });
  });
  afterAll(() => vi.unstubAllEnvs());

  it('messages: an ADC token, then rawPredict on the publisher model with anthropic_version and no model in the body', async () => {
    const message = await provider.messages({ ...base, system: 'sys' }, call);
    const predict = fake.server.lastRequest;
    expect(predict.path).toBe('/v1/projects/hub-proj/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-6:rawPredict');
    expect(predict.headers.authorization).toBe(`Bearer ${fake.issued.at(-1)}`);
    expect(bodyOf(predict)).toMatchObject({ anthropic_version: expect.any(String), system: 'sys', max_tokens: 64 });
    expect(bodyOf(predict).model).toBeUndefined();
    expect(message).toMatchObject({ model: 'claude-sonnet-4-6', content: [{ type: 'text', text: 'echo: hi' }] });
  });

  it('messagesStream: streamRawPredict, the SSE events pass through', async () => {
    const events = await collect(provider.messagesStream({ ...base, messages: [{ role: 'user', content: 'stream' }] }, call));
    expect(fake.server.lastRequest.path).toMatch(/:streamRawPredict$/);
    expect(textOf(events)).toBe('echo: stream');
    expect(events.at(-1)).toMatchObject({ type: 'message_stop' });
  });

  it('without credentials: an SDK client nobody called yet fails nothing (no unhandled rejection); the first call fails with the reason', async () => {
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', record);
    vi.stubEnv('GOOGLE_APPLICATION_CREDENTIALS', path.join(path.dirname(fake.adc), 'missing-adc.json'));
    try {
      // the provider as its lazy loader makes it once the SDK is loaded (which happens at the first call through Hub)
      const unauthenticated = createVertexAIAnthropic({ api_base: `${fake.server.url}/v1` });
      // the SDK resolves credentials from its constructor; give that time to fail
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(unhandled).toEqual([]);
      const before = fake.server.requests.length;
      const failure = await failureOf(unauthenticated.messages(base, call));
      expect((failure as Error).message).toMatch(/Google OAuth credentials/);
      expect(fake.server.requests.length).toBe(before);
    } finally {
      process.off('unhandledRejection', record);
      vi.stubEnv('GOOGLE_APPLICATION_CREDENTIALS', fake.adc);
    }
  });

  it('client_args projectId and region win; without any project: MissingApiKeyError naming GOOGLE_CLOUD_PROJECT', async () => {
    const other = vertexaianthropicProvider.create({ api_base: `${fake.server.url}/v1`, client_args: { projectId: 'p2', region: 'europe-west1' } });
    await other.messages(base, call);
    expect(fake.server.lastRequest.path).toBe('/v1/projects/p2/locations/europe-west1/publishers/anthropic/models/claude-sonnet-4-6:rawPredict');
    vi.stubEnv('GOOGLE_CLOUD_PROJECT', undefined);
    vi.stubEnv('ANTHROPIC_VERTEX_PROJECT_ID', undefined);
    try {
      const failure = await failureOf(amessages({ ...base, provider: 'vertexaianthropic', api_base: `${fake.server.url}/v1` }));
      expect(failure).toBeInstanceOf(MissingApiKeyError);
      expect(failure).toMatchObject({ env_var_name: 'GOOGLE_CLOUD_PROJECT' });
    } finally {
      vi.stubEnv('GOOGLE_CLOUD_PROJECT', VERTEX_PROJECT);
    }
  });

  it('a Google error answer maps by status, named vertexaianthropic', async () => {
    await provider.messages(base, call);
    fake.server.enqueue(googleError(429, 'RESOURCE_EXHAUSTED', 'Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model'), (r) => r.path.endsWith(':rawPredict'));
    const mapped = provider.toHubError(await failureOf(provider.messages(base, call)));
    expect(mapped).toBeInstanceOf(RateLimitError);
    expect(mapped).toMatchObject({ provider_name: 'vertexaianthropic', status_code: 429 });
  });
});
