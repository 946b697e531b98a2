/**
 * Cohere's embed API, POST /v2/embed and /v1/embed (issue 30, part 3), over raw HTTP against generated models: the
 * response shapes, every embedding type served (the packed sign bits checked against their definition here, not
 * against the server's code), null and ignored fields, and bad input refused with 400 in the route's error dialect
 * (OpenAI's body, as every route under /v1 and /v2), naming the field. The cohere-ai clients themselves:
 * real-clients.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';

let sentences: InProcessEncoder;
let classifier: InProcessEncoder;
const WIDTH = 32; // the generated model's hidden size

beforeAll(async () => {
  const [embeddingDir, classifierDir] = await Promise.all([
    generateTinyModel({ modelType: 'embedding' }),
    generateTinyModel({ modelType: 'sequence_classification', labels: ['no', 'yes'] }),
  ]);
  [sentences, classifier] = await Promise.all([
    serveInProcess(embeddingDir, 'sentences', 'sentence_embedding'),
    serveInProcess(classifierDir, 'classifier', 'sequence_classification'),
  ]);
});

afterAll(async () => {
  await Promise.all([sentences?.close(), classifier?.close()]);
});

type Json = Record<string, unknown>;

async function post(server: InProcessEncoder, route: string, body: unknown): Promise<{ status: number; json: Json; contentType: string | null }> {
  const response = await fetch(`${server.httpUrl}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, json: (await response.json()) as Json, contentType: response.headers.get('content-type') };
}

/** The server's vectors for `texts` on OpenAI's route, as JSON numbers. */
async function openAiVectors(texts: string[], dimensions?: number): Promise<number[][]> {
  const response = await post(sentences, '/v1/embeddings', { input: texts, dimensions });
  expect(response.status).toBe(200);
  return (response.json.data as { embedding: number[] }[]).map((item) => item.embedding);
}

/** Cohere's definition: a bit per component, set when it is positive, first component in the highest bit of byte 0. */
function signBits(vector: number[]): number[] {
  const bytes: number[] = [];
  for (let start = 0; start < vector.length; start += 8) {
    let byte = 0;
    for (let k = 0; k < 8; k++) byte = byte * 2 + (start + k < vector.length && vector[start + k] > 0 ? 1 : 0);
    bytes.push(byte);
  }
  return bytes;
}

const texts = ['hello world', 'the quick brown fox jumps', 'good morning'];
const tokenCount = (list: string[]) => list.reduce((sum, text) => sum + sentences.pipeline.tokenizer.encode(text).ids.length, 0);

