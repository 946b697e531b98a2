// The synchronous forms give the same results as the asynchronous ones for the native providers. The vendor fakes
// run in a child process: a synchronous call blocks this thread.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  aembedding,
  alist_models,
  amessages,
  arerank,
  create_batch,
  embedding,
  Hub,
  list_models,
  messages,
  rerank,
  retrieve_batch,
  retrieve_batch_results,
  UnsupportedParameterError,
} from '../../../src/hub/index.ts';
import type { MessagesResponse, MessagesStreamEvent } from '../../../src/hub/provider.ts';
import Anthropic from '@anthropic-ai/sdk';
import { ApiError as GeminiApiError } from '@google/genai';
import { MistralError } from '@mistralai/mistralai/models/errors';
import { CohereError } from 'cohere-ai';
import { fakeRanking } from '../../fakes/vendor-server.ts';
import { collect, failureOf } from '../helpers.ts';

let child: ChildProcess;
let bases: Record<string, string>;

beforeAll(async () => {
  child = spawn(process.execPath, [fileURLToPath(new URL('../../fakes/serve-vendor-fakes.ts', import.meta.url))], { stdio: ['ignore', 'pipe', 'inherit'] });
  bases = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (data: Buffer) => {
      out += data.toString();
      if (out.includes('\n')) resolve(JSON.parse(out.trim()) as Record<string, string>);
    });
    child.once('exit', (code) => reject(new Error(`vendor fakes exited with ${code}`)));
  });
});

afterAll(async () => {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
});

const chat = [
  ['anthropic', 'claude-sonnet-4-6'],
  ['gemini', 'gemini-2.5-flash'],
  ['mistral', 'mistral-small-latest'],
  ['cohere', 'command-a-03-2025'],
  ['ollama', 'llama3.2'],
] as const;

/** Ollama has no message ids; the Hub generates one per call, so ids are left out of the comparison. */
const withoutIds = <T>(value: T): T => JSON.parse(JSON.stringify(value, (key, v: unknown) => (key === 'id' ? undefined : v))) as T;

describe.each(chat)('%s: sync and async forms agree', (provider, model) => {
  const request = () => ({ provider, model, api_key: 'k', api_base: bases[provider], max_tokens: 20, messages: [{ role: 'user' as const, content: 'same answer?' }] });

  it('messages', async () => {
    const sync = messages(request()) as MessagesResponse;
    expect(sync.content[0]).toMatchObject({ type: 'text', text: 'echo: same answer?' });
    expect(withoutIds(sync)).toEqual(withoutIds(await amessages(request())));
  });

  it('messages with stream: true', async () => {
    const sync = [...(messages({ ...request(), stream: true }) as Iterable<MessagesStreamEvent>)];
    expect(sync.at(-1)).toEqual({ type: 'message_stop' });
    expect(withoutIds(sync)).toEqual(withoutIds(await collect(amessages({ ...request(), stream: true }))));
  });

  it('list_models', async () => {
    const options = { provider, api_key: 'k', api_base: bases[provider] };
    expect(list_models(options)).toEqual(await alist_models(options));
  });
});

describe.each([
  ['gemini', 'text-embedding-004'],
  ['mistral', 'mistral-embed'],
  ['cohere', 'embed-v4.0'],
  ['ollama', 'nomic-embed-text'],
  ['voyage', 'voyage-3.5'],
] as const)('%s: embedding and aembedding agree', (provider, model) => {
  it('embedding', async () => {
    const request = { provider, model, api_key: provider === 'voyage' ? 'vo-key' : 'k', api_base: bases[provider], inputs: ['one', 'two three'] };
    const sync = embedding(request);
    expect(sync.data).toHaveLength(2);
    expect(sync).toEqual(await aembedding(request));
  });
});

