/**
 * The Vercel AI SDK (`ai` with `@ai-sdk/openai`) against the gateway, at its defaults: `openai(model)` calls the
 * Responses API, `openai.chat(model)` chat completions, each plain and streamed, and `openai.embedding(model)`
 * embeddings. Each call is answered as the provider answered it and leaves one usage row, charged.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { embedMany, generateText, streamText } from 'ai';
import { describe, expect, it } from 'vitest';
import { CHAT_USAGE, DEFAULT_COMPLETION_TEXT } from '../fakes/openai-compatible.ts';
import { TEST_PRICING, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

const backends = await useBackends();
const fake = await useFakeProvider();

describe.each(backends)('the AI SDK on $name', (backend) => {
  let gateway: TestGateway;
  let key: { id: string; key: string };
  let openai: ReturnType<typeof createOpenAI>;

  useTestGateway(
    backend,
    () => ({
      providers: { openai: { api_key: 'sk-provider-secret', api_base: fake.baseURL } },
      pricing: { 'openai:gpt-fake': TEST_PRICING, 'openai:text-embedding-fake': TEST_PRICING },
    }),
    async (started) => {
      gateway = started;
      key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'ai-sdk' } })).json;
      openai = createOpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1` });
    },
  );

  const lastRow = async () => (await gateway.call('GET', `/v1/keys/${key.id}/usage?limit=1`)).json.data[0];
  const rows = async () => (await gateway.call('GET', `/v1/keys/${key.id}/usage`)).json.totals.requests as number;

  it.skipIf(backend.skipReason)('generateText through the Responses API (its default) and through chat completions', async () => {
    const before = await rows();
    const viaResponses = await generateText({ model: openai('openai:gpt-fake'), prompt: 'Hi' });
    expect(viaResponses.text).toBe(DEFAULT_COMPLETION_TEXT);
    expect(await lastRow()).toMatchObject({ endpoint: 'responses', provider: 'openai', model: 'gpt-fake', status: 'success', cost: expect.any(Number) });
    const viaChat = await generateText({ model: openai.chat('openai:gpt-fake'), prompt: 'Hi' });
    expect(viaChat.text).toBe(DEFAULT_COMPLETION_TEXT);
    expect(viaChat.usage).toMatchObject({ inputTokens: CHAT_USAGE.prompt_tokens, outputTokens: CHAT_USAGE.completion_tokens });
    expect(await lastRow()).toMatchObject({ endpoint: 'chat.completions', prompt_tokens: CHAT_USAGE.prompt_tokens, completion_tokens: CHAT_USAGE.completion_tokens, status: 'success' });
    expect((await lastRow()).cost).toBeGreaterThan(0);
    expect(await rows()).toBe(before + 2);
  });

  it.skipIf(backend.skipReason)('streamText, both APIs: the whole text, the usage the stream reported, one row each', async () => {
    const before = await rows();
    for (const model of [openai('openai:gpt-fake'), openai.chat('openai:gpt-fake')]) {
      const errors: unknown[] = [];
      const result = streamText({ model, prompt: 'Hi', onError: ({ error }) => void errors.push(error) });
      let text = '';
      for await (const piece of result.textStream) text += piece;
      expect(errors).toEqual([]);
      expect(text.length).toBeGreaterThan(0);
      const usage = await result.usage;
      expect(usage.inputTokens).toBeGreaterThan(0);
      const row = await lastRow();
      expect(row).toMatchObject({ status: 'success', prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens });
    }
    expect(await rows()).toBe(before + 2);
  });

  it.skipIf(backend.skipReason)('embedMany: the provider’s vectors, in order, one row', async () => {
    const before = await rows();
    const { embeddings, usage } = await embedMany({ model: openai.embedding('openai:text-embedding-fake'), values: ['first', 'second', 'third'] });
    expect(embeddings).toHaveLength(3);
    expect(embeddings[0]).not.toEqual(embeddings[1]);
    embeddings.forEach((vector) => expect(vector.every(Number.isFinite)).toBe(true));
    expect(await lastRow()).toMatchObject({ endpoint: 'embeddings', status: 'success', prompt_tokens: usage.tokens });
    expect(await rows()).toBe(before + 1);
  });
});
