// A stream whose provider stalls after some events fails with the Hub's timeout error (ProviderError, error_type
// "timeout") once `timeout` passes without an event, and its connection to the provider is closed; a slow but
// steady stream that lasts longer than `timeout` in all is not cut. Every provider's streams go through the same
// core, checked here against the OpenAI-compatible fake and every native vendor fake, async and sync.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProviderError, acompletion, amessages, completion, messages } from '../../src/hub/index.ts';
import { fakeMessageEvents, startAnthropicFake, type AnthropicFake } from '../fakes/anthropic.ts';
import { fakeCohereEvents, startCohereFake } from '../fakes/cohere.ts';
import { fakeGeminiChunks, startGeminiFake } from '../fakes/gemini.ts';
import { fakeChatChunks, startMistralFake, type MistralFake } from '../fakes/mistral.ts';
import { fakeOllamaChunks, startOllamaFake } from '../fakes/ollama.ts';
import { FakeOpenAIServer, chatChunks } from '../fakes/openai-compatible.ts';
import { FakeOpenAIProcess } from '../fakes/openai-compatible-process.ts';
import type { Reply, VendorServer } from '../fakes/vendor-server.ts';
import { eventually } from './helpers.ts';

/** Generous against a loaded machine: a stall is detected after this, steady events come 4 times as often. */
const TIMEOUT_MS = 1_500;
const STEADY_DELAY_MS = 350;

const user = (text: string) => [{ role: 'user' as const, content: text }];

/** Drains a stream, keeping the events that arrived before it failed; fails the test if the stream ends cleanly. */
async function drainUntilFailure<T>(stream: AsyncIterable<T> | Iterable<T>): Promise<{ events: T[]; error: unknown }> {
  const events: T[] = [];
  try {
    if (Symbol.asyncIterator in stream) for await (const event of stream) events.push(event);
    else for (const event of stream) events.push(event);
  } catch (error) {
    return { events, error };
  }
  throw new Error(`the stream ended without an error after ${events.length} events`);
}

function expectStreamTimeout(error: unknown, provider: string): void {
  expect(error).toBeInstanceOf(ProviderError);
  const hub = error as ProviderError;
  expect(hub.error_type).toBe('timeout');
  expect(hub.status_code).toBeNull();
  expect(hub.provider_name).toBe(provider);
  expect(hub.raw_message).toBe(`Stream timed out after ${TIMEOUT_MS} ms without an event`);
}

describe('OpenAI-compatible streams', () => {
  let fake: FakeOpenAIServer;
  let opts: { api_key: string; api_base: string; timeout: number };
  beforeAll(async () => {
    fake = await FakeOpenAIServer.start();
    opts = { api_key: 'sk-idle', api_base: fake.baseURL, timeout: TIMEOUT_MS };
  });
  afterAll(() => fake.close());

  it('amessages: a stream that stalls after its first events raises the timeout error and closes the connection', async () => {
    const before = fake.abandonedStreams;
    fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-test', ['Hel', 'lo']).slice(0, 3), hold: true });
    const { events, error } = await drainUntilFailure(amessages({ ...opts, model: 'openai:gpt-test', max_tokens: 16, stream: true, messages: user('hi') }));
    expectStreamTimeout(error, 'openai');
    const text = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? [e.delta.text] : [])).join('');
    expect(events[0].type).toBe('message_start');
    expect(text).toBe('Hello');
    await eventually(() => fake.abandonedStreams === before + 1, 'the fake saw the held stream closed');
  });

  it('acompletion: the same for chunks, with unified exceptions off (the Hub raises its own timeouts in every case)', async () => {
    const before = fake.abandonedStreams;
    fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-test', ['a', 'b']).slice(0, 2), hold: true });
    const { events, error } = await drainUntilFailure(acompletion({ ...opts, provider: 'groq', model: 'gpt-test', stream: true, unified_exceptions: false, messages: user('hi') }));
    expectStreamTimeout(error, 'groq');
    expect(events).toHaveLength(2);
    await eventually(() => fake.abandonedStreams === before + 1, 'the fake saw the held stream closed');
  });

  it('a slow but steady stream that lasts longer than the timeout in all is not cut', async () => {
    const pieces = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
    fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-test', pieces), delayMs: STEADY_DELAY_MS });
    const started = Date.now();
    const chunks: unknown[] = [];
    for await (const chunk of acompletion({ ...opts, model: 'openai:gpt-test', stream: true, messages: user('hi') })) chunks.push(chunk);
    expect(Date.now() - started).toBeGreaterThan(TIMEOUT_MS);
    expect(chunks).toHaveLength(pieces.length + 3);
  });

  it('a consumer slower than the timeout between two events does not time the stream out', async () => {
    fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-test', ['a', 'b']) });
    const chunks: unknown[] = [];
    for await (const chunk of acompletion({ ...opts, model: 'openai:gpt-test', stream: true, messages: user('hi') })) {
      chunks.push(chunk);
      if (chunks.length === 2) await new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS + 500));
    }
    expect(chunks).toHaveLength(5);
  });
});

