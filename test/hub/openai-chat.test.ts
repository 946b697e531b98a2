import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { chatChunksToMessageEvents, chatCompletionToMessage } from '../../src/hub/openai-chat/response-from-chat.ts';
import { DEFAULT_MAX_TOKENS, chatRequestToMessages } from '../../src/hub/openai-chat/request-from-chat.ts';
import { messageEventsToChatChunks, messageToChatCompletion } from '../../src/hub/openai-chat/response-to-chat.ts';
import { messagesToChatRequest } from '../../src/hub/openai-chat/request-to-chat.ts';
import type { ChatDialect } from '../../src/hub/openai-chat/request-to-chat.ts';
import { ProviderError, UnsupportedParameterError } from '../../src/hub/errors.ts';
import type { CompletionParams, MessagesParams } from '../../src/hub/provider.ts';
import { chatChunks } from '../fakes/openai-compatible.ts';
import { collect } from './helpers.ts';

const openaiDialect: ChatDialect = { provider_name: 'openai', top_k: false, reasoning: true, max_tokens_field: 'max_completion_tokens', user: true, image: true };
const localDialect: ChatDialect = { provider_name: 'vllm', top_k: true, reasoning: false, max_tokens_field: 'max_tokens', user: false, image: false };
const base: MessagesParams = { model: 'm', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] };

async function* from<T>(items: T[]): AsyncGenerator<T> {
  for (const item of items) yield item;
}

