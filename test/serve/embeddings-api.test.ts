/**
 * Pooled vectors (issue 12): model_type sentence_embedding on /predict, and the OpenAI-compatible /v1/embeddings and
 * /v1/models on embedding and sentence_embedding servers, driven by the official `openai` client.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { SentenceEmbeddingResponse } from '../../src/encoder/schemas.ts';
import { createHttpApp } from '../../src/serve/http/index.ts';
import { serverInfo } from '../../src/serve/server-info.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { hasShared, sharedModel, warnIfSharedMissing } from '../helpers/shared-fixtures.ts';
import type { JsonOf } from '../../src/shared/float32-json.ts';

const INFO = serverInfo({ target: 'x86_64-unknown-linux-gnu' });
const apps: FastifyInstance[] = [];
const pipelines: PredictPipeline[] = [];

/** Serves the model folder `dir` as `modelType` with extra YAML lines; returns the base URL and the pipeline. */
async function serve(dir: string, modelType: string, extra = '', options: { maxRequestTokens?: number } = {}) {
  const yaml = `encoder:\n  name: m-${modelType}\n  path: ${dir}\n  model_type: ${modelType}\n${extra}`;
  const pipeline = await PredictPipeline.load(readModelPackage(parseBuildConfig(yaml, { baseDir: dir })), options);
  pipelines.push(pipeline);
  const app = await createHttpApp(pipeline, { bodyLimitBytes: 1024 * 1024, serverInfo: INFO });
  apps.push(app);
  return { url: await app.listen({ host: '127.0.0.1', port: 0 }), pipeline };
}

