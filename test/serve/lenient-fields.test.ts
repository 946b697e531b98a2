/**
 * Lenient where clients are sloppy, strict where it matters (issue 30, part 3), over raw HTTP: every optional field of
 * every JSON route may be null, meaning "not given"; the fields real clients send that do not apply here are accepted
 * and change nothing; a value that would ask for another result than the one given is refused, naming the field; a
 * field no known client sends is still refused (a typo must not pass silently).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTinyCrossEncoder, generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';

let sentences: InProcessEncoder;
let tokens: InProcessEncoder;
let cross: InProcessEncoder;
let classifier: InProcessEncoder;

beforeAll(async () => {
  const [embeddingDir, crossDir, classifierDir] = await Promise.all([
    generateTinyModel({ modelType: 'embedding' }),
    generateTinyCrossEncoder(),
    generateTinyModel({ modelType: 'sequence_classification', labels: ['no', 'yes'] }),
  ]);
  [sentences, tokens, cross, classifier] = await Promise.all([
    serveInProcess(embeddingDir, 'sentences', 'sentence_embedding'),
    serveInProcess(embeddingDir, 'tokens', 'embedding'),
    serveInProcess(crossDir, 'cross', 'sequence_classification'),
    serveInProcess(classifierDir, 'classifier', 'sequence_classification'),
  ]);
});

afterAll(async () => {
  await Promise.all([sentences, tokens, cross, classifier].map((server) => server?.close()));
});

async function post(server: InProcessEncoder, route: string, body: unknown): Promise<{ status: number; json: Record<string, unknown>; text: string }> {
  const response = await fetch(`${server.httpUrl}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await response.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // text/plain error bodies of /predict
  }
  return { status: response.status, json, text };
}

/** What stays the same whatever is ignored: a response without its random id. */
const withoutId = ({ id: _id, ...rest }: Record<string, unknown>) => rest;

describe('/v1/embeddings', () => {
  const input = ['hello world', 'good morning'];
  const baseline = () => post(sentences, '/v1/embeddings', { input });

  it.each([
    ['model', { model: null }],
    ['encoding_format (float, the default)', { encoding_format: null }],
    ['dimensions', { dimensions: null }],
    ['user', { user: null }],
    ['modality', { modality: null }],
    ['all of them', { model: null, encoding_format: null, dimensions: null, user: null, modality: null }],
  ])('null %s is not given: the same answer as without', async (_name, extra) => {
    const expected = await baseline();
    const response = await post(sentences, '/v1/embeddings', { input, ...extra });
    expect(response.status, response.text).toBe(200);
    expect(response.json).toEqual(expected.json);
    expect((response.json.data as { embedding: unknown }[])[0].embedding).toBeInstanceOf(Array); // floats, not base64
  });

  it.each([
    ["OpenAI's user", { user: 'user-1234' }],
    ["Infinity's modality text", { modality: 'text' }],
    ['any model name', { model: 'text-embedding-ada-002' }],
  ])('%s is accepted and changes nothing', async (_name, extra) => {
    const response = await post(sentences, '/v1/embeddings', { input, ...extra });
    expect(response.status, response.text).toBe(200);
    expect(response.json).toEqual((await baseline()).json);
    expect(response.json.model).toBe('sentences');
  });

  it.each([
    ["Infinity's image modality: refused, not embedded as text", { modality: 'image' }, 'modality', /'modality' "image" is not served: this server embeds texts only/],
    ['a null input (required)', { input: null }, 'input', /'input' must be a non-empty text/],
    ['dimensions of the wrong type', { dimensions: '16' }, 'dimensions', /'dimensions' must be an integer of at least 1, got "16"/],
    ['a field no client sends (a typo of dimensions)', { dimension: 16 }, 'dimension', /^Unrecognized request argument supplied: dimension$/],
    ["TEI's native truncate (its OpenAI route has none either)", { truncate: true }, 'truncate', /^Unrecognized request argument supplied: truncate$/],
  ])('%s: 400 naming the field', async (_name, extra, param, message) => {
    const response = await post(sentences, '/v1/embeddings', { input, ...extra });
    expect(response.status).toBe(400);
    expect(response.json.error).toMatchObject({ type: 'invalid_request_error', param, message: expect.stringMatching(message) });
  });
});

