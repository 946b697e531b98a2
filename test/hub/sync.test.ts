// The synchronous forms block their thread, so the fake server runs in a child process here.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  AuthenticationError,
  BatchNotCompleteError,
  Hub,
  HubError,
  InvalidRequestError,
  MissingApiKeyError,
  ProviderError,
  RateLimitError,
  UnsupportedProviderError,
  acompletion,
  aembedding,
  alist_models,
  amessages,
  aresponses,
  cancel_batch,
  completion,
  create_batch,
  embedding,
  list_batches,
  list_models,
  messages,
  responses,
  retrieve_batch,
  retrieve_batch_results,
} from '../../src/hub/index.ts';
import { chatChunks, chatCompletionBody, errorBody } from '../fakes/openai-compatible.ts';
import { FakeOpenAIProcess } from '../fakes/openai-compatible-process.ts';
import { collect, collectGarbage, eventually, failureOf } from './helpers.ts';
import OpenAI from 'openai';

let fake: FakeOpenAIProcess;
let opts: { api_key: string; api_base: string };
const ask = { model: 'openai:gpt-test', max_tokens: 16, messages: [{ role: 'user' as const, content: 'hi' }] };

beforeAll(async () => {
  fake = await FakeOpenAIProcess.start();
  opts = { api_key: 'sk-sync', api_base: fake.baseURL };
});
afterEach(async () => {
  await fake.reset();
  delete process.env.HUB_UNIFIED_EXCEPTIONS;
});
afterAll(async () => {
  await fake.close();
});

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('sync and async forms give equal results', () => {
  it('messages, streamed messages, completion, embedding, list_models, responses', async () => {
    expect(messages({ ...opts, ...ask })).toEqual(await amessages({ ...opts, ...ask }));
    const syncEvents = [...messages({ ...opts, ...ask, stream: true })];
    expect(syncEvents).toEqual(await collect(amessages({ ...opts, ...ask, stream: true })));
    expect(syncEvents.map((e) => e.type)).toContain('message_stop');

    const chat = { ...opts, model: 'openai:gpt-test', messages: [{ role: 'user' as const, content: 'x' }] };
    const syncChat = completion(chat);
    const asyncChat = await acompletion(chat);
    expect({ ...syncChat, created: 0 }).toEqual({ ...asyncChat, created: 0 });
    expect([...completion({ ...chat, stream: true })].length).toBe((await collect(acompletion({ ...chat, stream: true }))).length);

    expect(embedding({ ...opts, model: 'openai:e', inputs: ['a', 'b'] })).toEqual(await aembedding({ ...opts, model: 'openai:e', inputs: ['a', 'b'] }));
    expect(list_models({ ...opts, provider: 'openai' })).toEqual(await alist_models({ ...opts, provider: 'openai' }));
    expect(responses({ ...opts, model: 'openai:gpt-test', input: 'q' })).toEqual(await aresponses({ ...opts, model: 'openai:gpt-test', input: 'q' }));
    expect([...responses({ ...opts, model: 'openai:gpt-test', input: 'q', stream: true })]).toEqual(
      await collect(aresponses({ ...opts, model: 'openai:gpt-test', input: 'q', stream: true })),
    );
  });

  it('output_format: a zod schema still gives a parsed, typed result', async () => {
    await fake.script('POST /v1/chat/completions', { json: chatCompletionBody('gpt-test', '{"ok":true}') });
    const message = messages({ ...opts, ...ask, output_format: z.object({ ok: z.boolean() }) });
    const ok: boolean | undefined = message.parsed_output?.ok;
    expect(ok).toBe(true);
    const requests = await fake.requests();
    expect(requests[0]!.body).toMatchObject({ response_format: { type: 'json_schema' } });
  });

  it('Hub instance sync methods', () => {
    const hub = Hub.create('openai', opts);
    const events = [...hub.messages({ model: 'gpt-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }], stream: true })];
    expect(events.at(-1)!.type).toBe('message_stop');
    expect(hub.messages({ model: 'gpt-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).content[0]).toMatchObject({ type: 'text' });
    expect(hub.list_models().length).toBeGreaterThan(0);
    expect(hub.embedding({ model: 'e', inputs: 'x' }).data).toHaveLength(1);
  });

  it('batches: create, retrieve, results (not complete), list, cancel', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'hub-sync-batch-'));
    const file = path.join(dir, 'in.jsonl');
    writeFileSync(file, JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: { model: 'm', messages: [] } }) + '\n');
    const batch = create_batch({ ...opts, provider: 'openai', input_file_path: file, endpoint: '/v1/chat/completions' });
    expect(retrieve_batch({ ...opts, provider: 'openai', batch_id: batch.id })).toMatchObject({ id: batch.id, status: 'validating' });
    expect(thrown(() => retrieve_batch_results({ ...opts, provider: 'openai', batch_id: batch.id }))).toBeInstanceOf(BatchNotCompleteError);
    expect(list_batches({ ...opts, provider: 'openai', limit: 1 }).map((b) => b.id)).toEqual([batch.id]);
    expect(cancel_batch({ ...opts, provider: 'openai', batch_id: batch.id }).status).toBe('cancelled');
  });
});

describe('sync errors keep their classes and fields', () => {
  it('without unified exceptions the vendor SDK error class is rebuilt (instanceof works), with its fields and headers', async () => {
    const rateLimited = { status: 429, headers: { 'retry-after': '0', 'x-request-id': 'req_42' }, json: errorBody('slow down', 'requests', 'rate_limit') };
    await fake.script('POST /v1/chat/completions', rateLimited, rateLimited, rateLimited);
    const asyncError = await failureOf(amessages({ ...opts, ...ask, max_retries: 0 }));
    const errors = [thrown(() => messages({ ...opts, ...ask, max_retries: 0 })), thrown(() => [...completion({ ...opts, ...ask, max_retries: 0, stream: true })])];
    expect(asyncError).toBeInstanceOf(OpenAI.RateLimitError);
    for (const error of errors) {
      expect(error).toBeInstanceOf(OpenAI.RateLimitError);
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect(error).not.toBeInstanceOf(HubError);
      const e = error as InstanceType<typeof OpenAI.RateLimitError>;
      expect(e.message).toBe((asyncError as Error).message);
      expect(e).toMatchObject({ status: 429, code: 'rate_limit', type: 'requests', error: { message: 'slow down' }, requestID: 'req_42' });
      expect(e.headers).toBeInstanceOf(Headers);
      expect(e.headers.get('retry-after')).toBe('0');
    }
  });

  it('unified exceptions cross the thread with their type and attributes', async () => {
    await fake.script('POST /v1/chat/completions', { status: 429, headers: { 'retry-after': '0' }, json: errorBody('slow', 'requests', 'rate_limit') });
    const error = thrown(() => messages({ ...opts, ...ask, max_retries: 0, unified_exceptions: true }));
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error).toBeInstanceOf(HubError);
    expect(error).toMatchObject({ status_code: 429, code: 'rate_limit', retry_after: 0, provider_name: 'openai', message: '[openai] slow' });
  });

  it('HUB_UNIFIED_EXCEPTIONS set after the worker started is honoured', async () => {
    messages({ ...opts, ...ask }); // the worker is running
    process.env.HUB_UNIFIED_EXCEPTIONS = '1';
    await fake.script('POST /v1/chat/completions', { status: 401, json: errorBody('bad key') });
    expect(thrown(() => messages({ ...opts, ...ask }))).toBeInstanceOf(AuthenticationError);
  });

  it('validation, selection and credential errors are raised on the calling thread', () => {
    expect(thrown(() => messages({ ...opts, ...ask, temperature: 2 }))).toBeInstanceOf(InvalidRequestError);
    expect(thrown(() => messages({ ...opts, ...ask, model: 'nosuch:x' }))).toBeInstanceOf(UnsupportedProviderError);
    delete process.env.GROQ_API_KEY;
    expect(thrown(() => messages({ api_base: fake.baseURL, ...ask, model: 'groq:x' }))).toBeInstanceOf(MissingApiKeyError);
    expect(thrown(() => messages({ ...opts, ...ask, signal: new AbortController().signal }))).toBeInstanceOf(InvalidRequestError);
  });

  it('a sync stream cut in the middle gives its events, then throws', async () => {
    await fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-test', ['a', 'b']).slice(0, 3), cut: true });
    const seen: string[] = [];
    const error = thrown(() => {
      for (const event of messages({ ...opts, ...ask, stream: true, unified_exceptions: true })) seen.push(event.type);
    });
    expect(error).toBeInstanceOf(ProviderError);
    expect(seen.slice(0, 2)).toEqual(['message_start', 'content_block_start']);
  });

  it('a sync stream dropped half-way (no break, no return) is closed once collected: the provider sees the connection close', async () => {
    // Streams that stall after their first events (as a provider that is still thinking): nothing but the
    // Hub closing them can end their connections.
    const held = { sse: chatChunks('gpt-test', ['a', 'b', 'c']).slice(0, 3), hold: true };
    await fake.script('POST /v1/chat/completions', held, held);
    const before = (await fake.stats()).abandonedStreams;
    // In functions of their own, so that nothing here keeps the iterators: one read half-way, one never iterated
    // (its first event was fetched when it opened).
    (() => {
      const iterator = messages({ ...opts, ...ask, stream: true })[Symbol.iterator]();
      expect(iterator.next().value?.type).toBe('message_start');
      expect(iterator.next().value?.type).toBe('content_block_start');
    })();
    (() => void messages({ ...opts, ...ask, stream: true }))();
    await eventually(async () => {
      collectGarbage();
      await new Promise((resolve) => setTimeout(resolve, 10));
      return (await fake.stats()).abandonedStreams === before + 2;
    }, 'the fake saw both dropped streams closed');
    // The worker is free for the next call, and still has no stream of its own open.
    expect(messages({ ...opts, ...ask }).type).toBe('message');
    expect((await fake.stats()).abandonedStreams).toBe(before + 2);
  });

  it('breaking out of a sync stream early closes it, and the next call works', () => {
    for (const event of messages({ ...opts, ...ask, stream: true })) {
      expect(event.type).toBe('message_start');
      break;
    }
    expect(messages({ ...opts, ...ask }).type).toBe('message');
  });
});
