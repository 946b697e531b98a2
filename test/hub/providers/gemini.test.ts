import type Anthropic from '@anthropic-ai/sdk';
import type { GenerateContentResponse } from '@google/genai';
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
import { fromGeminiResponse, fromGeminiStream, toGeminiRequest } from '../../../src/hub/providers/gemini/convert.ts';
import { geminiProvider } from '../../../src/hub/providers/gemini/index.ts';
import { fakeGeminiChunks, fakeVector, googleError, startGeminiFake } from '../../fakes/gemini.ts';
import { bodyOf, type VendorServer } from '../../fakes/vendor-server.ts';
import { collect, failureOf, fakeEmbeddings, useVendorFake } from '../helpers.ts';

const base: MessagesParams = { model: 'gemini-2.5-flash', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const weather: Anthropic.Tool = { name: 'weather', description: 'Weather in a city', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
const toolConversation: Anthropic.MessageParam[] = [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } }] },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'sunny' }] }] },
];

describe('gemini request conversion', () => {
  const rows: [string, Partial<MessagesParams>, Record<string, unknown>][] = [
    ['max_tokens → maxOutputTokens', {}, { config: { maxOutputTokens: 100 } }],
    ['system string → systemInstruction', { system: 'be brief' }, { config: { systemInstruction: 'be brief' } }],
    ['system blocks → joined systemInstruction', { system: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }, { config: { systemInstruction: 'a\n\nb' } }],
    ['temperature, top_p, top_k', { temperature: 0.3, top_p: 0.9, top_k: 20 }, { config: { temperature: 0.3, topP: 0.9, topK: 20 } }],
    ['stop_sequences → stopSequences', { stop_sequences: ['END', '##'] }, { config: { stopSequences: ['END', '##'] } }],
    [
      'tools → functionDeclarations with the JSON schema',
      { tools: [weather] },
      { config: { tools: [{ functionDeclarations: [{ name: 'weather', description: 'Weather in a city', parametersJsonSchema: weather.input_schema }] }] } },
    ],
    ['tool_choice auto', { tool_choice: { type: 'auto' } }, { config: { toolConfig: { functionCallingConfig: { mode: 'AUTO' } } } }],
    ['tool_choice any', { tool_choice: { type: 'any' } }, { config: { toolConfig: { functionCallingConfig: { mode: 'ANY' } } } }],
    ['tool_choice tool', { tool_choice: { type: 'tool', name: 'weather' } }, { config: { toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['weather'] } } } }],
    ['tool_choice none', { tool_choice: { type: 'none' } }, { config: { toolConfig: { functionCallingConfig: { mode: 'NONE' } } } }],
    ['thinking enabled → budget, thoughts included', { thinking: { type: 'enabled', budget_tokens: 2048 } }, { config: { thinkingConfig: { thinkingBudget: 2048, includeThoughts: true } } }],
    ['thinking enabled, display omitted', { thinking: { type: 'enabled', budget_tokens: 1024, display: 'omitted' } }, { config: { thinkingConfig: { thinkingBudget: 1024, includeThoughts: false } } }],
    ['thinking adaptive → dynamic budget', { thinking: { type: 'adaptive' } }, { config: { thinkingConfig: { thinkingBudget: -1, includeThoughts: true } } }],
    ['thinking disabled → budget 0', { thinking: { type: 'disabled' } }, { config: { thinkingConfig: { thinkingBudget: 0 } } }],
    [
      'output_config.format → JSON mime type and schema',
      { output_config: { format: { type: 'json_schema', schema: { type: 'object' } } } },
      { config: { responseMimeType: 'application/json', responseJsonSchema: { type: 'object' } } },
    ],
    ['user text → user role part', {}, { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }],
    [
      'base64 image → inlineData',
      { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBOR' } }, { type: 'text', text: 'what?' }] }] },
      { contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'image/png', data: 'iVBOR' } }, { text: 'what?' }] }] },
    ],
    [
      'base64 PDF document → inlineData',
      { messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBER' } }] }] },
      { contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'application/pdf', data: 'JVBER' } }] }] },
    ],
    [
      'tool_use → model functionCall; tool_result → functionResponse named after the call',
      { messages: toolConversation },
      {
        contents: [
          { role: 'user', parts: [{ text: 'Weather in Paris?' }] },
          { role: 'model', parts: [{ text: 'Checking.' }, { functionCall: { id: 'toolu_1', name: 'weather', args: { city: 'Paris' } } }] },
          { role: 'user', parts: [{ functionResponse: { id: 'toolu_1', name: 'weather', response: { output: 'sunny' } } }] },
        ],
      },
    ],
    [
      'tool_result with is_error → response.error',
      { messages: [toolConversation[0], toolConversation[1], { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'no such city', is_error: true }] }] },
      { contents: [{}, {}, { role: 'user', parts: [{ functionResponse: { id: 'toolu_1', name: 'weather', response: { error: 'no such city' } } }] }] },
    ],
    [
      'thinking blocks → thought parts; an empty signed one → the next part\'s thoughtSignature',
      {
        messages: [
          { role: 'user', content: 'q' },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'let me think', signature: 'sig-a' },
              { type: 'thinking', thinking: '', signature: 'sig-b' },
              { type: 'tool_use', id: 't1', name: 'weather', input: {} },
            ],
          },
        ],
      },
      {
        contents: [
          {},
          { role: 'model', parts: [{ text: 'let me think', thought: true, thoughtSignature: 'sig-a' }, { functionCall: { id: 't1', name: 'weather', args: {} }, thoughtSignature: 'sig-b' }] },
        ],
      },
    ],
  ];
  it.each(rows)('%s', (_name, change, expected) => {
    expect(toGeminiRequest({ ...base, ...change } as MessagesParams)).toMatchObject(expected);
  });

  it('cache_control marks are accepted and not sent (Gemini caches prefixes implicitly)', () => {
    const request = toGeminiRequest({
      ...base,
      cache_control: { type: 'ephemeral' },
      system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] }],
    });
    expect(JSON.stringify(request)).not.toMatch(/cache/i);
    expect(request).toMatchObject({ contents: [{ parts: [{ text: 'hi' }] }], config: { systemInstruction: 's' } });
  });

  it('merges provider-specific extra options into the config', () => {
    const request = toGeminiRequest(base, { safetySettings: [{ category: 'HARM_CATEGORY_HATE_SPEECH', threshold: 'BLOCK_NONE' }], seed: 7 });
    expect(request.config?.safetySettings).toHaveLength(1);
    expect(request.config?.seed).toBe(7);
  });

  it('an extra option the SDK would drop silently is an UnsupportedParameterError', () => {
    expect(() => toGeminiRequest(base, { safety_settings: [] })).toThrow(UnsupportedParameterError);
  });

  const unsupported: [string, Partial<MessagesParams>, string][] = [
    ['metadata', { metadata: { user_id: 'u' } }, 'metadata'],
    ['service_tier', { service_tier: 'auto' }, 'service_tier'],
    ['disable_parallel_tool_use', { tools: [weather], tool_choice: { type: 'auto', disable_parallel_tool_use: true } }, 'tool_choice.disable_parallel_tool_use'],
    ['URL image', { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }] }, 'image source url'],
    ['server tool', { tools: [{ type: 'web_search_20250305', name: 'web_search' } as Anthropic.ToolUnion] }, 'tools[type=web_search_20250305]'],
    ['redacted thinking', { messages: [{ role: 'assistant', content: [{ type: 'redacted_thinking', data: 'xx' }] }] }, 'content block redacted_thinking'],
    ['thinking between_tools', { thinking: { type: 'between_tools' } }, 'thinking.type=between_tools'],
    [
      'document title',
      { messages: [{ role: 'user', content: [{ type: 'document', title: 'Report', source: { type: 'text', media_type: 'text/plain', data: 'x' } }] }] },
      'document.title',
    ],
    [
      'document citations',
      { messages: [{ role: 'user', content: [{ type: 'document', citations: { enabled: true }, source: { type: 'text', media_type: 'text/plain', data: 'x' } }] }] },
      'document.citations',
    ],
    [
      'citations on a text block',
      { messages: [{ role: 'user', content: [{ type: 'text', text: 'x', citations: [{ type: 'char_location', cited_text: 'x', document_index: 0, document_title: null, start_char_index: 0, end_char_index: 1 }] }] }] },
      'text.citations',
    ],
    ['output_config.effort', { output_config: { effort: 'high' } }, 'output_config.effort'],
    [
      'an image inside a tool result',
      {
        messages: [
          toolConversation[1],
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'x' } }] }] },
        ],
      },
      'tool_result content of type image',
    ],
  ];
  it.each(unsupported)('%s → UnsupportedParameterError', (_name, change, parameter) => {
    const failure = (() => {
      try {
        toGeminiRequest({ ...base, ...change } as MessagesParams);
      } catch (error) {
        return error;
      }
      return null;
    })();
    expect(failure).toBeInstanceOf(UnsupportedParameterError);
    expect(failure).toMatchObject({ parameter_name: parameter, provider_name: 'gemini' });
  });

  it('a tool_result without its tool_use is an InvalidRequestError', () => {
    expect(() => toGeminiRequest({ ...base, messages: [toolConversation[2]] })).toThrow(InvalidRequestError);
  });
});