describe('/v1/rerank and /v2/rerank', () => {
  const query = 'what is the capital of france';
  const documents = ['paris is the capital of france', 'the cat sat on the mat', 'berlin is a city'];

  const nulls = [
    'model',
    'top_n',
    'return_documents',
    'rank_fields',
    'max_tokens_per_doc',
    'max_chunks_per_doc',
    'priority',
    'return_text',
    'raw_scores',
    'truncate',
    'truncation_direction',
  ];
  it.each(['/v1/rerank', '/v2/rerank'])('%s: each optional field null is not given', async (route) => {
    const expected = withoutId((await post(cross, route, { query, documents })).json);
    for (const field of nulls) {
      const response = await post(cross, route, { query, documents, [field]: null });
      expect(response.status, `${field}: ${response.text}`).toBe(200);
      expect(withoutId(response.json), field).toEqual(expected);
    }
    const all = await post(cross, route, { query, documents, ...Object.fromEntries(nulls.map((field) => [field, null])) });
    expect(withoutId(all.json)).toEqual(expected);
  });

  it.each([
    ["Cohere v2's max_tokens_per_doc (documents are truncated to the model's length)", { max_tokens_per_doc: 4 }],
    ["Cohere v1's max_chunks_per_doc", { max_chunks_per_doc: 10 }],
    ["Cohere v2's priority", { priority: 5 }],
    ["Cohere v1's rank_fields ['text']", { rank_fields: ['text'] }],
    ["Infinity's and TEI's raw_scores: false", { raw_scores: false }],
    ["TEI's truncate: true", { truncate: true }],
    ["TEI's truncate: false (long documents are truncated anyway)", { truncate: false }],
    ["TEI's truncation_direction Right", { truncation_direction: 'Right' }],
    ['any model name', { model: 'rerank-v3.5' }],
  ])('%s is accepted and changes nothing', async (_name, extra) => {
    const expected = withoutId((await post(cross, '/v2/rerank', { query, documents })).json);
    const response = await post(cross, '/v2/rerank', { query, documents, ...extra });
    expect(response.status, response.text).toBe(200);
    expect(withoutId(response.json)).toEqual(expected);
    expect(response.json.model).toBe('cross');
  });

  it("Infinity's and TEI's raw_scores: true scores with the logit, whose sigmoid is the default score (one-logit cross-encoder)", async () => {
    const probabilities = (await post(cross, '/v2/rerank', { query, documents })).json.results as { index: number; relevance_score: number }[];
    const raw = (await post(cross, '/v2/rerank', { query, documents, raw_scores: true })).json.results as { index: number; relevance_score: number }[];
    expect(raw.map((result) => result.index)).toEqual(probabilities.map((result) => result.index));
    raw.forEach((result, i) => expect(1 / (1 + Math.exp(-result.relevance_score))).toBeCloseTo(probabilities[i].relevance_score, 6));
  });

  it("TEI's return_text: true returns the documents, as return_documents does", async () => {
    const response = await post(cross, '/v1/rerank', { query, documents, return_text: true, top_n: 2 });
    const results = response.json.results as { index: number; document: { text: string } }[];
    expect(results).toHaveLength(2);
    for (const result of results) expect(result.document).toEqual({ text: documents[result.index] });
  });

  it("Cohere v1's rank_fields ranks object documents by the named fields, as \"field: value\" lines, and returns them as given", async () => {
    const objects = [
      { title: 'capital', body: 'paris is the capital of france', id: 'a' },
      { title: 'pets', body: 'the cat sat on the mat', id: 'b' },
    ];
    const ranked = await post(cross, '/v1/rerank', { query, documents: objects, rank_fields: ['title', 'body'], return_documents: true });
    expect(ranked.status, ranked.text).toBe(200);
    const asText = await post(cross, '/v1/rerank', { query, documents: objects.map((o) => `title: ${o.title}\nbody: ${o.body}`) });
    const scores = (response: { json: Record<string, unknown> }) => (response.json.results as { index: number; relevance_score: number }[]).map((r) => [r.index, r.relevance_score]);
    expect(scores(ranked)).toEqual(scores(asText));
    for (const result of ranked.json.results as { index: number; document: unknown }[]) expect(result.document).toEqual(objects[result.index]);
    // the body alone scores otherwise: the fields named are the ones read
    const bodyOnly = await post(cross, '/v1/rerank', { query, documents: objects, rank_fields: ['body'] });
    expect(scores(bodyOnly)).not.toEqual(scores(ranked));
  });

  it.each([
    ['raw_scores not a boolean', { raw_scores: 'yes' }, 'raw_scores', /'raw_scores' must be true or false/],
    ["TEI's truncation_direction Left", { truncation_direction: 'Left' }, 'truncation_direction', /'truncation_direction' "Left" is not supported: documents are truncated at their end/],
    ['rank_fields naming a field a document lacks', { documents: [{ title: 'x' }], rank_fields: ['title', 'body'] }, 'documents', /'documents\[0\]' has no text field 'body', which rank_fields names/],
    ['an object document without text, without rank_fields', { documents: [{ title: 'x' }] }, 'documents', /'documents\[0\]' must be a non-empty text or an object with a non-empty text field/],
    ['max_tokens_per_doc: 0', { max_tokens_per_doc: 0 }, 'max_tokens_per_doc', /'max_tokens_per_doc' must be >= 1/],
    ['a null query (required)', { query: null }, 'query', /'query' must be a non-empty text/],
  ])('%s: 400 naming the field', async (_name, extra, param, message) => {
    const response = await post(cross, '/v2/rerank', { query, documents, ...extra });
    expect(response.status).toBe(400);
    expect(response.json.error).toMatchObject({ type: 'invalid_request_error', param, message: expect.stringMatching(message) });
  });
});

