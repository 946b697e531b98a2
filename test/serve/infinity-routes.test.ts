/**
 * michaelfeil/infinity's routes at the root (issue 33, item 2): POST /embeddings, /rerank (Infinity's body, with
 * `documents`), /classify and GET /models, called with the example requests of Infinity's route documentation (its
 * OpenAPI document) over raw HTTP, and /embeddings through the openai client pointed at the root as Infinity's docs
 * point it. Answers are checked against this server's other routes (/v1/embeddings, /v1/rerank, /predict, /tokenize);
 * errors against Infinity's bodies and statuses (FastAPI's 422 `detail`, its 400 ModelNotDeployedError).
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTinyCrossEncoder, generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';

let sentences: InProcessEncoder;
let cross: InProcessEncoder;
let classifier: InProcessEncoder;
let unlabelled: InProcessEncoder;
let ner: InProcessEncoder;
let strict: InProcessEncoder;

beforeAll(async () => {
  const [embeddingDir, crossDir, classifierDir, unlabelledDir, tokenDir] = await Promise.all([
    generateTinyModel({ modelType: 'embedding' }),
    generateTinyCrossEncoder(),
    generateTinyModel({ modelType: 'sequence_classification', labels: ['sadness', 'joy', 'anger'] }),
    generateTinyModel({ modelType: 'sequence_classification' }),
    generateTinyModel({ modelType: 'token_classification', labels: ['O', 'B-PER'] }),
  ]);
  [sentences, cross, classifier, unlabelled, ner, strict] = await Promise.all([
    serveInProcess(embeddingDir, 'bge-small', 'sentence_embedding'),
    serveInProcess(crossDir, 'mxbai-rerank', 'sequence_classification'),
    serveInProcess(classifierDir, 'go-emotions', 'sequence_classification'),
    serveInProcess(unlabelledDir, 'plain-classifier', 'sequence_classification'),
    serveInProcess(tokenDir, 'ner', 'token_classification'),
    serveInProcess(embeddingDir, 'strict', 'sentence_embedding', { modelNames: { aliases: ['bge-small'], strict: true } }),
  ]);
});

afterAll(async () => {
  await Promise.all([sentences, cross, classifier, unlabelled, ner, strict].map((server) => server?.close()));
});

interface Answer {
  status: number;
  type: string | null;
  body: Record<string, unknown>;
}

async function call(server: InProcessEncoder, method: 'GET' | 'POST', route: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${server.httpUrl}${route}`, {
    method,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  return { status: response.status, type: response.headers.get('content-type'), body: (await response.json()) as Record<string, unknown> };
}
const post = (server: InProcessEncoder, route: string, body: unknown) => call(server, 'POST', route, body);

/** What every Infinity answer carries: its id, creation time and usage. */
function expectEnvelope(body: Record<string, unknown>, model: string): void {
  expect(body.model).toBe(model);
  expect(body.id).toMatch(/^infinity-[0-9a-f-]{36}$/);
  expect(Math.abs((body.created as number) - Date.now() / 1000)).toBeLessThan(60);
  const usage = body.usage as { prompt_tokens: number; total_tokens: number };
  expect(usage.prompt_tokens).toBeGreaterThan(0);
  expect(usage.total_tokens).toBe(usage.prompt_tokens);
}

/** FastAPI's 422 for a body it cannot read, naming the field at fault. */
function expectValidationError(answer: Answer, field: string | null): void {
  expect(answer.status).toBe(422);
  expect(answer.type).toMatch(/^application\/json/);
  const detail = answer.body.detail as { loc: string[]; msg: string; type: string }[];
  expect(detail).toHaveLength(1);
  expect(detail[0].loc).toEqual(field === null ? ['body'] : ['body', field]);
  expect(detail[0].msg).toEqual(expect.any(String));
}

/** Infinity's 400 when the model cannot do what is asked. */
function expectNotDeployed(answer: Answer, capability: string): void {
  expect(answer.status).toBe(400);
  expect(answer.body).toEqual({ error: { message: expect.stringMatching(new RegExp(`^ModelNotDeployedError: .*does not support \`${capability}\``)), type: null, param: null, code: 400 } });
}

