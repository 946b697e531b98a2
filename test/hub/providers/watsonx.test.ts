import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { acompletion, alist_models, amessages, Hub } from '../../../src/hub/index.ts';
import {
  AuthenticationError,
  ContextLengthExceededError,
  InvalidRequestError,
  ModelNotFoundError,
  ProviderError,
  RateLimitError,
  UnsupportedParameterError,
} from '../../../src/hub/errors.ts';
import { toWatsonxChat } from '../../../src/hub/providers/watsonx/provider.ts';
import { bodyOf } from '../../fakes/vendor-server.ts';
import { WATSONX_KEY, WATSONX_MODELS, WATSONX_PROJECT, WATSONX_USAGE, watsonxChunks, watsonxError, WatsonxFake, watsonxStream } from '../../fakes/watsonx.ts';
import { collect, failureOf, useVendorFake, weatherTool } from '../helpers.ts';

const MODEL = 'ibm/granite-3-8b-instruct';
let fake: WatsonxFake;
useVendorFake(() => WatsonxFake.start(), (started) => (fake = started));
beforeEach(() => fake.reset());
afterEach(() => vi.restoreAllMocks());

/** The options of a call to the fake; client_args as a caller would pass them. */
const opts = (client_args: Record<string, unknown> = {}, api_key = WATSONX_KEY) => ({
  provider: 'watsonx',
  api_key,
  api_base: fake.url,
  client_args: { iam_url: fake.iamUrl, project_id: WATSONX_PROJECT, ...client_args },
  max_retries: 0,
  unified_exceptions: true,
});
const hi = [{ role: 'user' as const, content: 'hi' }];

describe('watsonx chat', () => {
  it('exchanges the key for a token, then sends the chat with version, project and bearer token', async () => {
    const message = await amessages({ ...opts(), model: MODEL, max_tokens: 50, system: 'Be brief.', temperature: 0.3, messages: hi });
    expect(message).toMatchObject({ role: 'assistant', model: MODEL, content: [{ type: 'text', text: 'echo: hi' }], stop_reason: 'end_turn' });
    expect(message.usage).toMatchObject({ input_tokens: 12, output_tokens: 5 });
    const [token] = fake.tokenRequests;
    expect(new URLSearchParams(token.body.toString()).get('apikey')).toBe(WATSONX_KEY);
    const [chat] = fake.apiRequests;
    expect(chat.path).toBe('/ml/v1/text/chat');
    expect(chat.query.get('version')).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(chat.headers.authorization).toMatch(/^Bearer wx-token-\d+$/);
    expect(fake.valid.has(chat.headers.authorization!.slice('Bearer '.length))).toBe(true);
    expect(bodyOf(chat)).toEqual({
      model_id: MODEL,
      project_id: WATSONX_PROJECT,
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }],
      max_tokens: 50,
      temperature: 0.3,
    });
  });

  it('converts tools both ways: tools and tool_choice_option out, tool_calls back as tool_use', async () => {
    fake.server.enqueue({
      json: {
        id: 'c1', model_id: MODEL, created: 1,
        choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] }, finish_reason: 'tool_calls' }],
        usage: WATSONX_USAGE,
      },
    }, (request) => request.path === '/ml/v1/text/chat');
    const message = await amessages({ ...opts(), model: MODEL, max_tokens: 50, messages: hi, tools: [weatherTool], tool_choice: { type: 'any' } });
    expect(message.content).toMatchObject([{ type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Paris' } }]);
    expect(message.stop_reason).toBe('tool_use');
    const body = bodyOf(fake.apiRequests[0]);
    expect(body.tool_choice_option).toBe('required');
    expect(body.tool_choice).toBeUndefined();
    expect(body.tools).toEqual([{ type: 'function', function: { name: 'weather', description: 'Weather in a city', parameters: weatherTool.input_schema } }]);
  });

  it('completion: the answer is OpenAI-shaped; a named tool choice stays tool_choice, max_completion_tokens becomes max_tokens', async () => {
    const completion = await acompletion({
      ...opts(),
      model: MODEL,
      messages: hi,
      max_completion_tokens: 30,
      tools: [{ type: 'function', function: { name: 'weather', parameters: {} } }],
      tool_choice: { type: 'function', function: { name: 'weather' } },
    });
    expect(completion).toMatchObject({ object: 'chat.completion', model: MODEL, choices: [{ index: 0, message: { role: 'assistant', content: 'echo: hi' }, finish_reason: 'stop' }], usage: WATSONX_USAGE });
    const body = bodyOf(fake.apiRequests[0]);
    expect(body).toMatchObject({ model_id: MODEL, max_tokens: 30, tool_choice: { type: 'function', function: { name: 'weather' } } });
    expect(body).not.toHaveProperty('max_completion_tokens');
    expect(body).not.toHaveProperty('model');
  });

  it('toWatsonxChat drops stream and stream_options and keeps extra fields', () => {
    expect(toWatsonxChat({ model: 'm', messages: [], stream: true, stream_options: { include_usage: true }, tool_choice: 'none', seed: 7 }, { space_id: 's' })).toEqual({
      model_id: 'm', space_id: 's', messages: [], tool_choice_option: 'none', seed: 7,
    });
  });

  it('images go as image_url data parts', async () => {
    await amessages({
      ...opts(), model: MODEL, max_tokens: 10,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'what?' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }],
    });
    expect((bodyOf(fake.apiRequests[0]).messages as unknown[])[0]).toEqual({
      role: 'user', content: [{ type: 'text', text: 'what?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }],
    });
  });

  it('refuses thinking and top_k before anything is sent (watsonx takes neither)', async () => {
    for (const extra of [{ thinking: { type: 'enabled' as const, budget_tokens: 1024 } }, { top_k: 5 }]) {
      const error = await failureOf(amessages({ ...opts(), model: MODEL, max_tokens: 2048, messages: hi, ...extra }));
      expect(error).toBeInstanceOf(UnsupportedParameterError);
    }
    expect(fake.server.requests).toHaveLength(0);
  });
});

