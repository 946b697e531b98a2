// acompletion on a provider that implements only `messages` (Anthropic): the core converts the OpenAI chat request
// to Messages, and the Message (or its events) back to a ChatCompletion (or chunks). Uses the Anthropic fake.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Hub, UnsupportedParameterError, acompletion } from '../../src/hub/index.ts';
import { startAnthropicFake } from '../fakes/anthropic.ts';
import type { AnthropicFake } from '../fakes/anthropic.ts';
import { bodyOf } from '../fakes/vendor-server.ts';
import { collect } from './helpers.ts';

let fake: AnthropicFake;
let opts: { api_key: string; api_base: string };

beforeAll(async () => {
  fake = await startAnthropicFake();
  opts = { api_key: 'sk-ant-test', api_base: fake.server.url };
});
afterAll(() => fake.close());
beforeEach(() => fake.server.reset());

describe.skipIf(!Hub.get_supported_providers().includes('anthropic'))('completion through the Messages adapter', () => {
  it('converts the chat request on the wire and the Message back to a ChatCompletion', async () => {
    const chat = await acompletion({
      ...opts,
      model: 'anthropic:claude-sonnet-4-5',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hello there' },
      ],
      max_tokens: 40,
      stop: ['END'],
      temperature: 0.5,
    });
    expect(bodyOf(fake.server.requests[0]!)).toMatchObject({
      model: 'claude-sonnet-4-5',
      system: 'be brief',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hello there' }] }],
      max_tokens: 40,
      stop_sequences: ['END'],
      temperature: 0.5,
    });
    expect(chat).toMatchObject({
      object: 'chat.completion',
      model: 'claude-sonnet-4-5',
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'echo: hello there' } }],
      usage: { prompt_tokens: 14, prompt_tokens_details: { cached_tokens: 3 } },
    });
  });

  it('streams chunks converted from Messages events', async () => {
    const chunks = await collect(acompletion({ ...opts, model: 'anthropic:claude-sonnet-4-5', messages: [{ role: 'user', content: 'stream me' }], stream: true }));
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('echo: stream me');
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('stop');
  });

  it('a chat parameter Messages cannot honour is an UnsupportedParameterError, before any request', async () => {
    await expect(acompletion({ ...opts, model: 'anthropic:claude-sonnet-4-5', messages: [{ role: 'user', content: 'x' }], n: 3 })).rejects.toBeInstanceOf(
      UnsupportedParameterError,
    );
    expect(fake.server.requests).toHaveLength(0);
  });

  it('chat parameters sent at their OpenAI default values (as many clients do) are accepted: they ask for nothing', async () => {
    const chat = await acompletion({
      ...opts,
      model: 'anthropic:claude-sonnet-4-5',
      messages: [{ role: 'user', content: 'defaults' }],
      n: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      logprobs: false,
    });
    expect(chat.choices[0]!.message.content).toBe('echo: defaults');
    const body = bodyOf(fake.server.requests[0]!) as Record<string, unknown>;
    for (const field of ['n', 'presence_penalty', 'frequency_penalty', 'logprobs']) expect(body).not.toHaveProperty(field);
    // a value other than the default still asks for something Messages cannot do
    for (const field of [{ presence_penalty: 0.5 }, { frequency_penalty: -1 }, { logprobs: true }]) {
      await expect(acompletion({ ...opts, model: 'anthropic:claude-sonnet-4-5', messages: [{ role: 'user', content: 'x' }], ...field })).rejects.toBeInstanceOf(
        UnsupportedParameterError,
      );
    }
  });

  it('cache writes are counted in prompt_tokens and given apart as cache_creation_input_tokens (as LiteLLM does), streamed or not', async () => {
    const usage = { input_tokens: 10, output_tokens: 2, cache_read_input_tokens: 30, cache_creation_input_tokens: 50 };
    const message = { id: 'msg_c', type: 'message', role: 'assistant', model: 'claude-sonnet-4-5', content: [{ type: 'text', text: 'ok' }], stop_reason: 'end_turn', stop_sequence: null, usage };
    fake.server.enqueue({ json: message });
    const chat = await acompletion({ ...opts, model: 'anthropic:claude-sonnet-4-5', messages: [{ role: 'user', content: 'x' }] });
    const expected = { prompt_tokens: 90, completion_tokens: 2, total_tokens: 92, prompt_tokens_details: { cached_tokens: 30 }, cache_creation_input_tokens: 50 };
    expect(chat.usage).toEqual(expected);
    fake.server.enqueue({
      sse: [
        { event: 'message_start', data: { type: 'message_start', message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } } } },
        { event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 2 } } },
        { event: 'message_stop', data: { type: 'message_stop' } },
      ],
    });
    const chunks = await collect(acompletion({ ...opts, model: 'anthropic:claude-sonnet-4-5', messages: [{ role: 'user', content: 'x' }], stream: true }));
    expect(chunks.at(-1)!.usage).toEqual(expected);
  });

  it('a bound Hub offers completion on the Messages-only provider too', async () => {
    const hub = Hub.create('anthropic', opts);
    const chat = await hub.acompletion({ model: 'claude-haiku-4-5', messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.choices[0]!.message.content).toBe('echo: hi');
  });
});