describe('POST /embeddings', () => {
  // Infinity's documented example (its model name is taken as the served model)
  const example = { model: 'openai/clip-vit-base-patch32', input: ['Two cute cats.'] };

  it("answers Infinity's example as OpenAI's list, with Infinity's id and created, the vectors of /v1/embeddings", async () => {
    const answer = await post(sentences, '/embeddings', example);
    expect(answer.status).toBe(200);
    expectEnvelope(answer.body, 'bge-small');
    expect(answer.body.object).toBe('list');
    const openAi = await post(sentences, '/v1/embeddings', { input: example.input });
    expect(answer.body.data).toEqual((openAi.body as { data: unknown }).data);
    expect(answer.body.usage).toEqual(openAi.body.usage);
  });

  it('takes a text, base64, dimensions (0 is all of them, as Infinity) and modality text', async () => {
    const full = (await post(sentences, '/embeddings', { input: 'Two cute cats.' })).body.data as { embedding: number[] }[];
    const zero = (await post(sentences, '/embeddings', { input: 'Two cute cats.', dimensions: 0, modality: 'text', user: null })).body.data as { embedding: number[] }[];
    expect(zero).toEqual(full);
    const short = (await post(sentences, '/embeddings', { input: 'Two cute cats.', dimensions: 8 })).body.data as { embedding: number[] }[];
    expect(short[0].embedding).toHaveLength(8);
    expect(Math.hypot(...short[0].embedding)).toBeCloseTo(1, 5);
    const base64 = (await post(sentences, '/embeddings', { input: 'Two cute cats.', encoding_format: 'base64' })).body.data as { embedding: string }[];
    const bytes = Buffer.from(base64[0].embedding, 'base64');
    const floats = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    Array.from(floats).forEach((value, i) => expect(value).toBeCloseTo(full[0].embedding[i], 6));
  });

  it("is what the openai client gets pointed at the root, as Infinity's docs point it (base_url without /v1)", async () => {
    const openai = new OpenAI({ apiKey: 'unused', baseURL: sentences.httpUrl, maxRetries: 0 });
    const response = await openai.embeddings.create({ model: 'bge-small', input: ['the sound of a beep', 'the sound of a cat'], encoding_format: 'float' });
    expect(response.data).toHaveLength(2);
    const direct = (await post(sentences, '/v1/embeddings', { input: ['the sound of a beep', 'the sound of a cat'] })).body.data as { embedding: number[] }[];
    response.data.forEach((item, i) => item.embedding.forEach((value, k) => expect(value).toBeCloseTo(direct[i].embedding[k], 6)));
  });

  it("refuses as Infinity does: a body it cannot read is FastAPI's 422, a model without embeddings its 400, another model name (strict) a 400", async () => {
    expectValidationError(await post(sentences, '/embeddings', { model: 'x' }), 'input');
    expectValidationError(await post(sentences, '/embeddings', { input: [] }), 'input');
    expectValidationError(await post(sentences, '/embeddings', { input: 'x', dimensions: -1 }), 'dimensions');
    expectValidationError(await post(sentences, '/embeddings', { input: 'x', modality: 'image' }), 'modality');
    const badJson = await fetch(`${sentences.httpUrl}/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"input": [' });
    expect(badJson.status).toBe(422);
    expect(((await badJson.json()) as { detail: { type: string }[] }).detail[0].type).toBe('json_invalid');
    expectNotDeployed(await post(classifier, '/embeddings', example), 'embed');
    const other = await post(strict, '/embeddings', example);
    expect(other).toMatchObject({ status: 400, body: { error: { code: 400, message: expect.stringMatching(/^Invalid model: .*openai\/clip-vit-base-patch32/) } } });
    expect((await post(strict, '/embeddings', { ...example, model: 'bge-small' })).status).toBe(200);
    const get = await call(sentences, 'GET', '/embeddings');
    expect(get).toMatchObject({ status: 405, body: { detail: expect.stringMatching(/^Method Not Allowed/) } });
  });
});

describe('POST /rerank with Infinity\'s body', () => {
  // Infinity's documented example
  const example = { model: 'mixedbread-ai/mxbai-rerank-xsmall-v1', query: 'Where is Munich?', documents: ['Munich is in Germany.', 'The sky is blue.', 'Berlin is a city.'] };

  it("answers Infinity's example: results best first, document null, the scores of /v1/rerank", async () => {
    const answer = await post(cross, '/rerank', example);
    expect(answer.status).toBe(200);
    expect(answer.body.object).toBe('rerank');
    expectEnvelope(answer.body, 'mxbai-rerank');
    const results = answer.body.results as { relevance_score: number; index: number; document: string | null }[];
    const cohere = (await post(cross, '/v1/rerank', { query: example.query, documents: example.documents })).body.results as { index: number; relevance_score: number }[];
    expect(results.map(({ index, relevance_score }) => ({ index, relevance_score }))).toEqual(cohere);
    for (const result of results) expect(result.document).toBeNull();
  });

  it('return_documents gives each document as its text, top_n the best n, raw_scores the logits (sigmoid: the probability)', async () => {
    const probabilities = (await post(cross, '/rerank', example)).body.results as { relevance_score: number; index: number }[];
    const top = (await post(cross, '/rerank', { ...example, return_documents: true, top_n: 2 })).body.results as { index: number; document: string }[];
    expect(top.map((result) => result.index)).toEqual(probabilities.slice(0, 2).map((result) => result.index));
    for (const result of top) expect(result.document).toBe(example.documents[result.index]);
    const raw = (await post(cross, '/rerank', { ...example, raw_scores: true })).body.results as { relevance_score: number; index: number }[];
    expect(raw.map((result) => result.index)).toEqual(probabilities.map((result) => result.index));
    raw.forEach((result, i) => expect(1 / (1 + Math.exp(-result.relevance_score))).toBeCloseTo(probabilities[i].relevance_score, 6));
    expect(raw.map((result) => result.relevance_score)).not.toEqual(probabilities.map((result) => result.relevance_score));
  });

  it("refuses as Infinity does (422 detail, 400 ModelNotDeployedError), while TEI's body on the same path keeps TEI's errors", async () => {
    expectValidationError(await post(cross, '/rerank', { ...example, documents: [] }), 'documents');
    expectValidationError(await post(cross, '/rerank', { documents: example.documents }), 'query');
    expectValidationError(await post(cross, '/rerank', { ...example, top_n: 0 }), 'top_n');
    expectNotDeployed(await post(sentences, '/rerank', example), 'rerank');
    expect(await post(cross, '/rerank', { query: 'q', texts: [] })).toMatchObject({ status: 400, body: { error: '`texts` cannot be empty', error_type: 'Empty' } });
  });
});

describe('POST /classify', () => {
  // Infinity's documented example
  const example = { model: 'SamLowe/roberta-base-go_emotions', input: ['I am not having a great day.'] };

  it("answers Infinity's example: every label with its probability, best first, as /predict scores it", async () => {
    const answer = await post(classifier, '/classify', { ...example, input: [...example.input, 'What a lovely morning'] });
    expect(answer.status).toBe(200);
    expect(answer.body.object).toBe('classify');
    expectEnvelope(answer.body, 'go-emotions');
    const data = answer.body.data as { score: number; label: string }[][];
    const predicted = (await post(classifier, '/predict', { inputs: [...example.input, 'What a lovely morning'] })).body.results as { scores: number[]; logits: number[] }[];
    expect(data).toHaveLength(2);
    data.forEach((labels, i) => {
      const expected = ['sadness', 'joy', 'anger'].map((label, k) => ({ label, score: predicted[i].scores[k] })).sort((a, b) => b.score - a.score);
      expect(labels.map((entry) => entry.label)).toEqual(expected.map((entry) => entry.label));
      labels.forEach((entry, k) => expect(entry.score).toBeCloseTo(expected[k].score, 6));
    });
    // usage counts the texts' own tokens, as Infinity does (no [CLS] and [SEP])
    const tokens = (await post(classifier, '/tokenize', { inputs: [...example.input, 'What a lovely morning'], add_special_tokens: false })).body as unknown as unknown[][];
    expect((answer.body.usage as { prompt_tokens: number }).prompt_tokens).toBe(tokens[0].length + tokens[1].length);
  });

  it("raw_scores gives the logits; a model without labels answers HuggingFace's LABEL_<i> names", async () => {
    const raw = (await post(classifier, '/classify', { ...example, raw_scores: true })).body.data as { score: number; label: string }[][];
    const logits = ((await post(classifier, '/predict', { inputs: example.input })).body.results as { logits: number[] }[])[0].logits;
    const labels = ['sadness', 'joy', 'anger'];
    for (const entry of raw[0]) expect(entry.score).toBeCloseTo(logits[labels.indexOf(entry.label)], 5);
    const plain = (await post(unlabelled, '/classify', example)).body.data as { label: string }[][];
    expect(plain[0].map((entry) => entry.label).sort()).toEqual(['LABEL_0', 'LABEL_1']);
    // a one-logit model scores with the sigmoid (a softmax of one logit would always be 1), as Infinity's pipeline does
    const [single] = (await post(cross, '/classify', example)).body.data as { score: number; label: string }[][];
    const logit = ((await post(cross, '/predict', { inputs: example.input })).body.results as { logits: number[] }[])[0].logits[0];
    expect(single).toHaveLength(1);
    expect(single[0].score).toBeCloseTo(1 / (1 + Math.exp(-logit)), 6);
  });

  it('refuses as Infinity does: a text instead of a list, an empty list (422); an embedding or token classification model (400)', async () => {
    expectValidationError(await post(classifier, '/classify', { input: 'I am not having a great day.' }), 'input');
    expectValidationError(await post(classifier, '/classify', { input: [] }), 'input');
    expectValidationError(await post(classifier, '/classify', { ...example, raw_scores: 'yes' }), 'raw_scores');
    expectNotDeployed(await post(sentences, '/classify', example), 'classify');
    expectNotDeployed(await post(ner, '/classify', example), 'classify');
  });
});

describe('GET /models', () => {
  it("lists the one model as Infinity does, with what it can do (Infinity's client reads owned_by 'infinity')", async () => {
    const cases: [InProcessEncoder, string, string[]][] = [
      [sentences, 'bge-small', ['embed']],
      [classifier, 'go-emotions', ['classify', 'rerank']],
      [ner, 'ner', []],
    ];
    for (const [server, id, capabilities] of cases) {
      const answer = await call(server, 'GET', '/models');
      expect(answer.status).toBe(200);
      expect(answer.body).toEqual({
        object: 'list',
        data: [
          {
            id,
            object: 'model',
            owned_by: 'infinity',
            created: expect.any(Number),
            backend: 'onnxruntime',
            capabilities,
            stats: { queue_fraction: 0, queue_absolute: 0, results_pending: 0, batch_size: expect.any(Number) },
          },
        ],
      });
    }
  });
});
