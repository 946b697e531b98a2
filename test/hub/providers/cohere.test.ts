import type Anthropic from '@anthropic-ai/sdk';
import type { Cohere } from 'cohere-ai';
import { describe, expect, it } from 'vitest';
import {
  AuthenticationError,
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
import { fromCohereResponse, fromCohereStream, toCohereRequest } from '../../../src/hub/providers/cohere/convert.ts';
import { cohereProvider } from '../../../src/hub/providers/cohere/index.ts';
import { cohereError, fakeCohereEvents, startCohereFake } from '../../fakes/cohere.ts';
import { bodyOf, fakeVector, type VendorServer } from '../../fakes/vendor-server.ts';
import { collect, failureOf, fakeEmbeddings, useVendorFake, weatherTool as weather } from '../helpers.ts';

const base: MessagesParams = { model: 'command-a-03-2025', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const clock: Anthropic.Tool = { name: 'clock', input_schema: { type: 'object', properties: {} } };
const toolConversation: Anthropic.MessageParam[] = [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: [{ type: 'text', text: 'I will look it up.' }, { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } }] },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] },
];

describe('cohere request conversion', () => {
  const fn = (tool: Anthropic.Tool) => ({ type: 'function', function: { name: tool.name, ...(tool.description ? { description: tool.description } : {}), parameters: tool.input_schema } });
  const rows: [string, Partial<MessagesParams>, Partial<Cohere.V2ChatRequest>][] = [
    ['max_tokens, user text', {}, { maxTokens: 100, messages: [{ role: 'user', content: 'hi' }] }],
    ['system → system message', { system: 'be brief' }, { messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }] }],
    ['temperature, top_p → p, top_k → k', { temperature: 0.2, top_p: 0.7, top_k: 40 }, { temperature: 0.2, p: 0.7, k: 40 }],
    ['stop_sequences', { stop_sequences: ['END'] }, { stopSequences: ['END'] }],
    ['tools → function tools', { tools: [weather, clock] }, { tools: [fn(weather), fn(clock)] as Cohere.ToolV2[] }],
    ['tool_choice any → REQUIRED', { tools: [weather], tool_choice: { type: 'any' } }, { toolChoice: 'REQUIRED' }],
    ['tool_choice none → NONE', { tools: [weather], tool_choice: { type: 'none' } }, { toolChoice: 'NONE' }],
    ['tool_choice tool → only that tool, REQUIRED', { tools: [weather, clock], tool_choice: { type: 'tool', name: 'clock' } }, { toolChoice: 'REQUIRED', tools: [fn(clock)] as Cohere.ToolV2[] }],
    ['thinking enabled → token budget', { thinking: { type: 'enabled', budget_tokens: 2000 } }, { thinking: { type: 'enabled', tokenBudget: 2000 } }],
    ['thinking adaptive → enabled without budget', { thinking: { type: 'adaptive' } }, { thinking: { type: 'enabled' } }],
    ['thinking disabled', { thinking: { type: 'disabled' } }, { thinking: { type: 'disabled' } }],
    ['output_config.format → json_object with schema', { output_config: { format: { type: 'json_schema', schema: { type: 'object' } } } }, { responseFormat: { type: 'json_object', jsonSchema: { type: 'object' } } }],
    [
      'images → image_url content',
      { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVB' } }, { type: 'image', source: { type: 'url', url: 'https://i/x.png' } }] }] },
      { messages: [{ role: 'user', content: [{ type: 'image_url', imageUrl: { url: 'data:image/png;base64,iVB' } }, { type: 'image_url', imageUrl: { url: 'https://i/x.png' } }] }] },
    ],
    [
      'assistant text before tool calls → tool plan; tool_result → tool message',
      { messages: toolConversation },
      {
        messages: [
          { role: 'user', content: 'Weather in Paris?' },
          { role: 'assistant', toolPlan: 'I will look it up.', toolCalls: [{ id: 'toolu_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
          { role: 'tool', toolCallId: 'toolu_1', content: 'sunny' },
        ],
      },
    ],
    [
      'assistant text and thinking without tools → content items',
      { messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: [{ type: 'thinking', thinking: 'hm', signature: '' }, { type: 'text', text: 'a' }] }] },
      { messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: [{ type: 'thinking', thinking: 'hm' }, { type: 'text', text: 'a' }] }] },
    ],
  ];
  it.each(rows)('%s', (_name, change, expected) => {
    expect(toCohereRequest({ ...base, ...change } as MessagesParams)).toMatchObject(expected);
  });

  const unsupported: [string, Partial<MessagesParams>, string][] = [
    ['metadata', { metadata: { user_id: 'u' } }, 'metadata'],
    ['disable_parallel_tool_use', { tools: [weather], tool_choice: { type: 'any', disable_parallel_tool_use: true } }, 'tool_choice.disable_parallel_tool_use'],
    ['PDF document', { messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'x' } }] }] }, 'document source base64'],
    ['output_config.effort', { output_config: { effort: 'low' } }, 'output_config.effort'],
  ];
  it.each(unsupported)('%s → UnsupportedParameterError', (_name, change, parameter) => {
    let failure: unknown;
    try {
      toCohereRequest({ ...base, ...change } as MessagesParams);
    } catch (error) {
      failure = error;
    }
    expect(failure).toBeInstanceOf(UnsupportedParameterError);
    expect(failure).toMatchObject({ parameter_name: parameter, provider_name: 'cohere' });
  });

  it('tool_choice naming a tool not offered is an InvalidRequestError', () => {
    expect(() => toCohereRequest({ ...base, tools: [weather], tool_choice: { type: 'tool', name: 'nope' } })).toThrow(InvalidRequestError);
  });
});

