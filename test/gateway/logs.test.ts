import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { chatCompletionBody, DEFAULT_COMPLETION_TEXT, FakeOpenAIServer } from '../fakes/openai-compatible.ts';
import { KEY_IN_PROVIDER_ERROR, MASTER_KEY, PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES, sqliteBackend, startTestGateway, type TestGateway } from './helpers/gateway.ts';

const backend = sqliteBackend();
const lines: string[] = [];
const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    lines.push(...chunk.toString().split('\n').filter(Boolean));
    done();
  },
});
let fake: FakeOpenAIServer;
let gateway: TestGateway;
const PROVIDER_KEY = 'sk-provider-very-secret-0001';

beforeAll(async () => {
  fake = await FakeOpenAIServer.start();
  gateway = await startTestGateway(await backend.newDatabaseUrl(), { providers: { openai: { api_key: PROVIDER_KEY, api_base: fake.baseURL } }, requirePricing: false }, { logStream: sink });
});
afterAll(async () => {
  await gateway?.close();
  await fake?.close();
  await backend.close();
});

it('logs are JSON lines with a request id, and no master key, virtual key or provider key appears in them', async () => {
  const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'logged' } })).json;
  const client = new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  const ask = () => client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] });
  await ask();
  fake.script(PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES.unauthorized, PROVIDER_FAILURES.serverError);
  await ask().catch(() => {});
  await ask().catch(() => {});
  await gateway.call('GET', '/v1/users', { key: `${key.key}x` });
  const response = await fetch(`${gateway.url}/v1/models`, { headers: { authorization: `Bearer ${key.key}`, 'x-request-id': 'trace-me-42' } });
  expect(response.headers.get('x-request-id')).toBe('trace-me-42');
  await new Promise((resolve) => setTimeout(resolve, 100));

  const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  expect(records.length).toBeGreaterThan(5);
  expect(records.filter((record) => record.reqId === 'trace-me-42').length).toBeGreaterThanOrEqual(2);
  expect(records.some((record) => record.code === 'upstream_authentication_failed')).toBe(true);
  const all = lines.join('\n');
  for (const secret of [MASTER_KEY, key.key, key.key.slice(3), PROVIDER_KEY, KEY_IN_PROVIDER_ERROR]) expect(all).not.toContain(secret);
});

it('a usage row that cannot be written is logged and counted: before the provider the call is refused (503), after it the answer still goes out', async () => {
  const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'broken-db' } })).json;
  const client = new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  const ask = () => client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] });
  const unwritable = async <T>(table: 'pending_calls' | 'usage', during: () => Promise<T>) => {
    await gateway.store.driver.run(`ALTER TABLE ${table} RENAME TO ${table}_moved`);
    try {
      return await during();
    } finally {
      await gateway.store.driver.run(`ALTER TABLE ${table}_moved RENAME TO ${table}`);
    }
  };
  // The write-ahead row (a call in flight's pending_calls row) fails: no provider call without it.
  const sent = fake.requestsTo(PROVIDER_CHAT_ROUTE).length;
  await unwritable('pending_calls', () => expect(ask()).rejects.toMatchObject({ status: 503, code: 'usage_unavailable' }));
  expect(fake.requestsTo(PROVIDER_CHAT_ROUTE)).toHaveLength(sent);
  // The row of an answered call fails: the provider has been paid, the client gets the answer.
  fake.script(PROVIDER_CHAT_ROUTE, { delayMs: 300, then: { json: chatCompletionBody('gpt-fake') } });
  const answered = ask();
  while (fake.requestsTo(PROVIDER_CHAT_ROUTE).length === sent) await new Promise((resolve) => setTimeout(resolve, 10));
  const completion = await unwritable('usage', () => answered);
  expect(completion.choices[0].message.content).toBe(DEFAULT_COMPLETION_TEXT);
  const metrics = (await gateway.call('GET', '/metrics', { key: null })).json as string;
  expect(metrics).toMatch(/gateway_usage_write_failures_total 2\b/);
  const messages = lines.map((line) => String((JSON.parse(line) as { msg?: unknown }).msg));
  expect(messages.filter((msg) => msg.startsWith('usage row could not be written'))).toEqual([
    'usage row could not be written; the call was refused before reaching the provider',
    'usage row could not be written; the call was answered',
  ]);
});