describe('POST /v2/embed', () => {
  it("answers Cohere v2's shape: embeddings by type, the texts, the tokens billed", async () => {
    const response = await post(sentences, '/v2/embed', { model: 'embed-v4.0', texts, input_type: 'search_document', embedding_types: ['float'] });
    expect(response.status).toBe(200);
    expect(Object.keys(response.json).sort()).toEqual(['embeddings', 'id', 'meta', 'response_type', 'texts']);
    expect(response.json).toMatchObject({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      texts,
      meta: { api_version: { version: '2' }, billed_units: { input_tokens: tokenCount(texts) } },
      response_type: 'embeddings_by_type',
    });
    expect(response.json.embeddings).toEqual({ float: await openAiVectors(texts) });
  });

  it('serves float, base64, ubinary and binary at once, all of the same vectors, in the order of the texts', async () => {
    const response = await post(sentences, '/v2/embed', { texts, input_type: 'search_query', embedding_types: ['ubinary', 'base64', 'binary', 'float'] });
    expect(response.status).toBe(200);
    const embeddings = response.json.embeddings as { float: number[][]; base64: string[]; ubinary: number[][]; binary: number[][] };
    const floats = await openAiVectors(texts);
    expect(embeddings.float).toEqual(floats);
    expect(embeddings.base64.map((text) => [...new Float32Array(new Uint8Array(Buffer.from(text, 'base64')).buffer)])).toEqual(floats.map((v) => v.map(Math.fround)));
    expect(embeddings.ubinary).toEqual(floats.map(signBits));
    expect(embeddings.binary).toEqual(floats.map((vector) => signBits(vector).map((byte) => byte - 128)));
    for (const bytes of embeddings.ubinary) expect(bytes).toHaveLength(WIDTH / 8);
    // a real vector has components of both signs: the bits say something
    expect(embeddings.ubinary.flat().some((byte) => byte !== 0 && byte !== 255)).toBe(true);
  });

  it('output_dimension is OpenAI\'s dimensions: the first n components at unit length; the bits pad the last byte with zeros', async () => {
    const response = await post(sentences, '/v2/embed', { texts, input_type: 'clustering', embedding_types: ['float', 'ubinary'], output_dimension: 12 });
    expect(response.status).toBe(200);
    const embeddings = response.json.embeddings as { float: number[][]; ubinary: number[][] };
    expect(embeddings.float).toEqual(await openAiVectors(texts, 12));
    for (const vector of embeddings.float) expect(Math.hypot(...vector)).toBeCloseTo(1, 5);
    expect(embeddings.ubinary).toEqual(embeddings.float.map(signBits));
    for (const bytes of embeddings.ubinary) expect(bytes[1] & 0x0f).toBe(0);
  });

  it('without embedding_types: float; inputs of text parts: each input\'s parts joined by a newline', async () => {
    const byDefault = await post(sentences, '/v2/embed', { texts, input_type: 'search_document' });
    expect(byDefault.json.embeddings).toEqual({ float: await openAiVectors(texts) });
    const inputs = await post(sentences, '/v2/embed', {
      inputs: [{ content: [{ type: 'text', text: 'hello' }, { type: 'text', text: 'world' }] }, { content: [{ type: 'text', text: 'good morning' }] }],
      input_type: 'search_document',
    });
    expect(inputs.status).toBe(200);
    expect(inputs.json.texts).toEqual(['hello\nworld', 'good morning']);
    expect(inputs.json.embeddings).toEqual({ float: await openAiVectors(['hello\nworld', 'good morning']) });
  });

  it('every optional field null is not given, and the fields that do not apply change nothing', async () => {
    const expected = (await post(sentences, '/v2/embed', { texts })).json;
    const nulls = ['model', 'inputs', 'images', 'input_type', 'embedding_types', 'truncate', 'output_dimension', 'max_tokens', 'priority'];
    for (const route of ['/v2/embed', '/v1/embed']) {
      for (const fields of [...nulls.map((field) => [field]), nulls]) {
        const withNulls = await post(sentences, route, { texts, embedding_types: ['float'], ...Object.fromEntries(fields.map((field) => [field, null])) });
        const where = `${route} ${fields.join(', ')}`;
        expect(withNulls.status, where).toBe(200);
        // Cohere v1 without embedding_types (null: not given) answers the vectors themselves
        const floats = route === '/v1/embed' && fields.includes('embedding_types');
        expect(withNulls.json.response_type, where).toBe(floats ? 'embeddings_floats' : 'embeddings_by_type');
        expect(withNulls.json.embeddings, where).toEqual(floats ? (expected.embeddings as { float: unknown }).float : expected.embeddings);
      }
    }
    const viaInputs = await post(sentences, '/v2/embed', { texts: null, inputs: texts.map((text) => ({ content: [{ type: 'text', text }] })) });
    expect(viaInputs.json.embeddings).toEqual(expected.embeddings);
    for (const extra of [{ input_type: 'image' }, { truncate: 'END' }, { truncate: 'NONE' }, { max_tokens: 3 }, { priority: 7 }, { images: [] }, { model: 'anything' }]) {
      const response = await post(sentences, '/v2/embed', { texts, ...extra });
      expect(response.status, JSON.stringify(extra)).toBe(200);
      expect(response.json.embeddings, JSON.stringify(extra)).toEqual(expected.embeddings);
    }
  });

  const refusals: [string, Json, string, RegExp][] = [
    ['no texts at all', { input_type: 'search_query' }, 'texts', /^Missing required parameter: 'texts'$/],
    ['empty texts', { texts: [] }, 'texts', /^'texts' must be a non-empty list of texts$/],
    ['an empty text', { texts: ['a', ''] }, 'texts', /^'texts\[1\]' must be a non-empty text, got ""$/],
    ['a text of the wrong type', { texts: ['a', 7] }, 'texts', /^'texts\[1\]' must be a non-empty text, got 7$/],
    ['texts that are not a list', { texts: 'hello' }, 'texts', /^'texts' must be a non-empty list of texts$/],
    ['texts and inputs both', { texts: ['a'], inputs: [{ content: [{ type: 'text', text: 'b' }] }] }, 'inputs', /^'texts' and 'inputs' are alternatives: send one of them$/],
    ['an image part in inputs', { inputs: [{ content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AA==' } }] }] }, 'inputs', /^'inputs\[0\]\.content\[0\]' must be \{"type": "text", "text": <a non-empty text>\}: this server embeds texts only$/],
    ['an input without content', { inputs: [{ text: 'a' }] }, 'inputs', /^'inputs\[0\]' must be \{"content": \[/],
    ['images', { images: ['data:image/png;base64,AA=='] }, 'images', /^'images' is not supported: this server embeds texts; send texts$/],
    ['int8 (no scale defined for this model)', { texts: ['a'], embedding_types: ['float', 'int8'] }, 'embedding_types', /^'embedding_types' "int8" is not supported; supported: float, base64, binary, ubinary$/],
    ['uint8', { texts: ['a'], embedding_types: ['uint8'] }, 'embedding_types', /"uint8" is not supported/],
    ['an empty list of types', { texts: ['a'], embedding_types: [] }, 'embedding_types', /^'embedding_types' must be a non-empty list of float, base64, binary, ubinary$/],
    ['embedding_types as a text', { texts: ['a'], embedding_types: 'float' }, 'embedding_types', /must be a non-empty list/],
    ['truncate START (the start would be kept)', { texts: ['a'], truncate: 'START' }, 'truncate', /^'truncate' "START" is not supported: texts are truncated at their end/],
    ['output_dimension 0', { texts: ['a'], output_dimension: 0 }, 'output_dimension', /^'output_dimension' must be an integer of at least 1, got 0$/],
    ['output_dimension wider than the model', { texts: ['a'], output_dimension: 64 }, 'output_dimension', /^'output_dimension' 64 is more than the model's 32$/],
    ['max_tokens of the wrong type', { texts: ['a'], max_tokens: 'many' }, 'max_tokens', /^'max_tokens' must be an integer of at least 1, got "many"$/],
    ['input_type of the wrong type', { texts: ['a'], input_type: 3 }, 'input_type', /^'input_type' must be a text or null$/],
    ['a field no client sends (a typo of texts)', { text: ['a'] }, 'text', /^Unrecognized request argument supplied: text$/],
    ['a body that is a list', [] as unknown as Json, null as unknown as string, /^The request body must be a JSON object$/],
  ];
  it.each(refusals)('%s: 400 naming the field, in OpenAI\'s error body', async (_name, body, param, message) => {
    for (const route of ['/v2/embed', '/v1/embed']) {
      const response = await post(sentences, route, body);
      expect(response.status, route).toBe(400);
      expect(response.contentType).toMatch(/^application\/json/);
      expect(response.json.error, route).toMatchObject({ type: 'invalid_request_error', param, code: null, message: expect.stringMatching(message) });
    }
  });

  it("a classification server has no embeddings: 404 saying why", async () => {
    const response = await post(classifier, '/v2/embed', { texts: ['a'] });
    expect(response.status).toBe(404);
    expect(response.json.error).toMatchObject({ message: 'This server serves a sequence_classification model, which gives no embeddings; /v2/embed is served by embedding and sentence_embedding models' });
  });
});

describe('POST /v1/embed', () => {
  it("without embedding_types: Cohere v1's embeddings_floats, the vectors themselves", async () => {
    const response = await post(sentences, '/v1/embed', { texts, model: 'embed-english-v3.0', input_type: 'search_document', truncate: 'END' });
    expect(response.status).toBe(200);
    expect(response.json).toMatchObject({ texts, meta: { api_version: { version: '1' }, billed_units: { input_tokens: tokenCount(texts) } }, response_type: 'embeddings_floats' });
    expect(response.json.embeddings).toEqual(await openAiVectors(texts));
  });

  it('with embedding_types: embeddings by type, as v2', async () => {
    const response = await post(sentences, '/v1/embed', { texts, embedding_types: ['float', 'binary'] });
    expect(response.json).toMatchObject({ response_type: 'embeddings_by_type', meta: { api_version: { version: '1' } } });
    const floats = await openAiVectors(texts);
    expect(response.json.embeddings).toEqual({ float: floats, binary: floats.map((vector) => signBits(vector).map((byte) => byte - 128)) });
  });
});
