import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Anthropic from '@anthropic-ai/sdk';
import type * as components from '@mistralai/mistralai/models/components';
import { describe, expect, it } from 'vitest';
import {
  AuthenticationError,
  BatchNotCompleteError,
  ContextLengthExceededError,
  GatewayTimeoutError,
  InvalidRequestError,
  ModelNotFoundError,
  ProviderError,
  RateLimitError,
  UnsupportedParameterError,
  UpstreamProviderError,
  type HubError,
} from '../../../src/hub/errors.ts';
import type { MessagesParams, Provider } from '../../../src/hub/provider.ts';
import { fromMistralResponse, fromMistralStream, mistralToolCallId, toMistralRequest } from '../../../src/hub/providers/mistral/convert.ts';
import { mistralProvider } from '../../../src/hub/providers/mistral/index.ts';
import { fakeChatChunks, mistralError, startMistralFake, type MistralFake } from '../../fakes/mistral.ts';
import { bodyOf } from '../../fakes/vendor-server.ts';
import { amessages } from '../../../src/hub/index.ts';
import { collect, collectGarbage, eventually, failureOf, fakeEmbeddings, useVendorFake, weatherTool as weather } from '../helpers.ts';

const base: MessagesParams = { model: 'mistral-small-latest', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const toolConversation: Anthropic.MessageParam[] = [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: 'toolu_01ABC', name: 'weather', input: { city: 'Paris' } }] },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01ABC', content: 'sunny' }, { type: 'text', text: 'And tomorrow?' }] },
];
const mappedId = mistralToolCallId('toolu_01ABC');

describe('mistral tool call ids', () => {
  it('keeps Mistral ids, maps others to a stable 9-character id', () => {
    expect(mistralToolCallId('D681PevKs')).toBe('D681PevKs');
    expect(mappedId).toMatch(/^[a-zA-Z0-9]{9}$/);
    expect(mistralToolCallId('toolu_01ABC')).toBe(mappedId);
    expect(mistralToolCallId('toolu_01ABD')).not.toBe(mappedId);
  });
});

