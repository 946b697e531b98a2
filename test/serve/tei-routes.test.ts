/**
 * text-embeddings-inference's own routes (issue 33, item 2): POST /embed, /embed_all, /rerank, /tokenize, /decode and
 * GET /info, called with the example requests of TEI's documentation and OpenAPI document, over raw HTTP against
 * generated models. Answers are checked against this server's other routes (/v1/embeddings, /predict) and, for
 * /tokenize, against offsets computed here from the text; errors against TEI's body and statuses.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTinyCrossEncoder, generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';

let sentences: InProcessEncoder;
let tokens: InProcessEncoder;
let reranker: InProcessEncoder;
let labeller: InProcessEncoder;

beforeAll(async () => {
  const [embeddingDir, crossDir, tokenDir] = await Promise.all([
    generateTinyModel({ modelType: 'embedding' }),
    generateTinyCrossEncoder(),
    generateTinyModel({ modelType: 'token_classification', labels: ['O', 'B-PER', 'I-PER'] }),
  ]);
  [sentences, tokens, reranker, labeller] = await Promise.all([
    serveInProcess(embeddingDir, 'sentences', 'sentence_embedding', { pipeline: { maxRequestInputs: 16 } }),
    serveInProcess(embeddingDir, 'tokens', 'embedding', { pipeline: { maxRequestInputs: 16 } }),
    serveInProcess(crossDir, 'cross', 'sequence_classification'),
    serveInProcess(tokenDir, 'ner', 'token_classification'),
  ]);
});

afterAll(async () => {
  await Promise.all([sentences?.close(), tokens?.close(), reranker?.close(), labeller?.close()]);
});

async function post(server: InProcessEncoder, route: string, body: unknown): Promise<{ status: number; body: unknown; type: string | null }> {
  const response = await fetch(`${server.httpUrl}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, type: response.headers.get('content-type'), body: await response.json() };
}

const norm = (vector: number[]) => Math.hypot(...vector);

describe('POST /embed', () => {
  it("answers TEI's example (one text) with one unit vector, equal to /v1/embeddings'", async () => {
    const { status, body } = await post(sentences, '/embed', { inputs: 'What is Deep Learning?' });
    expect(status).toBe(200);
    const vectors = body as number[][];
    expect(vectors).toHaveLength(1);
    expect(norm(vectors[0])).toBeCloseTo(1, 5);
    const openai = (await post(sentences, '/v1/embeddings', { input: 'What is Deep Learning?' })).body as { data: { embedding: number[] }[] };
    vectors[0].forEach((value, i) => expect(value).toBeCloseTo(openai.data[0].embedding[i], 6));
  });

  it('takes a list, normalize: false (the pooled vector as it is), dimensions, and the accepted options', async () => {
    const inputs = ['Today is a nice day', 'I like you'];
    const unit = (await post(sentences, '/embed', { inputs })).body as number[][];
    const raw = (await post(sentences, '/embed', { inputs, normalize: false, truncate: false, truncation_direction: 'Right', prompt_name: null })).body as number[][];
    expect(raw).toHaveLength(2);
    raw.forEach((vector, k) => vector.forEach((value, i) => expect(value / norm(vector)).toBeCloseTo(unit[k][i], 5)));
    const short = (await post(sentences, '/embed', { inputs, dimensions: 8 })).body as number[][];
    expect(short[0]).toHaveLength(8);
    expect(norm(short[0])).toBeCloseTo(1, 5);
  });

  it("refuses in TEI's error body: an empty batch (400 Empty), a body it cannot read and unsupported options (422 Validation), too many inputs (422)", async () => {
    expect(await post(sentences, '/embed', { inputs: [] })).toMatchObject({ status: 400, body: { error: '`inputs` cannot be empty', error_type: 'Empty' } });
    expect(await post(sentences, '/embed', { input: 'x' })).toMatchObject({ status: 422, body: { error_type: 'Validation' } });
    expect(await post(sentences, '/embed', { inputs: 'x', truncation_direction: 'Left' })).toMatchObject({ status: 422, body: { error_type: 'Validation', error: expect.stringMatching(/truncation_direction/) } });
    expect(await post(sentences, '/embed', { inputs: 'x', prompt_name: 'query' })).toMatchObject({ status: 422, body: { error_type: 'Validation', error: expect.stringMatching(/prompt_name/) } });
    const many = await post(sentences, '/embed', { inputs: Array.from({ length: 17 }, () => 'a') });
    expect(many).toMatchObject({ status: 422, body: { error: 'batch size 17 > maximum allowed batch size 16', error_type: 'Validation' } });
    expect(many.type).toMatch(/^application\/json/);
    expect(await post(sentences, '/embed', { inputs: 'x', dimensions: 4096 })).toMatchObject({ status: 422, body: { error_type: 'Validation', error: expect.stringMatching(/^Input validation error: /) } });
  });

  it('is a 424 Backend error on a model that gives no pooled vector, as TEI answers a classifier', async () => {
    expect(await post(reranker, '/embed', { inputs: 'x' })).toMatchObject({ status: 424, body: { error: 'Model is not an embedding model', error_type: 'Backend' } });
  });
});

describe('POST /embed_all', () => {
  it("gives every token's vector, as /predict with normalize false", async () => {
    const { status, body } = await post(tokens, '/embed_all', { inputs: ['hello world', 'a'] });
    expect(status).toBe(200);
    const predicted = (await post(tokens, '/predict', { inputs: ['hello world', 'a'], normalize: false })).body as { results: { embeddings: { embedding: number[] }[] }[] };
    const all = body as number[][][];
    expect(all).toHaveLength(2);
    all.forEach((sequence, k) => {
      expect(sequence).toHaveLength(predicted.results[k].embeddings.length);
      sequence.forEach((vector, t) => vector.forEach((value, i) => expect(value).toBeCloseTo(predicted.results[k].embeddings[t].embedding[i], 6)));
    });
  });

  it('is a 424 on a pooled model, 400 on an empty batch', async () => {
    expect(await post(sentences, '/embed_all', { inputs: 'x' })).toMatchObject({ status: 424, body: { error_type: 'Backend' } });
    expect(await post(tokens, '/embed_all', { inputs: [] })).toMatchObject({ status: 400, body: { error_type: 'Empty' } });
  });
});

describe('POST /rerank', () => {
  const example = { query: 'What is Deep Learning?', texts: ['Deep Learning is not...', 'Deep learning is...', 'the cat sat on the mat'] };

  it("answers TEI's example with [{index, score}] best first, the scores of /v1/rerank", async () => {
    const { status, body } = await post(reranker, '/rerank', example);
    expect(status).toBe(200);
    const ranks = body as { index: number; score: number; text?: string }[];
    const cohere = (await post(reranker, '/v1/rerank', { query: example.query, documents: example.texts })).body as { results: { index: number; relevance_score: number }[] };
    expect(ranks.map((rank) => rank.index)).toEqual(cohere.results.map((result) => result.index));
    ranks.forEach((rank, i) => expect(rank.score).toBeCloseTo(cohere.results[i].relevance_score, 6));
    expect(ranks[0]).not.toHaveProperty('text');
    const withText = (await post(reranker, '/rerank', { ...example, return_text: true, raw_scores: false, truncate: true })).body as typeof ranks;
    for (const rank of withText) expect(rank.text).toBe(example.texts[rank.index]);
  });

  it('raw_scores: true scores with the logit, whose sigmoid is the probability (a one-logit cross-encoder), same order', async () => {
    const probabilities = (await post(reranker, '/rerank', example)).body as { index: number; score: number }[];
    const raw = (await post(reranker, '/rerank', { ...example, raw_scores: true })).body as { index: number; score: number }[];
    expect(raw.map((rank) => rank.index)).toEqual(probabilities.map((rank) => rank.index));
    raw.forEach((rank, i) => expect(1 / (1 + Math.exp(-rank.score))).toBeCloseTo(probabilities[i].score, 6));
    expect(raw.map((rank) => rank.score)).not.toEqual(probabilities.map((rank) => rank.score));
  });

  it('refuses an empty batch (400 Empty), a raw_scores that is not a boolean (422), and answers 424 on a model that is not a re-ranker', async () => {
    expect(await post(reranker, '/rerank', { query: 'q', texts: [] })).toMatchObject({ status: 400, body: { error: '`texts` cannot be empty', error_type: 'Empty' } });
    expect(await post(reranker, '/rerank', { ...example, raw_scores: 'yes' })).toMatchObject({ status: 422, body: { error_type: 'Validation' } });
    expect(await post(sentences, '/rerank', example)).toMatchObject({ status: 424, body: { error: 'model is not a re-ranker model', error_type: 'Backend' } });
  });
});

describe('POST /tokenize and /decode', () => {
  it("gives TEI's tokens: special tokens without offsets, the others with UTF-8 byte offsets and their text", async () => {
    const text = 'héllo wörld';
    const { status, body } = await post(tokens, '/tokenize', { inputs: text });
    expect(status).toBe(200);
    const [list] = body as { id: number; text: string; special: boolean; start: number | null; stop: number | null }[][];
    expect(list[0]).toMatchObject({ text: '[CLS]', special: true, start: null, stop: null });
    expect(list.at(-1)).toMatchObject({ text: '[SEP]', special: true, start: null, stop: null });
    const bytes = Buffer.from(text, 'utf8');
    for (const token of list.slice(1, -1)) {
      expect(token.special).toBe(false);
      expect(bytes.subarray(token.start!, token.stop!).toString('utf8')).toBe(token.text);
    }
    const ids = tokens.pipeline.tokenizer.encode(text).ids;
    expect(list.map((token) => token.id)).toEqual(ids);
    const plain = (await post(tokens, '/tokenize', { inputs: [text, 'a'], add_special_tokens: false })).body as { special: boolean }[][];
    expect(plain).toHaveLength(2);
    expect(plain[0]).toHaveLength(ids.length - 2);
    expect(plain[0].every((token) => !token.special)).toBe(true);
  });

  it('decodes ids back to text, special tokens skipped by default', async () => {
    const ids = tokens.pipeline.tokenizer.encode('hello world').ids;
    expect((await post(tokens, '/decode', { ids })).body).toEqual(['hello world']);
    const both = (await post(tokens, '/decode', { ids: [ids, ids], skip_special_tokens: false })).body as string[];
    expect(both).toHaveLength(2);
    expect(both[0]).toMatch(/^\[CLS\] hello world \[SEP\]$/);
  });

  it('refuses empty batches (400), too many inputs (422) and ids outside the vocabulary (422)', async () => {
    expect(await post(tokens, '/tokenize', { inputs: [] })).toMatchObject({ status: 400, body: { error_type: 'Empty' } });
    expect(await post(tokens, '/decode', { ids: [] })).toMatchObject({ status: 200, body: [''] });
    expect(await post(tokens, '/tokenize', { inputs: Array.from({ length: 17 }, () => 'a') })).toMatchObject({ status: 422, body: { error_type: 'Validation' } });
    expect(await post(tokens, '/decode', { ids: [10_000_000] })).toMatchObject({ status: 422, body: { error_type: 'Validation', error: expect.stringMatching(/not in the vocabulary/) } });
  });

  it('are served for every model type (they need the tokenizer only)', async () => {
    expect((await post(labeller, '/tokenize', { inputs: 'test' })).status).toBe(200);
    expect((await post(reranker, '/decode', { ids: [101, 102] })).status).toBe(200);
  });
});

describe('GET /info', () => {
  async function info(server: InProcessEncoder) {
    const response = await fetch(`${server.httpUrl}/info`);
    expect(response.status).toBe(200);
    return (await response.json()) as Record<string, unknown>;
  }

  it("fills TEI's info object with this server's model and limits", async () => {
    const body = await info(sentences);
    expect(body).toMatchObject({
      model_id: 'sentences',
      served_model_name: 'sentences',
      model_dtype: 'float32',
      model_type: { embedding: { pooling: expect.any(String) } },
      max_input_length: sentences.pipeline.tokenizer.maxLength,
      max_client_batch_size: 16,
      auto_truncate: true,
      version: expect.any(String),
    });
    expect(body.max_batch_tokens).toBeGreaterThan(0);
    expect(await info(reranker)).toMatchObject({ model_type: { reranker: { id2label: { 0: 'LABEL_0' }, label2id: { LABEL_0: 0 } } } });
    expect(await info(labeller)).toMatchObject({ model_type: { classifier: { id2label: { 0: 'O', 1: 'B-PER', 2: 'I-PER' } } } });
  });
});

describe("POST /predict with text-embeddings-inference's classification bodies", () => {
  let classifier: InProcessEncoder;
  const labels = ['negative', 'positive', 'neutral'];
  beforeAll(async () => {
    classifier = await serveInProcess(await generateTinyModel({ modelType: 'sequence_classification', labels }), 'sentiment', 'sequence_classification');
  });
  afterAll(async () => {
    await classifier?.close();
  });

  /** What spec 2's /predict answers for the same items: each label's softmax score (or logit), best first. */
  async function expectedFor(inputs: (string | string[])[], field: 'scores' | 'logits' = 'scores') {
    const { body } = await post(classifier, '/predict', { inputs });
    return (body as { results: Record<string, number[]>[] }).results.map((result) =>
      labels.map((label, k) => ({ label, score: result[field][k] })).sort((a, b) => b.score - a.score),
    );
  }

  function expectPredictions(actual: unknown, expected: { label: string; score: number }[]): void {
    const list = actual as { label: string; score: number }[];
    expect(list.map((entry) => entry.label)).toEqual(expected.map((entry) => entry.label));
    list.forEach((entry, i) => expect(entry.score).toBeCloseTo(expected[i].score, 6));
  }

  it("answers TEI's example (one text) with every label's score, best first", async () => {
    const { status, body } = await post(classifier, '/predict', { inputs: 'I like you.' });
    expect(status).toBe(200);
    expectPredictions(body, (await expectedFor(['I like you.']))[0]);
  });

  it("answers TEI's batch example ([text] items), a [text, text_pair] item as a pair, and raw_scores as the logits", async () => {
    const { status, body } = await post(classifier, '/predict', { inputs: [['I like you.'], ['I hate pineapples']] });
    expect(status).toBe(200);
    const expected = await expectedFor(['I like you.', 'I hate pineapples']);
    (body as unknown[]).forEach((item, i) => expectPredictions(item, expected[i]));
    const mixed = (await post(classifier, '/predict', { inputs: [['I like you.'], ['what is the capital of france', 'paris']] })).body as unknown[];
    expectPredictions(mixed[1], (await expectedFor([['what is the capital of france', 'paris']]))[0]);
    const raw = (await post(classifier, '/predict', { inputs: 'I like you.', raw_scores: true, truncate: true })).body;
    expectPredictions(raw, (await expectedFor(['I like you.'], 'logits'))[0]);
  });

  it("keeps spec 2's answer for every body spec 2 accepts (a list of texts is two texts, not TEI's pair)", async () => {
    const { status, body } = await post(classifier, '/predict', { inputs: ['I like you.', 'I hate pineapples'] });
    expect(status).toBe(200);
    expect((body as { results: unknown[] }).results).toHaveLength(2);
    expect(body).toMatchObject({ model_id: 'sentiment' });
  });

  it("refuses a TEI body as TEI does (422 Validation, 400 Empty, JSON); spec 2's refusals stay text/plain", async () => {
    const empty = await post(classifier, '/predict', { inputs: '' });
    expect(empty).toMatchObject({ status: 422, body: { error_type: 'Validation', error: expect.stringMatching(/^Input validation error: /) } });
    expect(empty.type).toMatch(/^application\/json/);
    expect(await post(classifier, '/predict', { inputs: [['a'], ['b', 'c', 'd']] })).toMatchObject({ status: 422, body: { error_type: 'Validation' } });
    expect(await post(classifier, '/predict', { inputs: 'x', truncation_direction: 'Left' })).toMatchObject({ status: 422, body: { error_type: 'Validation', error: expect.stringMatching(/truncation_direction/) } });
    const spec = await fetch(`${classifier.httpUrl}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ inputs: [] }) });
    expect(spec.status).toBe(422);
    expect(spec.headers.get('content-type')).toMatch(/^text\/plain/);
    // an embedding model has no TEI /predict: its body stays spec 2's 422
    const notClassifier = await fetch(`${sentences.httpUrl}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ inputs: 'x' }) });
    expect(notClassifier.status).toBe(422);
    expect(await notClassifier.text()).toBe('Invalid input: inputs must be a list, got string');
  });
});
