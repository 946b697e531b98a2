import type Anthropic from '@anthropic-ai/sdk';
import type { ChatResponse } from 'ollama';
import { describe, expect, it } from 'vitest';
import { InvalidRequestError, ModelNotFoundError, ProviderError, RateLimitError, UnsupportedParameterError } from '../../../src/hub/errors.ts';
import type { MessagesParams, Provider } from '../../../src/hub/provider.ts';
import { fromOllamaResponse, fromOllamaStream, toOllamaRequest } from '../../../src/hub/providers/ollama/convert.ts';
import { ollamaProvider } from '../../../src/hub/providers/ollama/index.ts';
import { fakeOllamaChunks, ollamaError, startOllamaFake } from '../../fakes/ollama.ts';
import { bodyOf, type VendorServer } from '../../fakes/vendor-server.ts';
import { collect, failureOf, fakeEmbeddings, useVendorFake, weatherTool as weather } from '../helpers.ts';

const base: MessagesParams = { model: 'llama3.2', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const toolConversation: Anthropic.MessageParam[] = [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: [{ type: 'thinking', thinking: 'use the tool', signature: '' }, { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } }] },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] },
];

describe('ollama request conversion', () => {
  const rows: [string, Partial<MessagesParams>, Record<string, unknown>][] = [
    ['max_tokens → options.num_predict', {}, { options: { num_predict: 100 }, messages: [{ role: 'user', content: 'hi' }] }],
    ['system → system message', { system: 'be brief' }, { messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }] }],
    ['sampling and stop → options', { temperature: 0.1, top_p: 0.5, top_k: 10, stop_sequences: ['END'] }, { options: { num_predict: 100, temperature: 0.1, top_p: 0.5, top_k: 10, stop: ['END'] } }],
    ['tools → function tools', { tools: [weather] }, { tools: [{ type: 'function', function: { name: 'weather', description: 'Weather in a city', parameters: weather.input_schema } }] }],
    ['thinking enabled → think true', { thinking: { type: 'enabled', budget_tokens: 500 } }, { think: true }],
    ['thinking disabled → think false', { thinking: { type: 'disabled' } }, { think: false }],
    ['output_config.format → format schema', { output_config: { format: { type: 'json_schema', schema: { type: 'object' } } } }, { format: { type: 'object' } }],
    [
      'base64 images → images with the text as content',
      { messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVB' } }] }] },
      { messages: [{ role: 'user', content: 'what is this?', images: ['iVB'] }] },
    ],
    [
      'thinking and tool_use → thinking and tool_calls; tool_result → tool message with tool_name',
      { messages: toolConversation },
      {
        messages: [
          { role: 'user', content: 'Weather in Paris?' },
          { role: 'assistant', content: '', thinking: 'use the tool', tool_calls: [{ function: { name: 'weather', arguments: { city: 'Paris' } } }] },
          { role: 'tool', content: 'sunny', tool_name: 'weather' },
        ],
      },
    ],
  ];
  it.each(rows)('%s', (_name, change, expected) => {
    expect(toOllamaRequest({ ...base, ...change } as MessagesParams)).toMatchObject(expected);
  });

  it('tool_choice none is honoured by not offering the tools', () => {
    expect(toOllamaRequest({ ...base, tools: [weather], tool_choice: { type: 'none' } }).tools).toBeUndefined();
    expect(toOllamaRequest({ ...base, tools: [weather], tool_choice: { type: 'auto' } }).tools).toHaveLength(1);
  });

  it('extra options merge into the model options; other extras go on the request', () => {
    expect(toOllamaRequest(base, { options: { num_ctx: 8192 }, keep_alive: '5m' })).toMatchObject({ options: { num_predict: 100, num_ctx: 8192 }, keep_alive: '5m' });
  });

  const unsupported: [string, Partial<MessagesParams>, string][] = [
    ['tool_choice any', { tools: [weather], tool_choice: { type: 'any' } }, 'tool_choice.type=any'],
    ['tool_choice tool', { tools: [weather], tool_choice: { type: 'tool', name: 'weather' } }, 'tool_choice.type=tool'],
    ['disable_parallel_tool_use', { tools: [weather], tool_choice: { type: 'auto', disable_parallel_tool_use: true } }, 'tool_choice.disable_parallel_tool_use'],
    ['URL image', { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }] }, 'image source url'],
    ['metadata', { metadata: { user_id: 'u' } }, 'metadata'],
  ];
  it.each(unsupported)('%s → UnsupportedParameterError', (_name, change, parameter) => {
    let failure: unknown;
    try {
      toOllamaRequest({ ...base, ...change } as MessagesParams);
    } catch (error) {
      failure = error;
    }
    expect(failure).toBeInstanceOf(UnsupportedParameterError);
    expect(failure).toMatchObject({ parameter_name: parameter, provider_name: 'ollama' });
  });

  it('a tool_result without its tool_use is an InvalidRequestError', () => {
    expect(() => toOllamaRequest({ ...base, messages: [toolConversation[2]] })).toThrow(InvalidRequestError);
  });
});