describe.each([
  ['cohere', 'rerank-v3.5', 'k'],
  ['voyage', 'rerank-2.5', 'vo-key'],
] as const)('%s: rerank and arerank agree', (provider, model, api_key) => {
  const request = () => ({ provider, model, api_key, api_base: bases[provider], query: 'capital of france', documents: ['the cat', 'paris is the capital of france', 'spain'], top_n: 2, return_documents: true });

  it('rerank, and Hub.rerank', async () => {
    const sync = rerank(request());
    expect(sync.results.map(({ index, relevance_score }) => ({ index, relevance_score }))).toEqual(fakeRanking(request().query, request().documents, 2));
    expect(sync.results[0].document).toEqual({ text: 'paris is the capital of france' });
    const asynchronous = await arerank(request());
    // Voyage answers no id: each call gets its own
    expect(withoutIds(sync)).toEqual(withoutIds(asynchronous));
    const { provider: _provider, ...bound } = request();
    expect(withoutIds(Hub.create(provider, { api_key, api_base: bases[provider] }).rerank(bound))).toEqual(withoutIds(asynchronous));
  });

  it('an option the provider cannot honour raises the unified exception on this thread', () => {
    if (provider === 'voyage') expect(() => rerank({ ...request(), max_tokens_per_doc: 10 })).toThrow(UnsupportedParameterError);
    else expect(() => rerank({ ...request(), provider: 'mistral', model: 'mistral-small-latest', api_base: bases.mistral })).toThrow(UnsupportedParameterError);
  });
});

describe('batches in the synchronous form', () => {
  it.each([
    ['anthropic', '/v1/messages', 'claude-sonnet-4-6'],
    ['mistral', '/v1/chat/completions', 'mistral-small-latest'],
  ])('%s: create, poll, results', (provider, endpoint, model) => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'hub-sync-batch-')), 'in.jsonl');
    writeFileSync(file, JSON.stringify({ custom_id: 'only', method: 'POST', url: endpoint, body: { model, max_tokens: 5, messages: [{ role: 'user', content: 'q' }] } }));
    const options = { provider, api_key: 'k', api_base: bases[provider] };
    const batch = create_batch({ ...options, input_file_path: file, endpoint });
    let current = batch;
    for (let polls = 0; current.status !== 'completed' && polls < 5; polls++) current = retrieve_batch({ ...options, batch_id: batch.id });
    expect(current.status).toBe('completed');
    expect(retrieve_batch_results({ ...options, batch_id: batch.id }).map((r) => r.custom_id)).toEqual(['only']);
  });
});

describe('without unified exceptions, a sync error is the vendor SDK error the async form raises', () => {
  // [provider, model, api_key, the class the async form raises (undefined: the SDK does not export it)]
  const failing = () =>
    [
      ['anthropic', 'claude-sonnet-4-6', 'bad-key', Anthropic.AuthenticationError],
      ['gemini', 'gemini-2.5-flash', 'bad-key', GeminiApiError],
      ['mistral', 'mistral-small-latest', 'bad-key', MistralError],
      ['cohere', 'command-a-03-2025', 'bad-key', CohereError],
      ['ollama', 'no-such-model', 'k', undefined],
    ] as const;

  function thrown(run: () => unknown): unknown {
    try {
      run();
    } catch (error) {
      return error;
    }
    throw new Error('expected the call to fail, it succeeded');
  }

  it.each([0, 1, 2, 3, 4])('provider #%i: messages and messages stream', async (i) => {
    const [provider, model, api_key, type] = failing()[i];
    const request = { provider, model, api_key, api_base: bases[provider], max_tokens: 20, max_retries: 0, unified_exceptions: false, messages: [{ role: 'user' as const, content: 'hi' }] };
    const asyncError = (await failureOf(amessages(request))) as Error;
    const syncErrors = [thrown(() => messages(request)), thrown(() => [...(messages({ ...request, stream: true }) as Iterable<MessagesStreamEvent>)])];
    for (const syncError of syncErrors as Error[]) {
      if (type) {
        expect(asyncError).toBeInstanceOf(type);
        expect(syncError).toBeInstanceOf(type);
        expect(syncError.constructor).toBe(asyncError.constructor);
      } else {
        // Ollama's ResponseError is not exported: the documented shape, a plain Error with its name and fields.
        expect(syncError.constructor).toBe(Error);
        expect(syncError).toMatchObject({ name: asyncError.name, status_code: 404 });
      }
      expect(syncError.name).toBe(asyncError.name);
      expect(syncError.message).toBe(asyncError.message);
    }
  });
});