describe('Messages request → chat request (every rule)', () => {
  const cases: [string, Partial<MessagesParams>, ChatDialect, Record<string, unknown>][] = [
    ['string system → system message', { system: 'be brief' }, openaiDialect, { messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }] }],
    [
      'system blocks (cache_control ignored) → one system message',
      { system: [{ type: 'text', text: 'a', cache_control: { type: 'ephemeral' } }, { type: 'text', text: 'b' }] },
      openaiDialect,
      { messages: [{ role: 'system', content: 'a\nb' }, { role: 'user', content: 'hi' }] },
    ],
    ['max_tokens → max_completion_tokens (openai)', {}, openaiDialect, { max_completion_tokens: 50 }],
    ['max_tokens → max_tokens (compatible)', {}, localDialect, { max_tokens: 50 }],
    ['temperature, top_p', { temperature: 0.3, top_p: 0.9 }, openaiDialect, { temperature: 0.3, top_p: 0.9 }],
    ['top_k where supported', { top_k: 40 }, localDialect, { top_k: 40 }],
    ['stop_sequences → stop', { stop_sequences: ['END'] }, openaiDialect, { stop: ['END'] }],
    ['metadata.user_id → user', { metadata: { user_id: 'u1' } }, openaiDialect, { user: 'u1' }],
    ['thinking budget → reasoning_effort', { thinking: { type: 'enabled', budget_tokens: 2048 } }, openaiDialect, { reasoning_effort: 'low' }],
    ['large thinking budget → high', { thinking: { type: 'enabled', budget_tokens: 20000 } }, openaiDialect, { reasoning_effort: 'high' }],
    [
      'tools → functions',
      { tools: [{ name: 'get', description: 'Get it', input_schema: { type: 'object', properties: { q: { type: 'string' } } } }] },
      openaiDialect,
      { tools: [{ type: 'function', function: { name: 'get', description: 'Get it', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }] },
    ],
    ['tool_choice auto', { tool_choice: { type: 'auto' } }, openaiDialect, { tool_choice: 'auto' }],
    ['tool_choice any → required', { tool_choice: { type: 'any' } }, openaiDialect, { tool_choice: 'required' }],
    ['tool_choice none', { tool_choice: { type: 'none' } }, openaiDialect, { tool_choice: 'none' }],
    [
      'tool_choice tool + disable_parallel_tool_use',
      { tool_choice: { type: 'tool', name: 'get', disable_parallel_tool_use: true } },
      openaiDialect,
      { tool_choice: { type: 'function', function: { name: 'get' } }, parallel_tool_calls: false },
    ],
    [
      'output_config.format → response_format json_schema',
      { output_config: { format: { type: 'json_schema', schema: { type: 'object' } } } },
      openaiDialect,
      { response_format: { type: 'json_schema', json_schema: { name: 'output', schema: { type: 'object' } } } },
    ],
  ];
  it.each(cases)('%s', (_name, params, dialect, expected) => {
    expect(messagesToChatRequest({ ...base, ...params } as MessagesParams, dialect)).toMatchObject(expected);
  });

  it('images: base64 → data URL, url → image_url; text-only user turns stay strings', () => {
    const chat = messagesToChatRequest(
      {
        ...base,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'look' },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
              { type: 'image', source: { type: 'url', url: 'https://x/y.png' } },
            ],
          },
          { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
        ],
      },
      openaiDialect,
    );
    expect(chat.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
          { type: 'image_url', image_url: { url: 'https://x/y.png' } },
        ],
      },
      { role: 'user', content: 'a\nb' },
    ]);
  });

  it('a base64 PDF document → a file part', () => {
    const chat = messagesToChatRequest(
      {
        ...base,
        messages: [{ role: 'user', content: [{ type: 'document', title: 'a.pdf', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBE' } }] }],
      },
      openaiDialect,
    );
    expect(chat.messages).toEqual([{ role: 'user', content: [{ type: 'file', file: { file_data: 'data:application/pdf;base64,JVBE', filename: 'a.pdf' } }] }]);
  });

  it('tool_use → assistant tool_calls; tool_result → tool messages before the rest of the user turn; thinking dropped', () => {
    const chat = messagesToChatRequest(
      {
        ...base,
        messages: [
          { role: 'user', content: 'weather?' },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'hmm', signature: 's' },
              { type: 'text', text: 'Checking.' },
              { type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Oslo' } },
            ],
          },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'call_1', content: [{ type: 'text', text: 'rain' }] },
              { type: 'tool_result', tool_use_id: 'call_2', content: 'boom', is_error: true },
              { type: 'text', text: 'and tomorrow?' },
            ],
          },
        ],
      },
      openaiDialect,
    );
    expect(chat.messages).toEqual([
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: 'Checking.', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'rain' },
      { role: 'tool', tool_call_id: 'call_2', content: 'Error: boom' },
      { role: 'user', content: 'and tomorrow?' },
    ]);
  });

  const unsupported: [string, Partial<MessagesParams> & Record<string, unknown>, ChatDialect, string][] = [
    ['top_k on OpenAI', { top_k: 5 }, openaiDialect, 'top_k'],
    ['thinking without reasoning control', { thinking: { type: 'enabled', budget_tokens: 1024 } }, localDialect, 'thinking'],
    ['metadata.user_id without user field', { metadata: { user_id: 'u' } }, localDialect, 'metadata.user_id'],
    ['server tools', { tools: [{ type: 'web_search_20250305', name: 'web_search' }] as MessagesParams['tools'] }, openaiDialect, 'tools'],
    ['an Anthropic-only field', { service_tier: 'auto' }, openaiDialect, 'service_tier'],
    ['output effort', { output_config: { effort: 'high' } }, openaiDialect, 'output_config.effort'],
    [
      'an image where the dialect takes none',
      { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }] },
      localDialect,
      'image',
    ],
  ];
  it.each(unsupported)('%s → UnsupportedParameterError', (_name, params, dialect, parameter) => {
    let caught: unknown;
    try {
      messagesToChatRequest({ ...base, ...params } as MessagesParams, dialect);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(UnsupportedParameterError);
    expect((caught as UnsupportedParameterError).parameter_name).toBe(parameter);
    expect((caught as UnsupportedParameterError).provider_name).toBe(dialect.provider_name);
  });

  it('thinking disabled is accepted everywhere', () => {
    expect(messagesToChatRequest({ ...base, thinking: { type: 'disabled' } }, localDialect)).not.toHaveProperty('reasoning_effort');
  });
});

