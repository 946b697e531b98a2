// The providers of this folder driven through the public Hub functions (provider:model selection, key handling,
// retries, unified exceptions, output_format, completion on top of messages) against their vendor fakes.

import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { acompletion, acreate_batch, aembedding, alist_batches, alist_models, amessages, aretrieve_batch, aretrieve_batch_results } from '../../../src/hub/index.ts';
import { AuthenticationError, MissingApiKeyError, ModelNotFoundError, RateLimitError } from '../../../src/hub/errors.ts';
import { anthropicError, startAnthropicFake, type AnthropicFake } from '../../fakes/anthropic.ts';
import { startCohereFake } from '../../fakes/cohere.ts';
import { googleError, startGeminiFake } from '../../fakes/gemini.ts';
import { mistralError, startMistralFake, type MistralFake } from '../../fakes/mistral.ts';
import { startOllamaFake } from '../../fakes/ollama.ts';
import { startVoyageFake } from '../../fakes/voyage.ts';
import type { VendorServer } from '../../fakes/vendor-server.ts';
import { PROVIDERS } from '../../../src/hub/providers/index.ts';
import { collect, failureOf } from '../helpers.ts';

let anthropic: AnthropicFake;
let mistral: MistralFake;
let gemini: VendorServer;
let cohere: VendorServer;
let ollama: VendorServer;
let voyage: VendorServer;

beforeAll(async () => {
  [anthropic, mistral, gemini, cohere, ollama, voyage] = await Promise.all([
    startAnthropicFake(),
    startMistralFake(),
    startGeminiFake(),
    startCohereFake(),
    startOllamaFake(),
    startVoyageFake(),
  ]);
});
afterAll(() => Promise.all([anthropic.close(), mistral.close(), gemini.close(), cohere.close(), ollama.close(), voyage.close()]));

const chatProviders = () =>
  [
    ['anthropic', 'claude-sonnet-4-6', anthropic.server.url],
    ['gemini', 'gemini-2.5-flash', gemini.url],
    ['mistral', 'mistral-small-latest', mistral.server.url],
    ['cohere', 'command-a-03-2025', cohere.url],
    ['ollama', 'llama3.2', ollama.url],
  ] as const;

describe.each([0, 1, 2, 3, 4])('chat provider #%i through amessages and acompletion', (i) => {
  const pick = () => chatProviders()[i];

  it('amessages with provider:model answers the converted Message', async () => {
    const [provider, model, api_base] = pick();
    const message = await amessages({ model: `${provider}:${model}`, api_key: 'k', api_base, max_tokens: 50, messages: [{ role: 'user', content: 'hello hub' }] });
    expect(message.role).toBe('assistant');
    expect(message.content[0]).toMatchObject({ type: 'text', text: 'echo: hello hub' });
    expect(message.stop_reason).toBe('end_turn');
  });

  it('amessages stream yields the Messages event kinds in order', async () => {
    const [provider, model, api_base] = pick();
    const events = await collect(amessages({ provider, model, api_key: 'k', api_base, max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'hello hub' }] }));
    expect(events[0].type).toBe('message_start');
    expect(events.at(-1)!.type).toBe('message_stop');
    const text = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? [e.delta.text] : [])).join('');
    expect(text).toBe('echo: hello hub');
  });

  it('acompletion (OpenAI shape) runs on top of messages', async () => {
    const [provider, model, api_base] = pick();
    const completion = await acompletion({ provider, model, api_key: 'k', api_base, messages: [{ role: 'user', content: 'hello hub' }] });
    expect(completion.choices[0].message.content).toBe('echo: hello hub');
  });
});

