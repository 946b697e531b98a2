import type Anthropic from '@anthropic-ai/sdk';
import type { ConverseStreamOutput } from '@aws-sdk/client-bedrock-runtime';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { amessages } from '../../../src/hub/index.ts';
import {
  AuthenticationError,
  ContextLengthExceededError,
  InvalidRequestError,
  ModelNotFoundError,
  ProviderError,
  RateLimitError,
  UnsupportedParameterError,
  type HubError,
} from '../../../src/hub/errors.ts';
import type { MessagesParams, Provider } from '../../../src/hub/provider.ts';
import { fromConverseResponse, fromConverseStream, toConverseRequest } from '../../../src/hub/providers/bedrock/convert.ts';
import { bedrockProvider } from '../../../src/hub/providers/bedrock/index.ts';
import {
  awsError,
  BAD_BEDROCK_TOKEN,
  BEDROCK_MODELS,
  converseStream,
  eventFrame,
  exceptionFrame,
  fakeConverseFrames,
  startBedrockFake,
  TEST_ACCESS_KEY_ID,
} from '../../fakes/bedrock.ts';
import { ForwardProxy } from '../../fakes/forward-proxy.ts';
import { bodyOf, fakeVector, type VendorServer } from '../../fakes/vendor-server.ts';
import { collect, failureOf, useVendorFake, weatherTool } from '../helpers.ts';

const MODEL = 'anthropic.claude-3-5-haiku-20241022-v1:0';
const base: MessagesParams = { model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const toolConversation: Anthropic.MessageParam[] = [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } }] },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'sunny' }], is_error: true }] },
];

describe('bedrock request conversion (Messages → Converse)', () => {
  const rows: [string, Partial<MessagesParams>, Record<string, unknown>][] = [
    ['max_tokens, temperature, top_p, stop_sequences → inferenceConfig', { temperature: 0.2, top_p: 0.9, stop_sequences: ['END'] }, { inferenceConfig: { maxTokens: 100, temperature: 0.2, topP: 0.9, stopSequences: ['END'] } }],
    ['system → one system text block', { system: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }, { system: [{ text: 'a\n\nb' }] }],
    ['top_k → additionalModelRequestFields.top_k', { top_k: 20 }, { additionalModelRequestFields: { top_k: 20 } }],
    ['thinking enabled → additionalModelRequestFields.thinking', { thinking: { type: 'enabled', budget_tokens: 2048 } }, { additionalModelRequestFields: { thinking: { type: 'enabled', budget_tokens: 2048 } } }],
    [
      'tools and tool_choice tool → toolConfig',
      { tools: [weatherTool], tool_choice: { type: 'tool', name: 'weather' } },
      { toolConfig: { tools: [{ toolSpec: { name: 'weather', description: 'Weather in a city', inputSchema: { json: weatherTool.input_schema } } }], toolChoice: { tool: { name: 'weather' } } } },
    ],
    ['tool_choice any → any', { tools: [weatherTool], tool_choice: { type: 'any' } }, { toolConfig: { toolChoice: { any: {} } } }],
    ['tool_choice auto → auto', { tools: [weatherTool], tool_choice: { type: 'auto' } }, { toolConfig: { toolChoice: { auto: {} } } }],
    [
      'output_config.format → outputConfig.textFormat with the schema as JSON text',
      { output_config: { format: { type: 'json_schema', schema: { type: 'object' } } } },
      { outputConfig: { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: '{"type":"object"}', name: 'output' } } } } },
    ],
    [
      'tool_use → toolUse; tool_result (is_error) → toolResult with status error',
      { messages: toolConversation },
      {
        messages: [
          { role: 'user', content: [{ text: 'Weather in Paris?' }] },
          { role: 'assistant', content: [{ text: 'Checking.' }, { toolUse: { toolUseId: 'toolu_1', name: 'weather', input: { city: 'Paris' } } }] },
          { role: 'user', content: [{ toolResult: { toolUseId: 'toolu_1', content: [{ text: 'sunny' }], status: 'error' } }] },
        ],
      },
    ],
    [
      'thinking blocks → reasoningContent with the signature',
      { messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm', signature: 'sig' }, { type: 'text', text: 'a' }] }] },
      { messages: [{}, { role: 'assistant', content: [{ reasoningContent: { reasoningText: { text: 'hmm', signature: 'sig' } } }, { text: 'a' }] }] },
    ],
    ['text document → text', { messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'doc' } }] }] }, { messages: [{ content: [{ text: 'doc' }] }] }],
  ];
  it.each(rows)('%s', (_name, change, expected) => {
    expect(toConverseRequest({ ...base, ...change } as MessagesParams)).toMatchObject({ modelId: MODEL, ...expected });
  });

  it('images and PDFs go as bytes, with the format Converse names', () => {
    const request = toConverseRequest({
      ...base,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: Buffer.from('png-bytes').toString('base64') } },
            { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: Buffer.from('%PDF').toString('base64') } },
          ],
        },
      ],
    });
    const [image, document] = request.messages![0].content!;
    expect(image.image?.format).toBe('png');
    expect(Buffer.from(image.image!.source!.bytes!).toString()).toBe('png-bytes');
    expect(document.document).toMatchObject({ format: 'pdf', name: 'document-2' });
    expect(Buffer.from(document.document!.source!.bytes!).toString()).toBe('%PDF');
  });

  it('extra Converse fields pass; additionalModelRequestFields merges with the converted ones', () => {
    const request = toConverseRequest({ ...base, top_k: 5 }, { additionalModelRequestFields: { anthropic_beta: ['x'] }, guardrailConfig: { guardrailIdentifier: 'g', guardrailVersion: '1' } });
    expect(request.additionalModelRequestFields).toEqual({ top_k: 5, anthropic_beta: ['x'] });
    expect(request.guardrailConfig).toEqual({ guardrailIdentifier: 'g', guardrailVersion: '1' });
  });

  const refused: [string, Partial<MessagesParams>, Record<string, unknown>, string][] = [
    ['an image by url', { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }] }, {}, 'image source url'],
    ['an image of an unknown type', { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/bmp' as 'image/png', data: 'AA' } }] }] }, {}, 'image media_type image/bmp'],
    ['tool_choice none', { tools: [weatherTool], tool_choice: { type: 'none' } }, {}, 'tool_choice.none'],
    ['disable_parallel_tool_use', { tools: [weatherTool], tool_choice: { type: 'auto', disable_parallel_tool_use: true } }, {}, 'tool_choice.disable_parallel_tool_use'],
    ['metadata', { metadata: { user_id: 'u' } }, {}, 'metadata'],
    ['an extra option Converse does not have', {}, { top_k: 3 }, 'top_k'],
  ];
  it.each(refused)('refuses %s with UnsupportedParameterError', (_name, change, extra, parameter) => {
    let failure: unknown;
    try {
      toConverseRequest({ ...base, ...change } as MessagesParams, extra);
    } catch (error) {
      failure = error;
    }
    expect(failure).toBeInstanceOf(UnsupportedParameterError);
    expect(failure).toMatchObject({ parameter_name: parameter });
  });
});

