// Edge cases that real OpenAI-compatible servers produce, through the public API and the real `openai` SDK against
// the fake server: tool calls under finish_reason "stop", parallel tool calls streamed under one index or interleaved
// by index, streamed refusals, cached tokens in a stream's usage, embeddings from servers that ignore encoding_format.

import type Anthropic from '@anthropic-ai/sdk';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ProviderError, acompletion, aembedding, amessages } from '../../src/hub/index.ts';
import type { MessagesStreamEvent } from '../../src/hub/index.ts';
import { FakeOpenAIServer, chatCompletionBody } from '../fakes/openai-compatible.ts';
import { collect, weatherTool } from './helpers.ts';

let fake: FakeOpenAIServer;
let opts: { api_key: string; api_base: string };
const ask = { model: 'vllm:m', max_tokens: 64, tools: [weatherTool], messages: [{ role: 'user' as const, content: 'weather?' }] };

beforeAll(async () => {
  fake = await FakeOpenAIServer.start();
  opts = { api_key: 'k-test-0123', api_base: fake.baseURL };
});
afterEach(() => fake.reset());
afterAll(() => fake.close());

const base = { id: 'chatcmpl-edge', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'm' };
const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] });
const usageChunk = (usage: Record<string, unknown>) => ({ ...base, choices: [], usage });

/** The blocks a stream builds, rebuilt from its events (tool inputs parsed from their JSON deltas). */
function rebuild(events: MessagesStreamEvent[]): { blocks: Record<string, unknown>[]; delta: Extract<MessagesStreamEvent, { type: 'message_delta' }> } {
  const blocks: Record<string, unknown>[] = [];
  const json: string[] = [];
  let delta: Extract<MessagesStreamEvent, { type: 'message_delta' }> | undefined;
  // Blocks follow each other as in Anthropic's own streams: one open at a time, its deltas between its start and stop.
  let open: number | null = null;
  for (const event of events) {
    if (event.type === 'content_block_start') {
      expect(open).toBeNull();
      expect(event.index).toBe(blocks.length);
      open = event.index;
      blocks.push({ ...event.content_block });
      json.push('');
    } else if (event.type === 'content_block_stop') {
      expect(event.index).toBe(open);
      open = null;
    } else if (event.type === 'content_block_delta') {
      expect(event.index).toBe(open);
      const block = blocks[event.index]!;
      if (event.delta.type === 'text_delta') block.text = `${block.text as string}${event.delta.text}`;
      if (event.delta.type === 'input_json_delta') json[event.index] += event.delta.partial_json;
    } else if (event.type === 'message_delta') delta = event;
  }
  blocks.forEach((block, index) => {
    if (block.type === 'tool_use') block.input = json[index] === '' ? {} : JSON.parse(json[index]!);
  });
  expect(delta).toBeDefined();
  return { blocks, delta: delta! };
}

