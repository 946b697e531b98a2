// OpenAI and the OpenAI-compatible services through the public Hub API, against the fake OpenAI-compatible server
// (the real `openai` SDK on the wire).

import { getEventListeners } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  AuthenticationError,
  BatchNotCompleteError,
  ContentFilterError,
  ContentFilterFinishReasonError,
  ContextLengthExceededError,
  GatewayTimeoutError,
  Hub,
  HubError,
  InsufficientFundsError,
  InvalidRequestError,
  LengthFinishReasonError,
  MissingApiKeyError,
  ModelNotFoundError,
  ProviderError,
  RateLimitError,
  UnsupportedParameterError,
  UpstreamProviderError,
  acancel_batch,
  acompletion,
  acreate_batch,
  aembedding,
  alist_batches,
  alist_models,
  amessages,
  aresponses,
  aretrieve_batch,
  aretrieve_batch_results,
} from '../../src/hub/index.ts';
import type { MessagesStreamEvent } from '../../src/hub/index.ts';
import { OPENAI_COMPATIBLE_SERVICES } from '../../src/hub/providers/openai/index.ts';
import { FAKE_MODEL_IDS, FakeOpenAIServer, chatChunks, chatCompletionBody, errorBody, fakeEmbedding } from '../fakes/openai-compatible.ts';
import { collect } from './helpers.ts';

let fake: FakeOpenAIServer;
const KEY = 'sk-test-secret-0123456789';
let opts: { api_key: string; api_base: string };
const ask = { model: 'openai:gpt-test', max_tokens: 64, messages: [{ role: 'user' as const, content: 'hi' }] };
const savedEnv = { ...process.env };

beforeAll(async () => {
  fake = await FakeOpenAIServer.start();
  opts = { api_key: KEY, api_base: fake.baseURL };
});
afterEach(() => {
  fake.reset();
  process.env = { ...savedEnv };
});
afterAll(async () => {
  await fake.close();
});

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

