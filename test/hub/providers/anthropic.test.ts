import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import {
  AuthenticationError,
  BatchNotCompleteError,
  ContextLengthExceededError,
  GatewayTimeoutError,
  HubError,
  InsufficientFundsError,
  InvalidRequestError,
  ModelNotFoundError,
  ProviderError,
  RateLimitError,
  UnsupportedParameterError,
  UpstreamProviderError,
} from '../../../src/hub/errors.ts';
import type { MessagesParams, Provider } from '../../../src/hub/provider.ts';
import { anthropicProvider } from '../../../src/hub/providers/anthropic/index.ts';
import { anthropicError, fakeInputTokens, fakeMessage, fakeMessageEvents, startAnthropicFake, type AnthropicFake } from '../../fakes/anthropic.ts';
import { bodyOf } from '../../fakes/vendor-server.ts';
import { collect, failureOf, useVendorFake } from '../helpers.ts';

let fake: AnthropicFake;
let provider: Provider;
const call = { extra: {} };
const params: MessagesParams = { model: 'claude-sonnet-4-6', max_tokens: 64, messages: [{ role: 'user', content: 'hello there' }] };

useVendorFake(startAnthropicFake, (started) => {
  fake = started;
  provider = anthropicProvider.create({ api_key: 'sk-ant-test', api_base: fake.server.url });
});

describe('anthropic messages', () => {
  it('sends the Messages request unchanged, with the key and version headers, and returns the Message', async () => {
    const request = { ...params, system: 'be brief', temperature: 0.2, top_k: 5, stop_sequences: ['END'], metadata: { user_id: 'u1' } } as MessagesParams;
    const message = await provider.messages(request, call);
    const wire = fake.server.lastRequest;
    expect(wire.method).toBe('POST');
    expect(wire.path).toBe('/v1/messages');
    // this SDK version sends the key as a bearer token (older ones used x-api-key; the API takes both)
    expect(wire.headers.authorization).toBe('Bearer sk-ant-test');
    expect(wire.headers['anthropic-version']).toBeTruthy();
    expect(bodyOf(wire)).toEqual({ ...request, stream: false });
    expect(message).toMatchObject(fakeMessage(bodyOf(wire)));
    expect(message.content[0]).toMatchObject({ type: 'text', text: 'echo: hello there' });
    expect(message.usage.cache_read_input_tokens).toBe(3);
  });

  it('sends a non-streaming request of a model’s whole output limit (the SDK alone refuses it as too long to wait for): the Hub core owns timeouts', async () => {
    const long = { ...params, model: 'claude-haiku-4-5', max_tokens: 64_000 };
    const message = await provider.messages(long, call);
    expect(bodyOf(fake.server.lastRequest)).toMatchObject({ max_tokens: 64_000, stream: false });
    expect(message.content[0]).toMatchObject({ type: 'text', text: 'echo: hello there' });
  });

  it('passes provider-specific extra options into the body', async () => {
    await provider.messages(params, { extra: { service_tier: 'standard_only' } });
    expect(bodyOf(fake.server.lastRequest).service_tier).toBe('standard_only');
  });

  it('streams the API events as they are and ends with message_stop', async () => {
    const events = await collect(provider.messagesStream(params, call));
    expect(bodyOf(fake.server.lastRequest).stream).toBe(true);
    const expected = fakeMessageEvents(bodyOf(fake.server.lastRequest))
      .map((e) => e.data as { type: string })
      .filter((e) => e.type !== 'ping');
    expect(events.map((e) => e.type)).toEqual(expected.map((e) => e.type));
    const text = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? [e.delta.text] : [])).join('');
    expect(text).toBe('echo: hello there');
  });

  it('a stream cut in the middle fails with a ProviderError instead of hanging', async () => {
    fake.server.enqueue({ sse: fakeMessageEvents(bodyOf({ json: params } as never)), cutAfter: 4 });
    const failure = await failureOf(collect(provider.messagesStream(params, call)));
    expect(provider.toHubError(failure)).toBeInstanceOf(ProviderError);
  });

  it('a stream that ends cleanly before message_stop is a ProviderError', async () => {
    fake.server.enqueue({ sse: fakeMessageEvents(bodyOf({ json: params } as never)), endEarly: 4 });
    const failure = await failureOf(collect(provider.messagesStream(params, call)));
    expect(failure).toBeInstanceOf(ProviderError);
    expect(String(failure)).toMatch(/^\[anthropic\] The stream ended before the response was complete/);
  });

  it('an error event inside the stream becomes the unified exception of its type', async () => {
    fake.server.enqueue({
      sse: [
        fakeMessageEvents(bodyOf({ json: params } as never))[0],
        { event: 'error', data: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } },
      ],
    });
    const failure = await failureOf(collect(provider.messagesStream(params, call)));
    const mapped = provider.toHubError(failure);
    expect(mapped).toBeInstanceOf(HubError);
    expect(mapped?.message).toMatch(/Overloaded/);
  });
});

