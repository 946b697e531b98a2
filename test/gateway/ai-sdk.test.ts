/**
 * The Vercel AI SDK (`ai` with `@ai-sdk/openai` and `@ai-sdk/anthropic`) against the gateway, at its defaults:
 * `openai(model)` calls the Responses API, `openai.chat(model)` chat completions, `anthropic(model)` the Messages API
 * (asking for the model's whole output limit as max_tokens), each plain and streamed, and `openai.embedding(model)`
 * embeddings. Each call is answered as the provider answered it and leaves one usage row, charged.
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { embedMany, generateText, streamText } from 'ai';
import { afterAll, describe, expect, it } from 'vitest';
import { startAnthropicFake } from '../fakes/anthropic.ts';
import { bodyOf } from '../fakes/vendor-server.ts';
import { CHAT_USAGE, DEFAULT_COMPLETION_TEXT } from '../fakes/openai-compatible.ts';
import { TEST_PRICING, useBackends, useFakeProvider, useTestGateway, type TestGateway } from './helpers/gateway.ts';

const backends = await useBackends();
const fake = await useFakeProvider();
const anthropicFake = await startAnthropicFake();
afterAll(() => anthropicFake.close());

describe.each(backends)('the AI SDK on $name', (backend) => {
  let gateway: TestGateway;
  let key: { id: string; key: string };
  let openai: ReturnType<typeof createOpenAI>;
  let anthropic: ReturnType<typeof createAnthropic>;

  useTestGateway(
    backend,
    () => ({
      providers: {
        openai: { api_key: 'sk-provider-secret', api_base: fake.baseURL },
        anthropic: { api_key: 'sk-ant-secret', api_base: anthropicFake.server.url },
      },
      pricing: { 'openai:gpt-fake': TEST_PRICING, 'openai:text-embedding-fake': TEST_PRICING, 'anthropic:claude-haiku-4-5': TEST_PRICING },
    }),
    async (started) => {
      gateway = started;
      key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'ai-sdk' } })).json;
      openai = createOpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1` });
      anthropic = createAnthropic({ apiKey: key.key, baseURL: `${gateway.url}/v1` });
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

  it.skipIf(backend.skipReason)('@ai-sdk/anthropic: generateText (max_tokens the model’s whole output limit, not streamed) and streamText through /v1/messages', async () => {
    const before = await rows();
    const answer = await generateText({ model: anthropic('anthropic:claude-haiku-4-5'), prompt: 'ping', maxRetries: 0 });
    expect(answer.text).toBe('echo: ping');
    expect(anthropicFake.server.lastRequest.path).toBe('/v1/messages');
    const sent = bodyOf(anthropicFake.server.lastRequest) as { max_tokens: number; stream?: boolean };
    expect(sent.max_tokens).toBeGreaterThanOrEqual(32_000);
    expect(sent.stream).toBe(false);
    expect(await lastRow()).toMatchObject({ endpoint: 'messages', provider: 'anthropic', model: 'claude-haiku-4-5', status: 'success', prompt_tokens: answer.usage.inputTokens });
    const streamed = streamText({ model: anthropic('anthropic:claude-haiku-4-5'), prompt: 'ping', maxRetries: 0 });
    let text = '';
    for await (const piece of streamed.textStream) text += piece;
    expect(text).toBe('echo: ping');
    expect(await lastRow()).toMatchObject({ endpoint: 'messages', status: 'success', completion_tokens: (await streamed.usage).outputTokens });
    expect(await rows()).toBe(before + 2);
  });
});