describe('messages over OpenAI chat', () => {
  it('sends the converted request with the key, and converts the answer', async () => {
    const message = await amessages({
      ...opts,
      ...ask,
      system: 'be brief',
      temperature: 0.2,
      stop_sequences: ['STOP'],
      seed: 7, // provider-specific passthrough
    });
    const [request] = fake.requestsTo('POST /v1/chat/completions');
    expect(request!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(request!.body).toEqual({
      model: 'gpt-test',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi' },
      ],
      max_completion_tokens: 64,
      temperature: 0.2,
      stop: ['STOP'],
      seed: 7,
    });
    expect(message).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'gpt-test',
      content: [{ type: 'text', text: 'Hello from the fake server' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 8, cache_read_input_tokens: 4, output_tokens: 6 },
    });
  });

  it('streams the spec event kinds and asks for usage', async () => {
    const events = await collect(amessages({ ...opts, ...ask, stream: true }));
    expect(events.map((e) => e.type)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const text = events
      .filter((e): e is Extract<MessagesStreamEvent, { type: 'content_block_delta' }> => e.type === 'content_block_delta')
      .map((e) => (e.delta.type === 'text_delta' ? e.delta.text : ''))
      .join('');
    expect(text).toBe('Hello from the fake');
    expect(fake.requestsTo('POST /v1/chat/completions')[0]!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });

  it.each([false, true])('a stream cut in the middle yields what arrived, then fails (unified: %s)', async (unified) => {
    fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-test', ['one', 'two']).slice(0, 3), cut: true });
    const seen: string[] = [];
    const error = await failure(
      (async () => {
        for await (const event of amessages({ ...opts, ...ask, stream: true, unified_exceptions: unified })) seen.push(event.type);
      })(),
    );
    expect(error).toBeInstanceOf(Error);
    if (unified) {
      expect(error).toBeInstanceOf(ProviderError);
      expect((error as ProviderError).status_code).toBeNull();
    }
    expect(seen.slice(0, 3)).toEqual(['message_start', 'content_block_start', 'content_block_delta']);
    expect(seen).not.toContain('message_stop');
  });

  it('a stream that ends cleanly but early (no finish_reason) is a ProviderError', async () => {
    fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-test', ['one', 'two']).slice(0, 3) });
    expect(await failure(collect(amessages({ ...opts, ...ask, stream: true })))).toBeInstanceOf(ProviderError);
  });

  it('rejects bad parameters before any request', async () => {
    const hot = await failure(amessages({ ...opts, ...ask, temperature: 1.5 }));
    expect(hot).toBeInstanceOf(InvalidRequestError);
    expect((hot as InvalidRequestError).param).toBe('temperature');
    expect(await failure(amessages({ ...opts, ...ask, top_k: 3 }))).toBeInstanceOf(UnsupportedParameterError);
    expect(await failure(amessages({ ...opts, model: 'openai:x', messages: [] } as never) as unknown as Promise<unknown>)).toBeInstanceOf(InvalidRequestError);
    expect(fake.requests).toHaveLength(0);
  });

  it('output_format with a zod schema gives a typed parsed_output and sends response_format', async () => {
    fake.script('POST /v1/chat/completions', { json: chatCompletionBody('gpt-test', '{"city":"Oslo","days":3}') });
    const Answer = z.object({ city: z.string(), days: z.number() });
    const message = await amessages({ ...opts, ...ask, output_format: Answer });
    const parsed: { city: string; days: number } | null = message.parsed_output;
    expect(parsed).toEqual({ city: 'Oslo', days: 3 });
    const body = fake.requestsTo('POST /v1/chat/completions')[0]!.body as { response_format: { type: string; json_schema: { schema: { properties: object } } } };
    expect(body.response_format.type).toBe('json_schema');
    expect(Object.keys(body.response_format.json_schema.schema.properties)).toEqual(['city', 'days']);
  });

  it('output_format with a raw JSON-schema configuration gives parsed JSON; a non-matching answer fails', async () => {
    fake.script('POST /v1/chat/completions', { json: chatCompletionBody('gpt-test', '{"n":1}') }, { json: chatCompletionBody('gpt-test', '{"n":"x"}') });
    const raw = await amessages({ ...opts, ...ask, output_format: { type: 'json_schema', schema: { type: 'object', properties: { n: { type: 'number' } } } } });
    expect(raw.parsed_output).toEqual({ n: 1 });
    expect(await failure(amessages({ ...opts, ...ask, output_format: z.object({ n: z.number() }) }))).toBeInstanceOf(ProviderError);
  });

  it('output_format on an answer cut at the token limit or refused raises the finish-reason errors', async () => {
    const cut = chatCompletionBody('gpt-test', '{"n":');
    cut.choices[0]!.finish_reason = 'length';
    const refused = chatCompletionBody('gpt-test', 'I cannot help with that');
    refused.choices[0]!.finish_reason = 'content_filter';
    fake.script('POST /v1/chat/completions', { json: cut }, { json: refused });
    const length = await failure(amessages({ ...opts, ...ask, output_format: z.object({ n: z.number() }) }));
    expect(length).toBeInstanceOf(LengthFinishReasonError);
    expect((length as HubError).provider_name).toBe('openai');
    expect(await failure(amessages({ ...opts, ...ask, output_format: z.object({ n: z.number() }) }))).toBeInstanceOf(ContentFilterFinishReasonError);
  });

  it('output_format with stream is an UnsupportedParameterError', async () => {
    const error = await failure(collect(amessages({ ...opts, ...ask, stream: true, output_format: z.object({}) })));
    expect(error).toBeInstanceOf(UnsupportedParameterError);
    expect((error as UnsupportedParameterError).parameter_name).toBe('output_format');
  });
});

describe('every OpenAI-compatible service', () => {
  it.each(OPENAI_COMPATIBLE_SERVICES.map((s) => [s.metadata.name, s] as const))('%s: key from its env var, messages round trip', async (name, service) => {
    process.env[service.metadata.env_key!] = `${name}-env-key`;
    if (name === 'azureopenai') process.env.AZURE_OPENAI_ENDPOINT = 'http://127.0.0.1:1';
    const message = await amessages({ api_base: fake.baseURL, provider: name, model: 'some/model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
    expect(message.content).toEqual([{ type: 'text', text: 'Hello from the fake server', citations: null }]);
    const request = fake.requestsTo('POST /v1/chat/completions')[0]!;
    expect(request.headers.authorization).toBe(`Bearer ${name}-env-key`);
    if (name === 'azureopenai') expect(request.headers['api-key']).toBe(`${name}-env-key`);
    expect((request.body as { model: string }).model).toBe('some/model');
    const limitField = service.dialect.max_tokens_field;
    expect(request.body).toHaveProperty(limitField, 5);
  });

  it('a missing key raises MissingApiKeyError naming the variable; local servers need none', async () => {
    delete process.env.GROQ_API_KEY;
    const error = await failure(amessages({ api_base: fake.baseURL, provider: 'groq', ...ask, model: 'm' }));
    expect(error).toBeInstanceOf(MissingApiKeyError);
    expect((error as MissingApiKeyError).env_var_name).toBe('GROQ_API_KEY');
    expect((error as MissingApiKeyError).provider_name).toBe('groq');
    expect(() => Hub.create('groq')).toThrow(MissingApiKeyError);
    delete process.env.VLLM_API_KEY;
    await expect(amessages({ api_base: fake.baseURL, provider: 'vllm', ...ask, model: 'm' })).resolves.toMatchObject({ type: 'message' });
  });

  it('azureopenai without an endpoint says what to set', async () => {
    delete process.env.AZURE_OPENAI_ENDPOINT;
    const error = await failure(amessages({ api_key: 'k', provider: 'azureopenai', ...ask, model: 'm' }));
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect(String(error)).toContain('AZURE_OPENAI_ENDPOINT');
  });

  const services = OPENAI_COMPATIBLE_SERVICES.map((s) => [s.metadata.name, s] as const);
  const chat = [{ role: 'user' as const, content: 'x' }];

  it.each(services)('%s: streams, passes completion through with its token-limit field, maps errors', async (name, service) => {
    const on = { api_key: `${name}-key`, api_base: fake.baseURL, provider: name };
    const events = await collect(amessages({ ...on, model: 'm', max_tokens: 5, messages: chat, stream: true }));
    expect(events.at(-1)!.type).toBe('message_stop');
    const streamed = fake.requestsTo('POST /v1/chat/completions')[0]!;
    expect(streamed.headers.authorization).toBe(`Bearer ${name}-key`);
    expect(streamed.body).toMatchObject({ model: 'm', stream: true });
    expect((streamed.body as { stream_options?: unknown }).stream_options).toEqual(service.stream_usage ? { include_usage: true } : undefined);

    const completion = await acompletion({ ...on, model: 'm', messages: chat, max_completion_tokens: 7 });
    expect(completion.choices[0]!.message.content).toBe('Hello from the fake server');
    const sent = fake.requestsTo('POST /v1/chat/completions')[1]!.body as Record<string, unknown>;
    // vendors that take only max_tokens get the limit under that name
    if (service.quirks.max_tokens_only) expect([sent.max_tokens, sent.max_completion_tokens]).toEqual([7, undefined]);
    else expect([sent.max_tokens, sent.max_completion_tokens]).toEqual([undefined, 7]);

    fake.script('POST /v1/chat/completions', { status: 401, json: errorBody('bad key') }, { status: 429, headers: { 'retry-after': '0' }, json: errorBody('slow down') });
    const denied = await failure(amessages({ ...on, model: 'm', max_tokens: 5, messages: chat, unified_exceptions: true, max_retries: 0 }));
    expect(denied).toBeInstanceOf(AuthenticationError);
    expect(denied).toMatchObject({ provider_name: name, status_code: 401, message: `[${name}] bad key` });
    const limited = await failure(collect(acompletion({ ...on, model: 'm', messages: chat, stream: true, unified_exceptions: true, max_retries: 0 })));
    expect(limited).toBeInstanceOf(RateLimitError);
    expect(limited).toMatchObject({ provider_name: name, retry_after: 0 });
  });

  it.each(services)('%s: list_models, embeddings and responses where its metadata says, UnsupportedParameterError elsewhere', async (name, service) => {
    const on = { api_key: `${name}-key`, api_base: fake.baseURL, provider: name };
    const { list_models, embedding, responses } = service.metadata;
    // github's catalog lists models; azure's /info describes the endpoint's one model
    const catalogRoute = service.quirks.model_catalog ? `GET ${new URL(service.quirks.model_catalog.url(fake.baseURL)).pathname}` : 'GET /v1/models';
    const listed = name === 'azure' ? FAKE_MODEL_IDS.slice(0, 1) : FAKE_MODEL_IDS;
    if (name === 'azure') fake.script(catalogRoute, { json: { model_name: listed[0], model_type: 'chat-completion', model_provider_name: 'Fake Labs' } });
    else if (service.quirks.model_catalog) fake.script(catalogRoute, { json: FAKE_MODEL_IDS.map((id) => ({ id, publisher: 'Fake Labs' })) });
    if (list_models) expect((await alist_models(on)).map((m) => [m.id, m.object])).toEqual(listed.map((id) => [id, 'model']));
    else expect(await failure(alist_models(on))).toMatchObject({ constructor: UnsupportedParameterError, parameter_name: 'list_models' });
    if (embedding) {
      const vectors = await aembedding({ ...on, model: 'e', inputs: ['abc'] });
      // OpenAI and Azure get base64 (float32 on the wire), the others ask for floats
      const base64 = name === 'openai' || name === 'azureopenai';
      expect(vectors.data[0]!.embedding).toEqual(base64 ? Array.from(new Float32Array(fakeEmbedding('abc'))) : fakeEmbedding('abc'));
      expect(fake.requestsTo('POST /v1/embeddings')[0]!.body).toMatchObject({ model: 'e', input: ['abc'], encoding_format: base64 ? 'base64' : 'float' });
    } else {
      expect(await failure(aembedding({ ...on, model: 'e', inputs: ['abc'] }))).toMatchObject({ constructor: UnsupportedParameterError, parameter_name: 'embedding' });
    }
    if (responses) expect((await aresponses({ ...on, model: 'm', input: 'hi' })).output_text).toBe('Hello from the fake server');
    else expect(await failure(aresponses({ ...on, model: 'm', input: 'hi' }))).toMatchObject({ constructor: UnsupportedParameterError, parameter_name: 'responses' });
    expect(fake.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      ...(list_models ? [catalogRoute] : []),
      ...(embedding ? ['POST /v1/embeddings'] : []),
      ...(responses ? ['POST /v1/responses'] : []),
    ]);
    for (const request of fake.requests) expect(request.headers.authorization).toBe(`Bearer ${name}-key`);
  });
});

describe('azure (Azure AI model inference)', () => {
  const chat = [{ role: 'user' as const, content: 'x' }];
  const at = () => ({ api_key: 'az-key', api_base: fake.baseURL, provider: 'azure' });

  it('every call carries api-version, the key as api-key and bearer; limits go as max_tokens; streams ask no stream_options', async () => {
    await amessages({ ...at(), model: 'Phi-4', max_tokens: 9, messages: chat });
    await collect(amessages({ ...at(), model: 'Phi-4', max_tokens: 9, messages: chat, stream: true }));
    await acompletion({ ...at(), model: 'Phi-4', messages: chat, max_completion_tokens: 11 });
    await aembedding({ ...at(), model: 'text-embedding-3-small', inputs: ['a'], dimensions: 8 });
    fake.script('GET /v1/info', { json: { model_name: 'Phi-4', model_type: 'chat-completion', model_provider_name: 'Microsoft' } });
    expect(await alist_models(at())).toEqual([{ id: 'Phi-4', object: 'model', created: 0, owned_by: 'Microsoft' }]);
    expect(fake.requests.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /v1/chat/completions', 'POST /v1/chat/completions', 'POST /v1/chat/completions', 'POST /v1/embeddings', 'GET /v1/info']);
    for (const request of fake.requests) {
      expect(request.query.get('api-version')).toBe('2024-05-01-preview');
      expect([request.headers['api-key'], request.headers.authorization]).toEqual(['az-key', 'Bearer az-key']);
    }
    const [plain, streamed, completion, embedding] = fake.requests.map((r) => r.body as Record<string, unknown>);
    expect(plain).toMatchObject({ model: 'Phi-4', max_tokens: 9 });
    expect(streamed).toMatchObject({ stream: true });
    expect(streamed).not.toHaveProperty('stream_options');
    expect([completion.max_tokens, completion.max_completion_tokens]).toEqual([11, undefined]);
    expect(embedding).toMatchObject({ input: ['a'], dimensions: 8, encoding_format: 'float' });
  });

  it('client_args.defaultQuery chooses another api-version', async () => {
    await amessages({ ...at(), client_args: { defaultQuery: { 'api-version': '2025-04-01' } }, model: 'm', max_tokens: 5, messages: chat });
    expect(fake.requests[0]!.query.get('api-version')).toBe('2025-04-01');
  });

  it('reads AZURE_API_KEY and AZURE_AI_CHAT_ENDPOINT; without an endpoint it says what to set', async () => {
    process.env.AZURE_API_KEY = 'env-az-key';
    process.env.AZURE_AI_CHAT_ENDPOINT = `${fake.baseURL}/`;
    await amessages({ provider: 'azure', model: 'm', max_tokens: 5, messages: chat });
    expect(fake.requests[0]!.headers['api-key']).toBe('env-az-key');
    expect(fake.requests[0]!.path).toBe('/v1/chat/completions');
    delete process.env.AZURE_AI_CHAT_ENDPOINT;
    // (another key: the functions reuse a client per provider, address and key)
    const error = await failure(amessages({ provider: 'azure', api_key: 'other-key', model: 'm', max_tokens: 5, messages: chat }));
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect(String(error)).toContain('AZURE_AI_CHAT_ENDPOINT');
  });

  it('refuses images and thinking before sending (any-llm: no image, no reasoning); maps Azure errors', async () => {
    const image = [{ role: 'user' as const, content: [{ type: 'image' as const, source: { type: 'url' as const, url: 'https://x/y.png' } }] }];
    expect(await failure(amessages({ ...at(), model: 'm', max_tokens: 5, messages: image }))).toMatchObject({ constructor: UnsupportedParameterError, parameter_name: 'image' });
    expect(await failure(amessages({ ...at(), model: 'm', max_tokens: 2048, messages: chat, thinking: { type: 'enabled', budget_tokens: 1024 } }))).toMatchObject({
      constructor: UnsupportedParameterError,
      parameter_name: 'thinking',
    });
    expect(fake.requests).toHaveLength(0);
    fake.script('POST /v1/chat/completions', { status: 404, json: { error: { code: 'DeploymentNotFound', message: 'The API deployment for this resource does not exist.', status: 404 } } });
    const missing = await failure(amessages({ ...at(), model: 'm', max_tokens: 5, messages: chat, unified_exceptions: true, max_retries: 0 }));
    expect(missing).toMatchObject({ constructor: ModelNotFoundError, provider_name: 'azure', code: 'DeploymentNotFound' });
  });
});

describe('vendor quirks', () => {
  const on = (provider: string) => ({ api_key: 'k', api_base: fake.baseURL, provider });
  const chat = [{ role: 'user' as const, content: 'x' }];
  const schema = { type: 'json_schema', schema: { type: 'object', properties: { n: { type: 'number' } } } };

  it.each(['inception', 'minimax', 'zai'])('%s has no structured output: output_format and response_format are refused before any request', async (provider) => {
    const messages = await failure(amessages({ ...on(provider), model: 'm', max_tokens: 5, messages: chat, output_format: schema }));
    expect(messages).toMatchObject({ constructor: UnsupportedParameterError, parameter_name: 'output_format', provider_name: provider });
    const completion = await failure(acompletion({ ...on(provider), model: 'm', messages: chat, response_format: { type: 'json_object' } }));
    expect(completion).toMatchObject({ constructor: UnsupportedParameterError, parameter_name: 'response_format' });
    expect(fake.requests).toHaveLength(0);
  });

  it("zai: its own finish reasons read as OpenAI's (context window → length, sensitive → content_filter)", async () => {
    const finishing = (reason: string) => chatCompletionBody('glm', 'partial', { choices: [{ index: 0, message: { role: 'assistant', content: 'partial' }, finish_reason: reason }] });
    fake.script('POST /v1/chat/completions', { json: finishing('model_context_window_exceeded') }, { json: finishing('sensitive') }, { sse: chatChunks('glm', ['a'], 'sensitive') });
    expect((await amessages({ ...on('zai'), model: 'glm', max_tokens: 5, messages: chat })).stop_reason).toBe('max_tokens');
    expect((await acompletion({ ...on('zai'), model: 'glm', messages: chat })).choices[0]!.finish_reason).toBe('content_filter');
    const events = await collect(amessages({ ...on('zai'), model: 'glm', max_tokens: 5, messages: chat, stream: true }));
    expect(events.find((e) => e.type === 'message_delta')).toMatchObject({ delta: { stop_reason: 'refusal' } });
  });

  it('llama: a tool property with oneOf and no type gets type string; the caller’s tools are left as they were', async () => {
    const tools = [
      {
        type: 'function' as const,
        function: { name: 'f', parameters: { type: 'object', properties: { either: { oneOf: [{ type: 'string' }, { type: 'number' }] }, n: { type: 'integer' } } } },
      },
    ];
    const before = structuredClone(tools);
    await acompletion({ ...on('llama'), model: 'Llama-4', messages: chat, tools });
    const sent = fake.requestsTo('POST /v1/chat/completions')[0]!.body as { tools: typeof tools };
    expect(sent.tools[0]!.function.parameters.properties).toEqual({ either: { oneOf: [{ type: 'string' }, { type: 'number' }], type: 'string' }, n: { type: 'integer' } });
    expect(tools).toEqual(before);
    // the same through messages
    await amessages({ ...on('llama'), model: 'Llama-4', max_tokens: 5, messages: chat, tools: [{ name: 'g', input_schema: { type: 'object', properties: { x: { oneOf: [{ type: 'string' }] } } } }] });
    const converted = fake.requestsTo('POST /v1/chat/completions')[1]!.body as { tools: typeof tools };
    expect(converted.tools[0]!.function.parameters.properties).toEqual({ x: { oneOf: [{ type: 'string' }], type: 'string' } });
  });

  it('requesty: reasoning goes as reasoning: {effort}, from thinking or reasoning_effort', async () => {
    await amessages({ ...on('requesty'), model: 'm', max_tokens: 30000, messages: chat, thinking: { type: 'enabled', budget_tokens: 20000 } });
    await acompletion({ ...on('requesty'), model: 'm', messages: chat, reasoning_effort: 'low' });
    await acompletion({ ...on('requesty'), model: 'm', messages: chat, reasoning_effort: 'none' });
    const bodies = fake.requestsTo('POST /v1/chat/completions').map((r) => r.body as Record<string, unknown>);
    expect(bodies.map((b) => [b.reasoning, b.reasoning_effort])).toEqual([
      [{ effort: 'high' }, undefined],
      [{ effort: 'low' }, undefined],
      [undefined, undefined],
    ]);
  });

  it.each(['minimax', 'portkey'])('%s: reasoning inside <think> tags becomes thinking (messages) and reasoning_content (completion)', async (provider) => {
    const answer = chatCompletionBody('m', '<think>plan the answer</think>\n\nThe answer');
    fake.script('POST /v1/chat/completions', { json: structuredClone(answer) }, { json: structuredClone(answer) });
    const message = await amessages({ ...on(provider), model: 'm', max_tokens: 50, messages: chat });
    expect(message.content).toEqual([
      { type: 'thinking', thinking: 'plan the answer', signature: '' },
      { type: 'text', text: 'The answer', citations: null },
    ]);
    const completion = await acompletion({ ...on(provider), model: 'm', messages: chat });
    expect(completion.choices[0]!.message).toMatchObject({ content: 'The answer', reasoning_content: 'plan the answer' });
  });

  it('minimax: <think> tags split across streamed chunks; a last chunk with usage and no delta still ends the text', async () => {
    // the last piece ends with what could begin a tag: held back, then given when the stream finishes
    const chunks = chatChunks('m', ['<thi', 'nk>pl', 'an</th', 'ink>\n\nThe ans', 'wer <']);
    // MiniMax ends with a choice that has a finish reason and usage but no delta
    const last = chunks.length - 2;
    chunks[last] = { ...(chunks[last] as object), choices: [{ index: 0, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 6, total_tokens: 9 } };
    fake.script('POST /v1/chat/completions', { sse: chunks }, { sse: structuredClone(chunks) });
    const events = await collect(amessages({ ...on('minimax'), model: 'm', max_tokens: 50, messages: chat, stream: true }));
    const deltas = events.filter((e): e is Extract<MessagesStreamEvent, { type: 'content_block_delta' }> => e.type === 'content_block_delta');
    const text = (kind: string) => deltas.map((e) => (e.delta.type === kind ? ('text' in e.delta ? e.delta.text : (e.delta as { thinking: string }).thinking) : '')).join('');
    expect(text('thinking_delta')).toBe('plan');
    expect(text('text_delta')).toBe('The answer <');
    expect(events.filter((e) => e.type === 'content_block_start').map((e) => (e as { content_block: { type: string } }).content_block.type)).toEqual(['thinking', 'text']);
    expect(events.at(-1)!.type).toBe('message_stop');
    const completion = await collect(acompletion({ ...on('minimax'), model: 'm', messages: chat, stream: true }));
    expect(completion.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('The answer <');
    expect(completion.map((c) => (c.choices[0]?.delta as { reasoning_content?: string } | undefined)?.reasoning_content ?? '').join('')).toBe('plan');
  });

  it.each(['edenai', 'requesty'])('%s: listed models lacking object, created or owned_by get them', async (provider) => {
    fake.script('GET /v1/models', { json: { object: 'list', data: [{ id: 'a/one' }, { id: 'two', owned_by: 'x', created: 5, context_length: 8192 }] } });
    expect(await alist_models(on(provider))).toEqual([
      { id: 'a/one', object: 'model', created: 0, owned_by: provider },
      { id: 'two', object: 'model', created: 5, owned_by: 'x', context_length: 8192 },
    ]);
  });

  it('github: models come from the catalog beside the inference address, with the GitHub media type', async () => {
    fake.script('GET /catalog/models', { json: [{ id: 'openai/gpt-4.1', publisher: 'OpenAI', name: 'GPT-4.1' }, { name: 'no id' }, 'junk'] });
    const models = await alist_models({ api_key: 'ghp_x', api_base: `${fake.origin}/inference`, provider: 'github' });
    expect(models).toEqual([{ id: 'openai/gpt-4.1', object: 'model', created: 0, owned_by: 'OpenAI' }]);
    const [request] = fake.requestsTo('GET /catalog/models');
    expect([request!.headers.authorization, request!.headers.accept]).toEqual(['Bearer ghp_x', 'application/vnd.github+json']);
    fake.script('GET /catalog/models', { status: 401, json: { message: 'Bad credentials' } });
    const denied = await failure(alist_models({ api_key: 'ghp_x', api_base: `${fake.origin}/inference`, provider: 'github', unified_exceptions: true }));
    expect(denied).toMatchObject({ constructor: AuthenticationError, provider_name: 'github' });
  });

  it('databricks: the base comes from DATABRICKS_HOST (the workspace) plus /serving-endpoints; without it, a clear error', async () => {
    process.env.DATABRICKS_TOKEN = 'dapi-x';
    delete process.env.DATABRICKS_HOST;
    expect(() => Hub.create('databricks')).toThrow(/DATABRICKS_HOST/);
    const missing = await failure(amessages({ provider: 'databricks', model: 'm', max_tokens: 5, messages: chat }));
    expect(missing).toBeInstanceOf(InvalidRequestError);
    for (const host of [fake.origin, `${fake.origin}/`, `${fake.origin}/serving-endpoints`]) {
      process.env.DATABRICKS_HOST = host;
      fake.script('POST /serving-endpoints/chat/completions', { json: chatCompletionBody('databricks-meta-llama') });
      const message = await amessages({ provider: 'databricks', model: 'databricks-meta-llama', max_tokens: 5, messages: chat });
      expect(message.content[0]).toMatchObject({ text: 'Hello from the fake server' });
    }
    expect(fake.requestsTo('POST /serving-endpoints/chat/completions').map((r) => r.headers.authorization)).toEqual(Array(3).fill('Bearer dapi-x'));
  });

  it('otari: OTARI_API_BASE names a self-hosted gateway; a key is optional there; the limit goes as max_tokens', async () => {
    delete process.env.OTARI_API_KEY;
    process.env.OTARI_API_BASE = fake.origin;
    await amessages({ provider: 'otari', model: 'openai:gpt-4o', max_tokens: 9, messages: chat });
    await acompletion({ provider: 'otari', model: 'openai:gpt-4o', messages: chat, max_completion_tokens: 11 });
    const bodies = fake.requestsTo('POST /v1/chat/completions').map((r) => r.body as Record<string, unknown>);
    expect(bodies.map((b) => [b.model, b.max_tokens, b.max_completion_tokens])).toEqual([
      ['openai:gpt-4o', 9, undefined],
      ['openai:gpt-4o', 11, undefined],
    ]);
  });

  it('otari: batches through its own API — requests in the body, the upstream provider named on every later call', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'hub-otari-batch-'));
    const file = path.join(dir, 'input.jsonl');
    const lines = ['a', 'b'].map((id) => ({ custom_id: id, method: 'POST', url: '/v1/chat/completions', body: { model: 'openai:gpt-4o', messages: [{ role: 'user', content: id }] } }));
    writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const batchOf = (status: string) => ({ id: 'batch_9', object: 'batch', endpoint: '/v1/chat/completions', status, completion_window: '24h', created_at: 1, input_file_id: 'f', provider: 'openai' });
    let status = 'in_progress';
    fake.handle('POST /v1/batches', () => ({ json: batchOf('validating') }));
    fake.handle('GET /v1/batches/batch_9', () => ({ json: batchOf(status) }));
    fake.handle('POST /v1/batches/batch_9/cancel', () => ({ json: batchOf('cancelling') }));
    fake.handle('GET /v1/batches', () => ({ json: { data: [batchOf('completed')] } }));
    fake.handle('GET /v1/batches/batch_9/results', () => ({
      json: { results: [{ custom_id: 'a', result: chatCompletionBody('gpt-4o', 'answer a'), error: null }, { custom_id: 'b', result: null, error: { code: 'rate_limited', message: 'later' } }] },
    }));
    const otari = { provider: 'otari', api_key: 'tk', api_base: fake.baseURL };

    const created = await acreate_batch({ ...otari, input_file_path: file, endpoint: '/v1/chat/completions', metadata: { job: 'nightly' } });
    expect(created).toEqual(batchOf('validating'));
    expect((created as typeof created & { provider: string }).provider).toBe('openai');
    expect(fake.requestsTo('POST /v1/batches')[0]!.body).toEqual({
      model: 'openai:gpt-4o',
      requests: lines.map((l) => ({ custom_id: l.custom_id, body: l.body })),
      completion_window: '24h',
      metadata: { job: 'nightly' },
    });
    expect(fake.requestsTo('POST /v1/files')).toHaveLength(0);

    const withoutUpstream = await failure(aretrieve_batch({ ...otari, batch_id: 'batch_9' }));
    expect(withoutUpstream).toMatchObject({ constructor: InvalidRequestError, param: 'provider_name' });
    expect((await aretrieve_batch({ ...otari, batch_id: 'batch_9', provider_name: 'openai' })).status).toBe('in_progress');
    const early = await failure(aretrieve_batch_results({ ...otari, batch_id: 'batch_9', provider_name: 'openai' }));
    expect(early).toMatchObject({ constructor: BatchNotCompleteError, batch_status: 'in_progress' });
    status = 'completed';
    expect(await aretrieve_batch_results({ ...otari, batch_id: 'batch_9', provider_name: 'openai' })).toEqual([
      { custom_id: 'a', result: chatCompletionBody('gpt-4o', 'answer a'), error: null },
      { custom_id: 'b', result: null, error: { code: 'rate_limited', message: 'later' } },
    ]);
    fake.script('GET /v1/batches/batch_9/results', { status: 409, json: { detail: 'not yet complete' } });
    expect(await failure(aretrieve_batch_results({ ...otari, batch_id: 'batch_9', provider_name: 'openai' }))).toBeInstanceOf(BatchNotCompleteError);
    expect((await acancel_batch({ ...otari, batch_id: 'batch_9', provider_name: 'openai' })).status).toBe('cancelling');
    expect((await alist_batches({ ...otari, provider_name: 'openai', limit: 2 })).map((b) => [b.id, b.status])).toEqual([['batch_9', 'completed']]);
    const later = fake.requests.filter((r) => r.path !== '/v1/batches' || r.method === 'GET');
    expect(later.map((r) => `${r.method} ${r.path}?${r.query.toString()}`)).toEqual([
      'GET /v1/batches/batch_9?provider=openai',
      'GET /v1/batches/batch_9?provider=openai',
      'GET /v1/batches/batch_9?provider=openai',
      'GET /v1/batches/batch_9/results?provider=openai',
      'GET /v1/batches/batch_9?provider=openai',
      'GET /v1/batches/batch_9/results?provider=openai',
      'POST /v1/batches/batch_9/cancel?provider=openai',
      'GET /v1/batches?provider=openai&limit=2',
    ]);
    for (const request of fake.requests) expect(request.headers.authorization).toBe('Bearer tk');

    const embeddings = await failure(acreate_batch({ ...otari, input_file_path: file, endpoint: '/v1/embeddings' }));
    expect(embeddings).toMatchObject({ constructor: UnsupportedParameterError, parameter_name: 'endpoint' });
    expect(fake.requestsTo('POST /v1/batches')).toHaveLength(1);
  });
});

describe('completion, responses, embeddings, models', () => {
  it('completion passes the OpenAI request through and returns the ChatCompletion', async () => {
    const chat = await acompletion({ ...opts, model: 'groq:llama', messages: [{ role: 'user', content: 'hi' }], n: 1, logit_bias: { 5: 1 } });
    expect(chat).toMatchObject({ object: 'chat.completion', choices: [{ message: { content: 'Hello from the fake server' } }] });
    expect(fake.requestsTo('POST /v1/chat/completions')[0]!.body).toEqual({ model: 'llama', messages: [{ role: 'user', content: 'hi' }], n: 1, logit_bias: { 5: 1 }, stream: false });
    const chunks = await collect(acompletion({ ...opts, model: 'groq:llama', messages: [{ role: 'user', content: 'hi' }], stream: true }));
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Hello from the fake');
  });

  it('responses where offered; elsewhere UnsupportedParameterError', async () => {
    const response = await aresponses({ ...opts, model: 'openai:gpt-test', input: 'hi' });
    expect(response.output_text).toBe('Hello from the fake server');
    expect(fake.requestsTo('POST /v1/responses')[0]!.body).toMatchObject({ model: 'gpt-test', input: 'hi' });
    expect(await failure(aresponses({ ...opts, model: 'deepseek:x', input: 'hi' }))).toBeInstanceOf(UnsupportedParameterError);
    const events = await collect(aresponses({ ...opts, model: 'openai:gpt-test', input: 'hi', stream: true }));
    expect(events.map((e) => e.type)).toEqual(['response.created', 'response.output_text.delta', 'response.output_text.delta', 'response.completed']);
    expect(fake.requestsTo('POST /v1/responses').at(-1)!.body).toMatchObject({ stream: true });
  });

  it('embedding returns CreateEmbeddingResponse for a string or a list', async () => {
    const one = await aembedding({ ...opts, model: 'openai:fake-embedder', inputs: 'abc' });
    expect(one.data).toHaveLength(1);
    expect(one.data[0]!.embedding).toEqual(Array.from(new Float32Array(fakeEmbedding('abc'))));
    const many = await aembedding({ ...opts, provider: 'openai', model: 'fake-embedder', inputs: ['a', 'bb'], dimensions: 4 });
    expect(many.data.map((d) => d.index)).toEqual([0, 1]);
    expect(many).toMatchObject({ model: 'fake-embedder', usage: { prompt_tokens: 6, total_tokens: 6 } });
    expect(fake.requestsTo('POST /v1/embeddings')[1]!.body).toMatchObject({ input: ['a', 'bb'], dimensions: 4 });
    expect(await failure(aembedding({ ...opts, model: 'deepseek:e', inputs: 'x' }))).toBeInstanceOf(UnsupportedParameterError);
    expect(await failure(aembedding({ ...opts, model: 'openai:e', inputs: [1] as never }))).toBeInstanceOf(InvalidRequestError);
  });

  it('list_models returns Model objects; a provider without listing says so', async () => {
    const models = await alist_models({ ...opts, provider: 'openai' });
    expect(models.map((m) => m.id)).toEqual(FAKE_MODEL_IDS);
    expect(await failure(alist_models({ ...opts, provider: 'perplexity' }))).toBeInstanceOf(UnsupportedParameterError);
    expect(await failure(alist_models({ ...opts } as never))).toBeInstanceOf(InvalidRequestError);
  });
});

describe('batches (OpenAI)', () => {
  it('upload, create, poll, results when complete, cancel, list with paging; one experimental warning', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    const dir = mkdtempSync(path.join(tmpdir(), 'hub-batch-'));
    const file = path.join(dir, 'input.jsonl');
    const lines = [
      { custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: { model: 'gpt-test', messages: [{ role: 'user', content: 'one' }] } },
      { custom_id: 'b', method: 'POST', url: '/v1/chat/completions', body: { model: 'gpt-test', messages: [], fail: true } },
    ];
    writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    try {
      const batch = await acreate_batch({ ...opts, provider: 'openai', input_file_path: file, endpoint: '/v1/chat/completions', metadata: { job: 'test' } });
      expect(batch).toMatchObject({ status: 'validating', completion_window: '24h', endpoint: '/v1/chat/completions', metadata: { job: 'test' } });
      const upload = fake.requestsTo('POST /v1/files')[0]!;
      expect(String(upload.headers['content-type'])).toMatch(/^multipart\/form-data/);
      expect(fake.files.get(batch.input_file_id)).toMatchObject({ purpose: 'batch', content: lines.map((l) => JSON.stringify(l)).join('\n') + '\n' });

      expect((await aretrieve_batch({ ...opts, provider: 'openai', batch_id: batch.id })).status).toBe('validating');
      const early = await failure(aretrieve_batch_results({ ...opts, provider: 'openai', batch_id: batch.id }));
      expect(early).toBeInstanceOf(BatchNotCompleteError);
      expect((early as BatchNotCompleteError).batch_status).toBe('validating');

      fake.completeBatch(batch.id);
      const results = await aretrieve_batch_results({ ...opts, provider: 'openai', batch_id: batch.id });
      expect(results).toEqual([
        { custom_id: 'a', result: expect.objectContaining({ object: 'chat.completion', choices: [expect.objectContaining({ message: expect.objectContaining({ content: 'answer a' }) })] }), error: null },
        { custom_id: 'b', result: null, error: { code: 'invalid_request', message: 'line failed' } },
      ]);

      const second = await acreate_batch({ ...opts, provider: 'openai', input_file_path: file, endpoint: '/v1/chat/completions', completion_window: '24h' });
      const cancelled = await acancel_batch({ ...opts, provider: 'openai', batch_id: second.id });
      expect(cancelled).toMatchObject({ id: second.id, status: 'cancelled' });
      const third = await acreate_batch({ ...opts, provider: 'openai', input_file_path: file, endpoint: '/v1/chat/completions' });

      const page1 = await alist_batches({ ...opts, provider: 'openai', limit: 2 });
      expect(page1.map((b) => b.id)).toEqual([third.id, second.id]);
      const page2 = await alist_batches({ ...opts, provider: 'openai', limit: 2, after: page1.at(-1)!.id });
      expect(page2.map((b) => b.id)).toEqual([batch.id]);
      expect(fake.requestsTo('GET /v1/batches').map((r) => r.query.toString())).toEqual(['limit=2', `after=${second.id}&limit=2`]);

      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => (w as Error & { code?: string }).code === 'HUB_EXPERIMENTAL_BATCH').length).toBeLessThanOrEqual(1);
      expect(await failure(acreate_batch({ ...opts, provider: 'deepseek', input_file_path: file, endpoint: '/v1/chat/completions' }))).toBeInstanceOf(UnsupportedParameterError);
      const missing = await failure(acreate_batch({ ...opts, provider: 'openai', input_file_path: path.join(dir, 'nope.jsonl'), endpoint: '/v1/chat/completions' }));
      expect(missing).toBeInstanceOf(InvalidRequestError);
      expect((missing as InvalidRequestError).param).toBe('input_file_path');
      const unknown = await failure(aretrieve_batch({ ...opts, provider: 'openai', batch_id: 'batch-nope', unified_exceptions: true }));
      expect(unknown).toBeInstanceOf(ModelNotFoundError); // a 404, per the spec's table
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('batches that end before every line ran (OpenAI expired, cancelled)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'hub-batch-partial-'));
  const file = path.join(dir, 'input.jsonl');
  const line = (id: string, extra: Record<string, unknown> = {}) => ({
    custom_id: id,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: 'gpt-test', messages: [{ role: 'user', content: id }], ...extra },
  });
  // a answered, b failed on its own, c and d never ran
  writeFileSync(file, [line('a'), line('b', { fail: true }), line('c'), line('d')].map((l) => JSON.stringify(l)).join('\n') + '\n');
  const answered = (id: string) => ({
    custom_id: id,
    result: expect.objectContaining({ object: 'chat.completion', choices: [expect.objectContaining({ message: expect.objectContaining({ content: `answer ${id}` }) })] }),
    error: null,
  });
  const failedLine = { custom_id: 'b', result: null, error: { code: 'invalid_request', message: 'line failed' } };
  const byId = (items: { custom_id: string }[]) => [...items].sort((x, y) => x.custom_id.localeCompare(y.custom_id));
  const create = () => acreate_batch({ ...opts, provider: 'openai', input_file_path: file, endpoint: '/v1/chat/completions' });
  const results = (batch_id: string) => aretrieve_batch_results({ ...opts, provider: 'openai', batch_id });

  it('an expired batch gives the results that exist; the lines that never ran come as batch_expired items', async () => {
    const batch = await create();
    fake.endBatchEarly(batch.id, 'expired', 2);
    const items = await results(batch.id);
    expect(byId(items)).toEqual([
      answered('a'),
      failedLine,
      { custom_id: 'c', result: null, error: { code: 'batch_expired', message: 'This request could not be executed before the completion window expired.' } },
      { custom_id: 'd', result: null, error: { code: 'batch_expired', message: 'This request could not be executed before the completion window expired.' } },
    ]);
    // Every line is in the files: the input file is not downloaded.
    expect(fake.requestsTo(`GET /v1/files/${batch.input_file_id}/content`)).toHaveLength(0);
  });

  it('lines of an expired batch that no file mentions are reported too, found in the input file', async () => {
    const batch = await create();
    fake.endBatchEarly(batch.id, 'expired', 2, { unreported: true });
    const items = await results(batch.id);
    expect(items.slice(0, 2)).toEqual([answered('a'), failedLine]);
    expect(items.slice(2)).toEqual(['c', 'd'].map((custom_id) => ({ custom_id, result: null, error: { code: 'batch_expired', message: expect.stringContaining('expired') } })));
    expect(fake.requestsTo(`GET /v1/files/${batch.input_file_id}/content`)).toHaveLength(1);
  });

  it('a batch that expired before any line ran (no output file) reports every line', async () => {
    const batch = await create();
    fake.endBatchEarly(batch.id, 'expired', 0, { unreported: true });
    expect(batch.output_file_id).toBeNull();
    const items = await results(batch.id);
    expect(items.map((item) => [item.custom_id, item.result, item.error?.code])).toEqual(['a', 'b', 'c', 'd'].map((id) => [id, null, 'batch_expired']));
  });

  it('a cancelled batch gives its answers too; the rest are batch_cancelled', async () => {
    const batch = await create();
    fake.endBatchEarly(batch.id, 'cancelled', 1, { unreported: true });
    const items = await results(batch.id);
    expect(items[0]).toEqual(answered('a'));
    expect(items.slice(1).map((item) => [item.custom_id, item.result, item.error?.code])).toEqual(['b', 'c', 'd'].map((id) => [id, null, 'batch_cancelled']));
  });

  it('a batch still running (or cancelling) still raises BatchNotCompleteError', async () => {
    const batch = await create();
    fake.batches.get(batch.id)!.status = 'cancelling';
    const early = await failure(results(batch.id));
    expect(early).toBeInstanceOf(BatchNotCompleteError);
    expect((early as BatchNotCompleteError).batch_status).toBe('cancelling');
  });
});

describe('errors, retries, timeouts, abort', () => {
  const statusCases: [number, string, typeof HubError][] = [
    [401, 'Incorrect API key provided', AuthenticationError],
    [403, 'Country not supported', AuthenticationError],
    [402, 'Payment required', InsufficientFundsError],
    [422, 'Content blocked by the safety system', ContentFilterError],
    [409, 'Batch is already being cancelled', InvalidRequestError],
    [404, 'The model `x` does not exist', ModelNotFoundError],
    [429, 'Rate limit reached', RateLimitError],
    [502, 'bad gateway', UpstreamProviderError],
    [504, 'upstream timed out', GatewayTimeoutError],
    [500, 'content policy', ProviderError],
    [400, "This model's maximum context length is 128000 tokens", ContextLengthExceededError],
    [400, 'Unrecognized request argument', InvalidRequestError],
    // the context errors of xAI, llama.cpp and vLLM's newer text
    [400, "This model's maximum prompt length is 131072 but the request contains 150000 tokens.", ContextLengthExceededError],
    [400, 'the request exceeds the available context size, try increasing it', ContextLengthExceededError],
    [400, 'The decoder prompt (length 40000) is longer than the maximum model length of 32768.', ContextLengthExceededError],
  ];

  it.each(statusCases)('unified on: %i → %o, with status, code and param', async (status, message, type) => {
    fake.script('POST /v1/chat/completions', { status, json: errorBody(message, 'invalid_request_error', 'some_code', 'messages') });
    const error = await failure(amessages({ ...opts, ...ask, unified_exceptions: true, max_retries: 0 }));
    expect(error).toBeInstanceOf(type);
    const hub = error as HubError;
    expect(hub.message).toBe(`[openai] ${message}`);
    expect([hub.status_code, hub.code, hub.param, hub.error_type]).toEqual([status, 'some_code', 'messages', 'invalid_request_error']);
    expect(hub.original_exception).toBeInstanceOf(OpenAI.APIError);
  });

  it('unified off (default): the SDK error comes through; HUB_UNIFIED_EXCEPTIONS=1 turns conversion on', async () => {
    delete process.env.HUB_UNIFIED_EXCEPTIONS;
    fake.script('POST /v1/chat/completions', { status: 404, json: errorBody('no model') }, { status: 404, json: errorBody('no model') });
    const raw = await failure(amessages({ ...opts, ...ask }));
    expect(raw).toBeInstanceOf(OpenAI.NotFoundError);
    expect(raw).not.toBeInstanceOf(HubError);
    process.env.HUB_UNIFIED_EXCEPTIONS = '1';
    expect(await failure(amessages({ ...opts, ...ask }))).toBeInstanceOf(ModelNotFoundError);
  });

  it('a Hub instance can turn unified exceptions on for itself', async () => {
    delete process.env.HUB_UNIFIED_EXCEPTIONS;
    fake.script('POST /v1/chat/completions', { status: 401, json: errorBody('bad key') });
    const hub = Hub.create('openai', { ...opts, unified_exceptions: true });
    expect(await failure(hub.amessages({ model: 'gpt', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }))).toBeInstanceOf(AuthenticationError);
  });

  it('a key echoed by the provider never appears in the error message', async () => {
    fake.script('POST /v1/chat/completions', { status: 401, json: errorBody(`Incorrect API key provided: ${KEY}`) });
    const error = (await failure(amessages({ ...opts, ...ask, unified_exceptions: true }))) as HubError;
    expect(error).toBeInstanceOf(AuthenticationError);
    expect(error.message).not.toContain(KEY);
    expect(String(error)).toContain('***');
    expect((error.original_exception as Error).message).not.toContain(KEY);
    fake.script('POST /v1/chat/completions', { status: 401, json: errorBody(`Incorrect API key provided: ${KEY}`) });
    const raw = (await failure(amessages({ ...opts, ...ask, unified_exceptions: false }))) as Error;
    expect(raw).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(raw.message).not.toContain(KEY);
    expect(raw.stack).not.toContain(KEY);
    expect(JSON.stringify((raw as InstanceType<typeof OpenAI.APIError>).error)).not.toContain(KEY);
  });

  it('retries 429 honouring Retry-After, and 503, then succeeds', async () => {
    fake.script(
      'POST /v1/chat/completions',
      { status: 429, headers: { 'retry-after': '0' }, json: errorBody('slow down') },
      { status: 503, headers: { 'retry-after': '0' }, json: errorBody('overloaded') },
    );
    const message = await amessages({ ...opts, ...ask });
    expect(message.content[0]).toMatchObject({ text: 'Hello from the fake server' });
    expect(fake.requestsTo('POST /v1/chat/completions')).toHaveLength(3);
  });

  it('waits the Retry-After of a 503 before retrying', async () => {
    fake.script('POST /v1/chat/completions', { status: 503, headers: { 'retry-after': '1' }, json: errorBody('busy') });
    const started = performance.now();
    await amessages({ ...opts, ...ask });
    expect(performance.now() - started).toBeGreaterThanOrEqual(950);
    expect(fake.requestsTo('POST /v1/chat/completions')).toHaveLength(2);
  });

  it('backs off exponentially without Retry-After', async () => {
    fake.script('POST /v1/chat/completions', { status: 502, json: errorBody('bad gateway') });
    const started = performance.now();
    await amessages({ ...opts, ...ask });
    expect(performance.now() - started).toBeGreaterThanOrEqual(300); // first delay: 500 ms × [0.75, 1]
    expect(fake.requestsTo('POST /v1/chat/completions')).toHaveLength(2);
  });

  it('stops after max_retries and raises RateLimitError with retry_after; no retry for 400 or a long Retry-After', async () => {
    fake.script(
      'POST /v1/chat/completions',
      { status: 429, headers: { 'retry-after': '0' }, json: errorBody('limit') },
      { status: 429, headers: { 'retry-after': '0' }, json: errorBody('limit') },
    );
    const error = await failure(amessages({ ...opts, ...ask, max_retries: 1, unified_exceptions: true }));
    expect(error).toBeInstanceOf(RateLimitError);
    expect((error as RateLimitError).retry_after).toBe(0);
    expect(fake.requestsTo('POST /v1/chat/completions')).toHaveLength(2);

    fake.reset();
    fake.script('POST /v1/chat/completions', { status: 400, json: errorBody('bad') });
    await failure(amessages({ ...opts, ...ask }));
    expect(fake.requestsTo('POST /v1/chat/completions')).toHaveLength(1);

    fake.reset();
    fake.script('POST /v1/chat/completions', { status: 429, headers: { 'retry-after': '3600' }, json: errorBody('come back later') });
    const long = await failure(amessages({ ...opts, ...ask, unified_exceptions: true }));
    expect((long as RateLimitError).retry_after).toBe(3600);
    expect(fake.requestsTo('POST /v1/chat/completions')).toHaveLength(1);
  });

  it('streams are retried before their first event', async () => {
    fake.script('POST /v1/chat/completions', { status: 503, headers: { 'retry-after': '0' }, json: errorBody('busy') });
    const events = await collect(amessages({ ...opts, ...ask, stream: true }));
    expect(events.at(-1)!.type).toBe('message_stop');
    expect(fake.requestsTo('POST /v1/chat/completions')).toHaveLength(2);
  });

  it('a per-call timeout raises ProviderError with no status and is not retried', async () => {
    fake.script('POST /v1/chat/completions', { delayMs: 3000, then: { json: chatCompletionBody('gpt-test') } });
    const error = await failure(amessages({ ...opts, ...ask, timeout: 200 }));
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).status_code).toBeNull();
    expect((error as ProviderError).error_type).toBe('timeout');
    expect(String(error)).toContain('timed out after 200 ms');
    expect(fake.requestsTo('POST /v1/chat/completions')).toHaveLength(1);
  });

  it('the timeout of a stream bounds each wait for an event, not the whole stream', async () => {
    fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-test', ['a', 'b', 'c']), delayMs: 250 });
    const events = await collect(amessages({ ...opts, ...ask, stream: true, timeout: 800 }));
    expect(events.at(-1)!.type).toBe('message_stop');
  });

  it('an AbortSignal cancels the call with its reason', async () => {
    fake.script('POST /v1/chat/completions', { delayMs: 3000, then: { json: chatCompletionBody('gpt-test') } });
    const controller = new AbortController();
    const reason = new Error('user gave up');
    setTimeout(() => controller.abort(reason), 100);
    expect(await failure(amessages({ ...opts, ...ask, signal: controller.signal }))).toBe(reason);
    const aborted = AbortSignal.abort(reason);
    expect(await failure(amessages({ ...opts, ...ask, signal: aborted }))).toBe(reason);
  });

  it('aborting during a backoff wait stops the retries', async () => {
    fake.script('POST /v1/chat/completions', { status: 503, json: errorBody('busy') });
    const controller = new AbortController();
    const reason = new Error('stop waiting');
    const pending = failure(amessages({ ...opts, ...ask, signal: controller.signal }));
    while (fake.requestsTo('POST /v1/chat/completions').length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort(reason);
    expect(await pending).toBe(reason);
    await new Promise((resolve) => setTimeout(resolve, 700)); // longer than the first backoff
    expect(fake.requestsTo('POST /v1/chat/completions')).toHaveLength(1);
  });

  it('a signal shared by many calls is left with no listener of theirs, and still aborts a stream mid-way', async () => {
    const controller = new AbortController();
    const { signal } = controller;
    fake.script('POST /v1/chat/completions', { json: chatCompletionBody('gpt-test') });
    for (let i = 0; i < 3; i++) await amessages({ ...opts, ...ask, signal });
    fake.script('POST /v1/chat/completions', { status: 400, json: errorBody('bad') });
    await failure(amessages({ ...opts, ...ask, signal }));
    const busy = { status: 503, headers: { 'retry-after': '0' }, json: errorBody('busy') };
    fake.script('POST /v1/chat/completions', busy, busy);
    await failure(amessages({ ...opts, ...ask, signal, max_retries: 1 }));
    fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-test', ['a', 'b']) });
    await collect(amessages({ ...opts, ...ask, stream: true, signal }));
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);

    fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-test', ['a', 'b', 'c']), delayMs: 300 });
    const reason = new Error('enough');
    const events: unknown[] = [];
    const consumed = (async () => {
      for await (const event of amessages({ ...opts, ...ask, stream: true, signal })) {
        events.push(event);
        if (events.length === 1) controller.abort(reason);
      }
    })();
    expect(await failure(consumed)).toBe(reason);
    expect(events).toHaveLength(1);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  it('connection failures → ProviderError (unified)', async () => {
    fake.script('POST /v1/chat/completions', { destroy: true });
    const error = await failure(amessages({ ...opts, ...ask, unified_exceptions: true }));
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).status_code).toBeNull();
  });
});