describe('gemini response conversion', () => {
  const usage = { promptTokenCount: 100, cachedContentTokenCount: 40, candidatesTokenCount: 20, thoughtsTokenCount: 5, totalTokenCount: 125 };
  const response = (parts: unknown[], finishReason = 'STOP', extra: object = {}) =>
    ({ candidates: [{ content: { role: 'model', parts }, finishReason }], usageMetadata: usage, responseId: 'r1', ...extra }) as unknown as GenerateContentResponse;

  it('text parts are one text block; usage splits cached input and counts thoughts as output', () => {
    const message = fromGeminiResponse(response([{ text: 'Hel' }, { text: 'lo' }]), 'gemini-2.5-flash');
    expect(message).toMatchObject({ id: 'r1', model: 'gemini-2.5-flash', role: 'assistant', stop_reason: 'end_turn', content: [{ type: 'text', text: 'Hello' }] });
    expect(message.usage).toMatchObject({ input_tokens: 60, cache_read_input_tokens: 40, output_tokens: 25, output_tokens_details: { thinking_tokens: 5 } });
  });

  it('functionCall → tool_use and stop_reason tool_use; thoughts → thinking blocks; signatures kept', () => {
    const message = fromGeminiResponse(
      response([
        { text: 'plan', thought: true, thoughtSignature: 's1' },
        { functionCall: { id: 'call_9', name: 'weather', args: { city: 'Paris' } }, thoughtSignature: 's2' },
        { functionCall: { name: 'weather', args: { city: 'Rome' } } },
      ]),
      'm',
    );
    expect(message.stop_reason).toBe('tool_use');
    expect(message.content).toMatchObject([
      { type: 'thinking', thinking: 'plan', signature: 's1' },
      { type: 'thinking', thinking: '', signature: 's2' },
      { type: 'tool_use', id: 'call_9', name: 'weather', input: { city: 'Paris' } },
      { type: 'tool_use', name: 'weather', input: { city: 'Rome' } },
    ]);
    expect((message.content[3] as Anthropic.ToolUseBlock).id).toMatch(/^toolu_/);
    // the signature goes back on the part it came with
    const back = toGeminiRequest({ ...base, messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: message.content as Anthropic.ContentBlockParam[] }] });
    expect(back.contents).toMatchObject([{}, { parts: [{ thoughtSignature: 's1', thought: true }, { functionCall: { id: 'call_9' }, thoughtSignature: 's2' }, { functionCall: { name: 'weather' } }] }]);
  });

  it.each([
    ['STOP', 'end_turn'],
    ['MAX_TOKENS', 'max_tokens'],
    ['SAFETY', 'refusal'],
    ['RECITATION', 'refusal'],
    ['PROHIBITED_CONTENT', 'refusal'],
    ['BLOCKLIST', 'refusal'],
    ['SPII', 'refusal'],
    ['OTHER', 'end_turn'],
  ])('finishReason %s → stop_reason %s', (finish, stop) => {
    expect(fromGeminiResponse(response([{ text: 'x' }], finish), 'm').stop_reason).toBe(stop);
  });

  it('a prompt blocked before any candidate is an empty refusal', () => {
    const message = fromGeminiResponse({ promptFeedback: { blockReason: 'SAFETY' }, usageMetadata: { promptTokenCount: 7 } } as unknown as GenerateContentResponse, 'm');
    expect(message).toMatchObject({ content: [], stop_reason: 'refusal', usage: { input_tokens: 7, output_tokens: 0 } });
  });
});