describe('/predict', () => {
  it('sentence_embedding: null normalize and null metadata are not given', async () => {
    const expected = await post(sentences, '/predict', { inputs: ['hello world'] });
    const response = await post(sentences, '/predict', { inputs: ['hello world'], normalize: null, metadata: null });
    expect(response.status, response.text).toBe(200);
    expect(response.json).toEqual(expected.json);
    expect(response.json).not.toHaveProperty('metadata');
  });

  it('embedding: normalize absent or null is false, as encoderfile answers (its request has no normalize): the vectors as the model gives them', async () => {
    const raw = await post(tokens, '/predict', { inputs: ['hello world'], normalize: false });
    const unit = await post(tokens, '/predict', { inputs: ['hello world'], normalize: true });
    expect(raw.json).not.toEqual(unit.json);
    for (const body of [{ inputs: ['hello world'] }, { inputs: ['hello world'], normalize: null }, { inputs: ['hello world'], metadata: null }]) {
      const response = await post(tokens, '/predict', body);
      expect(response.status, response.text).toBe(200);
      expect(response.json, JSON.stringify(body)).toEqual(raw.json);
    }
    const norms = (unit.json.results as { embeddings: { embedding: number[] }[] }[])[0].embeddings.map((t) => Math.hypot(...t.embedding));
    for (const norm of norms) expect(norm).toBeCloseTo(1, 5);
  });

  it("a text-embeddings-inference /embed body: its options are accepted where they ask for what happens anyway", async () => {
    const expected = await post(sentences, '/predict', { inputs: ['hello world'], normalize: true });
    for (const extra of [{ truncate: true }, { truncate: false }, { truncation_direction: 'Right' }, { truncation_direction: 'right' }, { prompt_name: null }, { truncate: null }]) {
      const response = await post(sentences, '/predict', { inputs: ['hello world'], normalize: true, ...extra });
      expect(response.status, `${JSON.stringify(extra)}: ${response.text}`).toBe(200);
      expect(response.json).toEqual(expected.json);
    }
  });

  it("a text-embeddings-inference /predict body: raw_scores changes nothing (logits and scores are both answered)", async () => {
    const expected = await post(classifier, '/predict', { inputs: ['hello world'] });
    for (const raw_scores of [true, false, null]) {
      const response = await post(classifier, '/predict', { inputs: ['hello world'], raw_scores, truncate: true });
      expect(response.status, response.text).toBe(200);
      expect(response.json).toEqual(expected.json);
    }
  });

  it.each([
    ['truncation_direction Left', { truncation_direction: 'Left' }, 'Invalid input: truncation_direction "Left" is not supported: inputs are truncated at their end ("Right")'],
    ['a prompt_name (no prompts here)', { prompt_name: 'query' }, 'Invalid input: prompt_name "query" is not supported: this server applies no prompts; prepend the prompt to each input'],
    ['truncate of the wrong type', { truncate: 'yes' }, 'Invalid input: truncate must be a boolean, got string'],
    ['a field no client sends (spec 2 refuses it)', { normalise: true }, 'Invalid input: unknown field "normalise"'],
    ['a null for a field no client sends', { normalise: null }, 'Invalid input: unknown field "normalise"'],
    ['a null inputs (required)', { inputs: null }, 'Invalid input: inputs must be a list, got null'],
  ])('%s: 422 saying why', async (_name, extra, message) => {
    const response = await post(sentences, '/predict', { inputs: ['hello world'], ...extra });
    expect(response.status).toBe(422);
    expect(response.text).toBe(message);
  });
});