describe('mistral request conversion', () => {
  const rows: [string, Partial<MessagesParams>, Partial<components.ChatCompletionRequest>][] = [
    ['max_tokens → maxTokens', {}, { maxTokens: 100, messages: [{ role: 'user', content: 'hi' }] }],
    ['system → first system message', { system: 'be brief' }, { messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }] }],
    ['temperature and top_p', { temperature: 0.4, top_p: 0.8 }, { temperature: 0.4, topP: 0.8 }],
    ['stop_sequences → stop', { stop_sequences: ['END'] }, { stop: ['END'] }],
    ['metadata → metadata', { metadata: { user_id: 'u-1' } }, { metadata: { user_id: 'u-1' } }],
    ['tools → function tools', { tools: [weather] }, { tools: [{ type: 'function', function: { name: 'weather', description: 'Weather in a city', parameters: weather.input_schema } }] }],
    ['tool_choice auto', { tool_choice: { type: 'auto' } }, { toolChoice: 'auto' }],
    ['tool_choice any', { tool_choice: { type: 'any' } }, { toolChoice: 'any' }],
    ['tool_choice none', { tool_choice: { type: 'none' } }, { toolChoice: 'none' }],
    ['tool_choice tool → named function', { tool_choice: { type: 'tool', name: 'weather' } }, { toolChoice: { type: 'function', function: { name: 'weather' } } }],
    ['disable_parallel_tool_use → parallelToolCalls false', { tool_choice: { type: 'auto', disable_parallel_tool_use: true } }, { toolChoice: 'auto', parallelToolCalls: false }],
    ['thinking enabled → reasoning prompt mode', { thinking: { type: 'enabled', budget_tokens: 1024 } }, { promptMode: 'reasoning' }],
    ['thinking adaptive → reasoning prompt mode', { thinking: { type: 'adaptive' } }, { promptMode: 'reasoning' }],
    [
      'output_config.format → json_schema response format',
      { output_config: { format: { type: 'json_schema', schema: { type: 'object' } } } },
      { responseFormat: { type: 'json_schema', jsonSchema: { name: 'output', schemaDefinition: { type: 'object' }, strict: true } } },
    ],
    [
      'base64 and URL images → image_url chunks',
      {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'compare' },
              { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/' } },
              { type: 'image', source: { type: 'url', url: 'https://img/x.png' } },
            ],
          },
        ],
      },
      {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'compare' },
              { type: 'image_url', imageUrl: 'data:image/jpeg;base64,/9j/' },
              { type: 'image_url', imageUrl: 'https://img/x.png' },
            ],
          },
        ],
      },
    ],
    [
      'tool_use → toolCalls with JSON arguments; tool_result → tool message before the user text',
      { messages: toolConversation },
      {
        messages: [
          { role: 'user', content: 'Weather in Paris?' },
          { role: 'assistant', content: 'Checking.', toolCalls: [{ id: mappedId, type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
          { role: 'tool', toolCallId: mappedId, name: 'weather', content: 'sunny' },
          { role: 'user', content: 'And tomorrow?' },
        ],
      },
    ],
    [
      'an error tool_result is marked in the content',
      { messages: [toolConversation[1], { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01ABC', content: 'no such city', is_error: true }] }] },
      { messages: [{ role: 'assistant' }, { role: 'tool', content: 'Error: no such city' }] as components.ChatCompletionRequest['messages'] },
    ],
    [
      'thinking blocks in history → thinking chunks',
      { messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm', signature: 's' }, { type: 'text', text: 'a' }] }] },
      {
        messages: [
          { role: 'user', content: 'q' },
          { role: 'assistant', content: [{ type: 'thinking', thinking: [{ type: 'text', text: 'hmm' }], signature: 's' }, { type: 'text', text: 'a' }] },
        ],
      },
    ],
  ];
  it.each(rows)('%s', (_name, change, expected) => {
    expect(toMistralRequest({ ...base, ...change } as MessagesParams)).toMatchObject(expected);
  });

  it('cache_control marks are accepted and not sent (Mistral caches prefixes automatically)', () => {
    const request = toMistralRequest({ ...base, cache_control: { type: 'ephemeral' }, messages: [{ role: 'user', content: [{ type: 'text', text: 'x', cache_control: { type: 'ephemeral' } }] }] });
    expect(JSON.stringify(request)).not.toMatch(/cache/i);
  });

  it('an extra option the SDK would drop silently (e.g. snake_case) is an UnsupportedParameterError', () => {
    expect(() => toMistralRequest(base, { safe_prompt: true })).toThrow(UnsupportedParameterError);
  });

  it('thinking disabled sends no prompt mode; extra options pass through', () => {
    const request = toMistralRequest({ ...base, thinking: { type: 'disabled' } }, { safePrompt: true, randomSeed: 7 });
    expect(request.promptMode).toBeUndefined();
    expect(request).toMatchObject({ safePrompt: true, randomSeed: 7 });
  });

  const unsupported: [string, Partial<MessagesParams>, string][] = [
    ['top_k', { top_k: 5 }, 'top_k'],
    ['base64 PDF', { messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVB' } }] }] }, 'document source base64'],
    ['server tools', { tools: [{ type: 'bash_20250124', name: 'bash' } as Anthropic.ToolUnion] }, 'tools[type=bash_20250124]'],
    ['thinking between_tools', { thinking: { type: 'between_tools' } }, 'thinking.type=between_tools'],
    ['speed', { speed: 'fast' }, 'speed'],
    ['inference_geo', { inference_geo: 'eu' }, 'inference_geo'],
  ];
  it.each(unsupported)('%s → UnsupportedParameterError', (_name, change, parameter) => {
    let failure: unknown;
    try {
      toMistralRequest({ ...base, ...change } as MessagesParams);
    } catch (error) {
      failure = error;
    }
    expect(failure).toBeInstanceOf(UnsupportedParameterError);
    expect(failure).toMatchObject({ parameter_name: parameter, provider_name: 'mistral' });
  });
});

describe('mistral response conversion', () => {
  const response = (message: components.AssistantMessage, finishReason: string, usage: object = { promptTokens: 50, completionTokens: 9 }) =>
    ({ id: 'c1', object: 'chat.completion', model: 'mistral-small-2506', created: 1, usage, choices: [{ index: 0, message, finishReason }] }) as components.ChatCompletionResponse;

  it('text, thinking chunks and tool calls become content blocks; cached tokens split from input', () => {
    const message = fromMistralResponse(
      response(
        {
          content: [
            { type: 'thinking', thinking: [{ type: 'text', text: 'first ' }, { type: 'text', text: 'think' }] },
            { type: 'text', text: 'Calling.' },
          ],
          toolCalls: [{ id: 'abcDEF123', function: { name: 'weather', arguments: '{"city":"Rome"}' } }],
        },
        'tool_calls',
        { promptTokens: 50, completionTokens: 9, prompt_tokens_details: { cached_tokens: 20 } },
      ),
      'm',
    );
    expect(message).toMatchObject({
      id: 'c1',
      model: 'mistral-small-2506',
      stop_reason: 'tool_use',
      content: [
        { type: 'thinking', thinking: 'first think' },
        { type: 'text', text: 'Calling.' },
        { type: 'tool_use', id: 'abcDEF123', name: 'weather', input: { city: 'Rome' } },
      ],
      usage: { input_tokens: 30, cache_read_input_tokens: 20, output_tokens: 9 },
    });
  });

  it.each([
    ['stop', 'end_turn'],
    ['length', 'max_tokens'],
    ['model_length', 'max_tokens'],
    ['tool_calls', 'tool_use'],
  ])('finish_reason %s → %s', (finish, stop) => {
    expect(fromMistralResponse(response({ content: 'x' }, finish), 'm').stop_reason).toBe(stop);
  });

  it('finish_reason error is a ProviderError; tool arguments that are not JSON too', () => {
    expect(() => fromMistralResponse(response({ content: 'x' }, 'error'), 'm')).toThrow(ProviderError);
    expect(() => fromMistralResponse(response({ content: '', toolCalls: [{ id: 'a', function: { name: 'f', arguments: '{oops' } }] }, 'tool_calls'), 'm')).toThrow(ProviderError);
  });
});

async function* eventsOf(chunks: unknown[]) {
  for (const data of chunks) yield { data } as components.CompletionEvent;
}
const chunk = (delta: object, finishReason: string | null = null, usage?: object) => ({ id: 'c9', model: 'm', choices: [{ index: 0, delta, finishReason }], ...(usage ? { usage } : {}) });

describe('mistral stream conversion', () => {
  it('text deltas, then streamed tool call arguments, then the finish', async () => {
    const events = await collect(
      fromMistralStream(
        eventsOf([
          chunk({ role: 'assistant', content: 'Let' }),
          chunk({ content: ' me check.' }),
          chunk({ toolCalls: [{ index: 0, id: 'call00001', function: { name: 'weather', arguments: '{"ci' } }] }),
          chunk({ toolCalls: [{ index: 0, function: { name: '', arguments: 'ty":"Oslo"}' } }] }),
          chunk({ content: '' }, 'tool_calls', { promptTokens: 10, completionTokens: 7 }),
        ]),
        'mistral-small-latest',
      ),
    );
    expect(events.map((e) => e.type)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events[5]).toMatchObject({ index: 1, content_block: { type: 'tool_use', id: 'call00001', name: 'weather' } });
    const json = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta' ? [e.delta.partial_json] : [])).join('');
    expect(JSON.parse(json)).toEqual({ city: 'Oslo' });
    expect(events[9]).toMatchObject({ delta: { stop_reason: 'tool_use' }, usage: { input_tokens: 10, output_tokens: 7 } });
  });

  it('thinking chunks stream as a thinking block', async () => {
    const events = await collect(fromMistralStream(eventsOf([chunk({ content: [{ type: 'thinking', thinking: [{ type: 'text', text: 'hm' }] }] }), chunk({ content: 'ok' }, 'stop')]), 'm'));
    expect(events[1]).toMatchObject({ content_block: { type: 'thinking' } });
    expect(events[2]).toMatchObject({ delta: { type: 'thinking_delta', thinking: 'hm' } });
    expect(events[4]).toMatchObject({ index: 1, content_block: { type: 'text' } });
  });

  it('a stream without finish_reason is incomplete: ProviderError', async () => {
    expect(await failureOf(collect(fromMistralStream(eventsOf([chunk({ content: 'x' })]), 'm')))).toBeInstanceOf(ProviderError);
  });
});

describe('mistral provider against the fake API', () => {
  let fake: MistralFake;
  let provider: Provider;
  const call = { extra: {} };
  useVendorFake(startMistralFake, (started) => {
    fake = started;
    provider = mistralProvider.create({ api_key: 'ms-key', api_base: fake.server.url });
  });

  it('messages: POST /v1/chat/completions with the bearer key and the snake_case body', async () => {
    const message = await provider.messages({ ...base, system: 'sys', temperature: 0.3, tools: [weather], tool_choice: { type: 'tool', name: 'weather' }, messages: toolConversation }, call);
    const wire = fake.server.lastRequest;
    expect(wire.path).toBe('/v1/chat/completions');
    expect(wire.headers.authorization).toBe('Bearer ms-key');
    expect(bodyOf(wire)).toEqual({
      model: 'mistral-small-latest',
      max_tokens: 100,
      temperature: 0.3,
      stream: false,
      tools: [{ type: 'function', function: { name: 'weather', description: 'Weather in a city', parameters: weather.input_schema } }],
      tool_choice: { type: 'function', function: { name: 'weather' } },
      messages: [
        { role: 'system', content: 'sys' },
        { role: 'user', content: 'Weather in Paris?' },
        // prefix and index are defaults the SDK writes
        { role: 'assistant', content: 'Checking.', prefix: false, tool_calls: [{ id: mappedId, index: 0, type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: mappedId, name: 'weather', content: 'sunny' },
        { role: 'user', content: 'And tomorrow?' },
      ],
    });
    expect(message).toMatchObject({ id: 'cmpl-fake-1', content: [{ type: 'text', text: 'echo: And tomorrow?' }], stop_reason: 'end_turn', usage: { input_tokens: 14, output_tokens: 5 } });
  });

  it('a tool call answer on the wire (snake_case) becomes tool_use with stop_reason tool_use', async () => {
    fake.server.enqueue({
      json: {
        id: 'c4',
        object: 'chat.completion',
        model: 'mistral-small-latest',
        created: 1,
        choices: [{ index: 0, message: { role: 'assistant', content: '', tool_calls: [{ id: 'Zyx987abc', type: 'function', function: { name: 'weather', arguments: '{"city":"Lyon"}' } }] }, finish_reason: 'tool_calls' }],
        usage: { prompt_tokens: 30, completion_tokens: 8, total_tokens: 38, prompt_tokens_details: { cached_tokens: 10 } },
      },
    });
    const message = await provider.messages({ ...base, tools: [weather] }, call);
    expect(message).toMatchObject({ stop_reason: 'tool_use', content: [{ type: 'tool_use', id: 'Zyx987abc', name: 'weather', input: { city: 'Lyon' } }], usage: { input_tokens: 20, cache_read_input_tokens: 10 } });
  });

  it('messagesStream: SSE chunks up to [DONE] become Messages events', async () => {
    const events = await collect(provider.messagesStream({ ...base, messages: [{ role: 'user', content: 'stream me' }] }, call));
    expect(bodyOf(fake.server.lastRequest).stream).toBe(true);
    const text = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? [e.delta.text] : [])).join('');
    expect(text).toBe('echo: stream me');
    expect(events.at(-2)).toMatchObject({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 5 } });
  });

  it('a streamed tool call on the wire (snake_case) arrives as a tool_use block', async () => {
    const chunk = (delta: object, finish_reason: string | null, usage?: object) => ({
      data: { id: 'c3', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason }], ...(usage ? { usage } : {}) },
    });
    fake.server.enqueue({
      sse: [
        chunk({ role: 'assistant', content: '' }, null),
        chunk({ tool_calls: [{ id: 'Abc123XYZ', type: 'function', index: 0, function: { name: 'weather', arguments: '{"city": "Oslo"}' } }] }, null),
        chunk({ content: '' }, 'tool_calls', { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 }),
        { data: '[DONE]' },
      ],
    });
    const events = await collect(provider.messagesStream({ ...base, tools: [weather] }, call));
    expect(events.find((e) => e.type === 'content_block_start')).toMatchObject({ content_block: { type: 'tool_use', id: 'Abc123XYZ', name: 'weather' } });
    expect(events.at(-2)).toMatchObject({ delta: { stop_reason: 'tool_use' }, usage: { input_tokens: 9, output_tokens: 4 } });
  });

  it('parallel tool calls in one streamed delta without index (the SDK makes each index 0) stay separate', async () => {
    const chunk = (delta: object, finish_reason: string | null) => ({
      data: { id: 'c5', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason }] },
    });
    const wireCall = (id: string, city: string) => ({ id, type: 'function', function: { name: 'weather', arguments: `{"city":"${city}"}` } });
    fake.server.enqueue({
      sse: [
        chunk({ role: 'assistant', tool_calls: [wireCall('Abc123XYZ', 'Oslo'), wireCall('Def456UVW', 'Rome')] }, null),
        // a call in fragments: the ones after the first carry no id (the SDK makes it the string "null")
        chunk({ tool_calls: [{ id: 'Ghi789RST', index: 2, function: { name: 'weather', arguments: '{"city":' } }] }, null),
        chunk({ tool_calls: [{ index: 2, function: { name: '', arguments: '"Bonn"}' } }] }, null),
        chunk({ content: '' }, 'tool_calls'),
        { data: '[DONE]' },
      ],
    });
    const events = await collect(provider.messagesStream({ ...base, tools: [weather] }, call));
    const starts = events.flatMap((e) => (e.type === 'content_block_start' ? [e.content_block] : []));
    const args = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta' ? [[e.index, e.delta.partial_json]] : []));
    expect(starts).toMatchObject([{ type: 'tool_use', id: 'Abc123XYZ' }, { type: 'tool_use', id: 'Def456UVW' }, { type: 'tool_use', id: 'Ghi789RST' }]);
    expect(args).toEqual([[0, '{"city":"Oslo"}'], [1, '{"city":"Rome"}'], [2, '{"city":'], [2, '"Bonn"}']]);
  });

  it('a stream cut in the middle, or ended before finish_reason, is a ProviderError', async () => {
    const chunks = fakeChatChunks({ model: 'm', messages: [{ role: 'user', content: 'a long enough text' }] });
    fake.server.enqueue({ sse: chunks, cutAfter: 2 });
    const cut = await failureOf(collect(provider.messagesStream(base, call)));
    expect(cut instanceof ProviderError || provider.toHubError(cut) instanceof ProviderError).toBe(true);
    fake.server.enqueue({ sse: chunks.slice(0, 3) });
    expect(await failureOf(collect(provider.messagesStream(base, call)))).toBeInstanceOf(ProviderError);
  });

  it('embedding: POST /v1/embeddings with input, vectors and usage back', async () => {
    const response = await provider.embedding!({ model: 'mistral-embed', inputs: ['one two', 'three'] }, call);
    expect(bodyOf(fake.server.lastRequest)).toEqual({ model: 'mistral-embed', input: ['one two', 'three'] });
    expect(response).toEqual(fakeEmbeddings('mistral-embed', ['one two', 'three'], 3));
  });

  it('embedding: known extra options reach the wire, unknown ones are refused', async () => {
    await provider.embedding!({ model: 'mistral-embed', inputs: ['x'] }, { extra: { outputDimension: 256 } });
    expect(bodyOf(fake.server.lastRequest).output_dimension).toBe(256);
    await expect(provider.embedding!({ model: 'mistral-embed', inputs: ['x'] }, { extra: { dims: 3 } })).rejects.toBeInstanceOf(UnsupportedParameterError);
  });

  it('listModels: GET /v1/models', async () => {
    const models = await provider.listModels!(call);
    expect(models).toContainEqual({ id: 'mistral-embed', object: 'model', created: 1_700_000_000, owned_by: 'mistralai' });
    expect(models).toHaveLength(3);
  });

  const errors: [string, ReturnType<typeof mistralError>, new (...args: never[]) => HubError, Record<string, unknown>][] = [
    ['400 invalid request', mistralError(400, 'Invalid model: nope', 'invalid_model', '1500', 'model'), InvalidRequestError, { code: '1500', param: 'model', error_type: 'invalid_model' }],
    ['400 context length', mistralError(400, 'Prompt contains 40000 tokens, too large for model with 32768 maximum context length', 'invalid_request_error', '3051'), ContextLengthExceededError, {}],
    ['401', { status: 401, json: { message: 'Unauthorized', request_id: 'r' } }, AuthenticationError, { status_code: 401 }],
    ['404', mistralError(404, 'Model not found', 'invalid_model'), ModelNotFoundError, {}],
    ['422 validation', { status: 422, json: { detail: [{ type: 'missing', loc: ['body', 'messages'], msg: 'Field required' }] } }, InvalidRequestError, { param: 'messages', error_type: 'missing' }],
    ['429 with Retry-After', mistralError(429, 'Requests rate limit exceeded', 'rate_limited', '1300', null, { 'retry-after': '3' }), RateLimitError, { retry_after: 3 }],
    ['500', mistralError(500, 'Internal error', 'internal_error'), ProviderError, {}],
    ['502', mistralError(502, 'Bad gateway', 'upstream'), UpstreamProviderError, {}],
    ['504', mistralError(504, 'Gateway timeout', 'timeout'), GatewayTimeoutError, {}],
  ];
  it.each(errors)('error %s', async (_name, reply, type, fields) => {
    fake.server.enqueue(reply);
    const mapped = provider.toHubError(await failureOf(provider.messages(base, call)));
    expect(mapped).toBeInstanceOf(type);
    expect(mapped).toMatchObject({ provider_name: 'mistral', status_code: (reply as { status: number }).status, ...fields });
  });

  describe('a non-stream answer that stalls after its headers', () => {
    /** Settles within `ms` (else the test fails: the call hung). */
    const settled = <T>(promise: Promise<T>, ms: number): Promise<{ value?: T; error?: unknown }> =>
      Promise.race([
        promise.then((value) => ({ value }), (error: unknown) => ({ error })),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`the call did not settle within ${ms} ms`)), ms)),
      ]);
    /** Waits until the fake has sent the headers and half the body, and the client has had time to read them. */
    const headersSent = async (before: number) => {
      await eventually(() => fake.server.stalledBodies === before + 1, 'the fake sent the headers');
      await new Promise((resolve) => setTimeout(resolve, 50));
      // What undici links weakly (the abort of a Request's clone) is gone after a collection, as in a busy process.
      collectGarbage();
    };

    it("aborting rejects with the signal's reason and closes the connection", async () => {
      fake.server.enqueue({ json: { id: 'cmpl-stall', object: 'chat.completion', model: 'mistral-small-latest', created: 1, choices: [] }, stallBody: true });
      const before = { stalled: fake.server.stalledBodies, abandoned: fake.server.abandonedReplies };
      const controller = new AbortController();
      const call = amessages({ provider: 'mistral', api_key: 'ms-key', api_base: fake.server.url, ...base, signal: controller.signal });
      await headersSent(before.stalled);
      const reason = new Error('the caller gave up');
      controller.abort(reason);
      const outcome = await settled(call, 5_000);
      expect(outcome.value).toBeUndefined();
      expect(outcome.error).toBe(reason);
      await eventually(() => fake.server.abandonedReplies === before.abandoned + 1, 'the fake saw the connection closed');
    });

    it('the timeout fails it with the timeout error and closes the connection', async () => {
      fake.server.enqueue({ json: { id: 'cmpl-stall', object: 'chat.completion', model: 'mistral-small-latest', created: 1, choices: [] }, stallBody: true });
      const before = { stalled: fake.server.stalledBodies, abandoned: fake.server.abandonedReplies };
      const call = amessages({ provider: 'mistral', api_key: 'ms-key', api_base: fake.server.url, ...base, timeout: 1_000 });
      await headersSent(before.stalled);
      const outcome = await settled(call, 10_000);
      expect(outcome.error).toBeInstanceOf(ProviderError);
      expect(outcome.error).toMatchObject({ error_type: 'timeout', status_code: null, raw_message: 'Request timed out after 1000 ms' });
      await eventually(() => fake.server.abandonedReplies === before.abandoned + 1, 'the fake saw the connection closed');
    });
  });

  it('a tool call id Mistral would refuse is never sent: the fake checks ids like the API', async () => {
    fake.server.reset();
    await provider.messages({ ...base, messages: toolConversation }, call);
    expect(fake.server.lastRequest.path).toBe('/v1/chat/completions');
    const fakeAnswer = await fetch(`${fake.server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer k', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'tool', tool_call_id: 'toolu_01ABC', content: 'x' }] }),
    });
    expect(fakeAnswer.status).toBe(400);
  });

  describe('batches', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'hub-mistral-batch-'));
    const input = (name: string, lines: object[]) => {
      const file = path.join(dir, name);
      writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n'));
      return file;
    };
    const line = (id: string, text: string, model = 'mistral-small-latest') => ({
      custom_id: id,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model, max_tokens: 10, messages: [{ role: 'user', content: text }] },
    });
    const create = (file: string, extra: object = {}) =>
      provider.batches!.create({ input_file_path: file, endpoint: '/v1/chat/completions', completion_window: '24h', ...extra }, call);

    it('uploads the rewritten JSONL, creates the job, polls it, downloads the results', async () => {
      const batch = await create(input('a.jsonl', [line('r1', 'first'), line('r2', 'second')]), { metadata: { team: 'search' } });
      const [upload, job] = fake.server.requests.slice(-2);
      expect(upload.path).toBe('/v1/files');
      const uploaded = [...fake.files.values()].at(-1)!;
      expect(uploaded.purpose).toBe('batch');
      expect(uploaded.content.trim().split('\n').map((l) => JSON.parse(l))).toEqual([
        { custom_id: 'r1', body: { max_tokens: 10, messages: [{ role: 'user', content: 'first' }] } },
        { custom_id: 'r2', body: { max_tokens: 10, messages: [{ role: 'user', content: 'second' }] } },
      ]);
      expect(bodyOf(job)).toEqual({ input_files: [uploaded.id], endpoint: '/v1/chat/completions', model: 'mistral-small-latest', metadata: { team: 'search' }, timeout_hours: 24 });
      expect(batch).toMatchObject({ object: 'batch', status: 'in_progress', input_file_id: uploaded.id, metadata: { team: 'search' }, request_counts: { total: 2, completed: 0, failed: 0 } });

      const running = await provider.batches!.retrieve(batch.id, call);
      expect(running.status).toBe('in_progress');
      await expect(provider.batches!.results(batch.id, call)).resolves.toHaveLength(2); // this get completes the job
      const done = await provider.batches!.retrieve(batch.id, call);
      expect(done).toMatchObject({ status: 'completed', request_counts: { total: 2, completed: 2, failed: 0 } });
      const results = await provider.batches!.results(batch.id, call);
      expect(results.map((r) => [r.custom_id, (r.result as { choices: { message: { content: string } }[] }).choices[0].message.content, r.error])).toEqual([
        ['r1', 'echo: first', null],
        ['r2', 'echo: second', null],
      ]);
    });

    it('failed lines come from the error file; the job errors and counts say so', async () => {
      const failing = { ...line('bad', 'x'), body: { ...line('bad', 'x').body, max_tokens: 0 } };
      const batch = await create(input('f.jsonl', [line('good', 'fine'), failing]));
      let done = batch;
      for (let polls = 0; done.status !== 'completed' && polls < 5; polls++) done = await provider.batches!.retrieve(batch.id, call);
      expect(done).toMatchObject({ status: 'completed', request_counts: { total: 2, completed: 1, failed: 1 }, errors: { object: 'list', data: [{ message: '1 request(s) failed' }] } });
      expect(done.error_file_id).toBeTruthy();
      const results = await provider.batches!.results(batch.id, call);
      expect(results.map((r) => [r.custom_id, r.error])).toEqual([
        ['good', null],
        ['bad', { code: '3001', message: 'max_tokens must be at least 1' }],
      ]);
    });

    it('results of an unfinished job: BatchNotCompleteError', async () => {
      const batch = await create(input('b.jsonl', [line('r1', 'x')]));
      fake.pollsUntilDone = 100;
      try {
        const failure = await failureOf(provider.batches!.results(batch.id, call));
        expect(failure).toBeInstanceOf(BatchNotCompleteError);
        expect(failure).toMatchObject({ batch_id: batch.id, batch_status: 'in_progress' });
      } finally {
        fake.pollsUntilDone = 2;
      }
    });

    it('cancel: cancelling, then cancelled', async () => {
      const batch = await create(input('c.jsonl', [line('r1', 'x')]));
      expect((await provider.batches!.cancel(batch.id, call)).status).toBe('cancelling');
      expect(fake.server.lastRequest).toMatchObject({ method: 'POST', path: `/v1/batch/jobs/${batch.id}/cancel` });
      expect((await provider.batches!.retrieve(batch.id, call)).status).toBe('cancelled');
    });

    it('list: limit is the page size; after walks the pages to the id', async () => {
      const all = await provider.batches!.list({}, call);
      expect(all.length).toBeGreaterThanOrEqual(3);
      const first = await provider.batches!.list({ limit: 2 }, call);
      expect(fake.server.lastRequest.query.get('page_size')).toBe('2');
      expect(first.map((b) => b.id)).toEqual(all.slice(0, 2).map((b) => b.id));
      const after = await provider.batches!.list({ after: all[0].id, limit: 2 }, call);
      expect(after.map((b) => b.id)).toEqual(all.slice(1, 3).map((b) => b.id));
    });

    it('rejects what Mistral cannot run: several models, other endpoints, odd windows', async () => {
      const mixed = input('d.jsonl', [line('a', 'x'), line('b', 'y', 'mistral-large-latest')]);
      await expect(create(mixed)).rejects.toBeInstanceOf(InvalidRequestError);
      const ok = input('e.jsonl', [line('a', 'x')]);
      await expect(provider.batches!.create({ input_file_path: ok, endpoint: '/v1/messages', completion_window: '24h' }, call)).rejects.toBeInstanceOf(UnsupportedParameterError);
      await expect(create(ok, { completion_window: '30m' })).rejects.toBeInstanceOf(UnsupportedParameterError);
    });

    it('an unknown job id is mapped from the API 404', async () => {
      expect(provider.toHubError(await failureOf(provider.batches!.retrieve('job-nope', call)))).toBeInstanceOf(ModelNotFoundError);
    });
  });
});
