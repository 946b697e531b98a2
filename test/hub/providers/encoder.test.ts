// The encoder provider against the REAL encoder server (src/serve), started in-process on tiny generated models:
// an embedding server, a sentence_embedding server of the same weights, and a classifier.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBuildConfig } from '../../../src/encoder/config.ts';
import { readModelPackage } from '../../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../../src/encoder/predict-pipeline.ts';
import { InvalidRequestError, ModelNotFoundError, ProviderError, UnsupportedParameterError } from '../../../src/hub/errors.ts';
import { aembedding } from '../../../src/hub/index.ts';
import type { Provider } from '../../../src/hub/provider.ts';
import { encoderProvider } from '../../../src/hub/providers/encoder/index.ts';
import { startEncoderServer, type RunningServer } from '../../../src/serve/encoder-server.ts';
import { generateTinyModel } from '../../helpers/generated-models.ts';
import { failureOf } from '../helpers.ts';

const servers: RunningServer[] = [];
const pipelines: PredictPipeline[] = [];
let embeddingUrl: string;
let sentenceUrl: string;
let classifierUrl: string;
let provider: Provider;
const call = { extra: {} };

let embeddingDir: string;

async function serve(modelType: 'embedding' | 'sentence_embedding' | 'sequence_classification', name: string): Promise<string> {
  // the sentence_embedding server serves the embedding server's own model folder: the same weights, pooled server-side
  const dir = modelType === 'sequence_classification' ? await generateTinyModel({ modelType, labels: ['no', 'yes'] }) : embeddingDir;
  const config = parseBuildConfig(`encoder:\n  name: ${name}\n  path: ${dir}\n  model_type: ${modelType}\n`, { baseDir: dir });
  const pipeline = await PredictPipeline.load(readModelPackage(config));
  pipelines.push(pipeline);
  const server = await startEncoderServer(pipeline, { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 * 1024 }, grpc: null, target: 'x86_64-unknown-linux-gnu' });
  servers.push(server);
  return server.httpUrl!;
}

beforeAll(async () => {
  embeddingDir = await generateTinyModel({ modelType: 'embedding' });
  [embeddingUrl, sentenceUrl, classifierUrl] = await Promise.all([
    serve('embedding', 'tiny-embedder'),
    serve('sentence_embedding', 'tiny-sentences'),
    serve('sequence_classification', 'tiny-classifier'),
  ]);
  provider = encoderProvider.create({ api_base: embeddingUrl });
});

afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
  await Promise.all(pipelines.map((pipeline) => pipeline.close()));
});

