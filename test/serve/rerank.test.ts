/**
 * Rerank with cross-encoders (issue 12): POST /v1/rerank and /v2/rerank in Cohere's and Infinity's shape, driven by
 * the official `cohere-ai` client; scores are those of /predict on [query, document] pairs.
 */
import type { FastifyInstance } from 'fastify';
import { CohereClient, CohereClientV2 } from 'cohere-ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { ConfigError } from '../../src/encoder/errors.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { SequenceClassificationResponse } from '../../src/encoder/schemas.ts';
import { createHttpApp } from '../../src/serve/http/index.ts';
import { serverInfo } from '../../src/serve/server-info.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import type { JsonOf } from '../../src/shared/float32-json.ts';

const INFO = serverInfo({ target: 'x86_64-unknown-linux-gnu' });
const apps: FastifyInstance[] = [];
const pipelines: PredictPipeline[] = [];

async function serve(dir: string, name: string, extra = '') {
  const yaml = `encoder:\n  name: ${name}\n  path: ${dir}\n  model_type: sequence_classification\n${extra}`;
  const pipeline = await PredictPipeline.load(readModelPackage(parseBuildConfig(yaml, { baseDir: dir })));
  pipelines.push(pipeline);
  const app = await createHttpApp(pipeline, { bodyLimitBytes: 1024 * 1024, serverInfo: INFO });
  apps.push(app);
  return app.listen({ host: '127.0.0.1', port: 0 });
}

