/**
 * The Vercel AI SDK against the model server, at its defaults: `@ai-sdk/openai`'s embedding model on /v1/embeddings
 * (any model name), `@ai-sdk/cohere`'s embedding and reranking models on /v2/embed and /v2/rerank. Answers are checked
 * against the same routes called directly.
 */
import { createCohere } from '@ai-sdk/cohere';
import { createOpenAI } from '@ai-sdk/openai';
import { embed, embedMany, rerank } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTinyCrossEncoder, generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';

let sentences: InProcessEncoder;
let cross: InProcessEncoder;

beforeAll(async () => {
  const [embeddingDir, crossDir] = await Promise.all([generateTinyModel({ modelType: 'embedding' }), generateTinyCrossEncoder()]);
  [sentences, cross] = await Promise.all([serveInProcess(embeddingDir, 'mini', 'sentence_embedding'), serveInProcess(crossDir, 'cross', 'sequence_classification')]);
});

afterAll(async () => {
  await Promise.all([sentences?.close(), cross?.close()]);
});

async function post<T>(server: InProcessEncoder, route: string, body: unknown): Promise<T> {
  const response = await fetch(`${server.httpUrl}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(response.status).toBe(200);
  return (await response.json()) as T;
}

const texts = ['The quick brown fox', 'jumps over the lazy dog', 'and runs away'];

describe('@ai-sdk/openai', () => {
  const openai = () => createOpenAI({ apiKey: 'unused', baseURL: `${sentences.httpUrl}/v1` });

  it('embedMany and embed (the default model name of a user’s code): /v1/embeddings’ vectors, in order', async () => {
    const direct = await post<{ data: { embedding: number[] }[] }>(sentences, '/v1/embeddings', { input: texts });
    const { embeddings, usage } = await embedMany({ model: openai().embedding('text-embedding-3-small'), values: texts });
    expect(embeddings).toEqual(direct.data.map(({ embedding }) => embedding));
    expect(usage.tokens).toBeGreaterThan(texts.length);
    const { embedding } = await embed({ model: openai().embedding('any-name'), value: texts[1] });
    expect(embedding).toEqual(direct.data[1].embedding);
  });

  it('providerOptions dimensions: the first n components, unit length again', async () => {
    const { embedding } = await embed({ model: openai().embedding('any-name'), value: texts[0], providerOptions: { openai: { dimensions: 8 } } });
    expect(embedding).toHaveLength(8);
    expect(Math.hypot(...embedding)).toBeCloseTo(1, 5);
  });
});

describe('@ai-sdk/cohere', () => {
  it('embedMany: /v2/embed’s float vectors', async () => {
    const cohere = createCohere({ apiKey: 'unused', baseURL: `${sentences.httpUrl}/v2` });
    const direct = await post<{ embeddings: { float: number[][] } }>(sentences, '/v2/embed', { texts, model: 'embed-english-v3.0', input_type: 'search_query', embedding_types: ['float'] });
    const { embeddings } = await embedMany({ model: cohere.textEmbeddingModel('embed-english-v3.0'), values: texts });
    expect(embeddings).toEqual(direct.embeddings.float);
  });

  it('rerank, texts and objects, topN: /v2/rerank’s order and scores', async () => {
    const cohere = createCohere({ apiKey: 'unused', baseURL: `${cross.httpUrl}/v2` });
    const direct = await post<{ results: { index: number; relevance_score: number }[] }>(cross, '/v2/rerank', { model: 'rerank-v3.5', query: 'a fox', documents: texts });
    const { ranking } = await rerank({ model: cohere.reranking('rerank-v3.5'), query: 'a fox', documents: texts, topN: 2 });
    expect(ranking.map(({ originalIndex, score, document }) => [originalIndex, score, document])).toEqual(
      direct.results.slice(0, 2).map(({ index, relevance_score }) => [index, relevance_score, texts[index]]),
    );
    const objects = texts.map((text, id) => ({ id, text }));
    const byObject = await rerank({ model: cohere.reranking('rerank-v3.5'), query: 'a fox', documents: objects });
    expect(byObject.ranking).toHaveLength(3);
    expect(byObject.ranking.map(({ document }) => document)).toEqual(expect.arrayContaining(objects));
  });
});