describe('encoder provider against the real encoder server', () => {
  it('metadata: embeddings and models, no key', () => {
    expect(encoderProvider.metadata).toMatchObject({ name: 'encoder', env_key: null, embedding: true, list_models: true, messages: false });
  });

  it.each(['embedding', 'sentence_embedding'] as const)('%s server: the vectors /v1/embeddings computes, exactly, with its token count', async (modelType) => {
    const url = modelType === 'embedding' ? embeddingUrl : sentenceUrl;
    const model = modelType === 'embedding' ? 'tiny-embedder' : 'tiny-sentences';
    const inputs = ['the cat sat on the mat', 'hello there'];
    const response = await encoderProvider.create({ api_base: url }).embedding!({ model, inputs }, call);
    const served = (await (
      await fetch(`${url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: inputs, encoding_format: 'float' }) })
    ).json()) as { data: { embedding: number[] }[]; usage: { prompt_tokens: number } };
    expect(response.model).toBe(model);
    expect(response.data.map((d) => d.index)).toEqual([0, 1]);
    expect(response.data.map((d) => d.embedding)).toEqual(served.data.map((d) => d.embedding));
    for (const item of response.data) expect(Math.hypot(...item.embedding)).toBeCloseTo(1, 5);
    expect(response.usage).toEqual({ prompt_tokens: served.usage.prompt_tokens, total_tokens: served.usage.prompt_tokens });
  });

  it('an embedding server pools as sentence-transformers does: the mean over every token, [CLS] and [SEP] included', async () => {
    const inputs = ['hello there', 'a longer sentence to pad the batch'];
    const [perToken, pooled] = await Promise.all([
      encoderProvider.create({ api_base: embeddingUrl }).embedding!({ model: 'tiny-embedder', inputs }, call),
      encoderProvider.create({ api_base: sentenceUrl }).embedding!({ model: 'tiny-sentences', inputs }, call),
    ]);
    perToken.data.forEach((item, i) => item.embedding.forEach((value, k) => expect(value).toBeCloseTo(pooled.data[i].embedding[k], 6)));
  });

  it('dimensions passes through: unit vectors of that many components', async () => {
    const response = await aembedding({ provider: 'encoder', api_base: sentenceUrl, model: 'tiny-sentences', inputs: ['x', 'y z'], dimensions: 16 });
    for (const item of response.data) {
      expect(item.embedding).toHaveLength(16);
      expect(Math.hypot(...item.embedding)).toBeCloseTo(1, 5);
    }
  });

  it('listModels: the served model from GET /v1/models', async () => {
    const [model] = await provider.listModels!(call);
    expect(model).toMatchObject({ id: 'tiny-embedder', object: 'model', owned_by: 'encoder' });
    expect(model.created).toBeGreaterThan(1_700_000_000);
  });

  it('a model name the server does not serve: ModelNotFoundError naming both', async () => {
    const failure = provider.toHubError(await failureOf(provider.embedding!({ model: 'other-model', inputs: ['x'] }, call)));
    expect(failure).toBeInstanceOf(ModelNotFoundError);
    expect(failure).toMatchObject({ status_code: 404, code: 'model_not_found' });
    expect((failure as Error).message).toMatch(/The model 'other-model' does not exist; this server serves 'tiny-embedder'/);
  });

  it("the server's 400 (an empty input, too many dimensions) → InvalidRequestError with its message and param", async () => {
    const empty = provider.toHubError(await failureOf(provider.embedding!({ model: 'tiny-embedder', inputs: ['ok', ''] }, call)));
    expect(empty).toBeInstanceOf(InvalidRequestError);
    expect(empty?.status_code).toBe(400);
    expect(empty?.message).toBe("[encoder] 'input[1]' is an empty string");
    const wide = provider.toHubError(await failureOf(provider.embedding!({ model: 'tiny-embedder', inputs: ['x'], dimensions: 999 }, call)));
    expect(wide).toBeInstanceOf(InvalidRequestError);
    expect(wide).toMatchObject({ param: 'dimensions' });
  });

  it('a server of another model type is not an embeddings provider: InvalidRequestError saying why', async () => {
    const classifier = encoderProvider.create({ api_base: classifierUrl });
    const failure = classifier.toHubError(await failureOf(classifier.embedding!({ model: 'tiny-classifier', inputs: ['x'] }, call)));
    expect(failure).toBeInstanceOf(InvalidRequestError);
    expect((failure as Error).message).toMatch(/does not serve embeddings: This server serves a sequence_classification model/);
  });

  it('extra options and messages are not supported', async () => {
    expect(await failureOf(provider.embedding!({ model: 'tiny-embedder', inputs: ['x'] }, { extra: { normalize: true } }))).toBeInstanceOf(UnsupportedParameterError);
    expect(await failureOf(provider.messages({ model: 'tiny-embedder', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }, call))).toBeInstanceOf(UnsupportedParameterError);
  });

  it('no server at the address: ProviderError without status', async () => {
    const offline = encoderProvider.create({ api_base: 'http://127.0.0.1:9' });
    const mapped = offline.toHubError(await failureOf(offline.embedding!({ model: 'x', inputs: ['x'] }, call)));
    expect(mapped).toBeInstanceOf(ProviderError);
    expect(mapped?.status_code).toBeNull();
  });
});