it('ollama: cache_control marks are accepted and not sent', () => {
  const request = toOllamaRequest({ ...base, cache_control: { type: 'ephemeral' }, system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }] });
  expect(JSON.stringify(request)).not.toMatch(/cache/i);
});

describe('ollama response conversion', () => {
  const response = (message: object, done_reason = 'stop') =>
    ({ model: 'qwen3:8b', message: { role: 'assistant', content: '', ...message }, done: true, done_reason, prompt_eval_count: 40, eval_count: 12 }) as unknown as ChatResponse;

  it('thinking, text and tool calls (ids generated: Ollama has none)', () => {
    const message = fromOllamaResponse(response({ thinking: 'hm', content: 'Checking.', tool_calls: [{ function: { name: 'weather', arguments: { city: 'Rome' } } }] }));
    expect(message).toMatchObject({
      model: 'qwen3:8b',
      stop_reason: 'tool_use',
      content: [{ type: 'thinking', thinking: 'hm' }, { type: 'text', text: 'Checking.' }, { type: 'tool_use', name: 'weather', input: { city: 'Rome' } }],
      usage: { input_tokens: 40, output_tokens: 12 },
    });
    expect((message.content[2] as Anthropic.ToolUseBlock).id).toMatch(/^toolu_/);
  });

  it.each([
    ['stop', 'end_turn'],
    ['length', 'max_tokens'],
    ['load', 'end_turn'],
  ])('done_reason %s → %s', (reason, stop) => {
    expect(fromOllamaResponse(response({ content: 'x' }, reason)).stop_reason).toBe(stop);
  });
});

async function* chunksOf(items: unknown[]) {
  for (const item of items) yield item as ChatResponse;
}

describe('ollama stream conversion', () => {
  it('thinking and content deltas, a tool call, then done', async () => {
    const events = await collect(
      fromOllamaStream(
        chunksOf([
          { message: { role: 'assistant', content: '', thinking: 'let me' }, done: false },
          { message: { role: 'assistant', content: '', thinking: ' see' }, done: false },
          { message: { role: 'assistant', content: 'Sure.' }, done: false },
          { message: { role: 'assistant', content: '', tool_calls: [{ function: { name: 'weather', arguments: { city: 'Oslo' } } }] }, done: false },
          { message: { role: 'assistant', content: '' }, done: true, done_reason: 'stop', prompt_eval_count: 9, eval_count: 4 },
        ]),
        'qwen3:8b',
      ),
    );
    expect(events.filter((e) => e.type === 'content_block_start').map((e) => (e as Anthropic.RawContentBlockStartEvent).content_block.type)).toEqual(['thinking', 'text', 'tool_use']);
    expect(events.at(-2)).toMatchObject({ type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { input_tokens: 9, output_tokens: 4 } });
  });

  it('a stream that ends without done is a ProviderError', async () => {
    expect(await failureOf(collect(fromOllamaStream(chunksOf([{ message: { role: 'assistant', content: 'x' }, done: false }]), 'm')))).toBeInstanceOf(ProviderError);
  });
});