describe('tool calls', () => {
  const call = { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } };

  it('tool calls answered with finish_reason "stop" still end with stop_reason tool_use', async () => {
    fake.script('POST /v1/chat/completions', {
      json: { ...chatCompletionBody('m'), choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [call] }, finish_reason: 'stop', logprobs: null }] },
    });
    const message = await amessages({ ...opts, ...ask });
    expect(message.content).toMatchObject([{ type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Paris' } }]);
    expect(message.stop_reason).toBe('tool_use');
  });

  it('streamed tool calls with finish_reason "stop" end with stop_reason tool_use', async () => {
    fake.script('POST /v1/chat/completions', {
      sse: [chunk({ role: 'assistant', tool_calls: [{ index: 0, ...call }] }), chunk({}, 'stop'), usageChunk({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 })],
    });
    const { blocks, delta } = rebuild(await collect(amessages({ ...opts, ...ask, stream: true })));
    expect(blocks).toMatchObject([{ type: 'tool_use', id: 'call_1', input: { city: 'Paris' } }]);
    expect(delta.delta.stop_reason).toBe('tool_use');
  });

  it('parallel tool calls streamed under one index (vLLM, SGLang…) stay separate calls', async () => {
    fake.script('POST /v1/chat/completions', {
      sse: [
        chunk({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'weather', arguments: '' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
        chunk({ tool_calls: [{ index: 0, id: 'call_b', type: 'function', function: { name: 'weather', arguments: '{"city":"Rome"}' } }] }),
        chunk({}, 'tool_calls'),
      ],
    });
    const { blocks, delta } = rebuild(await collect(amessages({ ...opts, ...ask, stream: true })));
    expect(blocks).toMatchObject([
      { type: 'tool_use', id: 'call_a', name: 'weather', input: { city: 'Paris' } },
      { type: 'tool_use', id: 'call_b', name: 'weather', input: { city: 'Rome' } },
    ]);
    expect(delta.delta.stop_reason).toBe('tool_use');
  });

  /** A tool call fragment of a chunk (OpenAI sends id, type and name on a call's first fragment only). */
  const fragment = (index: number, args: string, first?: { id: string; name: string }) => ({
    index,
    ...(first ? { id: first.id, type: 'function' } : {}),
    function: { ...(first ? { name: first.name } : {}), arguments: args },
  });

  it('fragments of parallel calls that alternate by index assemble into each call', async () => {
    fake.script('POST /v1/chat/completions', {
      sse: [
        chunk({ role: 'assistant', tool_calls: [fragment(0, '', { id: 'call_a', name: 'weather' })] }),
        chunk({ tool_calls: [fragment(1, '', { id: 'call_b', name: 'clock' })] }),
        chunk({ tool_calls: [fragment(0, '{"city":')] }),
        chunk({ tool_calls: [fragment(1, '{"zone":')] }),
        chunk({ tool_calls: [fragment(0, '"Paris"}')] }),
        chunk({ tool_calls: [fragment(1, '"CET"}')] }),
        chunk({}, 'tool_calls'),
      ],
    });
    const { blocks, delta } = rebuild(await collect(amessages({ ...opts, ...ask, stream: true })));
    expect(blocks).toEqual([
      { type: 'tool_use', id: 'call_a', name: 'weather', input: { city: 'Paris' }, caller: { type: 'direct' } },
      { type: 'tool_use', id: 'call_b', name: 'clock', input: { zone: 'CET' }, caller: { type: 'direct' } },
    ]);
    expect(delta.delta.stop_reason).toBe('tool_use');
  });

  it('three calls whose fragments interleave in one chunk and across chunks, the first finishing early', async () => {
    fake.script('POST /v1/chat/completions', {
      sse: [
        chunk({ role: 'assistant', tool_calls: [fragment(0, '{"city":"Oslo"', { id: 'call_a', name: 'weather' }), fragment(1, '{"ci', { id: 'call_b', name: 'weather' })] }),
        chunk({ tool_calls: [fragment(2, '{"zone"', { id: 'call_c', name: 'clock' }), fragment(0, '}')] }),
        chunk({ tool_calls: [fragment(1, 'ty":"Li'), fragment(2, ':"UTC"}')] }),
        chunk({ tool_calls: [fragment(1, 'ma"}')] }),
        chunk({}, 'tool_calls'),
        usageChunk({ prompt_tokens: 5, completion_tokens: 9, total_tokens: 14 }),
      ],
    });
    const { blocks } = rebuild(await collect(amessages({ ...opts, ...ask, stream: true })));
    const byId = Object.fromEntries(blocks.map((block) => [block.id, block]));
    expect(blocks).toHaveLength(3);
    expect(byId).toEqual({
      call_a: { type: 'tool_use', id: 'call_a', name: 'weather', input: { city: 'Oslo' }, caller: { type: 'direct' } },
      call_b: { type: 'tool_use', id: 'call_b', name: 'weather', input: { city: 'Lima' }, caller: { type: 'direct' } },
      call_c: { type: 'tool_use', id: 'call_c', name: 'clock', input: { zone: 'UTC' }, caller: { type: 'direct' } },
    });
  });

  it('calls streamed one after the other are still streamed as they come (each block opens with its first fragment)', async () => {
    fake.script('POST /v1/chat/completions', {
      sse: [
        chunk({ role: 'assistant', tool_calls: [fragment(0, '{"city":', { id: 'call_a', name: 'weather' })] }),
        chunk({ tool_calls: [fragment(0, '"Paris"}')] }),
        chunk({ tool_calls: [fragment(1, '{"city":"Rome"}', { id: 'call_b', name: 'weather' })] }),
        chunk({}, 'tool_calls'),
      ],
    });
    const events = await collect(amessages({ ...opts, ...ask, stream: true }));
    const json = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta' ? [[e.index, e.delta.partial_json]] : []));
    expect(json).toEqual([[0, '{"city":'], [0, '"Paris"}'], [1, '{"city":"Rome"}']]);
  });

  it('arguments for a call whose block has already closed are a ProviderError, not a call rebuilt from a fragment', async () => {
    fake.script('POST /v1/chat/completions', {
      sse: [
        chunk({ role: 'assistant', tool_calls: [fragment(0, '{"city":"Oslo"}', { id: 'call_a', name: 'weather' })] }),
        chunk({ tool_calls: [fragment(1, '{"city":"Lima"}', { id: 'call_b', name: 'weather' })] }),
        chunk({ tool_calls: [fragment(0, ',"unit":"C"}')] }),
        chunk({}, 'tool_calls'),
      ],
    });
    const seen: MessagesStreamEvent[] = [];
    let failure: unknown;
    try {
      for await (const event of amessages({ ...opts, ...ask, stream: true })) seen.push(event);
    } catch (error) {
      failure = error;
    }
    expect(failure).toBeInstanceOf(ProviderError);
    expect((failure as Error).message).toContain('call_a');
    expect(seen.filter((e) => e.type === 'content_block_start')).toHaveLength(2);
  });

  it('servers that repeat the id on every fragment of a call still give one call', async () => {
    fake.script('POST /v1/chat/completions', {
      sse: [
        chunk({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'weather', arguments: '{"city":' } }] }),
        chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { arguments: '"Oslo"}' } }] }),
        chunk({}, 'tool_calls'),
      ],
    });
    const { blocks } = rebuild(await collect(amessages({ ...opts, ...ask, stream: true })));
    expect(blocks).toMatchObject([{ type: 'tool_use', id: 'call_a', name: 'weather', input: { city: 'Oslo' } }]);
  });
});

