/**
 * The clients users already hold, at their default settings, against the server in this process (issue 30, part 3):
 * LangChain's OpenAIEmbeddings with only an API key and a base URL (it sends its own default model name and asks for
 * base64 through the openai client), the openai client with every optional field null and with its default, and the
 * cohere-ai v2 client's embed and rerank. Real ONNX exports from ../shared: the suite skips, saying why, without them.
 */
import { OpenAIEmbeddings } from '@langchain/openai';
import { Cohere, CohereClient, CohereClientV2 } from 'cohere-ai';
import OpenAI from 'openai';
import type { EmbeddingCreateParams } from 'openai/resources/embeddings';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SequenceClassificationResponse } from '../../src/encoder/schemas.ts';
import type { JsonOf } from '../../src/shared/float32-json.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';
import { hasShared, sharedModel, warnIfSharedMissing } from '../helpers/shared-fixtures.ts';

warnIfSharedMissing('real clients against the model server');

let embedder: InProcessEncoder;
let reranker: InProcessEncoder;

beforeAll(async () => {
  if (!hasShared) return;
  [embedder, reranker] = await Promise.all([
    serveInProcess(sharedModel('tiny-bert-sentence-embedding'), 'tiny-sentences', 'sentence_embedding'),
    serveInProcess(sharedModel('tiny-bert-sequence-classification'), 'tiny-reranker', 'sequence_classification'),
  ]);
});

afterAll(async () => {
  await Promise.all([embedder?.close(), reranker?.close()]);
});