describe('ollama provider against the fake server', () => {
  let fake: VendorServer;
  let provider: Provider;
  const call = { extra: {} };
  useVendorFake(startOllamaFake, (started) => {
    fake = started;
    provider = ollamaProvider.create({ api_base: fake.url });
  });

  it('needs no key: metadata says so and no authorization header is sent', async () => {
    expect(ollamaProvider.metadata.env_key).toBeNull();
    await provider.messages(base, call);
    expect(fake.lastRequest.headers.authorization).toBeUndefined();
  });

  it('a key, when given, is sent as a bearer token', async () => {
    const keyed = ollamaProvider.create({ api_key: 'ol-key', api_base: fake.url });
    await keyed.messages(base, call);
    expect(fake.lastRequest.headers.authorization).toBe('Bearer ol-key');
  });

  it('messages: POST /api/chat with stream false and the converted body', async () => {
    const message = await provider.messages({ ...base, system: 'sys', temperature: 0.2, tools: [weather], messages: toolConversation }, call);
    expect(fake.lastRequest.path).toBe('/api/chat');
    expect(bodyOf(fake.lastRequest)).toEqual({
      model: 'llama3.2',
      stream: false,
      options: { num_predict: 100, temperature: 0.2 },
      tools: [{ type: 'function', function: { name: 'weather', description: 'Weather in a city', parameters: weather.input_schema } }],
      messages: [
        { role: 'system', content: 'sys' },
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: '', thinking: 'use the tool', tool_calls: [{ function: { name: 'weather', arguments: { city: 'Paris' } } }] },
        { role: 'tool', content: 'sunny', tool_name: 'weather' },
      ],
    });
    expect(message).toMatchObject({ model: 'llama3.2', content: [{ type: 'text', text: 'echo: Weather in Paris?' }], usage: { input_tokens: 26, output_tokens: 7 } });
  });

  it('tool calls and thinking on the wire, answered and streamed', async () => {
    const answer = {
      model: 'qwen3:8b',
      created_at: '2026-11-22T00:00:00Z',
      message: { role: 'assistant', content: '', thinking: 'need the tool', tool_calls: [{ function: { name: 'weather', arguments: { city: 'Lyon' } } }] },
      done: true,
      done_reason: 'stop',
      prompt_eval_count: 20,
      eval_count: 5,
    };
    fake.enqueue({ json: answer });
    const message = await provider.messages({ ...base, model: 'qwen3:8b', tools: [weather] }, call);
    expect(message).toMatchObject({ stop_reason: 'tool_use', content: [{ type: 'thinking', thinking: 'need the tool' }, { type: 'tool_use', name: 'weather', input: { city: 'Lyon' } }] });
    fake.enqueue({ ndjson: [{ ...answer, done: false, done_reason: undefined }, { ...answer, message: { role: 'assistant', content: '' } }] });
    const events = await collect(provider.messagesStream({ ...base, model: 'qwen3:8b', tools: [weather] }, call));
    expect(events.filter((e) => e.type === 'content_block_start').map((e) => (e as Anthropic.RawContentBlockStartEvent).content_block.type)).toEqual(['thinking', 'tool_use']);
    expect(events.at(-2)).toMatchObject({ delta: { stop_reason: 'tool_use' }, usage: { input_tokens: 20, output_tokens: 5 } });
  });

  it('messagesStream: NDJSON chunks become Messages events', async () => {
    const events = await collect(provider.messagesStream({ ...base, messages: [{ role: 'user', content: 'stream me' }] }, call));
    expect(bodyOf(fake.lastRequest).stream).toBe(true);
    const text = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? [e.delta.text] : [])).join('');
    expect(text).toBe('echo: stream me');
    expect(events.at(-1)).toEqual({ type: 'message_stop' });
  });

  it('a stream cut in the middle, or ended before done, is a ProviderError', async () => {
    const chunks = fakeOllamaChunks({ model: 'llama3.2', messages: [{ role: 'user', content: 'a long enough text' }] });
    fake.enqueue({ ndjson: chunks, cutAfter: 2 });
    const cut = await failureOf(collect(provider.messagesStream(base, call)));
    expect(cut instanceof ProviderError || provider.toHubError(cut) instanceof ProviderError).toBe(true);
    fake.enqueue({ ndjson: chunks, endEarly: 2 });
    expect(await failureOf(collect(provider.messagesStream(base, call)))).toBeInstanceOf(ProviderError);
  });

  it('an error line inside the stream fails the stream', async () => {
    fake.enqueue({ ndjson: [fakeOllamaChunks({ model: 'llama3.2', messages: [] })[0], { error: 'out of memory' }] });
    const failure = await failureOf(collect(provider.messagesStream(base, call)));
    expect(String(failure)).toMatch(/out of memory/);
  });

  it('embedding: POST /api/embed', async () => {
    const response = await provider.embedding!({ model: 'nomic-embed-text', inputs: ['one', 'two'] }, call);
    expect(bodyOf(fake.lastRequest)).toEqual({ model: 'nomic-embed-text', input: ['one', 'two'] });
    expect(response).toEqual(fakeEmbeddings('nomic-embed-text', ['one', 'two'], 6));
  });

  it('listModels: GET /api/tags', async () => {
    const models = await provider.listModels!(call);
    expect(fake.lastRequest.path).toBe('/api/tags');
    expect(models[0]).toEqual({ id: 'llama3.2:latest', object: 'model', created: Date.parse('2026-11-01T10:00:00Z') / 1000, owned_by: 'ollama' });
    expect(models).toHaveLength(3);
  });

  it('an unknown model is the server 404 → ModelNotFoundError with its message', async () => {
    const mapped = provider.toHubError(await failureOf(provider.messages({ ...base, model: 'nope' }, call)));
    expect(mapped).toBeInstanceOf(ModelNotFoundError);
    expect(mapped?.message).toBe('[ollama] model "nope" not found, try pulling it first');
  });

  it('429 keeps Retry-After even though the SDK drops headers', async () => {
    fake.enqueue(ollamaError(429, 'server busy, please try again', { 'retry-after': '2' }));
    const mapped = provider.toHubError(await failureOf(provider.messages(base, call)));
    expect(mapped).toBeInstanceOf(RateLimitError);
    expect((mapped as RateLimitError).retry_after).toBe(2);
  });

  it('500 → ProviderError; no server at the address → ProviderError without status', async () => {
    fake.enqueue(ollamaError(500, 'llama runner process has terminated'));
    expect(provider.toHubError(await failureOf(provider.messages(base, call)))).toBeInstanceOf(ProviderError);
    const gone = await startOllamaFake();
    const url = gone.url;
    await gone.close();
    const offline = ollamaProvider.create({ api_base: url });
    const mapped = offline.toHubError(await failureOf(offline.messages(base, call)));
    expect(mapped).toBeInstanceOf(ProviderError);
    expect(mapped?.status_code).toBeNull();
  });

  it('an abort signal stops the call', async () => {
    const controller = new AbortController();
    controller.abort();
    const failure = await failureOf(provider.messages(base, { signal: controller.signal, extra: {} }));
    expect(provider.toHubError(failure)).toBeUndefined();
  });
});