describe('native providers', () => {
  let anthropic: AnthropicFake;
  let mistral: MistralFake;
  let gemini: VendorServer;
  let cohere: VendorServer;
  let ollama: VendorServer;
  beforeAll(async () => {
    [anthropic, mistral, gemini, cohere, ollama] = await Promise.all([startAnthropicFake(), startMistralFake(), startGeminiFake(), startCohereFake(), startOllamaFake()]);
  });
  afterAll(() => Promise.all([anthropic.close(), mistral.close(), gemini.close(), cohere.close(), ollama.close()]));

  // Long enough for several events from every fake (they split the echoed text into pieces of 4 or 5 characters).
  const question = 'hello hub, this answer comes slowly but steadily';
  const body = (model: string) => ({ model, messages: user(question), stream: true });
  // Each vendor's own stream framing, held after `after` events (or slowed down): [provider, model, fake, reply].
  const cases = (stall: { holdAfter: number } | { delayMs: number }) =>
    [
      ['anthropic', 'claude-sonnet-4-6', anthropic.server, { sse: fakeMessageEvents(body('claude-sonnet-4-6')), ...stall }],
      ['gemini', 'gemini-2.5-flash', gemini, { sse: fakeGeminiChunks({ contents: [{ role: 'user', parts: [{ text: question }] }] }), ...stall }],
      ['mistral', 'mistral-small-latest', mistral.server, { sse: fakeChatChunks(body('mistral-small-latest')), ...stall }],
      ['cohere', 'command-a-03-2025', cohere, { sse: fakeCohereEvents(body('command-a-03-2025')), ...stall }],
      ['ollama', 'llama3.2', ollama, { ndjson: fakeOllamaChunks(body('llama3.2')), ...stall }],
    ] as [string, string, VendorServer, Reply][];

  describe.each([0, 1, 2, 3, 4])('provider #%i', (i) => {
    it('amessages: a stream stalled after its first events raises the timeout error and closes the connection', async () => {
      const [provider, model, server, reply] = cases({ holdAfter: 2 })[i];
      const before = server.abandonedStreams;
      server.enqueue(reply);
      const { events, error } = await drainUntilFailure(amessages({ provider, model, api_key: 'k', api_base: server.url, timeout: TIMEOUT_MS, max_tokens: 50, stream: true, messages: user(question) }));
      expectStreamTimeout(error, provider);
      expect(events[0].type).toBe('message_start');
      await eventually(() => server.abandonedStreams === before + 1, `the ${provider} fake saw the held stream closed`);
    });

    it('acompletion (on top of messages): the same', async () => {
      const [provider, model, server, reply] = cases({ holdAfter: 2 })[i];
      const before = server.abandonedStreams;
      server.enqueue(reply);
      const { error } = await drainUntilFailure(acompletion({ provider, model, api_key: 'k', api_base: server.url, timeout: TIMEOUT_MS, stream: true, messages: user(question) }));
      expectStreamTimeout(error, provider);
      await eventually(() => server.abandonedStreams === before + 1, `the ${provider} fake saw the held stream closed`);
    });

    it('a slow but steady stream longer than the timeout in all is not cut', async () => {
      const [provider, model, server, reply] = cases({ delayMs: STEADY_DELAY_MS })[i];
      const items = 'sse' in reply ? reply.sse.length : 'ndjson' in reply ? reply.ndjson.length : 0;
      expect(items * STEADY_DELAY_MS).toBeGreaterThan(TIMEOUT_MS);
      server.enqueue(reply);
      const events = [];
      for await (const event of amessages({ provider, model, api_key: 'k', api_base: server.url, timeout: TIMEOUT_MS, max_tokens: 50, stream: true, messages: user(question) })) events.push(event);
      expect(events.at(-1)!.type).toBe('message_stop');
    });
  });
});

describe('synchronous forms', () => {
  let fake: FakeOpenAIProcess;
  let opts: { api_key: string; api_base: string; timeout: number };
  beforeAll(async () => {
    fake = await FakeOpenAIProcess.start();
    opts = { api_key: 'sk-idle-sync', api_base: fake.baseURL, timeout: TIMEOUT_MS };
  });
  afterAll(() => fake.close());

  it('messages and completion streams that stall raise the timeout error and close the connection', async () => {
    const before = (await fake.stats()).abandonedStreams;
    await fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-test', ['Hel', 'lo']).slice(0, 3), hold: true }, { sse: chatChunks('gpt-test', ['x']).slice(0, 2), hold: true });
    const stalledMessages = await drainUntilFailure(messages({ ...opts, model: 'openai:gpt-test', max_tokens: 16, stream: true, messages: user('hi') }));
    expectStreamTimeout(stalledMessages.error, 'openai');
    expect(stalledMessages.events[0].type).toBe('message_start');
    const stalledCompletion = await drainUntilFailure(completion({ ...opts, model: 'openai:gpt-test', stream: true, messages: user('hi') }));
    expectStreamTimeout(stalledCompletion.error, 'openai');
    expect(stalledCompletion.events).toHaveLength(2);
    await eventually(async () => (await fake.stats()).abandonedStreams === before + 2, 'the fake saw both held streams closed');
  });

  it('a slow but steady stream is not cut', async () => {
    await fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-test', ['a', 'b', 'c', 'd', 'e']), delayMs: STEADY_DELAY_MS });
    const chunks = [...completion({ ...opts, model: 'openai:gpt-test', stream: true, messages: user('hi') })];
    expect(chunks).toHaveLength(8);
  });
});