function post(url: string, route: string, body: unknown): Promise<Response> {
  return fetch(`${url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

/** The server's own vectors for `texts`, asked for as JSON numbers with no option but the input. */
async function floatVectors(texts: string[]): Promise<number[][]> {
  const response = await post(embedder.httpUrl, '/v1/embeddings', { input: texts, encoding_format: 'float' });
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: { embedding: number[] }[] }).data.map((item) => item.embedding);
}

/** A fetch that keeps the JSON body of every request it sends, to see what a client really asks for. */
function recordingFetch(bodies: Record<string, unknown>[]): typeof fetch {
  return (input, init) => {
    if (typeof init?.body === 'string') bodies.push(JSON.parse(init.body) as Record<string, unknown>);
    return fetch(input, init);
  };
}

/**
 * Words of bert-base-uncased that are one token each, so that a document of n words is n + 2 tokens ([CLS], [SEP]).
 * Documents differ by where in the list they start and by their step through it.
 */
const WORDS = 'the cat sat on mat and dog ran in park with red ball under big tree while bird sang song of day night sun moon star sky sea'.split(' ');
function documentOf(index: number, words: number): string {
  return Array.from({ length: words }, (_, k) => WORDS[(index + k * (1 + (index % 7))) % WORDS.length]).join(' ');
}

describe.skipIf(!hasShared)("LangChain's OpenAIEmbeddings with only apiKey and configuration.baseURL", () => {
  const langchain = () => new OpenAIEmbeddings({ apiKey: 'unused', configuration: { baseURL: `${embedder.httpUrl}/v1` } });

  it('embedQuery: its default model name (text-embedding-ada-002) is taken as the served model; the vector is the server\'s', async () => {
    const client = langchain();
    expect(client.model).toBe('text-embedding-ada-002'); // what it sends, never configured here
    const vector = await client.embedQuery('what is the capital of france');
    expect(vector).toEqual((await floatVectors(['what is the capital of france']))[0].map(Math.fround));
    expect(vector).toHaveLength(16);
  });

  it('embedDocuments of 600 documents of ~250 tokens: every vector, in order, equal to the server\'s own', { timeout: 120_000 }, async () => {
    const documents = Array.from({ length: 600 }, (_, i) => documentOf(i, 248));
    const tokens = documents.map((document) => embedder.pipeline.tokenizer.encode(document).ids.length);
    expect(new Set(tokens)).toEqual(new Set([250]));
    // LangChain sends batches of 512 (two requests here, at once): 128,000 tokens in the first. The server here has
    // the pipeline's default limits (no token limit today; OpenAI's 2,048 inputs and 300,000 tokens once the
    // pipeline's defaults are raised, which this fits). `serve`'s own default of today, 16,384 tokens, refuses it.
    const vectors = await langchain().embedDocuments(documents);
    expect(vectors).toHaveLength(600);
    const sample = [0, 1, 511, 512, 599];
    const expected = await floatVectors(sample.map((i) => documents[i]));
    sample.forEach((i, k) => expect(vectors[i], `document ${i}`).toEqual(expected[k].map(Math.fround)));
    // documents differ, and so do their vectors: the order was kept across the two batches
    expect(vectors[511]).not.toEqual(vectors[512]);
    for (const vector of vectors) expect(Math.hypot(...vector)).toBeCloseTo(1, 5);
  });
});

describe.skipIf(!hasShared)('the openai client', () => {
  const texts = ['hello world', 'the quick brown fox'];

  it('with every optional field null: the nulls reach the server, which takes them as not given', async () => {
    const bodies: Record<string, unknown>[] = [];
    const openai = new OpenAI({ apiKey: 'unused', baseURL: `${embedder.httpUrl}/v1`, maxRetries: 0, fetch: recordingFetch(bodies) });
    const params = { input: texts, model: null, dimensions: null, user: null, encoding_format: null } as unknown as EmbeddingCreateParams;
    const response = await openai.embeddings.create(params);
    // the client turns a null encoding_format into its default, base64 (raw HTTP: lenient-fields.test.ts), and sends the rest as they are
    expect(bodies).toEqual([{ input: texts, model: null, dimensions: null, user: null, encoding_format: 'base64' }]);
    expect(response.model).toBe('tiny-sentences');
    expect(response.data.map((item) => item.embedding)).toEqual((await floatVectors(texts)).map((vector) => vector.map(Math.fround)));
  });

  it('at its default it asks for base64 and decodes it: the same float32 values as the float answer', async () => {
    const bodies: Record<string, unknown>[] = [];
    const openai = new OpenAI({ apiKey: 'unused', baseURL: `${embedder.httpUrl}/v1`, maxRetries: 0, fetch: recordingFetch(bodies) });
    const response = await openai.embeddings.create({ model: 'text-embedding-3-small', input: texts });
    expect(bodies).toEqual([{ model: 'text-embedding-3-small', input: texts, encoding_format: 'base64' }]);
    expect(response.model).toBe('tiny-sentences');
    const floats = await floatVectors(texts);
    response.data.forEach((item, i) => {
      expect(item.index).toBe(i);
      expect(item.embedding).toEqual(floats[i].map(Math.fround));
    });
    const tokens = texts.reduce((sum, text) => sum + embedder.pipeline.tokenizer.encode(text).ids.length, 0);
    expect(response.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens });
  });
});

describe.skipIf(!hasShared)('the cohere-ai clients', () => {
  const texts = ['hello world', 'the quick brown fox', 'good morning'];

  it('v2 embed with float and base64 types and an input_type: both carry the server\'s float32 values', async () => {
    const cohere = new CohereClientV2({ token: 'unused', environment: embedder.httpUrl });
    const response = await cohere.embed({ model: 'embed-v4.0', texts, inputType: 'search_document', embeddingTypes: ['float', 'base64'] });
    const floats = await floatVectors(texts);
    expect(response.responseType).toBe('embeddings_by_type');
    expect(response.texts).toEqual(texts);
    // float: the same shortest float32 decimals; base64: those float32 values
    expect(response.embeddings.float).toEqual(floats);
    const decoded = response.embeddings.base64!.map((text) => [...new Float32Array(new Uint8Array(Buffer.from(text, 'base64')).buffer)]);
    expect(decoded).toEqual(floats.map((vector) => vector.map(Math.fround)));
    const tokens = texts.reduce((sum, text) => sum + embedder.pipeline.tokenizer.encode(text).ids.length, 0);
    expect(response.meta?.billedUnits?.inputTokens).toBe(tokens);
    expect(response.meta?.apiVersion?.version).toBe('2');
    // input_type changes nothing (an encoder without prompts embeds a query as a document)
    const query = await cohere.embed({ model: 'embed-v4.0', texts, inputType: 'search_query', embeddingTypes: ['float'] });
    expect(query.embeddings.float).toEqual(response.embeddings.float);
  });

  it('v2 embed of int8: the client raises its BadRequestError, with the body that names what is served', async () => {
    const cohere = new CohereClientV2({ token: 'unused', environment: embedder.httpUrl });
    const failure = await cohere.embed({ model: 'embed-v4.0', texts, inputType: 'search_document', embeddingTypes: ['int8'] }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Cohere.BadRequestError);
    expect(failure).toMatchObject({
      statusCode: 400,
      body: { error: { param: 'embedding_types', message: "'embedding_types' \"int8\" is not supported; supported: float, base64, binary, ubinary" } },
    });
  });

  it('v1 embed without embedding types: the float vectors (embeddings_floats)', async () => {
    const cohere = new CohereClient({ token: 'unused', environment: embedder.httpUrl });
    const response = await cohere.embed({ texts, model: 'embed-english-v3.0', inputType: 'classification' });
    expect(response.responseType).toBe('embeddings_floats');
    expect(response.embeddings).toEqual(await floatVectors(texts));
  });

  it('v2 rerank with maxTokensPerDoc: the documents best first, scored as /predict scores their pairs', async () => {
    const bodies: Record<string, unknown>[] = [];
    const cohere = new CohereClientV2({ token: 'unused', environment: reranker.httpUrl, fetch: recordingFetch(bodies) });
    const query = 'what is the capital of france';
    const documents = ['paris is the capital of france', 'the cat sat on the mat', 'berlin is in germany', 'france borders spain'];
    const response = await cohere.rerank({ model: 'rerank-v3.5', query, documents, topN: 3, maxTokensPerDoc: 64 });
    expect(bodies).toEqual([{ model: 'rerank-v3.5', query, documents, top_n: 3, max_tokens_per_doc: 64 }]);
    const predicted = (await (await post(reranker.httpUrl, '/predict', { inputs: documents.map((document) => [query, document]) })).json()) as JsonOf<SequenceClassificationResponse>;
    // two labels (good, bad), no rerank_label: the last label's probability
    const expected = predicted.results.map((result, index) => ({ index, score: result.scores[1] })).sort((a, b) => b.score - a.score);
    expect(response.results.map((result) => result.index)).toEqual(expected.slice(0, 3).map((result) => result.index));
    response.results.forEach((result, i) => expect(result.relevanceScore).toBeCloseTo(expected[i].score, 6));
  });
});
