/**
 * text-embeddings-inference's default route, POST / (where the Hugging Face inference clients send an endpoint's
 * requests), SageMaker's POST /invocations and GET /ping: called with the real `@huggingface/inference` client and
 * its default settings pointed at this server, as at a TEI endpoint; answers checked against the route of the model's
 * kind (/embed, /rerank, /predict), errors against that route's.
 */
import { InferenceClient } from '@huggingface/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKey } from '../../src/serve/api-key.ts';
import { generateTinyCrossEncoder, generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';

const KEY = 'default-route-key-0123456789';
let sentences: InProcessEncoder;
let classifier: InProcessEncoder;
let reranker: InProcessEncoder;
let labeller: InProcessEncoder;

beforeAll(async () => {
  const [embeddingDir, classifierDir, crossDir, tokenDir] = await Promise.all([
    generateTinyModel({ modelType: 'embedding' }),
    generateTinyModel({ modelType: 'sequence_classification', labels: ['negative', 'positive'] }),
    generateTinyCrossEncoder(),
    generateTinyModel({ modelType: 'token_classification', labels: ['O', 'B-PER', 'I-PER'] }),
  ]);
  [sentences, classifier, reranker, labeller] = await Promise.all([
    serveInProcess(embeddingDir, 'sentences', 'sentence_embedding', { pipeline: { maxRequestInputs: 16 }, apiKey: new ApiKey(KEY) }),
    serveInProcess(classifierDir, 'sentiment', 'sequence_classification'),
    serveInProcess(crossDir, 'cross', 'sequence_classification'),
    serveInProcess(tokenDir, 'ner', 'token_classification'),
  ]);
});

afterAll(async () => {
  await Promise.all([sentences?.close(), classifier?.close(), reranker?.close(), labeller?.close()]);
});

async function post(server: InProcessEncoder, route: string, body: string, headers: Record<string, string> = {}) {
  const authorization = server === sentences ? { authorization: `Bearer ${KEY}` } : {};
  const response = await fetch(`${server.httpUrl}${route}`, { method: 'POST', headers: { 'content-type': 'application/json', ...authorization, ...headers }, body });
  const text = await response.text();
  return { status: response.status, type: response.headers.get('content-type'), text };
}

const json = (answer: { text: string }) => JSON.parse(answer.text) as unknown;

describe('the @huggingface/inference client against this server as a TEI endpoint', () => {
  it('featureExtraction (POST / with {inputs}) gets /embed’s vectors, for one text and for a list', async () => {
    const endpoint = new InferenceClient(KEY).endpoint(sentences.httpUrl);
    const one = await endpoint.featureExtraction({ inputs: 'What is Deep Learning?' });
    expect(one).toEqual(json(await post(sentences, '/embed', JSON.stringify({ inputs: 'What is Deep Learning?' }))));
    expect((one as number[][])[0]).toHaveLength(32);
    const many = await endpoint.featureExtraction({ inputs: ['Today is a nice day', 'I like you'] });
    expect(many).toEqual(json(await post(sentences, '/embed', JSON.stringify({ inputs: ['Today is a nice day', 'I like you'] }))));
    expect(many as number[][]).toHaveLength(2);
  });

  it('without the key the server requires, its call fails on the 401 every route gives', async () => {
    await expect(new InferenceClient().endpoint(sentences.httpUrl).featureExtraction({ inputs: 'x' })).rejects.toThrow(/401|Unauthorized|API key/);
    expect((await post(sentences, '/', JSON.stringify({ inputs: 'x' }), { authorization: '' })).status).toBe(401);
  });
});

describe('POST / and POST /invocations: the route of the model’s kind', () => {
  it('an embedding model: /embed, with its options and TEI’s errors (an empty batch, a body that is not JSON)', async () => {
    const body = JSON.stringify({ inputs: ['a', 'b'], normalize: false, dimensions: 8 });
    const embedded = await post(sentences, '/embed', body);
    for (const route of ['/', '/invocations']) {
      expect(await post(sentences, route, body)).toEqual(embedded);
      const empty = await post(sentences, route, JSON.stringify({ inputs: [] }));
      expect({ status: empty.status, body: json(empty) }).toEqual({ status: 400, body: { error: '`inputs` cannot be empty', error_type: 'Empty' } });
      // refused before the route runs: still in TEI's body, as /embed answers it
      const broken = await post(sentences, route, '{"inputs": ["a",]}');
      expect(broken.status).toBe(400);
      expect(json(broken)).toEqual(json(await post(sentences, '/embed', '{"inputs": ["a",]}')));
      expect(json(broken)).toMatchObject({ error_type: expect.any(String) });
    }
  });

  it('a re-ranker (a classifier with one label): /rerank, TEI’s body and Infinity’s', async () => {
    const tei = JSON.stringify({ query: 'What is Deep Learning?', texts: ['Deep Learning is not...', 'Deep learning is...'], return_text: true });
    const infinity = JSON.stringify({ query: 'What is Deep Learning?', documents: ['Deep Learning is not...', 'Deep learning is...'] });
    for (const route of ['/', '/invocations']) {
      const ranked = await post(reranker, route, tei);
      expect(ranked.status).toBe(200);
      expect(json(ranked)).toEqual(json(await post(reranker, '/rerank', tei)));
      expect((json(ranked) as { text: string }[]).map(({ text }) => text).sort()).toEqual(['Deep Learning is not...', 'Deep learning is...']);
      const results = json(await post(reranker, route, infinity)) as { results: { index: number; relevance_score: number }[] };
      const byRerank = json(await post(reranker, '/rerank', infinity)) as typeof results;
      expect(results.results).toEqual(byRerank.results);
      expect(json(await post(reranker, route, JSON.stringify({ query: 'q', texts: [] })))).toMatchObject({ error_type: 'Empty' });
    }
  });

  it('a classifier: /predict, TEI’s body (one text: its labels best first) and spec 2’s', async () => {
    for (const body of [{ inputs: 'I like you.' }, { inputs: ['I like you.', 'I hate pineapples'] }]) {
      const predicted = await post(classifier, '/predict', JSON.stringify(body));
      expect(predicted.status).toBe(200);
      for (const route of ['/', '/invocations']) expect(await post(classifier, route, JSON.stringify(body))).toEqual(predicted);
    }
    const labels = json(await post(classifier, '/', JSON.stringify({ inputs: 'I like you.' }))) as { label: string; score: number }[];
    expect(labels.map(({ label }) => label).sort()).toEqual(['negative', 'positive']);
    expect(labels[0].score).toBeGreaterThanOrEqual(labels[1].score);
  });

  it('any other model: /predict, spec 2’s body and answer, spec 2’s errors', async () => {
    const body = JSON.stringify({ inputs: ['My name is Wolfgang', 'I live in Berlin'] });
    const predicted = await post(labeller, '/predict', body);
    expect(predicted.status).toBe(200);
    for (const route of ['/', '/invocations']) {
      expect(await post(labeller, route, body)).toEqual(predicted);
      const refused = await post(labeller, route, JSON.stringify({ inputs: 'one text' }));
      expect(refused).toEqual(await post(labeller, '/predict', JSON.stringify({ inputs: 'one text' })));
      expect(refused.status).toBe(422);
      expect(refused.type).toMatch(/^text\/plain/);
    }
  });

  it('the Hugging Face Inference API’s request options (Weaviate’s text2vec-huggingface sends them) change nothing; anything else in them is refused', async () => {
    const options = { wait_for_model: true, use_cache: true, use_gpu: false };
    const embedded = await post(sentences, '/embed', JSON.stringify({ inputs: ['a', 'b'] }));
    for (const route of ['/', '/embed']) expect(await post(sentences, route, JSON.stringify({ inputs: ['a', 'b'], options }))).toEqual(embedded);
    expect(await post(sentences, '/embed_all', JSON.stringify({ inputs: 'a', options }))).toMatchObject({ status: 424 });
    const labels = await post(classifier, '/predict', JSON.stringify({ inputs: 'I like you.' }));
    for (const route of ['/', '/predict']) expect(await post(classifier, route, JSON.stringify({ inputs: 'I like you.', options: { wait_for_model: true } }))).toEqual(labels);
    // spec 2's body on /predict takes them too
    const spec2 = await post(classifier, '/predict', JSON.stringify({ inputs: ['I like you.'] }));
    expect(await post(classifier, '/predict', JSON.stringify({ inputs: ['I like you.'], options }))).toEqual(spec2);
    const wrong = await post(sentences, '/', JSON.stringify({ inputs: 'a', options: { wait_for_model: 'yes' } }));
    expect(wrong.status).toBe(422);
    expect(json(wrong)).toMatchObject({ error_type: 'Validation', error: expect.stringContaining('options') });
    const unknown = await post(classifier, '/predict', JSON.stringify({ inputs: ['a'], options: { temperature: 1 } }));
    expect(unknown.status).toBe(422);
    expect(unknown.text).toContain('wait_for_model, use_cache, use_gpu');
  });

  it('no other method: GET / is 405 with its Allow header', async () => {
    const response = await fetch(`${classifier.httpUrl}/`);
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('POST');
  });
});

describe('GET /ping (SageMaker’s health check)', () => {
  it('answers as /health, without the API key a server requires', async () => {
    for (const server of [sentences, classifier]) {
      const ping = await fetch(`${server.httpUrl}/ping`);
      expect(ping.status).toBe(200);
      expect(await ping.json()).toBe('OK!');
    }
    expect((await post(sentences, '/predict', JSON.stringify({ inputs: ['x'] }), { authorization: '' })).status).toBe(401);
  });
});