it('cohere: cache_control marks are accepted and not sent', () => {
  const request = toCohereRequest({ ...base, cache_control: { type: 'ephemeral' }, system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }] });
  expect(JSON.stringify(request)).not.toMatch(/cache/i);
});

describe('cohere response conversion', () => {
  const response = (message: Partial<Cohere.AssistantMessageResponse>, finishReason: string, usage?: Cohere.Usage) =>
    ({ id: 'c1', finishReason, message: { role: 'assistant', ...message }, usage }) as Cohere.V2ChatResponse;

  it('thinking, tool plan and tool calls; token usage with cached tokens split out', () => {
    const message = fromCohereResponse(
      response(
        { content: [{ type: 'thinking', thinking: 'need weather' }], toolPlan: 'Looking up.', toolCalls: [{ id: 'w_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] },
        'TOOL_CALL',
        { tokens: { inputTokens: 300, outputTokens: 20 }, billedUnits: { inputTokens: 50, outputTokens: 20 }, cachedTokens: 250 },
      ),
      'command-a',
    );
    expect(message).toMatchObject({
      id: 'c1',
      model: 'command-a',
      stop_reason: 'tool_use',
      content: [
        { type: 'thinking', thinking: 'need weather' },
        { type: 'text', text: 'Looking up.' },
        { type: 'tool_use', id: 'w_1', name: 'weather', input: { city: 'Oslo' } },
      ],
      usage: { input_tokens: 50, cache_read_input_tokens: 250, output_tokens: 20 },
    });
  });

  it.each([
    ['COMPLETE', 'end_turn'],
    ['STOP_SEQUENCE', 'stop_sequence'],
    ['MAX_TOKENS', 'max_tokens'],
    ['TOOL_CALL', 'tool_use'],
  ])('finish_reason %s → %s', (finish, stop) => {
    expect(fromCohereResponse(response({ content: [{ type: 'text', text: 'x' }] }, finish), 'm').stop_reason).toBe(stop);
  });

  it.each(['ERROR', 'TIMEOUT'])('finish_reason %s is a ProviderError', (finish) => {
    expect(() => fromCohereResponse(response({}, finish), 'm')).toThrow(ProviderError);
  });
});

async function* eventsOf(events: unknown[]) {
  for (const event of events) yield event as Cohere.V2ChatStreamResponse;
}

describe('cohere stream conversion', () => {
  it('message-start, thinking and text content, tool plan, a streamed tool call, message-end', async () => {
    const events = await collect(
      fromCohereStream(
        eventsOf([
          { type: 'message-start', id: 'c7', delta: { message: { role: 'assistant' } } },
          { type: 'content-start', index: 0, delta: { message: { content: { type: 'thinking', thinking: 'hm' } } } },
          { type: 'content-end', index: 0 },
          { type: 'tool-plan-delta', delta: { message: { toolPlan: 'Checking' } } },
          { type: 'tool-plan-delta', delta: { message: { toolPlan: ' weather.' } } },
          { type: 'tool-call-start', index: 0, delta: { message: { toolCalls: { id: 'w_1', type: 'function', function: { name: 'weather', arguments: '' } } } } },
          { type: 'tool-call-delta', index: 0, delta: { message: { toolCalls: { function: { arguments: '{"city":' } } } } },
          { type: 'tool-call-delta', index: 0, delta: { message: { toolCalls: { function: { arguments: '"Oslo"}' } } } } },
          { type: 'tool-call-end', index: 0 },
          { type: 'message-end', delta: { finishReason: 'TOOL_CALL', usage: { tokens: { inputTokens: 30, outputTokens: 12 } } } },
        ]),
        'command-a',
      ),
    );
    expect(events[0]).toMatchObject({ type: 'message_start', message: { id: 'c7', model: 'command-a' } });
    expect(events.filter((e) => e.type === 'content_block_start').map((e) => (e as Anthropic.RawContentBlockStartEvent).content_block.type)).toEqual(['thinking', 'text', 'tool_use']);
    const json = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta' ? [e.delta.partial_json] : [])).join('');
    expect(JSON.parse(json)).toEqual({ city: 'Oslo' });
    expect(events.at(-2)).toMatchObject({ type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { input_tokens: 30, output_tokens: 12 } });
    expect(events.at(-1)).toEqual({ type: 'message_stop' });
  });

  it('an error in message-end and a stream without message-end are ProviderErrors', async () => {
    expect(await failureOf(collect(fromCohereStream(eventsOf([{ type: 'message-end', delta: { error: 'internal failure' } }]), 'm')))).toBeInstanceOf(ProviderError);
    expect(await failureOf(collect(fromCohereStream(eventsOf([{ type: 'message-start', id: 'x' }]), 'm')))).toBeInstanceOf(ProviderError);
  });
});

describe('cohere provider against the fake API', () => {
  let fake: VendorServer;
  let provider: Provider;
  const call = { extra: {} };
  useVendorFake(startCohereFake, (started) => {
    fake = started;
    provider = cohereProvider.create({ api_key: 'co-key', api_base: fake.url });
  });

  it('messages: POST /v2/chat with the bearer key and the snake_case body', async () => {
    const message = await provider.messages({ ...base, system: 'sys', top_k: 3, stop_sequences: ['X'], tools: [weather], messages: toolConversation }, call);
    const wire = fake.lastRequest;
    expect(wire.path).toBe('/v2/chat');
    expect(wire.headers.authorization).toBe('Bearer co-key');
    expect(bodyOf(wire)).toEqual({
      model: 'command-a-03-2025',
      max_tokens: 100,
      k: 3,
      stop_sequences: ['X'],
      stream: false,
      tools: [{ type: 'function', function: { name: 'weather', description: 'Weather in a city', parameters: weather.input_schema } }],
      messages: [
        { role: 'system', content: 'sys' },
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', tool_plan: 'I will look it up.', tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'toolu_1', content: 'sunny' },
      ],
    });
    expect(message).toMatchObject({ id: 'chat-fake-1', content: [{ type: 'text', text: 'echo: Weather in Paris?' }], stop_reason: 'end_turn', usage: { input_tokens: 20, cache_read_input_tokens: 100, output_tokens: 6 } });
  });

  it('a tool call answer on the wire (snake_case) becomes text (the plan) and tool_use', async () => {
    fake.enqueue({
      json: {
        id: 'c5',
        finish_reason: 'TOOL_CALL',
        message: { role: 'assistant', tool_plan: 'I will check.', tool_calls: [{ id: 'weather_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Lyon"}' } }] },
        usage: { tokens: { input_tokens: 40, output_tokens: 9 }, cached_tokens: 16 },
      },
    });
    const message = await provider.messages({ ...base, tools: [weather] }, call);
    expect(message).toMatchObject({
      stop_reason: 'tool_use',
      content: [{ type: 'text', text: 'I will check.' }, { type: 'tool_use', id: 'weather_1', name: 'weather', input: { city: 'Lyon' } }],
      usage: { input_tokens: 24, cache_read_input_tokens: 16, output_tokens: 9 },
    });
  });

  it('messagesStream: the v2 SSE events become Messages events', async () => {
    const events = await collect(provider.messagesStream({ ...base, messages: [{ role: 'user', content: 'stream me' }] }, call));
    expect(bodyOf(fake.lastRequest).stream).toBe(true);
    const text = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? [e.delta.text] : [])).join('');
    expect(text).toBe('echo: stream me');
    expect(events.at(-1)).toEqual({ type: 'message_stop' });
  });

  it('a streamed tool call on the wire (snake_case) arrives as a tool_use block', async () => {
    const event = (type: string, data: object) => ({ event: type, data: { type, ...data } });
    fake.enqueue({
      sse: [
        event('message-start', { id: 'c2', delta: { message: { role: 'assistant' } } }),
        event('tool-plan-delta', { delta: { message: { tool_plan: 'Checking.' } } }),
        event('tool-call-start', { index: 0, delta: { message: { tool_calls: { id: 'weather_x1', type: 'function', function: { name: 'weather', arguments: '' } } } } }),
        event('tool-call-delta', { index: 0, delta: { message: { tool_calls: { function: { arguments: '{"city":"Oslo"}' } } } } }),
        event('tool-call-end', { index: 0 }),
        event('message-end', { delta: { finish_reason: 'TOOL_CALL', usage: { tokens: { input_tokens: 8, output_tokens: 3 } } } }),
      ],
    });
    const events = await collect(provider.messagesStream({ ...base, tools: [weather] }, call));
    expect(events.find((e) => e.type === 'content_block_start' && e.content_block.type === 'tool_use')).toMatchObject({ content_block: { id: 'weather_x1', name: 'weather' } });
    const json = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta' ? [e.delta.partial_json] : [])).join('');
    expect(JSON.parse(json)).toEqual({ city: 'Oslo' });
    expect(events.at(-2)).toMatchObject({ delta: { stop_reason: 'tool_use' }, usage: { input_tokens: 8, output_tokens: 3 } });
  });

  it('a stream cut in the middle, or ended before message-end, is a ProviderError', async () => {
    const events = fakeCohereEvents({ messages: [{ role: 'user', content: 'a long enough text' }] });
    fake.enqueue({ sse: events, cutAfter: 3 });
    const cut = await failureOf(collect(provider.messagesStream(base, call)));
    expect(cut instanceof ProviderError || provider.toHubError(cut) instanceof ProviderError).toBe(true);
    fake.enqueue({ sse: events, endEarly: 3 });
    expect(await failureOf(collect(provider.messagesStream(base, call)))).toBeInstanceOf(ProviderError);
  });

  it('embedding: POST /v2/embed with float embeddings for documents', async () => {
    const response = await provider.embedding!({ model: 'embed-v4.0', inputs: ['red fox', 'blue'] }, call);
    expect(bodyOf(fake.lastRequest)).toEqual({ model: 'embed-v4.0', texts: ['red fox', 'blue'], input_type: 'search_document', embedding_types: ['float'] });
    expect(response).toEqual(fakeEmbeddings('embed-v4.0', ['red fox', 'blue'], 3));
  });

  it('embedding: extra options (input_type for queries) pass through', async () => {
    await provider.embedding!({ model: 'embed-v4.0', inputs: ['q'] }, { extra: { inputType: 'search_query' } });
    expect(bodyOf(fake.lastRequest).input_type).toBe('search_query');
  });

  it('embedding: more than 96 texts go in several calls, answers in order', async () => {
    const inputs = Array.from({ length: 200 }, (_, i) => `text number ${i}`);
    const response = await provider.embedding!({ model: 'embed-v4.0', inputs }, call);
    expect(fake.requests.filter((r) => r.path === '/v2/embed').map((r) => (bodyOf(r).texts as string[]).length)).toEqual([96, 96, 8]);
    expect(response.data.map((d) => d.index)).toEqual(inputs.map((_, i) => i));
    expect(response.data[150].embedding).toEqual(fakeVector('text number 150'));
    expect(response.usage.prompt_tokens).toBe(600);
  });

  it('listModels follows next_page_token', async () => {
    const models = await provider.listModels!(call);
    expect(models.map((m) => m.id)).toEqual(['command-a-03-2025', 'command-r7b-12-2024', 'embed-v4.0']);
    expect(fake.requests.map((r) => r.query.get('page_token'))).toEqual([null, '2']);
  });

  const errors: [string, ReturnType<typeof cohereError>, new (...args: never[]) => HubError, Record<string, unknown>][] = [
    ['400', cohereError(400, 'invalid request: message must be at least 1 token long'), InvalidRequestError, { status_code: 400 }],
    ['400 too long', cohereError(400, 'too many tokens: total number of tokens in the prompt cannot exceed 256000'), ContextLengthExceededError, {}],
    ['401', cohereError(401, 'invalid api token'), AuthenticationError, { status_code: 401 }],
    ['498 invalid token', cohereError(498, 'invalid api token'), AuthenticationError, { status_code: 401 }],
    ['404', cohereError(404, "model 'nope' not found"), ModelNotFoundError, {}],
    ['429 with Retry-After', cohereError(429, 'trial key rate limit exceeded', { 'retry-after': '9' }), RateLimitError, { retry_after: 9 }],
    ['500', cohereError(500, 'internal server error'), ProviderError, {}],
    ['502', cohereError(502, 'bad gateway'), UpstreamProviderError, {}],
    ['504', cohereError(504, 'gateway timeout'), GatewayTimeoutError, {}],
  ];
  it.each(errors)('error %s', async (_name, reply, type, fields) => {
    fake.enqueue(reply);
    const mapped = provider.toHubError(await failureOf(provider.messages(base, call)));
    expect(mapped).toBeInstanceOf(type);
    expect(mapped).toMatchObject({ provider_name: 'cohere', ...fields });
    expect(mapped?.message).toBe(`[cohere] ${(reply as { json: { message: string } }).json.message}`);
  });

  it('a refused connection is a ProviderError without status', async () => {
    const other = await startCohereFake();
    const url = other.url;
    await other.close();
    const offline = cohereProvider.create({ api_key: 'k', api_base: url });
    const mapped = offline.toHubError(await failureOf(offline.messages(base, call)));
    expect(mapped).toBeInstanceOf(ProviderError);
    expect(mapped?.status_code).toBeNull();
  });
});