describe('anthropic models', () => {
  it('lists every model across the API pages as OpenAI Model objects', async () => {
    const models = await provider.listModels!(call);
    expect(models.map((m) => m.id)).toEqual(['claude-opus-4-5', 'claude-sonnet-4-6', 'claude-haiku-4-5']);
    expect(models[0]).toEqual({ id: 'claude-opus-4-5', object: 'model', created: Date.parse('2025-11-01T00:00:00Z') / 1000, owned_by: 'anthropic' });
    expect(fake.server.requests.filter((r) => r.path === '/v1/models')).toHaveLength(2);
    expect(fake.server.requests[1].query.get('after_id')).toBe('claude-sonnet-4-6');
  });
});

describe('anthropic errors', () => {
  const rows: [number, string, string, new (...args: never[]) => HubError][] = [
    [400, 'invalid_request_error', 'messages: field required', InvalidRequestError],
    [400, 'invalid_request_error', 'prompt is too long: 210000 tokens > 200000 maximum', ContextLengthExceededError],
    [401, 'authentication_error', 'invalid x-api-key', AuthenticationError],
    [402, 'billing_error', 'Your credit balance is too low', InsufficientFundsError],
    [403, 'permission_error', 'not allowed', AuthenticationError],
    [404, 'not_found_error', 'model: claude-nope', ModelNotFoundError],
    [429, 'rate_limit_error', 'Number of requests has exceeded your rate limit', RateLimitError],
    [500, 'api_error', 'Internal server error', ProviderError],
    [502, 'api_error', 'Bad gateway', UpstreamProviderError],
    [504, 'timeout_error', 'Gateway timeout', GatewayTimeoutError],
    [529, 'overloaded_error', 'Overloaded', ProviderError],
  ];
  it.each(rows)('HTTP %i %s → %O', async (status, type, message, expected) => {
    fake.server.enqueue(anthropicError(status, type, message, status === 429 ? { 'retry-after': '7' } : undefined));
    const mapped = provider.toHubError(await failureOf(provider.messages(params, call)));
    expect(mapped).toBeInstanceOf(expected);
    expect(mapped?.status_code).toBe(status);
    expect(mapped?.error_type).toBe(type);
    expect(mapped?.provider_name).toBe('anthropic');
    expect(mapped?.message).toBe(`[anthropic] ${message}`);
    if (mapped instanceof RateLimitError) expect(mapped.retry_after).toBe(7);
  });

  it('a refused connection is a ProviderError without status', async () => {
    const closed = await startAnthropicFake();
    const url = closed.server.url;
    await closed.close();
    const offline = anthropicProvider.create({ api_key: 'k', api_base: url });
    const mapped = offline.toHubError(await failureOf(offline.messages(params, call)));
    expect(mapped).toBeInstanceOf(ProviderError);
    expect(mapped?.status_code).toBeNull();
  });

  it('an abort by the caller is not turned into a provider error', async () => {
    const controller = new AbortController();
    controller.abort();
    const failure = await failureOf(provider.messages(params, { signal: controller.signal, extra: {} }));
    expect(provider.toHubError(failure)).toBeUndefined();
  });

  it('the API key never appears in the error message', async () => {
    fake.server.enqueue(anthropicError(401, 'authentication_error', 'invalid x-api-key'));
    const mapped = provider.toHubError(await failureOf(provider.messages(params, call)));
    expect(mapped?.message).not.toContain('sk-ant-test');
  });
});