function post(url: string, route: string, body: unknown): Promise<Response> {
  return fetch(`${url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

const norm = (vector: readonly number[]) => Math.hypot(...vector);

let dir: string;
let sentence: { url: string; pipeline: PredictPipeline };
let tokens: { url: string; pipeline: PredictPipeline };
let classifier: { url: string; pipeline: PredictPipeline };

beforeAll(async () => {
  dir = await generateTinyModel({ modelType: 'embedding' });
  const classifierDir = await generateTinyModel({ modelType: 'sequence_classification', labels: ['no', 'yes'] });
  [sentence, tokens, classifier] = await Promise.all([
    serve(dir, 'sentence_embedding', '', { maxRequestTokens: 64 }),
    serve(dir, 'embedding'),
    serve(classifierDir, 'sequence_classification'),
  ]);
});

afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
  await Promise.all(pipelines.map((pipeline) => pipeline.close()));
});

describe('sentence_embedding on /predict', () => {
  it('answers one vector per input, unit length by default, raw with normalize: false', async () => {
    const normalized = (await (await post(sentence.url, '/predict', { inputs: ['hello world', 'a longer text here'] })).json()) as JsonOf<SentenceEmbeddingResponse>;
    expect(normalized.model_id).toBe('m-sentence_embedding');
    expect(normalized.results).toHaveLength(2);
    for (const { embedding } of normalized.results) {
      expect(embedding).toHaveLength(32);
      expect(norm(embedding)).toBeCloseTo(1, 5);
    }
    const raw = (await (await post(sentence.url, '/predict', { inputs: ['hello world'], normalize: false })).json()) as JsonOf<SentenceEmbeddingResponse>;
    const scale = norm(raw.results[0].embedding);
    expect(scale).not.toBeCloseTo(1, 2);
    raw.results[0].embedding.forEach((value, i) => expect(value / scale).toBeCloseTo(normalized.results[0].embedding[i], 5));
  });

  it('reports pooling and normalisation on /model', async () => {
    const model = await (await fetch(`${sentence.url}/model`)).json();
    expect(model).toEqual({ model_id: 'm-sentence_embedding', model_type: 'sentence_embedding', pooling: 'mean', normalize: true });
  });

  it('refuses what spec 2 refuses, with 422', async () => {
    for (const body of [{ inputs: [] }, { inputs: [''] }, { inputs: ['x'], normalize: 'yes' }, { inputs: ['x'], top_k: 1 }]) {
      const response = await post(sentence.url, '/predict', body);
      expect(response.status).toBe(422);
      expect(await response.text()).toMatch(/^Invalid input: /);
    }
  });
});

describe('POST /v1/embeddings through the official openai client', () => {
  const client = (url: string) => new OpenAI({ apiKey: 'unused', baseURL: `${url}/v1`, maxRetries: 0 });

  it('gives the same vectors as float and as base64, equal to /predict', async () => {
    const texts = ['hello world', 'the quick brown fox jumps over the lazy dog'];
    const openai = client(sentence.url);
    const asFloat = await openai.embeddings.create({ model: 'm-sentence_embedding', input: texts, encoding_format: 'float' });
    const asBase64 = await openai.embeddings.create({ model: 'm-sentence_embedding', input: texts, encoding_format: 'base64' });
    // asked for explicitly, base64 comes back as the string: little-endian float32 bytes of the same values
    const decoded = asBase64.data.map((d) => Array.from(new Float32Array(new Uint8Array(Buffer.from(d.embedding as unknown as string, 'base64')).buffer)));
    // float prints the shortest decimal of each float32: it reads back as exactly the same float32
    expect(decoded).toEqual(asFloat.data.map((d) => d.embedding.map(Math.fround)));
    const predicted = (await (await post(sentence.url, '/predict', { inputs: texts })).json()) as JsonOf<SentenceEmbeddingResponse>;
    asFloat.data.forEach((item, i) => {
      expect(item.object).toBe('embedding');
      expect(item.index).toBe(i);
      // /predict prints the same shortest float32 decimals
      expect(JSON.stringify(item.embedding)).toBe(JSON.stringify(predicted.results[i].embedding));
    });
    expect(asFloat.model).toBe('m-sentence_embedding');
    const tokenCount = texts.map((text) => sentence.pipeline.tokenizer.encode(text).ids.length).reduce((a, b) => a + b);
    expect(asFloat.usage).toEqual({ prompt_tokens: tokenCount, total_tokens: tokenCount });
  });

  it('answers the SDK default (base64 requested without encoding_format) and a single string', async () => {
    const response = await client(sentence.url).embeddings.create({ model: 'm-sentence_embedding', input: 'hello world' });
    expect(response.data).toHaveLength(1);
    expect(norm(response.data[0].embedding)).toBeCloseTo(1, 5);
  });

  it('dimensions: 16 gives unit vectors of 16 components, the first 16 of the full vector re-normalised', async () => {
    const openai = client(sentence.url);
    const full = await openai.embeddings.create({ model: 'm-sentence_embedding', input: ['hello world', 'good morning'], encoding_format: 'float' });
    const short = await openai.embeddings.create({ model: 'm-sentence_embedding', input: ['hello world', 'good morning'], dimensions: 16, encoding_format: 'float' });
    short.data.forEach((item, i) => {
      expect(item.embedding).toHaveLength(16);
      expect(norm(item.embedding)).toBeCloseTo(1, 5);
      const head = full.data[i].embedding.slice(0, 16);
      head.forEach((value, k) => expect(item.embedding[k]).toBeCloseTo(value / norm(head), 5));
    });
  });

  it('takes token ids as the model input, as they are', async () => {
    const encoding = sentence.pipeline.tokenizer.encode('hello world');
    const openai = client(sentence.url);
    const fromText = await openai.embeddings.create({ model: 'm-sentence_embedding', input: 'hello world', encoding_format: 'float' });
    const fromIds = await openai.embeddings.create({ model: 'm-sentence_embedding', input: encoding.ids, encoding_format: 'float' });
    const fromIdLists = await openai.embeddings.create({ model: 'm-sentence_embedding', input: [encoding.ids, encoding.ids.slice(0, 2)], encoding_format: 'float' });
    expect(fromIds.data[0].embedding).toEqual(fromText.data[0].embedding);
    expect(fromIdLists.data[0].embedding).toEqual(fromText.data[0].embedding);
    expect(fromIdLists.data[1].embedding).not.toEqual(fromText.data[0].embedding);
    expect(fromIdLists.usage.prompt_tokens).toBe(encoding.ids.length + 2);
  });

  it('pools a per-token embedding model the same way the sentence_embedding server does', async () => {
    const texts = ['hello world', 'good morning to you'];
    const [fromTokens, fromSentence] = await Promise.all(
      [tokens, sentence].map((server) => client(server.url).embeddings.create({ model: server.pipeline.modelId, input: texts, encoding_format: 'float' })),
    );
    fromTokens.data.forEach((item, i) => item.embedding.forEach((value, k) => expect(value).toBeCloseTo(fromSentence.data[i].embedding[k], 6)));
  });

  it('lists the served model on /v1/models', async () => {
    const openai = client(sentence.url);
    const models = [];
    for await (const model of openai.models.list()) models.push(model);
    expect(models.map((m) => [m.id, m.object, m.owned_by])).toEqual([['m-sentence_embedding', 'model', 'encoder']]);
    expect((await openai.models.retrieve('m-sentence_embedding')).id).toBe('m-sentence_embedding');
    // one model is served: any name is it, under its own name (--strict-model-name: model-names.test.ts)
    expect((await openai.models.retrieve('other')).id).toBe('m-sentence_embedding');
  });
});

describe('/v1/embeddings refuses bad input in OpenAI\'s error shape, naming the field', () => {
  const cases: [string, unknown, number, string | null, RegExp][] = [
    ['no input', { model: 'm-sentence_embedding' }, 400, 'input', /Missing required parameter: 'input'/],
    ['an empty list', { input: [] }, 400, 'input', /'input' is an empty list/],
    ['an empty string', { input: '' }, 400, 'input', /'input' is an empty string/],
    ['an empty string in a list', { input: ['a', ''] }, 400, 'input', /'input\[1\]' is an empty string/],
    ['an empty list of ids', { input: [[1, 2], []] }, 400, 'input', /'input\[1\]' is an empty list of token ids/],
    ['mixed items', { input: ['a', 3] }, 400, 'input', /'input' must be a non-empty text, a non-empty list of non-empty texts, a list of token ids/],
    ['a token id out of the vocabulary', { input: [[101, 99999999]] }, 400, 'input', /input\[0\]\[1\]: token id 99999999 is not in the model's vocabulary/],
    ['a negative token id', { input: [5, -1] }, 400, 'input', /must be a non-empty text/],
    ['dimensions: 0', { input: 'a', dimensions: 0 }, 400, 'dimensions', /'dimensions' must be an integer of at least 1, got 0/],
    ['more dimensions than the model has', { input: 'a', dimensions: 33 }, 400, 'dimensions', /dimensions 33 is more than the model's 32/],
    ['an unknown encoding', { input: 'a', encoding_format: 'int8' }, 400, 'encoding_format', /'encoding_format' must be 'float' or 'base64'/],
    ['an unknown field', { input: 'a', top_k: 2 }, 400, 'top_k', /Unrecognized request argument supplied: top_k/],
    ['more tokens than the request limit', { input: Array.from({ length: 20 }, () => 'one two three') }, 400, 'input', /more than the limit of 64 tokens per request/],
  ];
  it.each(cases)('%s', async (_name, body, status, param, message) => {
    const response = await post(sentence.url, '/v1/embeddings', body);
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const { error } = (await response.json()) as { error: { message: string; type: string; param: string | null; code: string | null } };
    expect(error.message).toMatch(message);
    expect(error.type).toBe('invalid_request_error');
    expect(error.param).toBe(param);
  });

  it('a body that is not JSON, and an unknown /v1 path, answer in the same shape', async () => {
    const broken = await fetch(`${sentence.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"input": [' });
    expect(broken.status).toBe(400);
    expect(((await broken.json()) as { error: { message: string } }).error.message).toMatch(/^Invalid JSON body/);
    const unknown = await fetch(`${sentence.url}/v1/chat/completions`, { method: 'POST' });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
  });

  it('a classification server has no embeddings: 404 saying why; the openai client raises NotFoundError', async () => {
    const openai = new OpenAI({ apiKey: 'unused', baseURL: `${classifier.url}/v1`, maxRetries: 0 });
    await expect(openai.embeddings.create({ model: 'x', input: 'a' })).rejects.toMatchObject({
      status: 404,
      message: expect.stringMatching(/serves a sequence_classification model, which gives no embeddings/),
    });
    // and rerank is not served by an embedding server
    const rerank = await post(sentence.url, '/v1/rerank', { query: 'q', documents: ['d'] });
    expect(rerank.status).toBe(404);
    expect(((await rerank.json()) as { error: { message: string } }).error.message).toMatch(/serves a sentence_embedding model; rerank is served by sequence_classification/);
  });
});