describe('chat completion → Message', () => {
  const completion = (message: Partial<OpenAI.ChatCompletionMessage> & Record<string, unknown>, finish: string, usage?: OpenAI.CompletionUsage): OpenAI.ChatCompletion =>
    ({
      id: 'c1',
      object: 'chat.completion',
      created: 1,
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: null, ...message }, finish_reason: finish, logprobs: null }],
      ...(usage ? { usage } : {}),
    }) as OpenAI.ChatCompletion;

  it.each([
    ['stop', 'end_turn'],
    ['length', 'max_tokens'],
    ['tool_calls', 'tool_use'],
    ['function_call', 'tool_use'],
    ['content_filter', 'refusal'],
  ])('finish_reason %s → stop_reason %s', (finish, stop) => {
    expect(chatCompletionToMessage(completion({ content: 'x' }, finish), 'p').stop_reason).toBe(stop);
  });

  it('text, reasoning and tool calls become content blocks; usage splits out cached tokens', () => {
    const message = chatCompletionToMessage(
      completion(
        {
          content: 'Sure.',
          reasoning_content: 'thinking...',
          tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
        },
        'tool_calls',
        { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120, prompt_tokens_details: { cached_tokens: 60 }, completion_tokens_details: { reasoning_tokens: 5 } },
      ),
      'p',
    );
    expect(message).toMatchObject({ id: 'c1', type: 'message', role: 'assistant', model: 'm', stop_reason: 'tool_use', stop_sequence: null });
    expect(message.content).toEqual([
      { type: 'thinking', thinking: 'thinking...', signature: '' },
      { type: 'text', text: 'Sure.', citations: null },
      { type: 'tool_use', id: 't1', name: 'f', input: { a: 1 }, caller: { type: 'direct' } },
    ]);
    expect(message.usage).toMatchObject({ input_tokens: 40, cache_read_input_tokens: 60, output_tokens: 20, output_tokens_details: { thinking_tokens: 5 } });
  });

  it('a refusal becomes text with stop_reason refusal; invalid tool JSON is kept raw', () => {
    expect(chatCompletionToMessage(completion({ refusal: 'I cannot.' }, 'stop'), 'p')).toMatchObject({
      stop_reason: 'refusal',
      content: [{ type: 'text', text: 'I cannot.' }],
    });
    const broken = chatCompletionToMessage(completion({ tool_calls: [{ id: 't', type: 'function', function: { name: 'f', arguments: '{oops' } }] }, 'tool_calls'), 'p');
    expect(broken.content[0]).toMatchObject({ type: 'tool_use', input: { _raw_arguments: '{oops' } });
  });

  it('no choices → ProviderError', () => {
    expect(() => chatCompletionToMessage({ id: 'x', object: 'chat.completion', created: 1, model: 'm', choices: [] }, 'p')).toThrow(ProviderError);
  });
});

