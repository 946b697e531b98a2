import net from 'node:net';
import { Ajv } from 'ajv';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBuildConfig, type ModelType } from '../../src/encoder/config.ts';
import { ConfigError, InputError, InternalError } from '../../src/encoder/errors.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { Predictor } from '../../src/encoder/predictor.ts';
import {
  MODEL_METADATA_SCHEMA,
  RESPONSE_SCHEMAS,
  type ModelMetadata,
  type PredictResponse,
  type SequenceClassificationResponse,
} from '../../src/encoder/schemas.ts';
import { createHttpApp } from '../../src/serve/http/index.ts';
import { serverInfo } from '../../src/serve/server-info.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { stringifyJson, type JsonOf } from '../../src/shared/float32-json.ts';
import { stubServingLimits } from '../helpers/predict-responses.ts';

const MODEL_TYPES = ['embedding', 'sequence_classification', 'token_classification'] as const;
const LABELS: Record<ModelType, string[] | undefined> = {
  embedding: undefined,
  sentence_embedding: undefined,
  sequence_classification: ['negative', 'positive', 'neutral'],
  token_classification: ['O', 'B-PER', 'I-PER'],
};
const INFO = serverInfo({ target: 'x86_64-unknown-linux-gnu' });
const ajv = new Ajv();

const apps: FastifyInstance[] = [];
const pipelines: PredictPipeline[] = [];
const served = {} as Record<ModelType, { url: string; pipeline: PredictPipeline }>;

/** Listens on 127.0.0.1, port 0; closed after the tests. */
async function listen(predictor: Predictor, bodyLimitBytes = 1024 * 1024): Promise<string> {
  const app = await createHttpApp(predictor, { bodyLimitBytes, serverInfo: INFO });
  apps.push(app);
  return app.listen({ host: '127.0.0.1', port: 0 });
}

function postJson(url: string, body: unknown): Promise<Response> {
  return fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

/** A predictor whose predict always fails with the given error: the 500 rows of the error table. */
function failingPredictor(error: unknown): Predictor {
  return {
    modelId: 'stub',
    modelType: 'sequence_classification',
    metadata: () => ({ model_id: 'stub', model_type: 'sequence_classification', id2label: { 0: 'no', 1: 'yes' } }),
    predict: () => Promise.reject(error),
    embed: () => Promise.reject(error),
    rerank: () => Promise.reject(error),
    tokenize: () => Promise.reject(error),
    decode: () => Promise.reject(error),
    servingLimits: stubServingLimits,
  };
}

async function expectPlainText(response: Response, status: number, body: string | RegExp): Promise<void> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toBe('text/plain; charset=utf-8');
  const text = await response.text();
  if (typeof body === 'string') expect(text).toBe(body);
  else expect(text).toMatch(body);
}

beforeAll(async () => {
  await Promise.all(
    MODEL_TYPES.map(async (modelType) => {
      const dir = await generateTinyModel({ modelType, ...(LABELS[modelType] ? { labels: LABELS[modelType] } : {}) });
      const config = parseBuildConfig(`encoder:\n  name: http-${modelType}\n  path: ${dir}\n  model_type: ${modelType}\n`, { baseDir: dir });
      const pipeline = await PredictPipeline.load(readModelPackage(config));
      pipelines.push(pipeline);
      served[modelType] = { url: await listen(pipeline), pipeline };
    }),
  );
});

afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
  await Promise.all(pipelines.map((pipeline) => pipeline.close()));
});

const validRequest = (modelType: ModelType, inputs: string[]) => (modelType === 'embedding' ? { inputs, normalize: true } : { inputs });

