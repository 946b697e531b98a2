// The encoder provider against the REAL encoder server (src/serve), started in-process on tiny generated models:
// an embedding server, a sentence_embedding server of the same weights, a two-label classifier, and a one-logit
// cross-encoder (rerank).

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthenticationError, InvalidRequestError, ModelNotFoundError, ProviderError, UnsupportedParameterError } from '../../../src/hub/errors.ts';
import { aembedding, arerank } from '../../../src/hub/index.ts';
import type { Provider } from '../../../src/hub/provider.ts';
import { encoderProvider } from '../../../src/hub/providers/encoder/index.ts';
import { ApiKey } from '../../../src/serve/api-key.ts';
import { generateTinyCrossEncoder, generateTinyModel } from '../../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../../helpers/in-process-encoder.ts';
import { failureOf } from '../helpers.ts';

const servers: InProcessEncoder[] = [];
let embeddingUrl: string;
let sentenceUrl: string;
let classifierUrl: string;
let crossEncoderUrl: string;
let provider: Provider;
const call = { extra: {} };

let embeddingDir: string;

async function serve(modelType: 'embedding' | 'sentence_embedding' | 'sequence_classification', name: string, modelDir?: string): Promise<string> {
  // the sentence_embedding server serves the embedding server's own model folder: the same weights, pooled server-side
  const dir = modelDir ?? (modelType === 'sequence_classification' ? await generateTinyModel({ modelType, labels: ['no', 'yes'] }) : embeddingDir);
  // strict about model names (serve --strict-model-name), so that another name is the server's 404 model_not_found
  const server = await serveInProcess(dir, name, modelType, { modelNames: { strict: true } });
  servers.push(server);
  return server.httpUrl;
}

beforeAll(async () => {
  embeddingDir = await generateTinyModel({ modelType: 'embedding' });
  [embeddingUrl, sentenceUrl, classifierUrl, crossEncoderUrl] = await Promise.all([
    serve('embedding', 'tiny-embedder'),
    serve('sentence_embedding', 'tiny-sentences'),
    serve('sequence_classification', 'tiny-classifier'),
    generateTinyCrossEncoder().then((dir) => serve('sequence_classification', 'tiny-cross', dir)),
  ]);
  provider = encoderProvider.create({ api_base: embeddingUrl });
});

afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
});

interface Served {
  /** The float32 values of the base64 answer, decoded here independently of the provider. */
  float32s: number[][];
  /** The numbers of the float answer, as JSON.parse reads the server's decimal text. */
  decimals: number[][];
  promptTokens: number;
}