describe('the SDK clients do not retry on their own (the core owns retries)', () => {
  it.each([0, 1, 2, 3, 4])('chat provider #%i: a 503 reaches the fake once when the provider is called directly', async (i) => {
    const [name, model, api_base] = chatProviders()[i];
    const server = { anthropic: anthropic.server, gemini, mistral: mistral.server, cohere, ollama }[name];
    server.reset();
    server.enqueue({ status: 503, json: { error: { message: 'overloaded', type: 'overloaded_error', code: 503, status: 'UNAVAILABLE' }, message: 'overloaded' } });
    const provider = PROVIDERS[name].create({ api_key: 'k', api_base });
    const failure = await failureOf(provider.messages({ model, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, { extra: {} }));
    expect(provider.toHubError(failure)?.status_code).toBe(503);
    expect(server.requests).toHaveLength(1);
  });
});

describe('key handling through the Hub', () => {
  it('a provider with a key variable and no key: MissingApiKeyError naming the variable', async () => {
    const saved = process.env.CO_API_KEY;
    delete process.env.CO_API_KEY;
    try {
      const failure = await failureOf(amessages({ provider: 'cohere', model: 'command-a', api_base: cohere.url, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }));
      expect(failure).toBeInstanceOf(MissingApiKeyError);
      expect(failure).toMatchObject({ provider_name: 'cohere', env_var_name: 'CO_API_KEY' });
    } finally {
      if (saved !== undefined) process.env.CO_API_KEY = saved;
    }
  });

  it('the environment variable is used when api_key is absent', async () => {
    process.env.MISTRAL_API_KEY = 'from-env';
    try {
      mistral.server.reset();
      await amessages({ provider: 'mistral', model: 'mistral-small-latest', api_base: mistral.server.url, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
      expect(mistral.server.lastRequest.headers.authorization).toBe('Bearer from-env');
    } finally {
      delete process.env.MISTRAL_API_KEY;
    }
  });

  it('ollama and encoder need no key', async () => {
    const models = await alist_models({ provider: 'ollama', api_base: ollama.url });
    expect(models.length).toBeGreaterThan(0);
  });
});

describe('retries and unified exceptions through the Hub', () => {
  it('a 429 with Retry-After is retried by the core once the SDK retries are off: two requests, one answer', async () => {
    mistral.server.reset();
    mistral.server.enqueue(mistralError(429, 'Requests rate limit exceeded', 'rate_limited', null, null, { 'retry-after': '0' }));
    const message = await amessages({ provider: 'mistral', model: 'mistral-small-latest', api_key: 'k', api_base: mistral.server.url, max_tokens: 5, messages: [{ role: 'user', content: 'again' }] });
    expect(message.content[0]).toMatchObject({ text: 'echo: again' });
    expect(mistral.server.requests).toHaveLength(2);
  });

  it("Anthropic's 529 overloaded_error is retried like a 503 (the Anthropic SDK retries it; callers coming from it rely on that)", async () => {
    anthropic.server.reset();
    anthropic.server.enqueue(anthropicError(529, 'overloaded_error', 'Overloaded', { 'retry-after': '0' }));
    const message = await amessages({ provider: 'anthropic', model: 'claude-sonnet-4-6', api_key: 'k', api_base: anthropic.server.url, max_tokens: 5, messages: [{ role: 'user', content: 'again' }] });
    expect(message.content[0]).toMatchObject({ text: 'echo: again' });
    expect(anthropic.server.requests).toHaveLength(2);
  });

  it.each([false, true])('a key echoed in a nested error body (Anthropic shape) is scrubbed everywhere (unified: %s)', async (unified) => {
    const key = 'sk-ant-echoed-0123456789';
    anthropic.server.reset();
    anthropic.server.enqueue(anthropicError(400, 'invalid_request_error', `bad request for key ${key}`));
    const failure = (await failureOf(
      amessages({ provider: 'anthropic', model: 'claude-sonnet-4-6', api_key: key, api_base: anthropic.server.url, unified_exceptions: unified, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    )) as Error & { original_exception?: unknown; error?: unknown };
    const raw = (unified ? failure.original_exception : failure) as Error & { error?: unknown };
    expect(failure.message).not.toContain(key);
    expect(raw.message).not.toContain(key);
    expect(raw.stack).not.toContain(key);
    expect(JSON.stringify(raw.error)).not.toContain(key);
    expect(JSON.stringify(raw.error)).toContain('***');
  });

  it.each(['mistral', 'cohere', 'gemini', 'ollama'] as const)('%s: a key echoed in the error body is in no string field of the raw error', async (name) => {
    const key = 'secret-echoed-0123456789';
    const text = `bad request for key ${key}`;
    const server = { mistral: mistral.server, cohere, gemini, ollama }[name];
    server.reset();
    server.enqueue(
      name === 'mistral' ? mistralError(400, text) : name === 'gemini' ? googleError(400, 'INVALID_ARGUMENT', text) : { status: 400, json: name === 'cohere' ? { message: text } : { error: text } },
    );
    const model = { mistral: 'mistral-small-latest', cohere: 'command-a', gemini: 'gemini-2.5-flash', ollama: 'llama3.2' }[name];
    const raw = (await failureOf(
      amessages({ provider: name, model, api_key: key, api_base: server.url, unified_exceptions: false, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    )) as Error;
    expect(raw.message).not.toContain(key);
    const strings: string[] = [];
    const walk = (value: unknown, depth: number) => {
      if (typeof value === 'string') strings.push(value);
      else if (value && typeof value === 'object' && depth < 6) for (const inner of Object.values(value)) walk(inner, depth + 1);
    };
    walk(raw, 0);
    expect(strings.filter((s) => s.includes(key))).toEqual([]);
  });

  it('with max_retries 0 the unified RateLimitError carries retry_after', async () => {
    gemini.enqueue(googleError(429, 'RESOURCE_EXHAUSTED', 'Quota exceeded', [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '21s' }]));
    const failure = await failureOf(
      amessages({ provider: 'gemini', model: 'gemini-2.5-flash', api_key: 'k', api_base: gemini.url, max_retries: 0, unified_exceptions: true, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    );
    expect(failure).toBeInstanceOf(RateLimitError);
    expect(failure).toMatchObject({ retry_after: 21, provider_name: 'gemini', status_code: 429 });
  });

  it('a bad key: AuthenticationError with unified exceptions on, the key nowhere in the message', async () => {
    const failure = await failureOf(
      amessages({ provider: 'cohere', model: 'command-a', api_key: 'bad-key', api_base: cohere.url, unified_exceptions: true, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    );
    expect(failure).toBeInstanceOf(AuthenticationError);
    expect(String(failure)).not.toContain('bad-key');
  });

  it('an unknown Ollama model: ModelNotFoundError', async () => {
    const failure = await failureOf(amessages({ provider: 'ollama', model: 'nope', api_base: ollama.url, unified_exceptions: true, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }));
    expect(failure).toBeInstanceOf(ModelNotFoundError);
  });
});

describe('output_format through the Hub', () => {
  it('a zod schema reaches Gemini as a JSON schema and the answer is parsed', async () => {
    gemini.reset();
    gemini.enqueue({ json: { candidates: [{ content: { role: 'model', parts: [{ text: '{"city":"Oslo","celsius":4}' }] }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 5 } } });
    const schema = z.object({ city: z.string(), celsius: z.number() });
    const message = await amessages({ provider: 'gemini', model: 'gemini-2.5-flash', api_key: 'k', api_base: gemini.url, max_tokens: 50, output_format: schema, messages: [{ role: 'user', content: 'weather' }] });
    expect(message.parsed_output).toEqual({ city: 'Oslo', celsius: 4 });
    const config = (gemini.lastRequest.json as { generationConfig: Record<string, unknown> }).generationConfig;
    expect(config.responseMimeType).toBe('application/json');
    expect(config.responseJsonSchema).toMatchObject({ type: 'object', properties: { city: { type: 'string' } } });
  });
});

describe('embeddings and models through the Hub', () => {
  it.each([
    ['gemini', 'text-embedding-004'],
    ['mistral', 'mistral-embed'],
    ['cohere', 'embed-v4.0'],
    ['ollama', 'nomic-embed-text'],
    ['voyage', 'voyage-3.5'],
  ])('aembedding with %s', async (provider, model) => {
    const bases: Record<string, string> = { gemini: gemini.url, mistral: mistral.server.url, cohere: cohere.url, ollama: ollama.url, voyage: `${voyage.url}/v1` };
    const response = await aembedding({ provider, model, api_key: provider === 'voyage' ? 'vo-key' : 'k', api_base: bases[provider], inputs: ['alpha', 'beta gamma'] });
    expect(response.data.map((d) => d.index)).toEqual([0, 1]);
    expect(response.data[0].embedding.length).toBeGreaterThan(0);
    expect(response.data[0].embedding).not.toEqual(response.data[1].embedding);
  });

  it.each(['anthropic', 'gemini', 'mistral', 'cohere', 'ollama'])('alist_models with %s', async (provider) => {
    const bases: Record<string, string> = { anthropic: anthropic.server.url, gemini: gemini.url, mistral: mistral.server.url, cohere: cohere.url, ollama: ollama.url };
    const models = await alist_models({ provider, api_key: 'k', api_base: bases[provider] });
    expect(models.length).toBe(3);
    expect(models.every((m) => typeof m.id === 'string' && m.id !== '')).toBe(true);
  });
});

describe('batches through the Hub', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hub-batches-'));

  it.each([
    ['anthropic', '/v1/messages', 'claude-sonnet-4-6'],
    ['mistral', '/v1/chat/completions', 'mistral-small-latest'],
  ])('%s: create, poll, results, list', async (provider, endpoint, model) => {
    const file = path.join(dir, `${provider}.jsonl`);
    writeFileSync(file, ['a', 'b'].map((id) => JSON.stringify({ custom_id: id, method: 'POST', url: endpoint, body: { model, max_tokens: 5, messages: [{ role: 'user', content: `q-${id}` }] } })).join('\n'));
    const api_base = provider === 'anthropic' ? anthropic.server.url : mistral.server.url;
    const batch = await acreate_batch({ provider, api_key: 'k', api_base, input_file_path: file, endpoint });
    expect(batch.completion_window).toBe('24h');
    let current = batch;
    for (let polls = 0; current.status !== 'completed' && polls < 5; polls++) current = await aretrieve_batch({ provider, api_key: 'k', api_base, batch_id: batch.id });
    expect(current.status).toBe('completed');
    const results = await aretrieve_batch_results({ provider, api_key: 'k', api_base, batch_id: batch.id });
    expect(results.map((r) => r.custom_id)).toEqual(['a', 'b']);
    const listed = await alist_batches({ provider, api_key: 'k', api_base, limit: 1 });
    expect(listed).toHaveLength(1);
  });
});