describe.each(MODEL_TYPES)('HTTP routes of a %s model', (modelType) => {
  it('GET /health answers the JSON string "OK!"', async () => {
    const response = await fetch(`${served[modelType].url}/health`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await response.json()).toBe('OK!');
  });

  it('GET /model answers the model metadata', async () => {
    const response = await fetch(`${served[modelType].url}/model`);
    expect(response.status).toBe(200);
    const metadata = (await response.json()) as ModelMetadata;
    expect(ajv.validate(MODEL_METADATA_SCHEMA, metadata)).toBe(true);
    expect(metadata).toEqual(served[modelType].pipeline.metadata());
    expect(metadata.model_id).toBe(`http-${modelType}`);
    if (modelType === 'embedding') expect(metadata.id2label).toBeUndefined();
    else expect(Object.values(metadata.id2label!)).toEqual(LABELS[modelType]);
  });

  it('POST /predict answers the response of the model type, one result per input, metadata echoed', async () => {
    const request = { ...validRequest(modelType, ['the cat sat on the mat', 'hello there']), metadata: { request_id: '7' } };
    const response = await postJson(served[modelType].url, request);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const text = await response.text();
    const body = JSON.parse(text) as JsonOf<PredictResponse>;
    expect(ajv.validate(RESPONSE_SCHEMAS[modelType], body), ajv.errorsText()).toBe(true);
    expect(body.results).toHaveLength(2);
    expect(body.model_id).toBe(`http-${modelType}`);
    expect(body.metadata).toEqual({ request_id: '7' });
    // what the HTTP layer adds is transport only: the body is the predictor's response for the same request, its
    // float32 outputs written as the shortest decimals that read back as the same float32 values
    const predicted = await served[modelType].pipeline.predict(request);
    expect(text).toBe(stringifyJson(predicted));
    // and in ECMAScript's number layout, so a client re-serializing the body gets the same text
    expect(JSON.stringify(body)).toBe(text);
  });

  it('POST /predict answers 422 text/plain with the reason for every invalid request', async () => {
    const { url } = served[modelType];
    const base = validRequest(modelType, ['hello']);
    const cases: [unknown, string][] = [
      [{ ...base, inputs: [] }, 'Invalid input: inputs must not be empty'],
      [{ ...base, inputs: ['ok', ''] }, 'Invalid input: inputs[1] is an empty string'],
      [
        { ...base, inputs: ['ok', 3] },
        modelType === 'sequence_classification'
          ? 'Invalid input: inputs[1] must be a non-empty text or a pair [text, text_pair] of non-empty texts'
          : 'Invalid input: inputs[1] must be a string, got number',
      ],
      ...((modelType === 'sequence_classification'
        ? [
            [{ inputs: [['a', 'b', 'c']] }, 'Invalid input: inputs[0] must be a non-empty text or a pair [text, text_pair] of non-empty texts'],
            [{ inputs: [['a', '']] }, 'Invalid input: inputs[0][1] is an empty string'],
          ]
        : []) as [unknown, string][]),
      // (on a sequence_classification model a single text is text-embeddings-inference's /predict body, answered as TEI does)
      ...((modelType === 'sequence_classification' ? [] : [[{ ...base, inputs: 'hello' }, 'Invalid input: inputs must be a list, got string']]) as [unknown, string][]),
      [{ ...base, top_k: 3 }, 'Invalid input: unknown field "top_k"'],
      [{ ...base, metadata: { n: 1 } }, 'Invalid input: metadata.n must be a string, got number'],
      [modelType === 'embedding' ? { normalize: true } : {}, 'Invalid input: missing required field "inputs"'],
      [['hello'], 'Invalid input: request body must be a JSON object, got a list'],
      [null, 'Invalid input: request body must be a JSON object, got null'],
      ...((modelType === 'embedding'
        ? [
            [{ inputs: ['hello'], normalize: 'yes' }, 'Invalid input: normalize must be a boolean, got string'],
          ]
        : [[{ inputs: ['hello'], normalize: true }, 'Invalid input: unknown field "normalize"']]) as [unknown, string][]),
    ];
    for (const [body, message] of cases) await expectPlainText(await postJson(url, body), 422, message);
  });
});