async function* chunksOf(items: unknown[]) {
  for (const item of items) yield item as GenerateContentResponse;
}

describe('gemini stream conversion', () => {
  it('thoughts, text and a function call become ordered blocks, then message_delta and message_stop', async () => {
    const events = await collect(
      fromGeminiStream(
        chunksOf([
          { responseId: 'r', candidates: [{ content: { parts: [{ text: 'hmm', thought: true }] } }], usageMetadata: { promptTokenCount: 9 } },
          { candidates: [{ content: { parts: [{ text: 'Let me ' }] } }] },
          { candidates: [{ content: { parts: [{ text: 'check.' }] } }] },
          {
            candidates: [{ content: { parts: [{ functionCall: { id: 'c1', name: 'weather', args: { city: 'Oslo' } } }] }, finishReason: 'STOP' }],
            usageMetadata: { promptTokenCount: 9, candidatesTokenCount: 6, thoughtsTokenCount: 2 },
          },
        ]),
        'gemini-2.5-flash',
      ),
    );
    expect(events.map((e) => (e.type === 'content_block_delta' ? `${e.type}:${e.delta.type}` : e.type))).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta:thinking_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta:text_delta',
      'content_block_delta:text_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta:input_json_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events[0]).toMatchObject({ message: { id: 'r', model: 'gemini-2.5-flash', usage: { input_tokens: 9 } } });
    expect(events[8]).toMatchObject({ index: 2, content_block: { type: 'tool_use', id: 'c1', name: 'weather' } });
    expect(events[9]).toMatchObject({ index: 2, delta: { partial_json: '{"city":"Oslo"}' } });
    expect(events[11]).toMatchObject({ delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 8, input_tokens: 9 } });
  });

  it('a stream without a finishReason is incomplete: ProviderError', async () => {
    const failure = await failureOf(collect(fromGeminiStream(chunksOf([{ candidates: [{ content: { parts: [{ text: 'partial' }] } }] }]), 'm')));
    expect(failure).toBeInstanceOf(ProviderError);
  });
});