describe('anthropic batches', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hub-anthropic-batch-'));
  const writeInput = (name: string, lines: unknown[]) => {
    const file = path.join(dir, name);
    writeFileSync(file, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n');
    return file;
  };
  const line = (id: string, text: string) => ({ custom_id: id, method: 'POST', url: '/v1/messages', body: { ...params, messages: [{ role: 'user', content: text }] } });
  const create = (file: string) => provider.batches!.create({ input_file_path: file, endpoint: '/v1/messages', completion_window: '24h' }, call);

  it('creates a batch from the JSONL file, polls it to completion and downloads the results', async () => {
    const batch = await create(writeInput('ok.jsonl', [line('a', 'first'), line('b', 'second'), line('c', 'third')]));
    const wire = fake.server.lastRequest;
    expect(wire.path).toBe('/v1/messages/batches');
    expect(bodyOf(wire)).toEqual({ requests: ['a', 'b', 'c'].map((id, i) => ({ custom_id: id, params: line(id, ['first', 'second', 'third'][i]).body })) });
    expect(batch).toMatchObject({ object: 'batch', endpoint: '/v1/messages', status: 'in_progress', completion_window: '24h', request_counts: { total: 3, completed: 0, failed: 0 } });

    await expect(provider.batches!.results(batch.id, call)).rejects.toBeInstanceOf(BatchNotCompleteError);
    const done = await provider.batches!.retrieve(batch.id, call);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: 3, completed: 3, failed: 0 });

    const results = await provider.batches!.results(batch.id, call);
    expect(results.map((r) => r.custom_id)).toEqual(['a', 'b', 'c']);
    expect((results[0].result as Anthropic.Message).content[0]).toMatchObject({ text: 'echo: first' });
    expect(results[1]).toEqual({ custom_id: 'b', result: null, error: { code: 'invalid_request_error', message: 'bad request line' } });
  });

  it('BatchNotCompleteError names the batch and its status', async () => {
    const batch = await create(writeInput('wait.jsonl', [line('x', 'one')]));
    fake.pollsUntilEnded = 100;
    try {
      const failure = await failureOf(provider.batches!.results(batch.id, call));
      expect(failure).toBeInstanceOf(BatchNotCompleteError);
      expect(failure).toMatchObject({ batch_id: batch.id, batch_status: 'in_progress', provider_name: 'anthropic' });
    } finally {
      fake.pollsUntilEnded = 2;
    }
  });

  it('cancels a batch: cancelling at once, cancelled once ended', async () => {
    const batch = await create(writeInput('cancel.jsonl', [line('x', 'one'), line('y', 'two')]));
    const cancelling = await provider.batches!.cancel(batch.id, call);
    expect(fake.server.lastRequest).toMatchObject({ method: 'POST', path: `/v1/messages/batches/${batch.id}/cancel` });
    expect(cancelling.status).toBe('cancelling');
    const cancelled = await provider.batches!.retrieve(batch.id, call);
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.request_counts).toEqual({ total: 2, completed: 0, failed: 2 });
  });

  it('lists batches with limit and the after cursor', async () => {
    const all = await provider.batches!.list({}, call);
    expect(all.length).toBeGreaterThanOrEqual(3);
    const first = await provider.batches!.list({ limit: 2 }, call);
    expect(fake.server.lastRequest.query.get('limit')).toBe('2');
    expect(first.map((b) => b.id)).toEqual(all.slice(0, 2).map((b) => b.id));
    const next = await provider.batches!.list({ after: first[1].id, limit: 2 }, call);
    expect(fake.server.lastRequest.query.get('after_id')).toBe(first[1].id);
    expect(next.map((b) => b.id)).toEqual(all.slice(2, 4).map((b) => b.id));
  });

  it('an unknown batch id is the API 404 mapped to ModelNotFoundError with the API message', async () => {
    const mapped = provider.toHubError(await failureOf(provider.batches!.retrieve('msgbatch_nope', call)));
    expect(mapped).toBeInstanceOf(ModelNotFoundError);
    expect(mapped?.message).toContain('msgbatch_nope');
  });

  it('rejects input it cannot send: other endpoints, windows, metadata, malformed lines', async () => {
    const ok = writeInput('one.jsonl', [line('a', 'x')]);
    await expect(provider.batches!.create({ input_file_path: ok, endpoint: '/v1/chat/completions', completion_window: '24h' }, call)).rejects.toBeInstanceOf(UnsupportedParameterError);
    await expect(provider.batches!.create({ input_file_path: ok, endpoint: '/v1/messages', completion_window: '1h' }, call)).rejects.toBeInstanceOf(UnsupportedParameterError);
    await expect(provider.batches!.create({ input_file_path: ok, endpoint: '/v1/messages', completion_window: '24h', metadata: { a: 'b' } }, call)).rejects.toBeInstanceOf(UnsupportedParameterError);
    const cases: [unknown[], RegExp][] = [
      [['{not json'], /line 1 is not valid JSON/],
      [[{ method: 'POST', url: '/v1/messages', body: {} }], /line 1 has no custom_id/],
      [[line('a', 'x'), line('a', 'y')], /line 2 repeats custom_id a/],
      [[{ ...line('a', 'x'), url: '/v1/other' }], /differs from the batch endpoint/],
      [[{ custom_id: 'a', method: 'POST', url: '/v1/messages' }], /has no body object/],
      [[], /has no requests/],
    ];
    for (const [lines, message] of cases) {
      const failure = await failureOf(create(writeInput('bad.jsonl', lines)));
      expect(failure).toBeInstanceOf(InvalidRequestError);
      expect((failure as Error).message).toMatch(message);
    }
    await expect(create(path.join(dir, 'missing.jsonl'))).rejects.toBeInstanceOf(InvalidRequestError);
  });
});