describe('HTTP errors', () => {
  it('answers 500 text/plain with the message of an InternalError or a ConfigError', async () => {
    for (const error of [new InternalError('onnxruntime: the run failed'), new ConfigError('transform: Postprocess is not defined')]) {
      const url = await listen(failingPredictor(error));
      await expectPlainText(await postJson(url, { inputs: ['x'] }), 500, error.message);
    }
  });

  it('answers 500 text/plain for an unexpected failure, and keeps serving', async () => {
    const url = await listen(failingPredictor(new TypeError('undefined is not a function')));
    await expectPlainText(await postJson(url, { inputs: ['x'] }), 500, 'Internal error: undefined is not a function');
    expect((await fetch(`${url}/health`)).status).toBe(200);
  });

  it('answers 422, not 500, for an InputError whatever predictor raises it', async () => {
    const url = await listen(failingPredictor(new InputError('inputs[0] is too long')));
    await expectPlainText(await postJson(url, { inputs: ['x'] }), 422, 'Invalid input: inputs[0] is too long');
  });

  it('answers 400 text/plain with the parser reason for malformed JSON, and for an empty JSON body', async () => {
    const { url } = served.sequence_classification;
    const post = (body: string) => fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const trailingComma = '{"inputs": ["a",]}';
    const reason = (() => {
      try {
        JSON.parse(trailingComma);
      } catch (error) {
        return (error as Error).message;
      }
    })();
    await expectPlainText(await post(trailingComma), 400, `Invalid JSON body: ${reason}`);
    // a long body is quoted around the fault only, never echoed whole
    const long = await post(`{"inputs": ["${'a'.repeat(10_000)}",]}`);
    expect(long.status).toBe(400);
    expect((await long.text()).length).toBeLessThan(200);
    await expectPlainText(await post('{"inputs": '), 400, 'Invalid JSON body: Unexpected end of JSON input');
    await expectPlainText(await post(''), 400, 'Invalid JSON body: Unexpected end of JSON input');
  });

  it('accepts application/json with a charset parameter', async () => {
    const { url } = served.sequence_classification;
    const response = await fetch(`${url}/predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: JSON.stringify({ inputs: ['hello'] }),
    });
    expect(response.status).toBe(200);
  });

  it('answers 415 text/plain for a body that is not application/json', async () => {
    const { url } = served.sequence_classification;
    const body = JSON.stringify({ inputs: ['hello'] });
    for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const response = await fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': contentType }, body });
      await expectPlainText(response, 415, `Unsupported Media Type: "${contentType}"; send application/json`);
    }
    // a body with no Content-Type at all (fetch adds text/plain to a string body, so send bytes)
    const response = await fetch(`${url}/predict`, { method: 'POST', body: new TextEncoder().encode(body) });
    await expectPlainText(response, 415, 'Unsupported Media Type: a body without Content-Type; send application/json');
  });

  it('answers 422 for a POST without a body: there is no request to run', async () => {
    const response = await fetch(`${served.sequence_classification.url}/predict`, { method: 'POST' });
    await expectPlainText(response, 422, 'Invalid input: request body must be a JSON object, got undefined');
  });

  it('answers 413 text/plain above bodyLimitBytes and accepts a body of exactly the limit', async () => {
    const limit = 64;
    const url = await listen(served.sequence_classification.pipeline, limit);
    const exact = JSON.stringify({ inputs: ['x'.repeat(limit - '{"inputs":[""]}'.length)] });
    expect(exact).toHaveLength(limit);
    expect((await postJson(url, JSON.parse(exact))).status).toBe(200);
    const over = JSON.stringify({ inputs: ['x'.repeat(limit)] });
    await expectPlainText(await postJson(url, JSON.parse(over)), 413, `Request body is too large: the limit is ${limit} bytes`);
    // also when the size is not announced up front (chunked)
    const chunked = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(over));
        controller.close();
      },
    });
    const response = await fetch(`${url}/predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: chunked,
      duplex: 'half',
    } as RequestInit);
    await expectPlainText(response, 413, `Request body is too large: the limit is ${limit} bytes`);
  });

  it('answers 404 text/plain for an unknown path and 405 with Allow for a known path under another method', async () => {
    const { url } = served.embedding;
    await expectPlainText(await fetch(`${url}/nope`), 404, 'Not Found: GET /nope');
    await expectPlainText(await fetch(`${url}/predict/`, { method: 'POST' }), 404, 'Not Found: POST /predict/');
    const get = await fetch(`${url}/predict?x=1`);
    expect(get.headers.get('allow')).toBe('POST');
    await expectPlainText(get, 405, 'Method Not Allowed: GET /predict; allowed: POST');
    const del = await fetch(`${url}/health`, { method: 'DELETE' });
    expect(del.headers.get('allow')).toBe('GET, HEAD');
    await expectPlainText(del, 405, 'Method Not Allowed: DELETE /health; allowed: GET, HEAD');
    expect((await fetch(`${url}/health`, { method: 'HEAD' })).status).toBe(200);
  });

  it('answers 400 text/plain for a URL that does not decode', async () => {
    await expectPlainText(await fetch(`${served.embedding.url}/%zz`), 400, "'/%zz' is not a valid url component");
  });

  it('answers 400 and 431 text/plain, not JSON, to a request that is not HTTP or has too large headers', async () => {
    const { port } = new URL(served.embedding.url);
    const exchange = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(request));
        let data = '';
        socket.on('data', (chunk) => (data += chunk));
        socket.on('close', () => resolve(data));
        // the server closes as soon as it has answered; unread request bytes make that a reset on our side
        socket.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' && data ? resolve(data) : reject(error)));
      });
    const garbage = await exchange('NOT HTTP AT ALL\r\n\r\n');
    expect(garbage).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(garbage).toContain('Content-Type: text/plain; charset=utf-8');
    expect(garbage.split('\r\n\r\n')[1]).toBe('Bad Request: the request is not valid HTTP/1.1');
    const hugeHeaders = await exchange(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`);
    expect(hugeHeaders).toMatch(/^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
    expect(hugeHeaders.split('\r\n\r\n')[1]).toBe('Request Header Fields Too Large: the request headers exceed the limit');
  });
});

describe('HTTP under concurrent requests', () => {
  it('answers each of many concurrent requests with the result of its own inputs', async () => {
    const { url, pipeline } = served.sequence_classification;
    const texts = Array.from({ length: 16 }, (_, i) => `request number ${i} ${'word '.repeat(i % 5)}`.trim());
    const responses = await Promise.all(texts.map((text) => postJson(url, { inputs: [text], metadata: { i: text } })));
    for (const [i, response] of responses.entries()) {
      expect(response.status).toBe(200);
      const body = (await response.json()) as JsonOf<SequenceClassificationResponse>;
      expect(body.metadata).toEqual({ i: texts[i] });
      const alone = (await pipeline.predict({ inputs: [texts[i]] })) as SequenceClassificationResponse;
      expect(body.results[0].predicted_index).toBe(alone.results[0].predicted_index);
      body.results[0].logits.forEach((logit, k) => expect(logit).toBeCloseTo(alone.results[0].logits[k], 4));
    }
  });
});