describe('watsonx project and space', () => {
  const saved = { project: process.env.WATSONX_PROJECT_ID, space: process.env.WATSONX_SPACE_ID };
  afterEach(() => {
    for (const [name, value] of [['WATSONX_PROJECT_ID', saved.project], ['WATSONX_SPACE_ID', saved.space]] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  it('reads WATSONX_PROJECT_ID, else WATSONX_SPACE_ID; client_args win', async () => {
    delete process.env.WATSONX_PROJECT_ID;
    process.env.WATSONX_SPACE_ID = 'space-9';
    await amessages({ ...opts({ project_id: undefined }), model: MODEL, max_tokens: 5, messages: hi });
    expect(bodyOf(fake.apiRequests.at(-1)!)).toMatchObject({ space_id: 'space-9' });
    process.env.WATSONX_PROJECT_ID = 'proj-env';
    await amessages({ ...opts({ project_id: undefined }), model: MODEL, max_tokens: 5, messages: hi });
    expect(bodyOf(fake.apiRequests.at(-1)!)).toMatchObject({ project_id: 'proj-env' });
    expect(bodyOf(fake.apiRequests.at(-1)!)).not.toHaveProperty('space_id');
    await amessages({ ...opts({ project_id: undefined, space_id: 'space-arg' }), model: MODEL, max_tokens: 5, messages: hi });
    expect(bodyOf(fake.apiRequests.at(-1)!)).toEqual(expect.objectContaining({ space_id: 'space-arg' }));
    expect(bodyOf(fake.apiRequests.at(-1)!)).not.toHaveProperty('project_id');
  });

  it('without a project or space: InvalidRequestError naming the variable, nothing sent', async () => {
    delete process.env.WATSONX_PROJECT_ID;
    delete process.env.WATSONX_SPACE_ID;
    const error = await failureOf(amessages({ ...opts({ project_id: undefined }), model: MODEL, max_tokens: 5, messages: hi }));
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect((error as Error).message).toContain('WATSONX_PROJECT_ID');
    expect(fake.server.requests).toHaveLength(0);
  });
});

describe('watsonx tokens', () => {
  it('one token serves many calls, concurrent first calls included', async () => {
    const hub = Hub.create('watsonx', opts());
    await Promise.all([1, 2, 3].map(() => hub.amessages({ model: MODEL, max_tokens: 5, messages: hi })));
    await hub.amessages({ model: MODEL, max_tokens: 5, messages: hi });
    expect(fake.tokenRequests).toHaveLength(1);
    expect(fake.apiRequests).toHaveLength(4);
    expect(new Set(fake.apiRequests.map((request) => request.headers.authorization)).size).toBe(1);
  });

  it('is renewed once 80 % of its lifetime has passed, not before', async () => {
    fake.tokenLifetime = 100;
    const hub = Hub.create('watsonx', opts());
    const start = Date.now();
    const now = vi.spyOn(Date, 'now');
    now.mockReturnValue(start);
    await hub.amessages({ model: MODEL, max_tokens: 5, messages: hi });
    now.mockReturnValue(start + 79_000);
    await hub.amessages({ model: MODEL, max_tokens: 5, messages: hi });
    expect(fake.tokenRequests).toHaveLength(1);
    now.mockReturnValue(start + 81_000);
    await hub.amessages({ model: MODEL, max_tokens: 5, messages: hi });
    expect(fake.tokenRequests).toHaveLength(2);
    const [first, , third] = fake.apiRequests.map((request) => request.headers.authorization);
    expect(third).not.toBe(first);
  });

  it('a cached token the service refuses (401) is renewed and the call tried once more', async () => {
    const hub = Hub.create('watsonx', opts());
    await hub.amessages({ model: MODEL, max_tokens: 5, messages: hi });
    fake.revokeAll();
    const message = await hub.amessages({ model: MODEL, max_tokens: 5, messages: hi });
    expect(message.content).toMatchObject([{ type: 'text', text: 'echo: hi' }]);
    expect(fake.tokenRequests).toHaveLength(2);
    // the first token twice (the second time refused), then the new one
    const [first, refused, renewed] = fake.apiRequests.map((request) => request.headers.authorization);
    expect(refused).toBe(first);
    expect(renewed).not.toBe(first);
  });

  it('a fresh token refused (401) is an AuthenticationError, without a loop', async () => {
    fake.server.enqueue(watsonxError(401, 'authentication_token_not_valid', 'Failed to authenticate the request due to invalid token'), (request) => request.path === '/ml/v1/text/chat');
    const error = await failureOf(amessages({ ...opts(), model: MODEL, max_tokens: 5, messages: hi }));
    expect(error).toBeInstanceOf(AuthenticationError);
    expect(error).toMatchObject({ status_code: 401, code: 'authentication_token_not_valid' });
    expect(fake.tokenRequests).toHaveLength(1);
    expect(fake.apiRequests).toHaveLength(1);
  });

  it('a key IAM does not know is an AuthenticationError with IAM’s code; no chat is sent', async () => {
    const error = await failureOf(amessages({ ...opts({}, 'wrong-key'), model: MODEL, max_tokens: 5, messages: hi }));
    expect(error).toBeInstanceOf(AuthenticationError);
    expect(error).toMatchObject({ code: 'BXNIM0415E', status_code: 400 });
    expect((error as Error).message).toContain('Provided API key could not be found');
    expect((error as Error).message).not.toContain('wrong-key');
    expect(fake.apiRequests).toHaveLength(0);
  });

  it('an IAM outage (503) is retried by the core and then succeeds', async () => {
    fake.server.enqueue({ status: 503, json: { errorCode: 'BXNIM0001E', errorMessage: 'Service unavailable' } }, (request) => request.path === '/identity/token');
    const message = await amessages({ ...opts(), max_retries: 1, model: MODEL, max_tokens: 5, messages: hi });
    expect(message.content).toMatchObject([{ type: 'text', text: 'echo: hi' }]);
    expect(fake.tokenRequests).toHaveLength(2);
  });

  it('reads WATSONX_API_KEY, WATSONX_URL and WATSONX_IAM_URL from the environment', async () => {
    const saved = { ...process.env };
    Object.assign(process.env, { WATSONX_API_KEY: WATSONX_KEY, WATSONX_URL: fake.url, WATSONX_IAM_URL: fake.iamUrl, WATSONX_PROJECT_ID: WATSONX_PROJECT });
    try {
      const message = await amessages({ model: `watsonx:${MODEL}`, max_tokens: 5, messages: hi });
      expect(message.content).toMatchObject([{ type: 'text', text: 'echo: hi' }]);
      expect(fake.tokenRequests).toHaveLength(1);
    } finally {
      for (const name of ['WATSONX_API_KEY', 'WATSONX_URL', 'WATSONX_IAM_URL', 'WATSONX_PROJECT_ID']) {
        if (saved[name] === undefined) delete process.env[name];
        else process.env[name] = saved[name];
      }
    }
  });
});

describe('watsonx streams', () => {
  it('messages stream: SSE chunks become Messages events, usage from the last chunk', async () => {
    const events = await collect(amessages({ ...opts(), model: MODEL, max_tokens: 20, messages: [{ role: 'user', content: 'stream me' }], stream: true }));
    const text = events.flatMap((event) => (event.type === 'content_block_delta' && event.delta.type === 'text_delta' ? [event.delta.text] : [])).join('');
    expect(text).toBe('echo: stream me');
    expect(events[0].type).toBe('message_start');
    expect(events.at(-1)!.type).toBe('message_stop');
    expect(events.find((event) => event.type === 'message_delta')).toMatchObject({ delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 5 } });
    expect(fake.apiRequests[0].path).toBe('/ml/v1/text/chat_stream');
    expect(bodyOf(fake.apiRequests[0])).not.toHaveProperty('stream');
    expect(bodyOf(fake.apiRequests[0])).not.toHaveProperty('stream_options');
  });

  it('completion stream: OpenAI chunks, tool call fragments indexed', async () => {
    const base = { id: 's1', model_id: MODEL, created: 1 };
    fake.server.enqueue(watsonxStream([
      { ...base, choices: [{ index: 0, delta: { role: 'assistant', tool_calls: [{ id: 'call_9', type: 'function', function: { name: 'weather', arguments: '' } }] }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: { tool_calls: [{ function: { arguments: '{"city":"Oslo"}' } }] }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }], usage: WATSONX_USAGE },
    ]), (request) => request.path === '/ml/v1/text/chat_stream');
    const chunks = await collect(acompletion({ ...opts(), model: MODEL, messages: hi, stream: true }));
    expect(chunks.map((chunk) => chunk.object)).toEqual(['chat.completion.chunk', 'chat.completion.chunk', 'chat.completion.chunk']);
    expect(chunks[0].choices[0].delta.tool_calls).toEqual([{ index: 0, id: 'call_9', type: 'function', function: { name: 'weather', arguments: '' } }]);
    expect(chunks[1].choices[0].delta.tool_calls?.[0]).toMatchObject({ index: 0, function: { arguments: '{"city":"Oslo"}' } });
    expect(chunks.at(-1)).toMatchObject({ choices: [{ finish_reason: 'tool_calls' }], usage: WATSONX_USAGE });
  });

  it('a stream that ends before its finish reason raises ProviderError after the events that came', async () => {
    fake.server.enqueue(watsonxStream(watsonxChunks({ model_id: MODEL, messages: hi }), { endEarly: 3 }), (request) => request.path === '/ml/v1/text/chat_stream');
    const seen: string[] = [];
    const error = await failureOf((async () => {
      for await (const chunk of acompletion({ ...opts(), model: MODEL, messages: hi, stream: true })) seen.push(chunk.choices[0]?.delta.content ?? '');
    })());
    expect(error).toBeInstanceOf(ProviderError);
    expect(seen.join('')).toBe('echo: hi');
  });

  it('a dropped connection fails the Messages stream with a ProviderError', async () => {
    fake.server.enqueue(watsonxStream(watsonxChunks({ model_id: MODEL, messages: hi }), { cutAfter: 2 }), (request) => request.path === '/ml/v1/text/chat_stream');
    const error = await failureOf(collect(amessages({ ...opts(), model: MODEL, max_tokens: 5, messages: hi, stream: true })));
    expect(error).toBeInstanceOf(ProviderError);
  });

  it('an error answer to the stream is raised at the first step', async () => {
    fake.server.enqueue(watsonxError(429, 'token_quota_reached', 'Rate limit exceeded', { 'retry-after': '3' }), (request) => request.path === '/ml/v1/text/chat_stream');
    const error = await failureOf(collect(amessages({ ...opts(), model: MODEL, max_tokens: 5, messages: hi, stream: true })));
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error).toMatchObject({ retry_after: 3, code: 'token_quota_reached' });
  });
});

describe('watsonx errors and models', () => {
  it.each([
    ['an unknown model → ModelNotFoundError', null, 'no/such-model', ModelNotFoundError, { status_code: 404, code: 'model_not_supported' }],
    ['400 too long → ContextLengthExceededError', watsonxError(400, 'invalid_input_argument', 'the number of input tokens exceeds the maximum context length of 8192'), MODEL, ContextLengthExceededError, { status_code: 400 }],
    ['429 → RateLimitError with Retry-After', watsonxError(429, 'rate_limit', 'Too many requests', { 'retry-after': '2' }), MODEL, RateLimitError, { retry_after: 2 }],
    ['500 → ProviderError', watsonxError(500, 'internal_error', 'boom'), MODEL, ProviderError, { status_code: 500 }],
  ] as const)('%s', async (_name, reply, model, type, fields) => {
    if (reply) fake.server.enqueue(reply, (request) => request.path === '/ml/v1/text/chat');
    const error = await failureOf(amessages({ ...opts(), model, max_tokens: 5, messages: hi }));
    expect(error).toBeInstanceOf(type);
    expect(error).toMatchObject(fields);
  });

  it('a refused connection is a ProviderError', async () => {
    const error = await failureOf(amessages({ ...opts({ iam_url: 'http://127.0.0.1:9/identity/token' }), model: MODEL, max_tokens: 5, messages: hi }));
    expect(error).toBeInstanceOf(ProviderError);
  });

  it('lists the foundation models across pages', async () => {
    const models = await alist_models(opts());
    expect(models).toEqual(WATSONX_MODELS.map((id) => ({ id, object: 'model', created: 0, owned_by: 'watsonx' })));
    expect(fake.apiRequests.map((request) => request.query.get('start'))).toEqual([null, 'page2']);
    expect(fake.apiRequests[0].query.get('limit')).toBe('200');
  });
});
