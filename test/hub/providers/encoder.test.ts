// The encoder provider against the REAL encoder server (src/serve), started in-process on a tiny generated model.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBuildConfig } from '../../../src/encoder/config.ts';
import { readModelPackage } from '../../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../../src/encoder/predict-pipeline.ts';
import type { EmbeddingResponse } from '../../../src/encoder/schemas.ts';
import { InvalidRequestError, ModelNotFoundError, ProviderError, UnsupportedParameterError } from '../../../src/hub/errors.ts';
import { aembedding } from '../../../src/hub/index.ts';
import type { Provider } from '../../../src/hub/provider.ts';
import { encoderProvider, meanPooledUnitVector } from '../../../src/hub/providers/encoder/index.ts';
import { startEncoderServer, type RunningServer } from '../../../src/serve/encoder-server.ts';
import { generateTinyModel } from '../../helpers/generated-models.ts';
import { failureOf } from '../helpers.ts';

const servers: RunningServer[] = [];
const pipelines: PredictPipeline[] = [];
let embeddingUrl: string;
let classifierUrl: string;
let provider: Provider;
const call = { extra: {} };

async function serve(modelType: 'embedding' | 'sequence_classification', name: string): Promise<string> {
  const dir = await generateTinyModel({ modelType, ...(modelType === 'sequence_classification' ? { labels: ['no', 'yes'] } : {}) });
  const config = parseBuildConfig(`encoder:\n  name: ${name}\n  path: ${dir}\n  model_type: ${modelType}\n`, { baseDir: dir });
  const pipeline = await PredictPipeline.load(readModelPackage(config));
  pipelines.push(pipeline);
  const server = await startEncoderServer(pipeline, { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 * 1024 }, grpc: null, target: 'x86_64-unknown-linux-gnu' });
  servers.push(server);
  return server.httpUrl!;
}

beforeAll(async () => {
  [embeddingUrl, classifierUrl] = await Promise.all([serve('embedding', 'tiny-embedder'), serve('sequence_classification', 'tiny-classifier')]);
  provider = encoderProvider.create({ api_base: embeddingUrl });
});

afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
  await Promise.all(pipelines.map((pipeline) => pipeline.close()));
});

describe('mean pooling', () => {
  it('averages token vectors, then scales to unit length', () => {
    expect(meanPooledUnitVector([{ embedding: [1, 0] }, { embedding: [3, 4] }])).toEqual([2 / Math.sqrt(8), 2 / Math.sqrt(8)]);
    expect(meanPooledUnitVector([{ embedding: [0, 0, 0] }])).toEqual([0, 0, 0]);
    expect(() => meanPooledUnitVector([{ embedding: [1, 2] }, { embedding: [1] }])).toThrow(ProviderError);
  });
});