describe('anthropic count_tokens', () => {
  it('POST /v1/messages/count_tokens through Hub: the count as Anthropic gives it; no other provider offers it', async () => {
    const { Hub, acount_tokens } = await import('../../../src/hub/index.ts');
    const hub = Hub.create('anthropic', { api_key: 'sk-ant-test', api_base: fake.server.url, max_retries: 0 });
    const request = { model: 'claude-sonnet-4-6', system: 'be brief', messages: [{ role: 'user' as const, content: 'count me' }] };
    expect(await hub.acount_tokens(request)).toEqual({ input_tokens: fakeInputTokens(request) });
    expect(fake.server.lastRequest.path).toBe('/v1/messages/count_tokens');
    expect(bodyOf(fake.server.lastRequest)).toEqual(request);
    expect(hub.get_provider_metadata().count_tokens).toBe(true);
    // the function form takes provider:model
    expect(await acount_tokens({ ...request, model: 'anthropic:claude-sonnet-4-6', api_key: 'sk-ant-test', api_base: fake.server.url })).toEqual({ input_tokens: fakeInputTokens(request) });
    const openai = Hub.create('openai', { api_key: 'sk-test', api_base: 'http://127.0.0.1:9' });
    await expect(openai.acount_tokens({ ...request, model: 'gpt-4o' })).rejects.toBeInstanceOf(UnsupportedParameterError);
    await expect(hub.acount_tokens({ model: 'claude-sonnet-4-6' } as unknown as typeof request)).rejects.toBeInstanceOf(InvalidRequestError);
  });
});