describe('chat chunk stream → Messages stream events', () => {
  it('text stream: start, one text block, delta with usage, stop', async () => {
    const events = await collect(chatChunksToMessageEvents(from(chatChunks('m', ['Hel', 'lo']) as OpenAI.ChatCompletionChunk[]), 'p'));
    expect(events.map((e) => e.type)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events[1]).toMatchObject({ index: 0, content_block: { type: 'text', text: '' } });
    expect(events.slice(2, 4).map((e) => (e as Anthropic.RawContentBlockDeltaEvent).delta)).toEqual([
      { type: 'text_delta', text: 'Hel' },
      { type: 'text_delta', text: 'lo' },
    ]);
    expect(events[5]).toMatchObject({ delta: { stop_reason: 'end_turn' }, usage: { input_tokens: 10, output_tokens: 2 } });
  });

  it('reasoning, text and two tool calls become separate blocks with their own indexes', async () => {
    const c = (delta: Record<string, unknown>, finish: string | null = null) =>
      ({ id: 's', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] }) as OpenAI.ChatCompletionChunk;
    const events = await collect(
      chatChunksToMessageEvents(
        from([
          c({ role: 'assistant', reasoning_content: 'hm' }),
          c({ content: 'ok' }),
          c({ tool_calls: [{ index: 0, id: 'a', type: 'function', function: { name: 'f', arguments: '{"x"' } }] }),
          c({ tool_calls: [{ index: 0, function: { arguments: ':1}' } }] }),
          c({ tool_calls: [{ index: 1, id: 'b', type: 'function', function: { name: 'g', arguments: '{}' } }] }),
          c({}, 'tool_calls'),
        ]),
        'p',
      ),
    );
    const starts = events.filter((e): e is Anthropic.RawContentBlockStartEvent => e.type === 'content_block_start');
    expect(starts.map((s) => [s.index, s.content_block.type])).toEqual([
      [0, 'thinking'],
      [1, 'text'],
      [2, 'tool_use'],
      [3, 'tool_use'],
    ]);
    expect(starts[2]!.content_block).toMatchObject({ id: 'a', name: 'f' });
    const json = events.filter((e): e is Anthropic.RawContentBlockDeltaEvent => e.type === 'content_block_delta' && e.delta.type === 'input_json_delta');
    expect(json.map((e) => [e.index, (e.delta as Anthropic.InputJSONDelta).partial_json])).toEqual([
      [2, '{"x"'],
      [2, ':1}'],
      [3, '{}'],
    ]);
    expect(events.filter((e) => e.type === 'content_block_stop')).toHaveLength(4);
    expect(events.at(-2)).toMatchObject({ type: 'message_delta', delta: { stop_reason: 'tool_use' } });
  });

  it('a stream that ends without finish_reason (cut) raises ProviderError after the events it had', async () => {
    const chunks = chatChunks('m', ['a', 'b']).slice(0, 3) as OpenAI.ChatCompletionChunk[];
    const seen: string[] = [];
    await expect(
      (async () => {
        for await (const event of chatChunksToMessageEvents(from(chunks), 'p')) seen.push(event.type);
      })(),
    ).rejects.toBeInstanceOf(ProviderError);
    expect(seen).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'content_block_delta']);
  });
});

describe('chat request → Messages request (completion adapter)', () => {
  const request = (extra: Partial<CompletionParams> & Record<string, unknown>): CompletionParams =>
    ({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra }) as CompletionParams;

  it.each([
    ['default max_tokens', {}, { max_tokens: DEFAULT_MAX_TOKENS }],
    ['max_completion_tokens wins', { max_completion_tokens: 9, max_tokens: 3 }, { max_tokens: 9 }],
    ['stop string → stop_sequences', { stop: 'END' }, { stop_sequences: ['END'] }],
    ['user → metadata.user_id', { user: 'u' }, { metadata: { user_id: 'u' } }],
    ['required → any', { tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'required' }, { tool_choice: { type: 'any', disable_parallel_tool_use: false } }],
    ['named function', { tool_choice: { type: 'function', function: { name: 'f' } }, parallel_tool_calls: false }, { tool_choice: { type: 'tool', name: 'f', disable_parallel_tool_use: true } }],
    ['json_schema → output_config', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' } } } }, { output_config: { format: { type: 'json_schema', schema: { type: 'object' } } } }],
    ['reasoning_effort → thinking budget', { reasoning_effort: 'low' }, { thinking: { type: 'enabled', budget_tokens: 2048 } }],
  ] as [string, Record<string, unknown>, Record<string, unknown>][])('%s', (_name, extra, expected) => {
    expect(chatRequestToMessages(request(extra), 'anthropic')).toMatchObject(expected);
  });

  it('system/developer → system; tool messages → merged tool_result turn; data URLs → base64 images', () => {
    const out = chatRequestToMessages(
      request({
        messages: [
          { role: 'system', content: 'sys' },
          { role: 'developer', content: 'dev' },
          { role: 'user', content: [{ type: 'text', text: 'see' }, { type: 'image_url', image_url: { url: 'data:image/jpeg;base64,QUJD' } }] },
          { role: 'assistant', content: null, tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{"q":1}' } }, { id: 'b', type: 'function', function: { name: 'g', arguments: '' } }] },
          { role: 'tool', tool_call_id: 'a', content: 'r1' },
          { role: 'tool', tool_call_id: 'b', content: 'r2' },
        ],
      }),
      'anthropic',
    );
    expect(out.system).toBe('sys\ndev');
    expect(out.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'see' }, { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: 'QUJD' } }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'a', name: 'f', input: { q: 1 } }, { type: 'tool_use', id: 'b', name: 'g', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: 'r1' }, { type: 'tool_result', tool_use_id: 'b', content: 'r2' }] },
    ]);
  });

  it.each([
    ['n > 1', { n: 2 }, 'n'],
    ['logprobs', { logprobs: true }, 'logprobs'],
    ['json_object', { response_format: { type: 'json_object' } }, "response_format 'json_object'"],
  ] as [string, Record<string, unknown>, string][])('%s → UnsupportedParameterError', (_name, extra, parameter) => {
    expect(() => chatRequestToMessages(request(extra), 'anthropic')).toThrow(UnsupportedParameterError);
    try {
      chatRequestToMessages(request(extra), 'anthropic');
    } catch (error) {
      expect((error as UnsupportedParameterError).parameter_name).toBe(parameter);
    }
  });
});