function post(url: string, route: string, body: unknown): Promise<Response> {
  return fetch(`${url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

async function predictPairs(url: string, query: string, documents: string[]): Promise<JsonOf<SequenceClassificationResponse>> {
  return (await (await post(url, '/predict', { inputs: documents.map((document) => [query, document]) })).json()) as JsonOf<SequenceClassificationResponse>;
}

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
const QUERY = 'what is the capital of france';
const DOCUMENTS = ['paris is the capital of france', 'the cat sat on the mat', 'berlin is a city in germany', 'france borders spain'];

let crossEncoder: string;
let twoLabels: string;
let twoLabelsDir: string;

beforeAll(async () => {
  const oneLogitDir = await generateTinyModel({ modelType: 'sequence_classification', labels: ['LABEL_0'] });
  twoLabelsDir = await generateTinyModel({ modelType: 'sequence_classification', labels: ['irrelevant', 'relevant'], seed: 7 });
  [crossEncoder, twoLabels] = await Promise.all([serve(oneLogitDir, 'cross'), serve(twoLabelsDir, 'pairs', '  rerank_label: irrelevant\n')]);
});

afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
  await Promise.all(pipelines.map((pipeline) => pipeline.close()));
});

describe('a one-logit cross-encoder', () => {
  it('scores each (query, document) pair with the sigmoid of its logit, best first (Cohere v2 client)', async () => {
    const cohere = new CohereClientV2({ token: 'unused', environment: crossEncoder });
    const response = await cohere.rerank({ model: 'cross', query: QUERY, documents: DOCUMENTS });
    const predicted = await predictPairs(crossEncoder, QUERY, DOCUMENTS);
    expect(predicted.results[0].logits).toHaveLength(1);
    const expected = predicted.results.map((result, index) => ({ index, relevanceScore: sigmoid(result.logits[0]) })).sort((a, b) => b.relevanceScore - a.relevanceScore);
    expect(response.results.map((r) => r.index)).toEqual(expected.map((r) => r.index));
    response.results.forEach((result, i) => expect(result.relevanceScore).toBeCloseTo(expected[i].relevanceScore, 6));
    for (let i = 1; i < response.results.length; i++) expect(response.results[i - 1].relevanceScore).toBeGreaterThanOrEqual(response.results[i].relevanceScore);
  });

  it('honours top_n and return_documents, takes {text} documents, and counts tokens (Cohere v1 client)', async () => {
    const cohere = new CohereClient({ token: 'unused', environment: crossEncoder });
    const response = await cohere.rerank({ query: QUERY, documents: DOCUMENTS.map((text) => ({ text })), topN: 2, returnDocuments: true });
    expect(response.results).toHaveLength(2);
    for (const result of response.results) expect(result.document?.text).toBe(DOCUMENTS[result.index]);
    const raw = (await (await post(crossEncoder, '/v1/rerank', { query: QUERY, documents: DOCUMENTS })).json()) as {
      results: { index: number; document?: unknown }[];
      model: string;
      usage: { prompt_tokens: number; total_tokens: number };
    };
    expect(raw.model).toBe('cross');
    expect(raw.results).toHaveLength(4);
    expect(raw.results[0].document).toBeUndefined();
    const pipeline = pipelines[0];
    const tokens = DOCUMENTS.reduce((sum, document) => sum + pipeline.tokenizer.encodePair(QUERY, document).ids.length, 0);
    expect(raw.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens });
  });
});

describe('a two-label model', () => {
  it('scores with the softmax probability of rerank_label', async () => {
    const response = (await (await post(twoLabels, '/v1/rerank', { query: QUERY, documents: DOCUMENTS })).json()) as {
      results: { index: number; relevance_score: number }[];
    };
    const predicted = await predictPairs(twoLabels, QUERY, DOCUMENTS);
    for (const result of response.results) expect(result.relevance_score).toBeCloseTo(predicted.results[result.index].scores[0], 6);
  });

  it('uses the last label by default, and refuses a rerank_label the model does not have', async () => {
    const byDefault = await serve(twoLabelsDir, 'pairs-default');
    const response = (await (await post(byDefault, '/v2/rerank', { query: QUERY, documents: DOCUMENTS })).json()) as {
      results: { index: number; relevance_score: number }[];
    };
    const predicted = await predictPairs(byDefault, QUERY, DOCUMENTS);
    for (const result of response.results) expect(result.relevance_score).toBeCloseTo(predicted.results[result.index].scores[1], 6);
    const yaml = `encoder:\n  name: x\n  path: ${twoLabelsDir}\n  model_type: sequence_classification\n  rerank_label: maybe\n`;
    await expect(PredictPipeline.load(readModelPackage(parseBuildConfig(yaml, { baseDir: twoLabelsDir })))).rejects.toThrow(ConfigError);
    await expect(PredictPipeline.load(readModelPackage(parseBuildConfig(yaml, { baseDir: twoLabelsDir })))).rejects.toThrow(
      'rerank_label "maybe" is not a label of the model; its labels: irrelevant, relevant',
    );
  });
});

describe('/v1/rerank refuses bad input in OpenAI\'s error shape, naming the field', () => {
  const cases: [string, unknown, number, string | null, RegExp][] = [
    ['no query', { documents: ['a'] }, 400, 'query', /Missing required parameter: 'query'/],
    ['an empty query', { query: '', documents: ['a'] }, 400, 'query', /'query' must be a non-empty text/],
    ['no documents', { query: 'q', documents: [] }, 400, 'documents', /'documents' must be a non-empty list of texts/],
    ['an empty document', { query: 'q', documents: ['a', ''] }, 400, 'documents', /'documents\[1\]' must be a non-empty text or an object with a non-empty text field/],
    ['a document object without text', { query: 'q', documents: [{ title: 'x' }] }, 400, 'documents', /'documents\[0\]'/],
    ['top_n: 0', { query: 'q', documents: ['a'], top_n: 0 }, 400, 'top_n', /'top_n' must be an integer of at least 1/],
    ['an unknown field (a typo of rank_fields)', { query: 'q', documents: ['a'], rank_field: ['x'] }, 400, 'rank_field', /Unrecognized request argument supplied: rank_field/],
  ];
  it.each(cases)('%s', async (_name, body, status, param, message) => {
    const response = await post(crossEncoder, '/v1/rerank', body);
    expect(response.status).toBe(status);
    const { error } = (await response.json()) as { error: { message: string; type: string; param: string | null } };
    expect(error.message).toMatch(message);
    expect(error.type).toBe('invalid_request_error');
    expect(error.param).toBe(param);
  });

  it('a sequence classification server has no /v1/embeddings', async () => {
    const response = await post(crossEncoder, '/v1/embeddings', { input: 'a' });
    expect(response.status).toBe(404);
    expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(/serves a sequence_classification model, which gives no embeddings/);
  });
});