describe('pooling parity on tinybert-golden (real weights, published per-token outputs)', () => {
  warnIfSharedMissing('tinybert-golden pooling parity');
  const golden = () =>
    JSON.parse(readFileSync(path.join(sharedModel('tinybert-golden'), 'golden.json'), 'utf8')) as {
      text: string;
      outputs: { 'output_0_per_token_including_CLS_and_SEP': number[][] };
    };

  it.skipIf(!hasShared)('mean pooling equals the mean of the 13 rows, [CLS] and [SEP] included (1e-5)', async () => {
    const { text, outputs } = golden();
    const rows = outputs['output_0_per_token_including_CLS_and_SEP'];
    const served = await serve(sharedModel('tinybert-golden'), 'sentence_embedding', '  pooling: mean\n');
    const response = (await (await post(served.url, '/predict', { inputs: [text], normalize: false })).json()) as JsonOf<SentenceEmbeddingResponse>;
    const mean = rows[0].map((_, k) => rows.reduce((sum, row) => sum + row[k], 0) / rows.length);
    expect(response.results[0].embedding).toHaveLength(50);
    response.results[0].embedding.forEach((value, k) => expect(Math.abs(value - mean[k])).toBeLessThan(1e-5));
  });

  it.skipIf(!hasShared)('cls pooling equals row 0; max and last are the largest values and row 12', async () => {
    const { text, outputs } = golden();
    const rows = outputs['output_0_per_token_including_CLS_and_SEP'];
    const expected = {
      cls: rows[0],
      last: rows[12],
      max: rows[0].map((_, k) => Math.max(...rows.map((row) => row[k]))),
    };
    for (const [pooling, vector] of Object.entries(expected)) {
      const served = await serve(sharedModel('tinybert-golden'), 'sentence_embedding', `  pooling: ${pooling}\n  normalize: false\n`);
      const response = (await (await post(served.url, '/predict', { inputs: [text] })).json()) as JsonOf<SentenceEmbeddingResponse>;
      response.results[0].embedding.forEach((value, k) => expect(Math.abs(value - vector[k]), `${pooling}[${k}]`).toBeLessThan(1e-5));
    }
  });
});
