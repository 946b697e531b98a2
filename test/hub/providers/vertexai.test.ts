// Vertex AI: @google/genai in Vertex mode against the fake, authenticated through google-auth-library's real
// Application Default Credentials path (an external_account file whose token exchange is the fake's).

import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { amessages } from '../../../src/hub/index.ts';
import { AuthenticationError, MissingApiKeyError, ModelNotFoundError, RateLimitError, UnsupportedParameterError } from '../../../src/hub/errors.ts';
import type { MessagesParams, Provider } from '../../../src/hub/provider.ts';
import { vertexaiProvider } from '../../../src/hub/providers/vertexai/index.ts';
import { googleError } from '../../fakes/gemini.ts';
import { bodyOf, fakeVector } from '../../fakes/vendor-server.ts';
import { EXPRESS_KEY, startVertexFake, stubAdcEnvironment, VERTEX_PROJECT, type VertexFake } from '../../fakes/vertexai.ts';
import { collect, failureOf, useVendorFake, weatherTool } from '../helpers.ts';

const base: MessagesParams = { model: 'gemini-2.5-flash', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const call = { extra: {} };
const MODEL_PATH = '/v1beta1/projects/hub-proj/locations/europe-west4/publishers/google/models';

describe('vertexai provider against the fake (ADC token exchange, then the publisher model routes)', () => {
  let fake: VertexFake;
  let provider: Provider;
  useVendorFake(startVertexFake, (started) => {
    fake = started;
    stubAdcEnvironment(fake, 'europe-west4');
    provider = vertexaiProvider.create({ api_base: fake.server.url });
  });
  afterAll(() => vi.unstubAllEnvs());

  it('messages: an access token from the ADC exchange, then generateContent on the project and location path', async () => {
    const fresh = vertexaiProvider.create({ api_base: fake.server.url });
    const message = await fresh.messages({ ...base, system: 'sys', tools: [weatherTool], tool_choice: { type: 'any' } }, call);
    const [exchange, generate] = fake.server.requests;
    expect(exchange.path).toBe('/v1/token');
    expect(new URLSearchParams(exchange.body.toString()).get('grant_type')).toBe('urn:ietf:params:oauth:grant-type:token-exchange');
    expect(generate.path).toBe(`${MODEL_PATH}/gemini-2.5-flash:generateContent`);
    expect(generate.headers.authorization).toBe(`Bearer ${fake.issued.at(-1)}`);
    expect(bodyOf(generate)).toMatchObject({
      systemInstruction: { parts: [{ text: 'sys' }] },
      generationConfig: { maxOutputTokens: 100 },
      tools: [{ functionDeclarations: [{ name: 'weather' }] }],
      toolConfig: { functionCallingConfig: { mode: 'ANY' } },
    });
    expect(message).toMatchObject({ content: [{ type: 'text', text: 'echo: hi' }], stop_reason: 'end_turn', usage: { input_tokens: 10, cache_read_input_tokens: 2 } });
  });

  it('the token is reused by later calls of the same provider', async () => {
    const fresh = vertexaiProvider.create({ api_base: fake.server.url });
    await fresh.messages(base, call);
    await fresh.messages(base, call);
    expect(fake.server.requests.filter((r) => r.path === '/v1/token')).toHaveLength(1);
    expect(fake.server.requests.filter((r) => r.path.endsWith(':generateContent'))).toHaveLength(2);
  });

  it('messagesStream: streamGenerateContent?alt=sse becomes Messages events', async () => {
    const events = await collect(provider.messagesStream({ ...base, messages: [{ role: 'user', content: 'stream me' }] }, call));
    expect(fake.server.lastRequest.path).toBe(`${MODEL_PATH}/gemini-2.5-flash:streamGenerateContent`);
    const text = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? [e.delta.text] : [])).join('');
    expect(text).toBe('echo: stream me');
    expect(events.at(-1)).toEqual({ type: 'message_stop' });
  });

  it('embedding: text-embedding models go to :predict with instances; dimensions and token counts', async () => {
    const response = await provider.embedding!({ model: 'text-embedding-005', inputs: ['alpha', 'be'], dimensions: 8 }, call);
    expect(fake.server.lastRequest.path).toBe(`${MODEL_PATH}/text-embedding-005:predict`);
    expect(bodyOf(fake.server.lastRequest)).toMatchObject({ instances: [{ content: 'alpha' }, { content: 'be' }], parameters: { outputDimensionality: 8 } });
    expect(response.data.map((d) => d.embedding)).toEqual([fakeVector('alpha', 8), fakeVector('be', 8)]);
    expect(response.usage).toEqual({ prompt_tokens: 7, total_tokens: 7 });
  });

  it('listModels: the publisher models, every page, ids without their path', async () => {
    expect((await provider.listModels!(call)).map((m) => m.id)).toEqual(['gemini-2.5-flash', 'text-embedding-005']);
    expect(fake.server.requests.filter((r) => r.path === '/v1beta1/publishers/google/models')).toHaveLength(2);
  });

  it('an api_key selects express mode: the key header, no project in the path, no token exchange', async () => {
    const express = vertexaiProvider.create({ api_base: fake.server.url, api_key: EXPRESS_KEY });
    await express.messages(base, call);
    expect(fake.server.requests.map((r) => r.path)).toEqual(['/v1beta1/publishers/google/models/gemini-2.5-flash:generateContent']);
    expect(fake.server.lastRequest.headers['x-goog-api-key']).toBe(EXPRESS_KEY);
  });

  it('client_args project and location win over the environment', async () => {
    const other = vertexaiProvider.create({ api_base: fake.server.url, client_args: { project: 'other-proj', location: 'us-east5' } });
    await other.messages(base, call);
    expect(fake.server.lastRequest.path).toBe('/v1beta1/projects/other-proj/locations/us-east5/publishers/google/models/gemini-2.5-flash:generateContent');
  });

  it('without a project (and no api_key): MissingApiKeyError naming GOOGLE_CLOUD_PROJECT, nothing sent', async () => {
    vi.stubEnv('GOOGLE_CLOUD_PROJECT', undefined);
    try {
      const failure = await failureOf(amessages({ ...base, provider: 'vertexai', api_base: fake.server.url }));
      expect(failure).toBeInstanceOf(MissingApiKeyError);
      expect(failure).toMatchObject({ provider_name: 'vertexai', env_var_name: 'GOOGLE_CLOUD_PROJECT' });
      expect(fake.server.requests).toHaveLength(0);
    } finally {
      vi.stubEnv('GOOGLE_CLOUD_PROJECT', VERTEX_PROJECT);
    }
  });

  it('a refused token exchange is an AuthenticationError and no model call is sent', async () => {
    const bad = path.join(path.dirname(fake.adc), 'bad-adc.json');
    writeFileSync(bad, JSON.stringify({ ...JSON.parse(readFileSync(fake.adc, 'utf8')), credential_source: { file: path.join(path.dirname(fake.adc), 'nope') } }));
    writeFileSync(path.join(path.dirname(fake.adc), 'nope'), 'not-the-subject-token');
    const refused = vertexaiProvider.create({ api_base: fake.server.url, client_args: { googleAuthOptions: { keyFilename: bad } } });
    const failure = await failureOf(refused.messages(base, call));
    const mapped = refused.toHubError(failure);
    expect(mapped).toBeInstanceOf(AuthenticationError);
    expect(mapped).toMatchObject({ provider_name: 'vertexai', status_code: 400 });
    expect(mapped?.message).toMatch(/invalid_grant/);
    expect(fake.server.requests.map((r) => r.path)).toEqual(['/v1/token']);
  });

  const errors: [string, ReturnType<typeof googleError>, new (...args: never[]) => Error][] = [
    ['401 UNAUTHENTICATED', googleError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.'), AuthenticationError],
    ['404 NOT_FOUND', googleError(404, 'NOT_FOUND', 'Publisher Model `gemini-9` was not found.'), ModelNotFoundError],
    ['429 RESOURCE_EXHAUSTED', googleError(429, 'RESOURCE_EXHAUSTED', 'Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute'), RateLimitError],
  ];
  it.each(errors)('error %s, named vertexai', async (_name, reply, type) => {
    await provider.messages(base, call); // the token first, so the scripted reply meets the model call
    fake.server.enqueue(reply, (request) => request.path.includes(':generateContent'));
    const mapped = provider.toHubError(await failureOf(provider.messages(base, call)));
    expect(mapped).toBeInstanceOf(type);
    expect(mapped).toMatchObject({ provider_name: 'vertexai' });
  });

  it('conversion refusals name vertexai', async () => {
    const failure = await failureOf(provider.messages({ ...base, metadata: { user_id: 'u' } }, call));
    expect(failure).toBeInstanceOf(UnsupportedParameterError);
    expect(failure).toMatchObject({ provider_name: 'vertexai', parameter_name: 'metadata' });
  });
});