describe('the Hub class', () => {
  it('binds a provider and its options; get_provider_metadata; instance methods', async () => {
    const hub = Hub.create('openai', opts);
    expect(hub.get_provider_metadata()).toMatchObject({ name: 'openai', env_key: 'OPENAI_API_KEY', streaming: true, embedding: true, batch: true });
    const message = await hub.amessages({ model: 'gpt-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
    expect(message.content[0]).toMatchObject({ text: 'Hello from the fake server' });
    expect((await hub.alist_models()).map((m) => m.id)).toEqual(FAKE_MODEL_IDS);
    const chat = await hub.acompletion({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] });
    expect(chat.choices[0]!.message.content).toBe('Hello from the fake server');
    expect((await hub.aembedding({ model: 'e', inputs: ['q'] })).data).toHaveLength(1);
    const events = await collect(hub.amessages({ model: 'gpt-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }], stream: true }));
    expect(events[0]!.type).toBe('message_start');
    for (const request of fake.requests) expect(request.headers.authorization).toBe(`Bearer ${KEY}`);
  });

  it('a call on a Hub cannot change its api_key, api_base or client_args: InvalidRequestError, nothing sent', async () => {
    const hub = Hub.create('openai', opts);
    const ask = { model: 'gpt-test', max_tokens: 5, messages: [{ role: 'user' as const, content: 'x' }] };
    const attempts = [{ api_key: 'sk-other-key-42' }, { api_base: 'http://127.0.0.1:9/v1' }, { client_args: { defaultHeaders: { 'x-trace': 't1' } } }];
    for (const change of attempts) {
      const param = Object.keys(change)[0];
      for (const error of [
        await failure(hub.amessages({ ...ask, ...change })),
        await failure(collect(hub.amessages({ ...ask, ...change, stream: true }))),
        await failure(hub.acompletion({ model: 'gpt-test', messages: ask.messages, ...change })),
        await failure(hub.aembedding({ model: 'e', inputs: 'x', ...change })),
        await failure(hub.alist_models(change)),
      ]) {
        expect(error).toBeInstanceOf(InvalidRequestError);
        expect(error).toMatchObject({ param, provider_name: 'openai' });
      }
      expect(() => hub.messages({ ...ask, ...change })).toThrow(InvalidRequestError);
    }
    expect(fake.requests).toHaveLength(0);
    // the instance's own values may be repeated
    await hub.amessages({ ...ask, api_key: KEY, api_base: fake.baseURL });
    expect(fake.requestsTo('POST /v1/chat/completions')[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
  });
});