describe('encoder provider against the real encoder server', () => {
  it('metadata: embeddings and models, no key', () => {
    expect(encoderProvider.metadata).toMatchObject({ name: 'encoder', env_key: null, embedding: true, list_models: true, messages: false });
  });

  it('embedding: one unit vector per input, the mean of the raw token vectors /predict returns', async () => {
    const inputs = ['the cat sat on the mat', 'hello there'];
    const response = await provider.embedding!({ model: 'tiny-embedder', inputs }, call);
    const raw = (await (
      await fetch(`${embeddingUrl}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ inputs, normalize: false }) })
    ).json()) as EmbeddingResponse;
    expect(response.model).toBe('tiny-embedder');
    expect(response.data.map((d) => d.index)).toEqual([0, 1]);
    response.data.forEach((item, i) => {
      const tokens = raw.results[i].embeddings;
      const width = tokens[0].embedding.length;
      expect(item.embedding).toHaveLength(width);
      const mean = Array.from({ length: width }, (_, k) => tokens.reduce((sum, t) => sum + t.embedding[k], 0) / tokens.length);
      const norm = Math.hypot(...mean);
      item.embedding.forEach((value, k) => expect(value).toBeCloseTo(mean[k] / norm, 5));
      expect(Math.hypot(...item.embedding)).toBeCloseTo(1, 5);
    });
    const tokenCount = raw.results.reduce((n, r) => n + r.embeddings.length, 0);
    expect(response.usage).toEqual({ prompt_tokens: tokenCount, total_tokens: tokenCount });
    expect(response.data[0].embedding).not.toEqual(response.data[1].embedding);
  });

  it('the same text embeds to the same vector alone or in a batch', async () => {
    const alone = await provider.embedding!({ model: 'tiny-embedder', inputs: ['hello there'] }, call);
    const batched = await provider.embedding!({ model: 'tiny-embedder', inputs: ['a much longer sentence to pad the batch with', 'hello there'] }, call);
    alone.data[0].embedding.forEach((value, k) => expect(batched.data[1].embedding[k]).toBeCloseTo(value, 4));
  });

  it('listModels: the served model from GET /model', async () => {
    expect(await provider.listModels!(call)).toEqual([{ id: 'tiny-embedder', object: 'model', created: 0, owned_by: 'encoder' }]);
  });

  it('a model name the server does not serve: ModelNotFoundError naming both', async () => {
    const failure = await failureOf(provider.embedding!({ model: 'other-model', inputs: ['x'] }, call));
    expect(failure).toBeInstanceOf(ModelNotFoundError);
    expect((failure as Error).message).toMatch(/serves tiny-embedder, not other-model/);
  });

  it('the server 422 (an empty input) → InvalidRequestError with the server text', async () => {
    const mapped = provider.toHubError(await failureOf(provider.embedding!({ model: 'tiny-embedder', inputs: ['ok', ''] }, call)));
    expect(mapped).toBeInstanceOf(InvalidRequestError);
    expect(mapped?.status_code).toBe(422);
    expect(mapped?.message).toBe('[encoder] Invalid input: inputs[1] is an empty string');
  });

  it('a server of another model type is not an embeddings provider: InvalidRequestError', async () => {
    const classifier = encoderProvider.create({ api_base: classifierUrl });
    const failure = await failureOf(classifier.embedding!({ model: 'tiny-classifier', inputs: ['x'] }, call));
    expect(failure).toBeInstanceOf(InvalidRequestError);
    expect((failure as Error).message).toMatch(/does not serve an embedding model/);
  });

  it('extra options and messages are not supported', async () => {
    expect(await failureOf(provider.embedding!({ model: 'tiny-embedder', inputs: ['x'] }, { extra: { normalize: true } }))).toBeInstanceOf(UnsupportedParameterError);
    expect(await failureOf(provider.messages({ model: 'tiny-embedder', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }, call))).toBeInstanceOf(UnsupportedParameterError);
  });

  it('dimensions is refused (UnsupportedParameterError) before anything is sent; the same call without it answers', async () => {
    const refused = await failureOf(aembedding({ provider: 'encoder', api_base: embeddingUrl, model: 'tiny-embedder', inputs: ['x'], dimensions: 2 }));
    expect(refused).toBeInstanceOf(UnsupportedParameterError);
    expect(refused).toMatchObject({ parameter_name: 'dimensions', provider_name: 'encoder' });
    // nothing listens at port 9: a refusal that sent something would have been a connection error
    const offline = await failureOf(aembedding({ provider: 'encoder', api_base: 'http://127.0.0.1:9', model: 'tiny-embedder', inputs: ['x'], dimensions: 2 }));
    expect(offline).toBeInstanceOf(UnsupportedParameterError);
    const answered = await aembedding({ provider: 'encoder', api_base: embeddingUrl, model: 'tiny-embedder', inputs: ['x'] });
    expect(answered.data[0].embedding.length).toBeGreaterThan(2);
  });

  it('no server at the address: ProviderError without status', async () => {
    const offline = encoderProvider.create({ api_base: 'http://127.0.0.1:9' });
    const mapped = offline.toHubError(await failureOf(offline.embedding!({ model: 'x', inputs: ['x'] }, call)));
    expect(mapped).toBeInstanceOf(ProviderError);
    expect(mapped?.status_code).toBeNull();
  });
});