describe('refusals and usage in streams', () => {
  it('a streamed refusal ends with stop_reason refusal, as the same answer does without streaming', async () => {
    fake.script(
      'POST /v1/chat/completions',
      { json: { ...chatCompletionBody('m'), choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: 'I cannot help.' }, finish_reason: 'stop', logprobs: null }] } },
      { sse: [chunk({ role: 'assistant', refusal: 'I cannot' }), chunk({ refusal: ' help.' }), chunk({}, 'stop')] },
    );
    const plain = await amessages({ ...opts, ...ask });
    const { blocks, delta } = rebuild(await collect(amessages({ ...opts, ...ask, stream: true })));
    expect(plain.stop_reason).toBe('refusal');
    expect(blocks).toMatchObject([{ type: 'text', text: 'I cannot help.' }]);
    expect(delta.delta.stop_reason).toBe(plain.stop_reason);
  });

  it("cached prompt tokens in the stream's usage chunk leave input_tokens and become cache_read_input_tokens", async () => {
    fake.script('POST /v1/chat/completions', {
      sse: [
        chunk({ role: 'assistant', content: 'hi' }),
        chunk({}, 'stop'),
        usageChunk({ prompt_tokens: 100, completion_tokens: 2, total_tokens: 102, prompt_tokens_details: { cached_tokens: 60 } }),
      ],
    });
    const { delta } = rebuild(await collect(amessages({ ...opts, ...ask, stream: true })));
    const usage: Anthropic.MessageDeltaUsage = delta.usage;
    expect(usage).toMatchObject({ input_tokens: 40, cache_read_input_tokens: 60, output_tokens: 2 });
  });
});

describe('embeddings of OpenAI-compatible servers', () => {
  const floats = [0.25, -1.5, 3];
  const answer = { json: { object: 'list', model: 'e', data: [{ object: 'embedding', index: 0, embedding: floats }], usage: { prompt_tokens: 2, total_tokens: 2 } } };

  it('a server that answers floats whatever encoding_format says gives those floats (the SDK asks base64 unless told)', async () => {
    fake.script('POST /v1/embeddings', answer);
    const result = await aembedding({ ...opts, model: 'vllm:e', inputs: 'x' });
    expect(result.data[0]!.embedding).toEqual(floats);
    expect(fake.requestsTo('POST /v1/embeddings')[0]!.body).toMatchObject({ encoding_format: 'float' });
  });

  it("the caller's encoding_format is sent as given; OpenAI itself keeps the SDK's compact base64", async () => {
    fake.script('POST /v1/embeddings', answer);
    await aembedding({ ...opts, model: 'vllm:e', inputs: 'x', encoding_format: 'float' });
    const openai = await aembedding({ ...opts, model: 'openai:fake-embedder', inputs: 'abc' });
    const [compatible, own] = fake.requestsTo('POST /v1/embeddings');
    expect(compatible!.body).toMatchObject({ encoding_format: 'float' });
    expect(own!.body).toMatchObject({ encoding_format: 'base64' });
    expect(openai.data[0]!.embedding).toHaveLength(4);
  });
});