describe('Message → chat completion (completion adapter)', () => {
  const message: Anthropic.Message = {
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'claude',
    content: [
      { type: 'thinking', thinking: 'th', signature: 'sig' },
      { type: 'text', text: 'Hi', citations: null },
      { type: 'tool_use', id: 'tu', name: 'f', input: { a: 1 }, caller: { type: 'direct' } },
    ],
    container: null,
    diagnostics: null,
    stop_details: null,
    stop_reason: 'tool_use',
    stop_sequence: null,
    usage: {
      input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 30, cache_creation_input_tokens: 2, cache_creation: null,
      inference_geo: null, output_tokens_details: null, server_tool_use: null, service_tier: null, speed: null,
    },
  };

  it('content, tool calls, finish_reason and usage (prompt includes cache reads and writes)', () => {
    const chat = messageToChatCompletion(message);
    expect(chat.choices[0]).toMatchObject({
      finish_reason: 'tool_calls',
      message: { role: 'assistant', content: 'Hi', reasoning_content: 'th', tool_calls: [{ id: 'tu', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
    });
    expect(chat.usage).toEqual({ prompt_tokens: 42, completion_tokens: 5, total_tokens: 47, prompt_tokens_details: { cached_tokens: 30 }, cache_creation_input_tokens: 2 });
  });

  it.each([
    ['end_turn', 'stop'],
    ['stop_sequence', 'stop'],
    ['max_tokens', 'length'],
    ['tool_use', 'tool_calls'],
    ['refusal', 'content_filter'],
  ] as [Anthropic.StopReason, string][])('stop_reason %s → finish_reason %s', (stop, finish) => {
    expect(messageToChatCompletion({ ...message, stop_reason: stop }).choices[0]!.finish_reason).toBe(finish);
  });

  it('stream events → chunks: role first, text, tool call deltas, final finish with usage', async () => {
    const events: Anthropic.RawMessageStreamEvent[] = [
      { type: 'message_start', message: { ...message, content: [], stop_reason: null } },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '', citations: null } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'tu', name: 'f', input: {}, caller: { type: 'direct' } } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"a":1}' } },
      { type: 'content_block_stop', index: 1 },
      {
        type: 'message_delta',
        delta: { stop_reason: 'tool_use', stop_sequence: null, container: null, stop_details: null },
        usage: { input_tokens: null, output_tokens: 7, cache_read_input_tokens: null, cache_creation_input_tokens: null, output_tokens_details: null, server_tool_use: null },
      },
      { type: 'message_stop' },
    ];
    const chunks = await collect(messageEventsToChatChunks(from(events)));
    expect(chunks.map((c) => c.choices[0]!.delta)).toEqual([
      { role: 'assistant', content: '' },
      { content: 'Hi' },
      { tool_calls: [{ index: 0, id: 'tu', type: 'function', function: { name: 'f', arguments: '' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"a":1}' } }] },
      {},
    ]);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('tool_calls');
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 42, completion_tokens: 7 });
    expect(new Set(chunks.map((c) => c.id))).toEqual(new Set(['msg_1']));
  });
});