describe('bedrock response conversion (Converse → Messages)', () => {
  it('text, reasoning, redacted reasoning and tool use blocks; stop reason and usage with cache reads and writes', () => {
    const message = fromConverseResponse(
      {
        output: {
          message: {
            role: 'assistant',
            content: [
              { reasoningContent: { reasoningText: { text: 'think', signature: 'sig' } } },
              { reasoningContent: { redactedContent: new Uint8Array([1, 2, 3]) } },
              { text: 'Checking.' },
              { toolUse: { toolUseId: 'tu-1', name: 'weather', input: { city: 'Oslo' } } },
            ],
          },
        },
        stopReason: 'tool_use',
        usage: { inputTokens: 10, outputTokens: 5, totalTokens: 22, cacheReadInputTokens: 4, cacheWriteInputTokens: 3 },
        metrics: { latencyMs: 1 },
      },
      MODEL,
    );
    expect(message.content).toEqual([
      { type: 'thinking', thinking: 'think', signature: 'sig' },
      { type: 'redacted_thinking', data: 'AQID' },
      { type: 'text', text: 'Checking.', citations: null },
      { type: 'tool_use', id: 'tu-1', name: 'weather', input: { city: 'Oslo' }, caller: { type: 'direct' } },
    ]);
    expect(message).toMatchObject({ model: MODEL, stop_reason: 'tool_use', usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 4, cache_creation_input_tokens: 3 } });
  });

  const stops: [string, Anthropic.StopReason][] = [
    ['end_turn', 'end_turn'],
    ['max_tokens', 'max_tokens'],
    ['stop_sequence', 'stop_sequence'],
    ['content_filtered', 'refusal'],
    ['guardrail_intervened', 'refusal'],
    ['model_context_window_exceeded', 'model_context_window_exceeded'],
  ];
  it.each(stops)('stopReason %s → %s', (reason, expected) => {
    const message = fromConverseResponse({ output: { message: { role: 'assistant', content: [{ text: 'x' }] } }, stopReason: reason as never, usage: undefined, metrics: undefined }, MODEL);
    expect(message.stop_reason).toBe(expected);
  });

  it('malformed model output is a ProviderError, not an answer', () => {
    expect(() => fromConverseResponse({ output: { message: { role: 'assistant', content: [] } }, stopReason: 'malformed_tool_use', usage: undefined, metrics: undefined }, MODEL)).toThrow(ProviderError);
  });

  async function* eventsOf(events: ConverseStreamOutput[]): AsyncIterable<ConverseStreamOutput> {
    yield* events;
  }

  it('a stream with reasoning, text and a tool call becomes blocks in order; usage from the metadata event', async () => {
    const events = await collect(
      fromConverseStream(
        eventsOf([
          { messageStart: { role: 'assistant' } },
          { contentBlockDelta: { contentBlockIndex: 0, delta: { reasoningContent: { text: 'hm' } } } },
          { contentBlockDelta: { contentBlockIndex: 0, delta: { reasoningContent: { signature: 'sig' } } } },
          { contentBlockStop: { contentBlockIndex: 0 } },
          { contentBlockDelta: { contentBlockIndex: 1, delta: { text: 'Checking.' } } },
          { contentBlockStop: { contentBlockIndex: 1 } },
          { contentBlockStart: { contentBlockIndex: 2, start: { toolUse: { toolUseId: 'tu-1', name: 'weather' } } } },
          { contentBlockDelta: { contentBlockIndex: 2, delta: { toolUse: { input: '{"city":' } } } },
          { contentBlockDelta: { contentBlockIndex: 2, delta: { toolUse: { input: '"Oslo"}' } } } },
          { contentBlockStop: { contentBlockIndex: 2 } },
          { messageStop: { stopReason: 'tool_use' } },
          { metadata: { usage: { inputTokens: 7, outputTokens: 9, totalTokens: 16 }, metrics: { latencyMs: 1 } } },
        ]),
        MODEL,
      ),
    );
    expect(events.map((e) => (e.type === 'content_block_delta' ? e.delta.type : e.type))).toEqual([
      'message_start',
      'content_block_start',
      'thinking_delta',
      'signature_delta',
      'content_block_stop',
      'content_block_start',
      'text_delta',
      'content_block_stop',
      'content_block_start',
      'input_json_delta',
      'input_json_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events[8]).toMatchObject({ index: 2, content_block: { type: 'tool_use', id: 'tu-1', name: 'weather' } });
    expect(events.at(-2)).toMatchObject({ delta: { stop_reason: 'tool_use' }, usage: { input_tokens: 7, output_tokens: 9 } });
  });

  it('a stream without messageStop is incomplete: ProviderError', async () => {
    const failure = await failureOf(collect(fromConverseStream(eventsOf([{ messageStart: { role: 'assistant' } }, { contentBlockDelta: { contentBlockIndex: 0, delta: { text: 'part' } } }]), MODEL)));
    expect(failure).toBeInstanceOf(ProviderError);
  });
});

describe('bedrock provider against the fake (the AWS SDK, SigV4 from the environment)', () => {
  let fake: VendorServer;
  let provider: Provider;
  const call = { extra: {} };
  beforeAll(() => {
    // static test credentials: the SDK's default chain reads them from the environment and signs with SigV4
    vi.stubEnv('AWS_ACCESS_KEY_ID', TEST_ACCESS_KEY_ID);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'fake-secret-key');
    vi.stubEnv('AWS_SESSION_TOKEN', undefined);
    vi.stubEnv('AWS_REGION', 'eu-west-3');
    vi.stubEnv('AWS_BEARER_TOKEN_BEDROCK', undefined);
  });
  afterAll(() => vi.unstubAllEnvs());
  useVendorFake(startBedrockFake, (started) => {
    fake = started;
    provider = bedrockProvider.create({ api_base: fake.url });
  });

  it('messages: POST /model/{id}/converse, signed with SigV4 for bedrock in the region, the converted body', async () => {
    const message = await provider.messages({ ...base, system: 'sys', tools: [weatherTool], messages: toolConversation }, call);
    const wire = fake.lastRequest;
    expect(decodeURIComponent(wire.path)).toBe(`/model/${MODEL}/converse`);
    expect(wire.headers.authorization).toMatch(new RegExp(`^AWS4-HMAC-SHA256 Credential=${TEST_ACCESS_KEY_ID}/\\d{8}/eu-west-3/bedrock/aws4_request, SignedHeaders=[a-z0-9;-]*host[a-z0-9;-]*, Signature=[0-9a-f]{64}$`));
    expect(wire.headers['x-amz-date']).toMatch(/^\d{8}T\d{6}Z$/);
    expect(bodyOf(wire)).toMatchObject({
      system: [{ text: 'sys' }],
      inferenceConfig: { maxTokens: 100 },
      toolConfig: { tools: [{ toolSpec: { name: 'weather' } }] },
      messages: [{ role: 'user' }, { role: 'assistant' }, { role: 'user', content: [{ toolResult: { toolUseId: 'toolu_1', status: 'error' } }] }],
    });
    expect(message).toMatchObject({ model: MODEL, content: [{ type: 'text', text: 'echo: ' }], stop_reason: 'end_turn', usage: { input_tokens: 11, output_tokens: 4, cache_read_input_tokens: 3 } });
  });

  it('a Bedrock API key (api_key) goes as a bearer token instead of a signature', async () => {
    const keyed = bedrockProvider.create({ api_base: fake.url, api_key: 'ABSKbedrock-key' });
    await keyed.messages(base, call);
    expect(fake.lastRequest.headers.authorization).toBe('Bearer ABSKbedrock-key');
  });

  it('with NODE_USE_ENV_PROXY=1, calls go through HTTP_PROXY as Node’s own agents’ do (a company network); not without', async () => {
    const proxy = await ForwardProxy.start();
    try {
      vi.stubEnv('HTTP_PROXY', proxy.url);
      vi.stubEnv('NO_PROXY', undefined);
      await bedrockProvider.create({ api_base: fake.url, api_key: 'ABSKbedrock-key' }).messages(base, call);
      expect(proxy.requests).toEqual([]);
      vi.stubEnv('NODE_USE_ENV_PROXY', '1');
      const message = await bedrockProvider.create({ api_base: fake.url, api_key: 'ABSKbedrock-key' }).messages(base, call);
      expect(message).toMatchObject({ model: MODEL, content: [{ type: 'text' }], stop_reason: 'end_turn' });
      expect(proxy.requests).toHaveLength(1);
      expect(decodeURIComponent(proxy.requests[0]!)).toBe(`POST ${fake.url}/model/${MODEL}/converse`);
    } finally {
      vi.stubEnv('HTTP_PROXY', undefined);
      vi.stubEnv('NODE_USE_ENV_PROXY', undefined);
      await proxy.close();
    }
  });

  it('through the Hub, AWS_BEARER_TOKEN_BEDROCK is the key; without it the credential chain signs', async () => {
    await amessages({ ...base, provider: 'bedrock', api_base: fake.url });
    expect(fake.lastRequest.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 /);
    vi.stubEnv('AWS_BEARER_TOKEN_BEDROCK', 'ABSKfrom-env');
    try {
      await amessages({ ...base, provider: 'bedrock', api_base: fake.url });
      expect(fake.lastRequest.headers.authorization).toBe('Bearer ABSKfrom-env');
    } finally {
      vi.stubEnv('AWS_BEARER_TOKEN_BEDROCK', undefined);
    }
  });

  it('messagesStream: ConverseStream event-stream frames become Messages events', async () => {
    const events = await collect(provider.messagesStream({ ...base, messages: [{ role: 'user', content: 'stream me' }] }, call));
    expect(decodeURIComponent(fake.lastRequest.path)).toBe(`/model/${MODEL}/converse-stream`);
    expect(fake.lastRequest.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=/);
    const text = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? [e.delta.text] : [])).join('');
    expect(text).toBe('echo: stream me');
    expect(events.at(-2)).toMatchObject({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { input_tokens: 11, output_tokens: 4 } });
    expect(events.at(-1)).toEqual({ type: 'message_stop' });
  });

  it('a tool call streamed in frames arrives as a tool_use block with its arguments', async () => {
    fake.enqueue(
      converseStream([
        eventFrame('messageStart', { role: 'assistant' }),
        eventFrame('contentBlockStart', { contentBlockIndex: 0, start: { toolUse: { toolUseId: 'tu-9', name: 'weather' } } }),
        eventFrame('contentBlockDelta', { contentBlockIndex: 0, delta: { toolUse: { input: '{"city":"Lyon"}' } } }),
        eventFrame('contentBlockStop', { contentBlockIndex: 0 }),
        eventFrame('messageStop', { stopReason: 'tool_use' }),
        eventFrame('metadata', { usage: { inputTokens: 3, outputTokens: 2, totalTokens: 5 }, metrics: { latencyMs: 1 } }),
      ]),
    );
    const events = await collect(provider.messagesStream({ ...base, tools: [weatherTool] }, call));
    expect(events.find((e) => e.type === 'content_block_start')).toMatchObject({ content_block: { type: 'tool_use', id: 'tu-9', name: 'weather' } });
    expect(events.find((e) => e.type === 'content_block_delta')).toMatchObject({ delta: { type: 'input_json_delta', partial_json: '{"city":"Lyon"}' } });
    expect(events.at(-2)).toMatchObject({ delta: { stop_reason: 'tool_use' } });
  });

  it('an exception frame in the middle of the stream fails it after the events that arrived, mapped by its type', async () => {
    const frames = fakeConverseFrames({ messages: [{ role: 'user', content: [{ text: 'a long enough text' }] }] });
    fake.enqueue(converseStream([...frames.slice(0, 3), exceptionFrame('throttlingException', 'Too many tokens, please wait before trying again.')]));
    const seen: string[] = [];
    const failure = await failureOf(
      (async () => {
        for await (const event of provider.messagesStream(base, call)) seen.push(event.type);
      })(),
    );
    expect(seen).toContain('content_block_delta');
    const mapped = provider.toHubError(failure);
    expect(mapped).toBeInstanceOf(RateLimitError);
    expect(mapped).toMatchObject({ provider_name: 'bedrock', code: 'ThrottlingException', status_code: 429 });
  });

  it('a stream cut in the middle, or ended before messageStop, fails instead of hanging or looking complete', async () => {
    const frames = fakeConverseFrames({ messages: [{ role: 'user', content: [{ text: 'a long enough text to split' }] }] });
    fake.enqueue(converseStream(frames, { cutAfter: 3 }));
    const cut = await failureOf(collect(provider.messagesStream(base, call)));
    expect(cut instanceof ProviderError || provider.toHubError(cut) instanceof ProviderError).toBe(true);
    fake.enqueue(converseStream(frames, { endEarly: 3 }));
    expect(await failureOf(collect(provider.messagesStream(base, call)))).toBeInstanceOf(ProviderError);
  });

  it('embedding (Titan): one signed InvokeModel per text, dimensions sent, token counts summed', async () => {
    const response = await provider.embedding!({ model: 'amazon.titan-embed-text-v2:0', inputs: ['alpha beta', 'gamma'], dimensions: 6 }, { extra: { normalize: true } });
    const invokes = fake.requests.filter((r) => r.path.endsWith('/invoke'));
    expect(invokes.map((r) => bodyOf(r)).sort((a, b) => String(a.inputText).localeCompare(String(b.inputText)))).toEqual([
      { inputText: 'alpha beta', normalize: true, dimensions: 6 },
      { inputText: 'gamma', normalize: true, dimensions: 6 },
    ]);
    expect(invokes[0].headers.authorization).toMatch(/^AWS4-HMAC-SHA256 /);
    expect(response.data.map((d) => d.embedding)).toEqual([fakeVector('alpha beta', 6), fakeVector('gamma', 6)]);
    expect(response.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 });
  });

  it('embedding (Cohere): texts in calls of at most 96, input_type search_document by default, vectors in order', async () => {
    const inputs = Array.from({ length: 100 }, (_, i) => `text ${i}`);
    const response = await provider.embedding!({ model: 'cohere.embed-english-v3', inputs }, call);
    expect(fake.requests.map((r) => (bodyOf(r).texts as string[]).length)).toEqual([96, 4]);
    expect(bodyOf(fake.requests[0]).input_type).toBe('search_document');
    expect(response.data.map((d) => d.index)).toEqual(inputs.map((_, i) => i));
    expect(response.data[99].embedding).toEqual(fakeVector('text 99'));
    // embedding_types: Cohere answers {float: [...]}
    const typed = await provider.embedding!({ model: 'cohere.embed-english-v3', inputs: ['x'] }, { extra: { embedding_types: ['float'], input_type: 'search_query' } });
    expect(bodyOf(fake.lastRequest)).toMatchObject({ input_type: 'search_query', embedding_types: ['float'] });
    expect(typed.data[0].embedding).toEqual(fakeVector('x'));
  });

  it('embedding: an answer without vectors is a ProviderError; an unknown model is the vendor\'s 404', async () => {
    fake.enqueue({ json: { embeddings: { int8: [[1]] } } });
    expect(await failureOf(provider.embedding!({ model: 'cohere.embed-english-v3', inputs: ['x'] }, call))).toBeInstanceOf(ProviderError);
    const failure = await failureOf(provider.embedding!({ model: 'meta.nope', inputs: ['x'] }, call));
    expect(provider.toHubError(failure)).toBeInstanceOf(ModelNotFoundError);
  });

  it('listModels: the control plane\'s ListFoundationModels, signed', async () => {
    const models = await provider.listModels!(call);
    expect(fake.lastRequest.path).toBe('/foundation-models');
    expect(fake.lastRequest.headers.authorization).toMatch(/\/eu-west-3\/bedrock\/aws4_request/);
    expect(models).toEqual(BEDROCK_MODELS.map((m) => ({ id: m.modelId, object: 'model', created: 0, owned_by: m.providerName })));
  });

  const errors: [string, number, string, string, new (...args: never[]) => HubError][] = [
    ['400 ValidationException', 400, 'ValidationException', 'The model returned the following errors: temperature: range: 0..1', InvalidRequestError],
    ['400 ValidationException input too long', 400, 'ValidationException', 'Input is too long for requested model.', ContextLengthExceededError],
    ['403 AccessDeniedException', 403, 'AccessDeniedException', 'You don\'t have access to the model with the specified model ID.', AuthenticationError],
    ['404 ResourceNotFoundException', 404, 'ResourceNotFoundException', 'Could not resolve the foundation model.', ModelNotFoundError],
    ['429 ThrottlingException', 429, 'ThrottlingException', 'Too many requests, please wait before trying again.', RateLimitError],
    ['500 InternalServerException', 500, 'InternalServerException', 'Internal server error', ProviderError],
    ['503 ServiceUnavailableException', 503, 'ServiceUnavailableException', 'Bedrock is unable to process your request.', ProviderError],
  ];
  it.each(errors)('error %s', async (_name, status, type, text, hubType) => {
    fake.enqueue(awsError(status, type, text));
    const failure = await failureOf(provider.messages(base, call));
    const mapped = provider.toHubError(failure);
    expect(mapped).toBeInstanceOf(hubType);
    expect(mapped).toMatchObject({ provider_name: 'bedrock', status_code: status, code: type, message: `[bedrock] ${text}` });
  });

  it('a refused API key is an AuthenticationError (unified exceptions through the Hub)', async () => {
    const failure = await failureOf(amessages({ ...base, provider: 'bedrock', api_base: fake.url, api_key: BAD_BEDROCK_TOKEN, unified_exceptions: true }));
    expect(failure).toBeInstanceOf(AuthenticationError);
    expect(failure).toMatchObject({ status_code: 403, code: 'UnrecognizedClientException' });
  });

  it('no credentials anywhere in the chain: AuthenticationError naming the cause, nothing sent', async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', undefined);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', undefined);
    vi.stubEnv('AWS_PROFILE', 'hub-test-no-such-profile');
    vi.stubEnv('AWS_CONFIG_FILE', '/nonexistent/aws-config');
    vi.stubEnv('AWS_SHARED_CREDENTIALS_FILE', '/nonexistent/aws-credentials');
    vi.stubEnv('AWS_EC2_METADATA_DISABLED', 'true');
    try {
      const bare = bedrockProvider.create({ api_base: fake.url });
      const failure = await failureOf(bare.messages(base, call));
      expect(bare.toHubError(failure)).toBeInstanceOf(AuthenticationError);
      expect(fake.requests).toHaveLength(0);
    } finally {
      vi.stubEnv('AWS_ACCESS_KEY_ID', TEST_ACCESS_KEY_ID);
      vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'fake-secret-key');
    }
  });

  it('aborting a call closes the connection to the vendor', async () => {
    fake.enqueue({ delayMs: 5_000, then: { json: {} } });
    const controller = new AbortController();
    const pending = failureOf(provider.messages(base, { extra: {}, signal: controller.signal }));
    await new Promise((resolve) => setTimeout(resolve, 100));
    controller.abort(new Error('stop'));
    const failure = await pending;
    expect(provider.toHubError(failure)).toBeUndefined();
    await vi.waitFor(() => expect(fake.abandonedReplies).toBeGreaterThan(0));
  });
});