describe("DeepSeek's cache counts (prompt_cache_hit_tokens, not prompt_tokens_details.cached_tokens)", () => {
  const usage = { prompt_tokens: 100, completion_tokens: 5, total_tokens: 105, prompt_cache_hit_tokens: 64, prompt_cache_miss_tokens: 36 };
  const ds = { api_key: 'k-test-0123', model: 'deepseek:deepseek-chat', max_tokens: 10, messages: [{ role: 'user' as const, content: 'hi' }] };

  it('become cache_read_input_tokens of messages, with and without streaming', async () => {
    fake.script(
      'POST /v1/chat/completions',
      { json: { ...chatCompletionBody('deepseek-chat'), usage } },
      { sse: [chunk({ role: 'assistant', content: 'hi' }), chunk({}, 'stop'), usageChunk(usage)] },
    );
    const message = await amessages({ ...ds, api_base: fake.baseURL });
    expect(message.usage).toMatchObject({ input_tokens: 36, cache_read_input_tokens: 64, output_tokens: 5 });
    const { delta } = rebuild(await collect(amessages({ ...ds, api_base: fake.baseURL, stream: true })));
    expect(delta.usage).toMatchObject({ input_tokens: 36, cache_read_input_tokens: 64, output_tokens: 5 });
  });

  it('are also given as prompt_tokens_details.cached_tokens in completion answers and chunks (the OpenAI field)', async () => {
    fake.script(
      'POST /v1/chat/completions',
      { json: { ...chatCompletionBody('deepseek-chat'), usage } },
      { sse: [chunk({ role: 'assistant', content: 'hi' }), chunk({}, 'stop'), usageChunk(usage)] },
    );
    const request = { api_key: ds.api_key, api_base: fake.baseURL, model: ds.model, messages: ds.messages };
    const completion = await acompletion(request);
    expect(completion.usage).toMatchObject({ prompt_tokens: 100, prompt_tokens_details: { cached_tokens: 64 }, prompt_cache_hit_tokens: 64 });
    const chunks = await collect(acompletion({ ...request, stream: true }));
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 100, prompt_tokens_details: { cached_tokens: 64 } });
  });
});

describe('text blocks and documents on OpenAI-compatible services', () => {
  it('a plain-text document becomes a text part, as on the native providers; text blocks are not run together', async () => {
    await amessages({
      ...opts,
      model: 'vllm:m',
      max_tokens: 10,
      messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'The sky is green.' } }, { type: 'text', text: 'What colour is the sky?' }] }],
    });
    expect(fake.requestsTo('POST /v1/chat/completions')[0]!.body).toMatchObject({
      messages: [{ role: 'user', content: 'The sky is green.\nWhat colour is the sky?' }],
    });
  });

  it('an assistant turn with no text and no tool calls (thinking only) is sent with empty text, not null content', async () => {
    await amessages({
      ...opts,
      model: 'vllm:m',
      max_tokens: 10,
      messages: [
        { role: 'user', content: 'think' },
        { role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm', signature: '' }] },
        { role: 'user', content: 'go on' },
      ],
    });
    // OpenAI refuses an assistant message whose content is null unless it has tool calls
    expect((fake.requestsTo('POST /v1/chat/completions')[0]!.body as { messages: unknown[] }).messages[1]).toEqual({ role: 'assistant', content: '' });
  });

  it("a tool result's text blocks are joined by a newline too", async () => {
    await amessages({
      ...opts,
      model: 'vllm:m',
      max_tokens: 10,
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Oslo' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: [{ type: 'text', text: 'Oslo: rain.' }, { type: 'text', text: 'Bergen: sun.' }] }] },
      ],
    });
    expect((fake.requestsTo('POST /v1/chat/completions')[0]!.body as { messages: unknown[] }).messages[2]).toEqual({ role: 'tool', tool_call_id: 'call_1', content: 'Oslo: rain.\nBergen: sun.' });
  });
});

describe('completion streams', () => {
  it('a completion stream that ends cleanly without any finish_reason raises ProviderError after its chunks, as messages does', async () => {
    fake.script('POST /v1/chat/completions', { sse: [chunk({ role: 'assistant', content: 'Hel' }), chunk({ content: 'lo' })] });
    const seen: string[] = [];
    let error: unknown;
    try {
      for await (const part of acompletion({ ...opts, model: 'vllm:m', messages: [{ role: 'user', content: 'hi' }], stream: true })) seen.push(part.choices[0]?.delta.content ?? '');
    } catch (caught) {
      error = caught;
    }
    expect(seen.join('')).toBe('Hello');
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ provider_name: 'vllm', status_code: null });
  });

  it('a complete one (finish_reason, then the usage chunk) ends without error', async () => {
    fake.script('POST /v1/chat/completions', { sse: [chunk({ role: 'assistant', content: 'Hi' }), chunk({}, 'stop'), usageChunk({ prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 })] });
    const parts = await collect(acompletion({ ...opts, model: 'vllm:m', messages: [{ role: 'user', content: 'hi' }], stream: true }));
    expect(parts.at(-1)!.usage).toMatchObject({ total_tokens: 4 });
  });
});