/** What the server's own /v1/embeddings answers for these inputs, asked directly in both encodings. */
async function served(url: string, input: string[]): Promise<Served> {
  const ask = async (encoding_format: 'float' | 'base64') =>
    (await (
      await fetch(`${url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input, encoding_format }) })
    ).json()) as { data: { embedding: number[] | string }[]; usage: { prompt_tokens: number } };
  const [base64, float] = await Promise.all([ask('base64'), ask('float')]);
  const float32s = base64.data.map(({ embedding }) => {
    const bytes = Uint8Array.from(Buffer.from(embedding as string, 'base64'));
    return Array.from(new Float32Array(bytes.buffer));
  });
  return { float32s, decimals: float.data.map(({ embedding }) => embedding as number[]), promptTokens: float.usage.prompt_tokens };
}

/** A plain HTTP server answering every request with one scripted status and body: servers that are not (this) encoder. */
async function scriptedServer(status: number, body: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((request, response) => {
    request.resume();
    response.writeHead(status, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('encoder provider against the real encoder server', () => {
  it('metadata: embeddings, rerank and models; a key from ENCODER_API_KEY when there is one, none needed', () => {
    expect(encoderProvider.metadata).toMatchObject({
      name: 'encoder',
      env_key: 'ENCODER_API_KEY',
      api_key_optional: true,
      embedding: true,
      rerank: true,
      list_models: true,
      messages: false,
    });
  });

  it.each(['embedding', 'sentence_embedding'] as const)('%s server: the float32s /v1/embeddings computes, exactly, with its token count', async (modelType) => {
    const url = modelType === 'embedding' ? embeddingUrl : sentenceUrl;
    const model = modelType === 'embedding' ? 'tiny-embedder' : 'tiny-sentences';
    const inputs = ['the cat sat on the mat', 'hello there'];
    const response = await encoderProvider.create({ api_base: url }).embedding!({ model, inputs }, call);
    const server = await served(url, inputs);
    expect(response.model).toBe(model);
    expect(response.data.map((d) => d.index)).toEqual([0, 1]);
    const vectors = response.data.map((d) => d.embedding);
    // bit for bit the server's float32s …
    expect(vectors).toEqual(server.float32s);
    // … which are what its float answer's decimals read back as (float32 by float32)
    expect(vectors).toEqual(server.decimals.map((vector) => vector.map((value) => Math.fround(value))));
    for (const vector of vectors) expect(Math.hypot(...vector)).toBeCloseTo(1, 5);
    expect(response.usage).toEqual({ prompt_tokens: server.promptTokens, total_tokens: server.promptTokens });
  });

  it('an embedding server pools server-side like a sentence_embedding server of the same weights', async () => {
    const inputs = ['hello there', 'a longer sentence to pad the batch'];
    const [perToken, pooled] = await Promise.all([
      encoderProvider.create({ api_base: embeddingUrl }).embedding!({ model: 'tiny-embedder', inputs }, call),
      encoderProvider.create({ api_base: sentenceUrl }).embedding!({ model: 'tiny-sentences', inputs }, call),
    ]);
    perToken.data.forEach((item, i) => item.embedding.forEach((value, k) => expect(value).toBeCloseTo(pooled.data[i].embedding[k], 6)));
  });

  it('not the old client-side mean of /predict token vectors, which leaves out [CLS] and [SEP]', async () => {
    const inputs = ['hello there'];
    const response = await provider.embedding!({ model: 'tiny-embedder', inputs }, call);
    const predicted = (await (
      await fetch(`${embeddingUrl}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ inputs, normalize: false }) })
    ).json()) as { results: { embeddings: { embedding: number[] }[] }[] };
    const tokens = predicted.results[0].embeddings.map((token) => token.embedding);
    const mean = tokens[0].map((_, k) => tokens.reduce((sum, token) => sum + token[k], 0) / tokens.length);
    const norm = Math.hypot(...mean);
    const largestGap = Math.max(...response.data[0].embedding.map((value, k) => Math.abs(value - mean[k] / norm)));
    expect(largestGap).toBeGreaterThan(1e-3);
    // two more tokens than /predict shows: [CLS] and [SEP]
    expect(response.usage.prompt_tokens).toBe(tokens.length + 2);
  });

  it('the same text embeds to the same vector alone or padded in a batch', async () => {
    const alone = await provider.embedding!({ model: 'tiny-embedder', inputs: ['hello there'] }, call);
    const batched = await provider.embedding!({ model: 'tiny-embedder', inputs: ['a much longer sentence than the other one', 'hello there'] }, call);
    alone.data[0].embedding.forEach((value, k) => expect(value).toBeCloseTo(batched.data[1].embedding[k], 5));
    expect(batched.data[0].embedding).not.toEqual(batched.data[1].embedding);
  });

  it('dimensions passes through: unit vectors of that many components, the server\'s own shortened vectors', async () => {
    const inputs = ['x', 'y z'];
    const response = await aembedding({ provider: 'encoder', api_base: sentenceUrl, model: 'tiny-sentences', inputs, dimensions: 16 });
    const full = await encoderProvider.create({ api_base: sentenceUrl }).embedding!({ model: 'tiny-sentences', inputs }, call);
    expect(full.data[0].embedding.length).toBeGreaterThan(16);
    response.data.forEach((item, i) => {
      expect(item.embedding).toHaveLength(16);
      expect(Math.hypot(...item.embedding)).toBeCloseTo(1, 5);
      // the first 16 components of the full vector, re-normalised
      const head = full.data[i].embedding.slice(0, 16);
      const norm = Math.hypot(...head);
      item.embedding.forEach((value, k) => expect(value).toBeCloseTo(head[k] / norm, 6));
    });
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
    // the public function with unified exceptions raises the same
    const viaHub = await failureOf(aembedding({ provider: 'encoder', api_base: embeddingUrl, model: 'other-model', inputs: ['x'], unified_exceptions: true }));
    expect(viaHub).toBeInstanceOf(ModelNotFoundError);
  });

  it("the server's 400 (an empty input, too many dimensions) → InvalidRequestError with its message and param", async () => {
    const empty = provider.toHubError(await failureOf(provider.embedding!({ model: 'tiny-embedder', inputs: ['ok', ''] }, call)));
    expect(empty).toBeInstanceOf(InvalidRequestError);
    expect(empty?.status_code).toBe(400);
    expect(empty?.message).toBe("[encoder] 'input[1]' is an empty string");
    const wide = provider.toHubError(await failureOf(provider.embedding!({ model: 'tiny-embedder', inputs: ['x'], dimensions: 999 }, call)));
    expect(wide).toBeInstanceOf(InvalidRequestError);
    expect(wide).toMatchObject({ status_code: 400, param: 'dimensions' });
  });

  it('a server of another model type is not an embeddings provider: InvalidRequestError saying why', async () => {
    const classifier = encoderProvider.create({ api_base: classifierUrl });
    const failure = classifier.toHubError(await failureOf(classifier.embedding!({ model: 'tiny-classifier', inputs: ['x'] }, call)));
    expect(failure).toBeInstanceOf(InvalidRequestError);
    expect(failure).toMatchObject({ status_code: 404, param: 'model' });
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

const post = async (url: string, route: string, body: unknown) =>
  (await fetch(`${url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json();
const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
const QUERY = 'what is the capital of france';
const DOCUMENTS = ['paris is the capital of france', 'the cat sat on the mat', 'berlin is a city in germany', 'france borders spain'];

describe('encoder provider rerank against real cross-encoder servers', () => {
  it("a one-logit cross-encoder: the sigmoid of each (query, document) pair's logit, most relevant first; the server's token count", async () => {
    const cross = encoderProvider.create({ api_base: crossEncoderUrl });
    const response = await cross.rerank!({ model: 'tiny-cross', query: QUERY, documents: DOCUMENTS }, call);
    // the scores the model gives the pairs, asked of /predict independently of /v1/rerank
    const predicted = (await post(crossEncoderUrl, '/predict', { inputs: DOCUMENTS.map((document) => [QUERY, document]) })) as { results: { logits: number[] }[] };
    const expected = predicted.results.map((result, index) => ({ index, score: sigmoid(result.logits[0]) })).sort((a, b) => b.score - a.score);
    expect(response.results.map((result) => result.index)).toEqual(expected.map((result) => result.index));
    response.results.forEach((result, i) => expect(result.relevance_score).toBeCloseTo(expected[i].score, 6));
    // exactly what the server's own /v1/rerank answers
    const direct = (await post(crossEncoderUrl, '/v1/rerank', { query: QUERY, documents: DOCUMENTS })) as { results: unknown[]; usage: { prompt_tokens: number } };
    expect(response.results).toEqual(direct.results);
    expect(response.usage).toEqual({ prompt_tokens: direct.usage.prompt_tokens, total_tokens: direct.usage.prompt_tokens });
    expect(direct.usage.prompt_tokens).toBeGreaterThan(DOCUMENTS.length * 2);
    expect(response).toMatchObject({ model: 'tiny-cross', meta: { billed_units: { search_units: 1 } } });
  });

  it('a two-label classifier: the softmax probability of its last label; top_n and return_documents through arerank', async () => {
    const response = await arerank({ provider: 'encoder', api_base: classifierUrl, model: 'tiny-classifier', query: QUERY, documents: DOCUMENTS, top_n: 2, return_documents: true });
    expect(bodyless(response.results)).toEqual(((await post(classifierUrl, '/v1/rerank', { query: QUERY, documents: DOCUMENTS, top_n: 2 })) as { results: unknown[] }).results);
    // scores are the softmax over the labels [no, yes]: the last is relevance
    const predicted = (await post(classifierUrl, '/predict', { inputs: DOCUMENTS.map((document) => [QUERY, document]) })) as { results: { scores: number[] }[] };
    const yes = predicted.results.map((result, index) => ({ index, score: result.scores[1] })).sort((a, b) => b.score - a.score);
    expect(response.results.map((result) => result.index)).toEqual(yes.slice(0, 2).map((result) => result.index));
    response.results.forEach((result, i) => expect(result.relevance_score).toBeCloseTo(yes[i].score, 6));
    for (const result of response.results) expect(result.document).toEqual({ text: DOCUMENTS[result.index] });
  });

  it('another model name: ModelNotFoundError; an embedding server: InvalidRequestError saying it serves no rerank', async () => {
    const cross = encoderProvider.create({ api_base: crossEncoderUrl });
    const other = cross.toHubError(await failureOf(cross.rerank!({ model: 'rerank-v3.5', query: QUERY, documents: DOCUMENTS }, call)));
    expect(other).toBeInstanceOf(ModelNotFoundError);
    expect((other as Error).message).toMatch(/The model 'rerank-v3.5' does not exist; this server serves 'tiny-cross'/);
    const embedder = encoderProvider.create({ api_base: embeddingUrl });
    const wrongType = embedder.toHubError(await failureOf(embedder.rerank!({ model: 'tiny-embedder', query: QUERY, documents: DOCUMENTS }, call)));
    expect(wrongType).toBeInstanceOf(InvalidRequestError);
    expect(wrongType).toMatchObject({ status_code: 404, param: 'model' });
    expect((wrongType as Error).message).toMatch(/does not serve rerank: This server serves a embedding model; rerank is served by sequence_classification/);
  });

  it("the server's 400 (an empty document) → InvalidRequestError with its message; max_tokens_per_doc and extra options are refused", async () => {
    const cross = encoderProvider.create({ api_base: crossEncoderUrl });
    const empty = cross.toHubError(await failureOf(cross.rerank!({ model: 'tiny-cross', query: QUERY, documents: ['ok', ''] }, call)));
    expect(empty).toBeInstanceOf(InvalidRequestError);
    expect(empty?.message).toBe("[encoder] 'documents[1]' must be a non-empty text or an object with a non-empty text field");
    expect(await failureOf(cross.rerank!({ model: 'tiny-cross', query: QUERY, documents: DOCUMENTS, max_tokens_per_doc: 8 }, call))).toBeInstanceOf(UnsupportedParameterError);
    expect(await failureOf(cross.rerank!({ model: 'tiny-cross', query: QUERY, documents: DOCUMENTS }, { extra: { rank_fields: ['text'] } }))).toBeInstanceOf(UnsupportedParameterError);
  });
});

/** Results without the texts the Hub adds (the server was not asked for them). */
function bodyless(results: { index: number; relevance_score: number }[]) {
  return results.map(({ index, relevance_score }) => ({ index, relevance_score }));
}

describe('encoder provider against a server started with an API key', () => {
  let guarded: InProcessEncoder;
  const saved = process.env.ENCODER_API_KEY;

  beforeAll(async () => {
    guarded = await serveInProcess(embeddingDir, 'guarded', 'sentence_embedding', { apiKey: new ApiKey('hub-to-server_key') });
  });
  afterAll(async () => {
    if (saved === undefined) delete process.env.ENCODER_API_KEY;
    else process.env.ENCODER_API_KEY = saved;
    await guarded.close();
  });

  it('sends api_key, else ENCODER_API_KEY, as a bearer token; without one, or with another, AuthenticationError', async () => {
    const request = { provider: 'encoder', api_base: guarded.httpUrl, model: 'guarded', inputs: ['a guarded text'], unified_exceptions: true };
    delete process.env.ENCODER_API_KEY;
    const missing = await failureOf(aembedding(request));
    expect(missing).toBeInstanceOf(AuthenticationError);
    expect((missing as AuthenticationError).message).toContain('this server requires an API key');
    expect(await failureOf(aembedding({ ...request, api_key: 'another' }))).toBeInstanceOf(AuthenticationError);

    expect((await aembedding({ ...request, api_key: 'hub-to-server_key' })).data).toHaveLength(1);
    process.env.ENCODER_API_KEY = 'hub-to-server_key';
    expect((await aembedding(request)).data).toHaveLength(1);
    const ranked = await failureOf(arerank({ provider: 'encoder', api_base: guarded.httpUrl, model: 'guarded', query: 'q', documents: ['d'], unified_exceptions: true }));
    expect(ranked).toBeInstanceOf(InvalidRequestError); // the key passed; a sentence_embedding server serves no rerank
  });
});

describe('encoder provider against servers that are not this encoder server', () => {
  it('a 404 without an OpenAI body (a server older than /v1/embeddings): InvalidRequestError saying it serves no embeddings', async () => {
    const old = await scriptedServer(404, JSON.stringify({ message: 'Route POST:/v1/embeddings not found', error: 'Not Found', statusCode: 404 }));
    try {
      const client = encoderProvider.create({ api_base: old.url });
      const failure = client.toHubError(await failureOf(client.embedding!({ model: 'm', inputs: ['x'] }, call)));
      expect(failure).toBeInstanceOf(InvalidRequestError);
      expect((failure as Error).message).toContain(`The encoder server at ${old.url} does not serve embeddings: {"message":"Route POST:/v1/embeddings not found"`);
    } finally {
      await old.close();
    }
  });

  it("a 500 in OpenAI's shape: ProviderError with the server's message", async () => {
    const broken = await scriptedServer(500, JSON.stringify({ error: { message: 'inference failed', type: 'server_error', param: null, code: null } }));
    try {
      const client = encoderProvider.create({ api_base: broken.url });
      const failure = client.toHubError(await failureOf(client.embedding!({ model: 'm', inputs: ['x'] }, call)));
      expect(failure).toBeInstanceOf(ProviderError);
      expect(failure).toMatchObject({ status_code: 500, message: '[encoder] inference failed' });
    } finally {
      await broken.close();
    }
  });

  it('a 200 that is not one base64 vector per input: ProviderError', async () => {
    const answers = [
      { object: 'list', data: [], model: 'm', usage: { prompt_tokens: 1, total_tokens: 1 } },
      { object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.5, 0.5] }], model: 'm', usage: { prompt_tokens: 1, total_tokens: 1 } },
      { object: 'list', data: [{ object: 'embedding', index: 0, embedding: Buffer.from([1, 2, 3]).toString('base64') }], model: 'm', usage: { prompt_tokens: 1, total_tokens: 1 } },
    ];
    for (const answer of answers) {
      const odd = await scriptedServer(200, JSON.stringify(answer));
      try {
        expect(await failureOf(encoderProvider.create({ api_base: odd.url }).embedding!({ model: 'm', inputs: ['x'] }, call))).toBeInstanceOf(ProviderError);
      } finally {
        await odd.close();
      }
    }
  });
});