describe('gemini provider against the fake API', () => {
  let fake: VendorServer;
  let provider: Provider;
  const call = { extra: {} };
  useVendorFake(startGeminiFake, (started) => {
    fake = started;
    provider = geminiProvider.create({ api_key: 'gm-key', api_base: fake.url });
  });

  it('messages: POST /v1beta/models/{model}:generateContent with the key header and the converted body', async () => {
    const message = await provider.messages({ ...base, system: 'sys', temperature: 0.5, tools: [weather], tool_choice: { type: 'any' }, messages: toolConversation }, call);
    const wire = fake.lastRequest;
    expect(wire.path).toBe('/v1beta/models/gemini-2.5-flash:generateContent');
    expect(wire.headers['x-goog-api-key']).toBe('gm-key');
    const body = bodyOf(wire);
    expect(body).toMatchObject({
      systemInstruction: { parts: [{ text: 'sys' }] },
      generationConfig: { maxOutputTokens: 100, temperature: 0.5 },
      tools: [{ functionDeclarations: [{ name: 'weather', parametersJsonSchema: weather.input_schema }] }],
      toolConfig: { functionCallingConfig: { mode: 'ANY' } },
      contents: [{ role: 'user' }, { role: 'model', parts: [{ text: 'Checking.' }, { functionCall: { name: 'weather', args: { city: 'Paris' } } }] }, { role: 'user', parts: [{ functionResponse: { name: 'weather', response: { output: 'sunny' } } }] }],
    });
    expect(message).toMatchObject({ id: 'resp-fake-1', model: 'gemini-2.5-flash-001', content: [{ type: 'text', text: 'echo: ' }], stop_reason: 'end_turn' });
    expect(message.usage).toMatchObject({ input_tokens: 10, cache_read_input_tokens: 2, output_tokens: 4 });
  });

  it('a function call answer on the wire becomes tool_use', async () => {
    fake.enqueue({
      json: {
        candidates: [{ content: { role: 'model', parts: [{ functionCall: { name: 'weather', args: { city: 'Lyon' } } }] }, finishReason: 'STOP' }],
        usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 3 },
      },
    });
    const message = await provider.messages({ ...base, tools: [weather] }, call);
    expect(message).toMatchObject({ stop_reason: 'tool_use', content: [{ type: 'tool_use', name: 'weather', input: { city: 'Lyon' } }] });
  });

  it('messagesStream: SSE from :streamGenerateContent?alt=sse becomes Messages events', async () => {
    const events = await collect(provider.messagesStream({ ...base, messages: [{ role: 'user', content: 'stream me' }] }, call));
    expect(fake.lastRequest.path).toBe('/v1beta/models/gemini-2.5-flash:streamGenerateContent');
    expect(fake.lastRequest.query.get('alt')).toBe('sse');
    const text = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? [e.delta.text] : [])).join('');
    expect(text).toBe('echo: stream me');
    expect(events.at(-1)).toEqual({ type: 'message_stop' });
  });

  it('a function call in the SSE stream arrives as a tool_use block', async () => {
    fake.enqueue({
      sse: [
        { data: { candidates: [{ content: { role: 'model', parts: [{ text: 'Checking.' }] } }], usageMetadata: { promptTokenCount: 5 } } },
        {
          data: {
            candidates: [{ content: { role: 'model', parts: [{ functionCall: { id: 'fc-1', name: 'weather', args: { city: 'Oslo' } }, thoughtSignature: 'sig' }] }, finishReason: 'STOP' }],
            usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 6 },
          },
        },
      ],
    });
    const events = await collect(provider.messagesStream({ ...base, tools: [weather] }, call));
    expect(events.filter((e) => e.type === 'content_block_start').map((e) => (e as Anthropic.RawContentBlockStartEvent).content_block.type)).toEqual(['text', 'thinking', 'tool_use']);
    expect(events.find((e) => e.type === 'content_block_delta' && e.delta.type === 'signature_delta')).toMatchObject({ delta: { signature: 'sig' } });
    expect(events.at(-2)).toMatchObject({ delta: { stop_reason: 'tool_use' }, usage: { input_tokens: 5, output_tokens: 6 } });
  });

  it('a stream cut in the middle fails (ProviderError) instead of hanging', async () => {
    const chunks = fakeGeminiChunks({ contents: [{ role: 'user', parts: [{ text: 'a long enough text to split' }] }] });
    fake.enqueue({ sse: chunks, cutAfter: 2 });
    const failure = await failureOf(collect(provider.messagesStream(base, call)));
    expect(failure instanceof ProviderError || provider.toHubError(failure) instanceof ProviderError).toBe(true);
    fake.enqueue({ sse: chunks, endEarly: 2 });
    expect(await failureOf(collect(provider.messagesStream(base, call)))).toBeInstanceOf(ProviderError);
  });

  it('embedding: batchEmbedContents, one vector per input in order', async () => {
    const response = await provider.embedding!({ model: 'text-embedding-004', inputs: ['alpha', 'beta'] }, call);
    expect(fake.lastRequest.path).toBe('/v1beta/models/text-embedding-004:batchEmbedContents');
    expect(bodyOf(fake.lastRequest).requests).toEqual([
      { model: 'models/text-embedding-004', content: { role: 'user', parts: [{ text: 'alpha' }] } },
      { model: 'models/text-embedding-004', content: { role: 'user', parts: [{ text: 'beta' }] } },
    ]);
    expect(response).toEqual(fakeEmbeddings('text-embedding-004', ['alpha', 'beta'], 0));
  });

  it('embedding: more than 100 inputs go in several batchEmbedContents calls, answers in order', async () => {
    const inputs = Array.from({ length: 230 }, (_, i) => `input ${i}`);
    const response = await provider.embedding!({ model: 'text-embedding-004', inputs }, call);
    expect(fake.requests.map((r) => (bodyOf(r).requests as unknown[]).length)).toEqual([100, 100, 30]);
    expect(response.data.map((d) => d.index)).toEqual(inputs.map((_, i) => i));
    expect(response.data[229].embedding).toEqual(fakeVector('input 229'));
  });

  it('listModels: every page, ids without the models/ prefix', async () => {
    const models = await provider.listModels!(call);
    expect(models.map((m) => m.id)).toEqual(['gemini-2.5-flash', 'gemini-2.5-pro', 'text-embedding-004']);
    expect(fake.requests.map((r) => r.query.get('pageToken'))).toEqual([null, '2']);
  });

  const errors: [string, ReturnType<typeof googleError>, new (...args: never[]) => HubError, Record<string, unknown>][] = [
    [
      '400 API_KEY_INVALID (a bad key reported as 400)',
      googleError(400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.', [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID' }]),
      AuthenticationError,
      { status_code: 400, code: 'API_KEY_INVALID', error_type: 'INVALID_ARGUMENT' },
    ],
    [
      '400 field violation',
      googleError(400, 'INVALID_ARGUMENT', 'Invalid value at generation_config.temperature', [
        { '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ field: 'generation_config.temperature', description: 'bad' }] },
      ]),
      InvalidRequestError,
      { param: 'generation_config.temperature' },
    ],
    [
      '400 input too long',
      googleError(400, 'INVALID_ARGUMENT', 'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).'),
      ContextLengthExceededError,
      { status_code: 400 },
    ],
    ['403 PERMISSION_DENIED', googleError(403, 'PERMISSION_DENIED', 'denied'), AuthenticationError, { status_code: 403 }],
    ['404 NOT_FOUND', googleError(404, 'NOT_FOUND', 'models/nope is not found for API version v1beta'), ModelNotFoundError, { status_code: 404 }],
    [
      '429 with RetryInfo',
      googleError(429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted', [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '17s' }]),
      RateLimitError,
      { retry_after: 17, error_type: 'RESOURCE_EXHAUSTED' },
    ],
    ['500 INTERNAL', googleError(500, 'INTERNAL', 'An internal error has occurred'), ProviderError, { status_code: 500 }],
    ['502', googleError(502, 'UNAVAILABLE', 'bad gateway'), UpstreamProviderError, { status_code: 502 }],
    ['503 UNAVAILABLE', googleError(503, 'UNAVAILABLE', 'The model is overloaded'), ProviderError, { status_code: 503 }],
    ['504 DEADLINE_EXCEEDED', googleError(504, 'DEADLINE_EXCEEDED', 'Deadline exceeded'), GatewayTimeoutError, { status_code: 504 }],
  ];
  it.each(errors)('error %s', async (_name, reply, type, fields) => {
    fake.enqueue(reply);
    const mapped = provider.toHubError(await failureOf(provider.messages(base, call)));
    expect(mapped).toBeInstanceOf(type);
    expect(mapped).toMatchObject({ provider_name: 'gemini', ...fields });
    expect(mapped?.message).toBe(`[gemini] ${(reply as { json: { error: { message: string } } }).json.error.message}`);
  });

  it('the fake rejects a bad key the way the API does, and the mapping finds AuthenticationError', async () => {
    const bad = geminiProvider.create({ api_key: 'bad-key', api_base: fake.url });
    expect(bad.toHubError(await failureOf(bad.messages(base, call)))).toBeInstanceOf(AuthenticationError);
  });
});
