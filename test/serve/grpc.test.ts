import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { fromJSON, loadSync, type Options } from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import sharp from 'sharp';
import 'protobufjs/ext/descriptor.js'; // adds Root.fromDescriptor
import descriptorJson from 'protobufjs/google/protobuf/descriptor.json' with { type: 'json' };
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBuildConfig, type ModelType } from '../../src/encoder/config.ts';
import { ConfigError, InputError, InternalError } from '../../src/encoder/errors.ts';
import { readImageModelPackage } from '../../src/encoder/image-model-package.ts';
import { ImagePipeline } from '../../src/encoder/image-pipeline.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { Predictor } from '../../src/encoder/predictor.ts';
import type { ModelMetadata, PredictResponse } from '../../src/encoder/schemas.ts';
import { createImageGrpcServer } from '../../src/serve/grpc/image-services.ts';
import { createGrpcServer, type GrpcFrontEnd } from '../../src/serve/grpc/index.ts';
import type { JsonOf } from '../../src/shared/float32-json.ts';
import { TINY_VIT, writeVitModelDirectory } from '../../scripts/model-generator/index.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { predictResponseOf, stubServingLimits } from '../helpers/predict-responses.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

const protoText = readFileSync(path.join(repoRoot, 'proto', 'encoder.proto'), 'utf8');
const SERVICE = {
  embedding: 'Embedding',
  sentence_embedding: 'SentenceEmbedding',
  sequence_classification: 'SequenceClassification',
  token_classification: 'TokenClassification',
} as const satisfies Record<ModelType, string>;
const MODEL_TYPES = Object.keys(SERVICE) as ModelType[];
const LABELS: Record<ModelType, string[] | undefined> = {
  embedding: undefined,
  sentence_embedding: undefined,
  sequence_classification: ['negative', 'positive', 'neutral'],
  token_classification: ['O', 'B-PER', 'I-PER'],
};
const TEXTS = ['the cat sat on the mat', 'hi', 'a much longer sentence with quite a few more words in it', 'Zoë naïve café'];
const DEADLINE_MS = 15_000;

// ---- clients: built from the same proto file, independently of the server's loading code ----

/** What a grpc-js user gets with the usual options: original field names, enums by name, defaults filled in. */
const CLIENT_OPTIONS: Options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: false };

function encoderPackage(): grpc.GrpcObject {
  const { root } = protobuf.parse(protoText, { keepCase: true });
  return grpc.loadPackageDefinition(fromJSON(root.toJSON() as Parameters<typeof fromJSON>[0], CLIENT_OPTIONS)).encoder as grpc.GrpcObject;
}

/** Health and reflection clients from the .proto files the npm packages ship, i.e. the canonical definitions. */
function packageFromFile(file: string): grpc.GrpcObject {
  return grpc.loadPackageDefinition(loadSync(file, CLIENT_OPTIONS));
}

type Callback = (error: grpc.ServiceError | null, value: unknown) => void;

function unary<T>(client: grpc.Client, method: string, request: object): Promise<T> {
  const call = (client as unknown as Record<string, (req: object, options: grpc.CallOptions, cb: Callback) => void>)[method];
  return new Promise((resolve, reject) => {
    call.call(client, request, { deadline: Date.now() + DEADLINE_MS }, (error, value) => (error ? reject(error) : resolve(value as T)));
  });
}

async function expectStatus(promise: Promise<unknown>, code: grpc.status, details?: string | RegExp): Promise<grpc.ServiceError> {
  const error = (await promise.then(
    () => expect.fail(`expected status ${grpc.status[code]}`),
    (e: unknown) => e,
  )) as grpc.ServiceError;
  expect(grpc.status[error.code]).toBe(grpc.status[code]);
  if (typeof details === 'string') expect(error.details).toBe(details);
  else if (details) expect(error.details).toMatch(details);
  return error;
}

// ---- servers ----

const frontEnds: GrpcFrontEnd[] = [];
const clients: grpc.Client[] = [];
const pipelines: { close(): Promise<void> }[] = [];

async function serve(predictor: Predictor, maxMessageBytes?: number): Promise<{ frontEnd: GrpcFrontEnd; address: string }> {
  const frontEnd = createGrpcServer(predictor, { protoText, maxMessageBytes });
  frontEnds.push(frontEnd);
  const port = await new Promise<number>((resolve, reject) =>
    frontEnd.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  return { frontEnd, address: `127.0.0.1:${port}` };
}

function clientOf(pkg: grpc.GrpcObject, service: string, address: string): grpc.Client {
  const Client = pkg[service] as grpc.ServiceClientConstructor;
  const client = new Client(address, grpc.credentials.createInsecure());
  clients.push(client);
  return client;
}

function shutdown(server: grpc.Server): Promise<void> {
  return new Promise((resolve) => {
    const force = setTimeout(() => server.forceShutdown(), 5_000);
    server.tryShutdown(() => {
      clearTimeout(force);
      resolve();
    });
  });
}

afterAll(async () => {
  for (const client of clients) client.close();
  await Promise.all(frontEnds.map((frontEnd) => shutdown(frontEnd.server)));
  await Promise.all(pipelines.map((pipeline) => pipeline.close()));
});

/** A predictor that records the bodies it gets and answers as told. */
class StubPredictor implements Predictor {
  readonly modelId = 'stub-model';
  readonly bodies: unknown[] = [];
  readonly modelType: ModelType;
  readonly #answer: (body: unknown) => JsonOf<PredictResponse>;
  readonly #metadata: ModelMetadata;

  constructor(modelType: ModelType, answer: (body: unknown) => JsonOf<PredictResponse>, metadata?: ModelMetadata) {
    this.modelType = modelType;
    this.#answer = answer;
    this.#metadata = metadata ?? { model_id: this.modelId, model_type: modelType };
  }

  metadata(): ModelMetadata {
    return this.#metadata;
  }

  async predict(body: unknown): Promise<PredictResponse> {
    this.bodies.push(structuredClone(body));
    return predictResponseOf(this.#answer(body));
  }

  tokenize(): never {
    throw new Error('unused');
  }
  decode(): never {
    throw new Error('unused');
  }
  servingLimits() {
    return stubServingLimits();
  }

  embed(): Promise<never> {
    return Promise.reject(new InputError('not served by this stub'));
  }

  rerank(): Promise<never> {
    return Promise.reject(new InputError('not served by this stub'));
  }
}

/**
 * `actual` equals `expected` with every number of `expected` seen through float32: exactly for numbers handed
 * over as they are, within `tolerance` (relative, at least absolute) when the two come from different model runs.
 */
function expectFloat32Equal(actual: unknown, expected: unknown, where = 'response', tolerance = 0): void {
  if (typeof expected === 'number') {
    expect(typeof actual, where).toBe('number');
    const want = Math.fround(expected);
    expect(Math.abs((actual as number) - want), `${where}: ${actual} vs ${expected}`).toBeLessThanOrEqual(tolerance * Math.max(1, Math.abs(want)));
  } else if (Array.isArray(expected) || expected instanceof Float32Array) {
    expect(Array.isArray(actual), where).toBe(true);
    expect((actual as unknown[]).length, `${where}.length`).toBe(expected.length);
    Array.from(expected as ArrayLike<unknown>).forEach((item, i) => expectFloat32Equal((actual as unknown[])[i], item, `${where}[${i}]`, tolerance));
  } else if (expected !== null && typeof expected === 'object') {
    expect(Object.keys(actual as object).sort(), `${where} keys`).toEqual(Object.keys(expected).sort());
    for (const [key, value] of Object.entries(expected)) expectFloat32Equal((actual as Record<string, unknown>)[key], value, `${where}.${key}`, tolerance);
  } else {
    expect(actual, where).toEqual(expected);
  }
}

// ---- the encoder services over generated models ----

describe('encoder services over a predict pipeline', () => {
  const served = {} as Record<ModelType, { pipeline: PredictPipeline; address: string; frontEnd: GrpcFrontEnd }>;
  let pkg: grpc.GrpcObject;

  beforeAll(async () => {
    pkg = encoderPackage();
    await Promise.all(
      MODEL_TYPES.map(async (modelType) => {
        const dir = await generateTinyModel({ modelType, labels: LABELS[modelType] });
        const config = parseBuildConfig(`encoder:\n  name: grpc-${modelType}\n  path: ${dir}\n  model_type: ${modelType}\n`, { baseDir: dir });
        const pipeline = await PredictPipeline.load(readModelPackage(config));
        pipelines.push(pipeline);
        served[modelType] = { pipeline, ...(await serve(pipeline)) };
      }),
    );
  });

  it.each(MODEL_TYPES)('%s: Predict answers what predictor.predict answers, metadata echoed', async (modelType) => {
    const { pipeline, address } = served[modelType];
    const client = clientOf(pkg, SERVICE[modelType], address);
    const metadata = { request_id: 'r-17', 'with space': 'ü ✓' };
    const body = modelType === 'embedding' ? { inputs: TEXTS, normalize: true, metadata } : { inputs: TEXTS, metadata };
    // One after the other, so that each is a run of its own: same inputs, same run, same numbers.
    const viaGrpc = await unary<PredictResponse>(client, 'Predict', body);
    const direct = await pipeline.predict(body);
    expect(direct.metadata).toEqual(metadata);
    expect(viaGrpc.model_id).toBe(`grpc-${modelType}`);
    expect(viaGrpc.results).toHaveLength(TEXTS.length);
    expectFloat32Equal(viaGrpc, direct, 'response', 1e-6);
  });

  it('embedding: normalize false reaches the predictor (raw vectors), true gives unit vectors', async () => {
    const { pipeline, address } = served.embedding;
    const client = clientOf(pkg, 'Embedding', address);
    const raw = await unary<PredictResponse & { results: { embeddings: { embedding: number[] }[] }[] }>(client, 'Predict', { inputs: ['hello world'] });
    expectFloat32Equal(raw, { ...(await pipeline.predict({ inputs: ['hello world'], normalize: false })), metadata: {} }, 'response', 1e-6);
    expect(raw.metadata).toEqual({});
    expect(Math.hypot(...raw.results[0].embeddings[0].embedding)).not.toBeCloseTo(1, 3);
    const unit = await unary<typeof raw>(client, 'Predict', { inputs: ['hello world'], normalize: true });
    for (const { embedding } of unit.results[0].embeddings) expect(Math.hypot(...embedding)).toBeCloseTo(1, 5);
  });

  it('sequence_classification: predicted_label from id2label; scores sum to 1', async () => {
    const client = clientOf(pkg, 'SequenceClassification', served.sequence_classification.address);
    const response = await unary<{ results: { scores: number[]; predicted_index: number; predicted_label?: string }[] }>(client, 'Predict', {
      inputs: ['good', 'bad'],
    });
    for (const result of response.results) {
      expect(result.scores.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5);
      expect(result.predicted_label).toBe(LABELS.sequence_classification![result.predicted_index]);
    }
  });

  it('sentence_embedding: one vector per input; normalize unset is the model default, false and true honoured', async () => {
    const { pipeline, address } = served.sentence_embedding;
    const client = clientOf(pkg, 'SentenceEmbedding', address);
    type Vectors = { results: { embedding: number[] }[]; model_id: string };
    const unset = await unary<Vectors>(client, 'Predict', { inputs: ['hello world', 'good morning'] });
    expect(unset.results).toHaveLength(2);
    expectFloat32Equal(unset, { ...(await pipeline.predict({ inputs: ['hello world', 'good morning'] })), metadata: {} }, 'response', 1e-6);
    for (const { embedding } of unset.results) expect(Math.hypot(...embedding)).toBeCloseTo(1, 5); // the generated layout normalises
    const raw = await unary<Vectors>(client, 'Predict', { inputs: ['hello world'], normalize: false });
    expect(Math.hypot(...raw.results[0].embedding)).not.toBeCloseTo(1, 3);
    const unit = await unary<Vectors>(client, 'Predict', { inputs: ['hello world'], normalize: true });
    expectFloat32Equal(unit.results[0], unset.results[0], 'normalize true', 1e-6);
  });

  it('sentence_embedding: normalize unset follows a model whose layout does not normalise (no Normalize module)', async () => {
    const dir = await generateTinyModel({ modelType: 'sentence_embedding', normalize: false });
    const config = parseBuildConfig(`encoder:\n  name: grpc-raw-vectors\n  path: ${dir}\n  model_type: sentence_embedding\n`, { baseDir: dir });
    const pipeline = await PredictPipeline.load(readModelPackage(config));
    pipelines.push(pipeline);
    expect(pipeline.metadata()).toMatchObject({ normalize: false });
    const client = clientOf(pkg, 'SentenceEmbedding', (await serve(pipeline)).address);
    type Vectors = { results: { embedding: number[] }[] };
    const unset = await unary<Vectors>(client, 'Predict', { inputs: ['hello world'] });
    expectFloat32Equal(unset, { ...(await pipeline.predict({ inputs: ['hello world'], normalize: false })), metadata: {} }, 'response', 1e-6);
    const length = Math.hypot(...unset.results[0].embedding);
    expect(length).not.toBeCloseTo(1, 3);
    const unit = await unary<Vectors>(client, 'Predict', { inputs: ['hello world'], normalize: true });
    expectFloat32Equal(unit.results[0].embedding, unset.results[0].embedding.map((value) => value / length), 'normalize true', 1e-5);
    const metadata = await unary<object>(client, 'GetModelMetadata', {});
    expect(metadata).toEqual({ model_id: 'grpc-raw-vectors', model_type: 'SENTENCE_EMBEDDING', id2label: {}, quantization: '' });
  });

  it('sequence_classification: pairs are tokenized together, as HTTP [text, text_pair] items; inputs and pairs together are INVALID_ARGUMENT', async () => {
    const { pipeline, address } = served.sequence_classification;
    const client = clientOf(pkg, 'SequenceClassification', address);
    const pairs = [
      { text: 'what is the capital of france', text_pair: 'paris is the capital of france' },
      { text: 'hello', text_pair: 'a long document about something else entirely' },
    ];
    const viaGrpc = await unary<PredictResponse>(client, 'Predict', { pairs });
    const direct = await pipeline.predict({ inputs: pairs.map((pair) => [pair.text, pair.text_pair]) });
    expectFloat32Equal(viaGrpc, { ...direct, metadata: {} }, 'response', 1e-6);
    const single = await pipeline.predict({ inputs: [pairs[0].text] });
    expect(single.results[0]).not.toEqual(direct.results[0]);
    await expectStatus(unary(client, 'Predict', { inputs: ['x'], pairs }), grpc.status.INVALID_ARGUMENT, 'Invalid input: send inputs or pairs, not both');
    await expectStatus(unary(client, 'Predict', { pairs: [{ text: 'x', text_pair: '' }] }), grpc.status.INVALID_ARGUMENT, 'Invalid input: inputs[0][1] is an empty string');
  });

  it('answers concurrent calls each with its own result', async () => {
    const { pipeline, address } = served.token_classification;
    const client = clientOf(pkg, 'TokenClassification', address);
    const calls = TEXTS.flatMap((text) => [text, `${text} again`]).map((text, i) => ({ inputs: [text], metadata: { call: String(i) } }));
    const responses = await Promise.all(calls.map((body) => unary<PredictResponse>(client, 'Predict', body)));
    // Concurrent calls may share a padded model run (batching across requests): equal up to that run's rounding.
    for (const [i, body] of calls.entries()) expectFloat32Equal(responses[i], await pipeline.predict(body), `call ${i}`, 1e-4);
  });

  it.each(MODEL_TYPES)('%s: GetModelMetadata answers metadata() with the ModelType enum and id2label by index', async (modelType) => {
    const { pipeline, address } = served[modelType];
    const response = await unary<object>(clientOf(pkg, SERVICE[modelType], address), 'GetModelMetadata', {});
    const metadata = pipeline.metadata();
    const enumName = { embedding: 'EMBEDDING', sentence_embedding: 'SENTENCE_EMBEDDING', sequence_classification: 'SEQUENCE_CLASSIFICATION', token_classification: 'TOKEN_CLASSIFICATION' };
    expect(response).toEqual({ model_id: metadata.model_id, model_type: enumName[modelType], id2label: metadata.id2label ?? {}, quantization: '' });
    const labels = LABELS[modelType];
    if (labels) expect(response).toMatchObject({ id2label: Object.fromEntries(labels.map((l, i) => [String(i), l])) });
  });

  it.each(MODEL_TYPES)('%s: the other services, the image ones too, answer UNIMPLEMENTED naming the served model type', async (modelType) => {
    const { address } = served[modelType];
    for (const other of [...MODEL_TYPES.filter((type) => type !== modelType).map((type) => SERVICE[type]), 'ImageClassification', 'ImageEmbedding']) {
      const client = clientOf(pkg, other, address);
      const details = `encoder.${other} is not served: this server serves a ${modelType} model; call encoder.${SERVICE[modelType]}`;
      const request = other.startsWith('Image') ? { inputs: [{ image: Buffer.from('a picture') }] } : { inputs: ['hello'] };
      await expectStatus(unary(client, 'Predict', request), grpc.status.UNIMPLEMENTED, details);
      await expectStatus(unary(client, 'GetModelMetadata', {}), grpc.status.UNIMPLEMENTED, details);
    }
  });

  it.each(MODEL_TYPES)('%s: empty inputs and an empty string are INVALID_ARGUMENT with the predictor message', async (modelType) => {
    const { pipeline, address } = served[modelType];
    const client = clientOf(pkg, SERVICE[modelType], address);
    for (const inputs of [[], ['fine', ''], ['']]) {
      const body = modelType === 'embedding' ? { inputs, normalize: false } : { inputs };
      const predictorError = await pipeline.predict(body).then(() => expect.fail('predictor accepted the body'), (e: unknown) => e);
      expect(predictorError).toBeInstanceOf(InputError);
      const error = await expectStatus(unary(client, 'Predict', { inputs }), grpc.status.INVALID_ARGUMENT, (predictorError as Error).message);
      expect(error.details).toMatch(/^Invalid input: inputs/);
    }
  });
});

// ---- translation and errors, with stub predictors ----

describe('translation between messages and predictor bodies', () => {
  let pkg: grpc.GrpcObject;
  beforeAll(() => {
    pkg = encoderPackage();
  });

  it('passes inputs, normalize and non-empty metadata; an empty metadata map means no metadata', async () => {
    const stub = new StubPredictor('embedding', () => ({ results: [], model_id: 'stub-model' }));
    const client = clientOf(pkg, 'Embedding', (await serve(stub)).address);
    await unary(client, 'Predict', { inputs: ['a', 'b'], normalize: true, metadata: { k: 'v' } });
    await unary(client, 'Predict', { inputs: ['c'], metadata: {} });
    expect(stub.bodies).toEqual([{ inputs: ['a', 'b'], normalize: true, metadata: { k: 'v' } }, { inputs: ['c'], normalize: false }]);

    const classifier = new StubPredictor('sequence_classification', () => ({ results: [], model_id: 'stub-model' }));
    const classifierClient = clientOf(pkg, 'SequenceClassification', (await serve(classifier)).address);
    await unary(classifierClient, 'Predict', { inputs: ['x'], metadata: { a: '1', b: '' } });
    expect(classifier.bodies).toEqual([{ inputs: ['x'], metadata: { a: '1', b: '' } }]);
  });

  it('takes a message up to maxMessageBytes (above the 4 MiB default of grpc-js), refuses a larger one with RESOURCE_EXHAUSTED', async () => {
    const stub = new StubPredictor('embedding', () => ({ results: [], model_id: 'stub-model' }));
    const client = clientOf(pkg, 'Embedding', (await serve(stub, 6 * 2 ** 20)).address);
    const large = 'a'.repeat(5 * 2 ** 20);
    await unary(client, 'Predict', { inputs: [large] });
    expect((stub.bodies[0] as { inputs: string[] }).inputs[0]).toHaveLength(large.length);
    await expectStatus(unary(client, 'Predict', { inputs: ['a'.repeat(6 * 2 ** 20)] }), grpc.status.RESOURCE_EXHAUSTED);
    expect(stub.bodies).toHaveLength(1);
  });

  it('sentence_embedding: normalize unset stays absent (the model decides), false and true are passed on', async () => {
    const stub = new StubPredictor('sentence_embedding', () => ({ results: [], model_id: 'stub-model' }));
    const client = clientOf(pkg, 'SentenceEmbedding', (await serve(stub)).address);
    await unary(client, 'Predict', { inputs: ['a'] });
    await unary(client, 'Predict', { inputs: ['b'], normalize: false });
    await unary(client, 'Predict', { inputs: ['c'], normalize: true, metadata: { k: 'v' } });
    expect(stub.bodies).toEqual([{ inputs: ['a'] }, { inputs: ['b'], normalize: false }, { inputs: ['c'], normalize: true, metadata: { k: 'v' } }]);
  });

  it('sequence_classification: pairs become [text, text_pair] items; inputs and pairs together never reach the predictor', async () => {
    const stub = new StubPredictor('sequence_classification', () => ({ results: [], model_id: 'stub-model' }));
    const client = clientOf(pkg, 'SequenceClassification', (await serve(stub)).address);
    await unary(client, 'Predict', { pairs: [{ text: 'q', text_pair: 'd1' }, { text: 'q', text_pair: 'd2' }], metadata: { k: 'v' } });
    await expectStatus(unary(client, 'Predict', { inputs: ['x'], pairs: [{ text: 'q', text_pair: 'd' }] }), grpc.status.INVALID_ARGUMENT, 'Invalid input: send inputs or pairs, not both');
    expect(stub.bodies).toEqual([{ inputs: [['q', 'd1'], ['q', 'd2']], metadata: { k: 'v' } }]);
  });

  it('keeps predicted_label absent when the model has no labels, and exact float32 values', async () => {
    const stub = new StubPredictor('sequence_classification', () => ({
      results: [
        { logits: [0.1, -2.5e-8, 3.4e38], scores: [1 / 3, 2 / 3, 0], predicted_index: 1 },
        { logits: [1], scores: [1], predicted_index: 0, predicted_label: '' },
      ],
      model_id: 'stub-model',
    }));
    const client = clientOf(pkg, 'SequenceClassification', (await serve(stub)).address);
    const response = await unary<{ results: Record<string, unknown>[] }>(client, 'Predict', { inputs: ['x'] });
    expect(response.results[0]).toEqual({ logits: [0.1, -2.5e-8, 3.4e38].map(Math.fround), scores: [1 / 3, 2 / 3, 0].map(Math.fround), predicted_index: 1 });
    expect('predicted_label' in response.results[0]).toBe(false);
    // proto3 `optional`: an empty label is still sent, unlike a plain string field
    expect(response.results[1]).toEqual({ logits: [1], scores: [1], predicted_index: 0, predicted_label: '' });
  });

  it('maps InternalError and ConfigError to INTERNAL, InputError to INVALID_ARGUMENT, with their messages', async () => {
    const failures: [Error, grpc.status][] = [
      [new InternalError('onnxruntime run failed: out of memory'), grpc.status.INTERNAL],
      [new ConfigError('transform: Postprocess is not a function'), grpc.status.INTERNAL],
      [new InputError('inputs/0 is too long'), grpc.status.INVALID_ARGUMENT],
      [new TypeError('something unexpected'), grpc.status.INTERNAL],
    ];
    let next = 0;
    const stub = new StubPredictor('token_classification', () => {
      throw failures[next++][0];
    });
    const client = clientOf(pkg, 'TokenClassification', (await serve(stub)).address);
    for (const [error, code] of failures) await expectStatus(unary(client, 'Predict', { inputs: ['x'] }), code, error.message);
    expect(next).toBe(failures.length);
  });

  it('GetModelMetadata of a broken id2label is INTERNAL, not a mangled map', async () => {
    const stub = new StubPredictor('token_classification', () => ({ results: [], model_id: 'm' }), {
      model_id: 'm',
      model_type: 'token_classification',
      id2label: { zero: 'O' },
    });
    const client = clientOf(pkg, 'TokenClassification', (await serve(stub)).address);
    await expectStatus(unary(client, 'GetModelMetadata', {}), grpc.status.INTERNAL, /id2label key "zero"/);
  });

  it('refuses a proto text that does not parse or lacks a service or method, with a ConfigError', () => {
    const stub = new StubPredictor('embedding', () => ({ results: [], model_id: 'm' }));
    expect(() => createGrpcServer(stub, { protoText: 'syntax = "proto3"; package encoder; message {' })).toThrow(ConfigError);
    expect(() => createGrpcServer(stub, { protoText: 'syntax = "proto3"; package encoder; message X {}' })).toThrow(
      'encoder.proto defines no service encoder.Embedding',
    );
    const noMetadataMethod = protoText.replace(/rpc GetModelMetadata\(GetModelMetadataRequest\) returns \(GetModelMetadataResponse\);/, '');
    expect(() => createGrpcServer(stub, { protoText: noMetadataMethod })).toThrow('encoder.proto: service encoder.Embedding has no method GetModelMetadata');
  });
});

// ---- the wire: field numbers and types of spec 2's table, decoded without the proto file ----

type Kind = 'string' | 'optionalString' | 'uint32' | 'bool' | 'float' | 'floats' | 'strings' | 'stringMap' | 'uint32Map' | { message: Schema; repeated: boolean };
type Schema = Record<number, [name: string, kind: Kind]>;

const TOKEN_INFO: Schema = { 1: ['token', 'string'], 2: ['token_id', 'uint32'], 3: ['start', 'uint32'], 4: ['end', 'uint32'] };
const TEXT_PAIR: Schema = { 1: ['text', 'string'], 2: ['text_pair', 'string'] };
/** Spec 2's table, transcribed; enums are their numbers on the wire. */
const SPEC: Record<string, Schema> = {
  // quantization (4) is ours, not spec 2's: "int8" for a quantized build, else absent from the wire
  GetModelMetadataResponse: { 1: ['model_id', 'string'], 2: ['model_type', 'uint32'], 3: ['id2label', 'uint32Map'], 4: ['quantization', 'string'] },
  EmbeddingRequest: { 1: ['inputs', 'strings'], 2: ['normalize', 'bool'], 3: ['metadata', 'stringMap'] },
  // mozilla-ai/encoderfile 0.7.0's numbers (encoderfile.sentence_embedding), plus our optional normalize at 2, which it leaves unused
  SentenceEmbeddingRequest: { 1: ['inputs', 'strings'], 2: ['normalize', 'bool'], 3: ['metadata', 'stringMap'] },
  SentenceEmbeddingResponse: {
    1: ['results', { repeated: true, message: { 1: ['embedding', 'floats'] } }],
    2: ['model_id', 'string'],
    3: ['metadata', 'stringMap'],
  },
  SequenceClassificationRequest: { 1: ['inputs', 'strings'], 2: ['metadata', 'stringMap'], 3: ['pairs', { repeated: true, message: TEXT_PAIR }] },
  TokenClassificationRequest: { 1: ['inputs', 'strings'], 2: ['metadata', 'stringMap'] },
  EmbeddingResponse: {
    1: ['results', { repeated: true, message: { 1: ['embeddings', { repeated: true, message: { 1: ['embedding', 'floats'], 2: ['token_info', { repeated: false, message: TOKEN_INFO }] } }] } }],
    2: ['model_id', 'string'],
    3: ['metadata', 'stringMap'],
  },
  SequenceClassificationResponse: {
    1: ['results', { repeated: true, message: { 1: ['logits', 'floats'], 2: ['scores', 'floats'], 3: ['predicted_index', 'uint32'], 4: ['predicted_label', 'optionalString'] } }],
    2: ['model_id', 'string'],
    3: ['metadata', 'stringMap'],
  },
  TokenClassificationResponse: {
    1: [
      'results',
      {
        repeated: true,
        message: {
          1: [
            'tokens',
            {
              repeated: true,
              message: { 1: ['token_info', { repeated: false, message: TOKEN_INFO }], 2: ['logits', 'floats'], 3: ['scores', 'floats'], 4: ['label', 'string'], 5: ['score', 'float'] },
            },
          ],
        },
      },
    ],
    2: ['model_id', 'string'],
    3: ['metadata', 'stringMap'],
  },
};

const WIRE_TYPE = { string: 2, optionalString: 2, uint32: 0, bool: 0, float: 5, floats: 2, strings: 2, stringMap: 2, uint32Map: 2 } as const;

function emptyOf(kind: Kind): unknown {
  if (typeof kind === 'object') return kind.repeated ? [] : undefined;
  return { string: '', optionalString: undefined, uint32: 0, bool: false, float: 0, floats: [], strings: [], stringMap: {}, uint32Map: {} }[kind];
}

/** Decodes `bytes` by the spec's numbers; every field on the wire must be in the schema with its wire type. */
function decodeBySpec(bytes: Uint8Array, schema: Schema): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, kind] of Object.values(schema)) if (emptyOf(kind) !== undefined) out[name] = emptyOf(kind);
  const reader = protobuf.Reader.create(bytes);
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    const [number, wireType] = [tag >>> 3, tag & 7];
    expect(schema[number], `unexpected field number ${number}`).toBeDefined();
    const [name, kind] = schema[number];
    expect(wireType, `wire type of ${name} (${number})`).toBe(typeof kind === 'object' ? 2 : WIRE_TYPE[kind]);
    if (typeof kind === 'object') {
      const message = decodeBySpec(reader.bytes(), kind.message);
      if (kind.repeated) (out[name] as unknown[]).push(message);
      else out[name] = message;
    } else if (kind === 'string' || kind === 'optionalString') out[name] = reader.string();
    else if (kind === 'strings') (out[name] as string[]).push(reader.string());
    else if (kind === 'uint32') out[name] = reader.uint32();
    else if (kind === 'bool') out[name] = reader.bool();
    else if (kind === 'float') out[name] = reader.float();
    else if (kind === 'floats') {
      // proto3 packs repeated floats: one length-delimited run of little-endian float32s
      const packed = reader.bytes();
      const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
      for (let i = 0; i < packed.byteLength; i += 4) (out[name] as number[]).push(view.getFloat32(i, true));
    } else {
      const keyKind = kind === 'uint32Map' ? 'uint32' : 'string';
      const entry = decodeBySpec(reader.bytes(), { 1: ['key', keyKind], 2: ['value', 'string'] });
      (out[name] as Record<string, unknown>)[String(entry.key)] = entry.value;
    }
  }
  return out;
}

/** A unary call that sends and returns raw bytes, so nothing but the test's own decoding reads them. */
function rawUnary(address: string, method: string, request: Uint8Array): Promise<Uint8Array> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  clients.push(client);
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      method,
      (bytes: Uint8Array) => Buffer.from(bytes),
      (bytes: Buffer) => new Uint8Array(bytes),
      request,
      { deadline: Date.now() + DEADLINE_MS },
      (error, value) => (error ? reject(error) : resolve(value!)),
    );
  });
}

function encodeRequest(inputs: string[], metadataField: number, metadata: Record<string, string>, normalize?: boolean): Uint8Array {
  const writer = protobuf.Writer.create();
  for (const input of inputs) writer.uint32((1 << 3) | 2).string(input);
  if (normalize !== undefined) writer.uint32((2 << 3) | 0).bool(normalize);
  for (const [key, value] of Object.entries(metadata)) {
    writer.uint32((metadataField << 3) | 2).fork().uint32((1 << 3) | 2).string(key).uint32((2 << 3) | 2).string(value).ldelim();
  }
  return writer.finish();
}

/** The messages of mozilla-ai/encoderfile 0.7.0's encoderfile/proto/sentence_embedding.proto (its service and import left out). */
const ENCODERFILE_SENTENCE_EMBEDDING_PROTO = `syntax = "proto3";
  package encoderfile.sentence_embedding;
  message SentenceEmbeddingRequest { repeated string inputs = 1; map<string, string> metadata = 3; }
  message SentenceEmbeddingResponse { repeated SentenceEmbedding results = 1; string model_id = 2; map<string, string> metadata = 3; }
  message SentenceEmbedding { repeated float embedding = 1; }`;

/** encoderfile 0.7.0's encoderfile/proto/metadata.proto. */
const ENCODERFILE_METADATA_PROTO = `syntax = "proto3";
  package encoderfile.metadata;
  message GetModelMetadataRequest {}
  message GetModelMetadataResponse { string model_id = 1; ModelType model_type = 2; map<uint32, string> id2label = 3; }
  enum ModelType {
    MODEL_TYPE_UNSPECIFIED = 0; EMBEDDING = 1; SEQUENCE_CLASSIFICATION = 2; TOKEN_CLASSIFICATION = 3; SENTENCE_EMBEDDING = 4;
    IMAGE_CLASSIFICATION = 21;
  }`;

describe('field numbers and types on the wire (spec 2 table)', () => {
  const tokenInfo = { token: 'caf', token_id: 7, start: 0, end: 3 };
  const answers: Record<ModelType, JsonOf<PredictResponse>> = {
    sentence_embedding: { results: [{ embedding: [0.1, -1.5, 3e-7] }, { embedding: [] }], model_id: 'stub-model', metadata: { trace: 'abc' } },
    embedding: {
      results: [{ embeddings: [{ embedding: [0.1, -1.5, 3e-7], token_info: tokenInfo }, { embedding: [2, 0, -0.25] }] }, { embeddings: [] }],
      model_id: 'stub-model',
      metadata: { trace: 'abc' },
    },
    sequence_classification: {
      results: [{ logits: [-0.3, 1.7], scores: [0.1, 0.9], predicted_index: 1, predicted_label: 'positive' }],
      model_id: 'stub-model',
      metadata: { trace: 'abc' },
    },
    token_classification: {
      results: [{ tokens: [{ token_info: { ...tokenInfo, token: '##é', start: 3, end: 4 }, logits: [0.5, -0.5], scores: [0.7, 0.3], label: 'B-PER', score: 0.7 }] }],
      model_id: 'stub-model',
      metadata: { trace: 'abc' },
    },
  };

  it.each(MODEL_TYPES)('%s: request and response fields by number', async (modelType) => {
    const stub = new StubPredictor(modelType, () => answers[modelType]);
    const { address } = await serve(stub);
    const metadataField = modelType === 'embedding' || modelType === 'sentence_embedding' ? 3 : 2;
    const request = encodeRequest(['Zoë', 'x'], metadataField, { trace: 'abc' }, modelType === 'embedding' ? true : undefined);
    const requestName = `${SERVICE[modelType]}Request`;
    // the test's own encoding agrees with its reading of the table
    expect(decodeBySpec(request, SPEC[requestName])).toMatchObject({ inputs: ['Zoë', 'x'], metadata: { trace: 'abc' } });

    const bytes = await rawUnary(address, `/encoder.${SERVICE[modelType]}/Predict`, request);
    const expectedBody = modelType === 'embedding' ? { inputs: ['Zoë', 'x'], normalize: true, metadata: { trace: 'abc' } } : { inputs: ['Zoë', 'x'], metadata: { trace: 'abc' } };
    expect(stub.bodies).toEqual([expectedBody]);
    expectFloat32Equal(decodeBySpec(bytes, SPEC[`${SERVICE[modelType]}Response`]), answers[modelType]);
  });

  it("sentence_embedding: a message of encoderfile 0.7.0's own sentence_embedding.proto decodes here, and our answer decodes there", async () => {
    const theirs = protobuf.parse(ENCODERFILE_SENTENCE_EMBEDDING_PROTO, { keepCase: true }).root;
    const Request = theirs.lookupType('encoderfile.sentence_embedding.SentenceEmbeddingRequest');
    const Response = theirs.lookupType('encoderfile.sentence_embedding.SentenceEmbeddingResponse');
    const stub = new StubPredictor('sentence_embedding', () => answers.sentence_embedding);
    const { address } = await serve(stub);
    const request = Request.encode(Request.fromObject({ inputs: ['Zoë', 'x'], metadata: { trace: 'abc' } })).finish();
    const bytes = await rawUnary(address, '/encoder.SentenceEmbedding/Predict', request);
    expect(stub.bodies).toEqual([{ inputs: ['Zoë', 'x'], metadata: { trace: 'abc' } }]);
    const decoded = Response.toObject(Response.decode(bytes), { defaults: true });
    expectFloat32Equal(decoded, answers.sentence_embedding);
  });

  it("sentence_embedding: our messages decode with encoderfile 0.7.0's proto, theirs with ours, and its ModelType reads ours", async () => {
    const theirs = protobuf.parse(ENCODERFILE_SENTENCE_EMBEDDING_PROTO, { keepCase: true }).root;
    const ours = protobuf.parse(protoText, { keepCase: true }).root;
    const [TheirRequest, TheirResponse] = ['SentenceEmbeddingRequest', 'SentenceEmbeddingResponse'].map((name) => theirs.lookupType(`encoderfile.sentence_embedding.${name}`));
    const [OurRequest, OurResponse] = ['SentenceEmbeddingRequest', 'SentenceEmbeddingResponse'].map((name) => ours.lookupType(`encoder.${name}`));
    // our request, normalize set: an encoderfile server reads the inputs and metadata, and skips field 2
    const ourRequest = OurRequest.encode(OurRequest.fromObject({ inputs: ['Zoë', 'x'], normalize: false, metadata: { trace: 'abc' } })).finish();
    expect(TheirRequest.toObject(TheirRequest.decode(ourRequest))).toEqual({ inputs: ['Zoë', 'x'], metadata: { trace: 'abc' } });
    // an encoderfile server's response: our client reads every field
    const theirAnswer = { results: [{ embedding: [0.5, -0.25] }, { embedding: [] }], model_id: 'their-model', metadata: { trace: 'abc' } };
    const theirResponse = TheirResponse.encode(TheirResponse.fromObject(theirAnswer)).finish();
    expect(OurResponse.toObject(OurResponse.decode(theirResponse), { defaults: true })).toEqual(theirAnswer);
    // GetModelMetadata of our server, read with encoderfile's metadata.proto
    const metadataProto = protobuf.parse(ENCODERFILE_METADATA_PROTO, { keepCase: true }).root.lookupType('encoderfile.metadata.GetModelMetadataResponse');
    const stub = new StubPredictor('sentence_embedding', () => answers.sentence_embedding);
    const bytes = await rawUnary((await serve(stub)).address, '/encoder.SentenceEmbedding/GetModelMetadata', new Uint8Array());
    expect(metadataProto.toObject(metadataProto.decode(bytes), { enums: String, defaults: true })).toEqual({ model_id: 'stub-model', model_type: 'SENTENCE_EMBEDDING', id2label: {} });
  });

  it('GetModelMetadataResponse: model_id (1), ModelType number (2), id2label uint32 → string (3)', async () => {
    const stub = new StubPredictor('token_classification', () => answers.token_classification, {
      model_id: 'ner',
      model_type: 'token_classification',
      id2label: { '0': 'O', '1': 'B-PER', '7': 'I-PER' },
    });
    const { address } = await serve(stub);
    const bytes = await rawUnary(address, '/encoder.TokenClassification/GetModelMetadata', new Uint8Array());
    expect(decodeBySpec(bytes, SPEC.GetModelMetadataResponse)).toEqual({ model_id: 'ner', model_type: 3, id2label: { '0': 'O', '1': 'B-PER', '7': 'I-PER' }, quantization: '' });

    const embedder = new StubPredictor('embedding', () => answers.embedding);
    const embedderBytes = await rawUnary((await serve(embedder)).address, '/encoder.Embedding/GetModelMetadata', new Uint8Array());
    expect(decodeBySpec(embedderBytes, SPEC.GetModelMetadataResponse)).toEqual({ model_id: 'stub-model', model_type: 1, id2label: {}, quantization: '' });

    // SENTENCE_EMBEDDING = 4, as in encoderfile 0.7.0's ModelType
    const sentences = new StubPredictor('sentence_embedding', () => answers.sentence_embedding);
    const sentenceBytes = await rawUnary((await serve(sentences)).address, '/encoder.SentenceEmbedding/GetModelMetadata', new Uint8Array());
    expect(decodeBySpec(sentenceBytes, SPEC.GetModelMetadataResponse)).toEqual({ model_id: 'stub-model', model_type: 4, id2label: {}, quantization: '' });
  });
});

// ---- health ----

interface HealthResponse {
  status: string;
}

describe('grpc.health.v1.Health', () => {
  const health = () => packageFromFile(path.join(repoRoot, 'node_modules/grpc-health-check/proto/health/v1/health.proto'));

  function client(address: string): grpc.Client {
    const v1 = ((health().grpc as grpc.GrpcObject).health as grpc.GrpcObject).v1 as grpc.GrpcObject;
    return clientOf(v1, 'Health', address);
  }

  /** Opens a Watch and collects its messages until the stream ends. */
  function watch(c: grpc.Client, service: string) {
    const stream = (c as unknown as { Watch(req: object): grpc.ClientReadableStream<HealthResponse> }).Watch({ service });
    const messages: string[] = [];
    const waiters: (() => void)[] = [];
    stream.on('data', (message: HealthResponse) => {
      messages.push(message.status);
      waiters.splice(0).forEach((wake) => wake());
    });
    const ended = new Promise<grpc.StatusObject>((resolve, reject) => {
      stream.on('status', resolve);
      stream.on('error', reject);
    });
    const received = (count: number) =>
      new Promise<string[]>((resolve) => {
        const check = () => (messages.length >= count ? resolve(messages.slice()) : waiters.push(check));
        check();
      });
    return { stream, received, ended };
  }

  it('Check and List: SERVING for "" and the served services (ours and encoderfile\'s); unknown names are NOT_FOUND', async () => {
    const stub = new StubPredictor('sequence_classification', () => ({ results: [], model_id: 'm' }));
    const { address } = await serve(stub);
    const c = client(address);
    expect(await unary(c, 'Check', { service: '' })).toEqual({ status: 'SERVING' });
    expect(await unary(c, 'Check', { service: 'encoder.SequenceClassification' })).toEqual({ status: 'SERVING' });
    expect(await unary(c, 'Check', { service: 'encoderfile.sequence_classification.SequenceClassificationInference' })).toEqual({ status: 'SERVING' });
    await expectStatus(unary(c, 'Check', { service: 'encoder.Embedding' }), grpc.status.NOT_FOUND, 'unknown service "encoder.Embedding"');
    expect(await unary(c, 'List', {})).toEqual({
      statuses: {
        '': { status: 'SERVING' },
        'encoder.SequenceClassification': { status: 'SERVING' },
        'encoderfile.sequence_classification.SequenceClassificationInference': { status: 'SERVING' },
      },
    });
  });

  it('a sentence_embedding server reports encoder.SentenceEmbedding as SERVING, and no other encoder service', async () => {
    const { address } = await serve(new StubPredictor('sentence_embedding', () => ({ results: [], model_id: 'm' })));
    const c = client(address);
    expect(await unary(c, 'Check', { service: 'encoder.SentenceEmbedding' })).toEqual({ status: 'SERVING' });
    await expectStatus(unary(c, 'Check', { service: 'encoder.Embedding' }), grpc.status.NOT_FOUND, 'unknown service "encoder.Embedding"');
  });

  it('Watch: current status at once, NOT_SERVING at shutdown, then the stream ends so the server can stop', async () => {
    const stub = new StubPredictor('embedding', () => ({ results: [], model_id: 'm' }));
    const { address, frontEnd } = await serve(stub);
    const c = client(address);
    const whole = watch(c, '');
    const embedding = watch(c, 'encoder.Embedding');
    const unknown = watch(c, 'no.Such');
    expect(await whole.received(1)).toEqual(['SERVING']);
    expect(await embedding.received(1)).toEqual(['SERVING']);
    expect(await unknown.received(1)).toEqual(['SERVICE_UNKNOWN']);

    frontEnd.setServing(false);
    expect(await whole.received(2)).toEqual(['SERVING', 'NOT_SERVING']);
    expect(await embedding.received(2)).toEqual(['SERVING', 'NOT_SERVING']);
    for (const w of [whole, embedding, unknown]) expect((await w.ended).code).toBe(grpc.status.OK);
    expect(await unary(c, 'Check', { service: 'encoder.Embedding' })).toEqual({ status: 'NOT_SERVING' });

    // a Watch opened while not serving gets the status and is ended at once
    const late = watch(c, '');
    expect(await late.received(1)).toEqual(['NOT_SERVING']);
    expect((await late.ended).code).toBe(grpc.status.OK);

    const started = Date.now();
    await new Promise<void>((resolve) => frontEnd.server.tryShutdown(() => resolve()));
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('setServing(true) brings the statuses back for watchers', async () => {
    const stub = new StubPredictor('embedding', () => ({ results: [], model_id: 'm' }));
    const { address, frontEnd } = await serve(stub);
    const c = client(address);
    frontEnd.setServing(false);
    expect(await unary(c, 'Check', { service: '' })).toEqual({ status: 'NOT_SERVING' });
    frontEnd.setServing(true);
    const w = watch(c, '');
    expect(await w.received(1)).toEqual(['SERVING']);
    frontEnd.setServing(true);
    expect(await w.received(2)).toEqual(['SERVING', 'SERVING']);
    w.stream.cancel();
    await expect(w.ended).rejects.toMatchObject({ code: grpc.status.CANCELLED });
  });
});

// ---- reflection ----

const FileDescriptorProto = protobuf.Root.fromJSON(descriptorJson as protobuf.INamespace).lookupType('google.protobuf.FileDescriptorProto');

interface ReflectionResponse {
  list_services_response?: { service: { name: string }[] };
  file_descriptor_response?: { file_descriptor_proto: Buffer[] };
  error_response?: { error_code: number; error_message: string };
}

interface DescribedMessage {
  name: string;
  field?: { name: string; typeName?: string; jsonName?: string; oneofIndex?: number; proto3Optional?: boolean }[];
  nestedType?: DescribedMessage[];
  enumType?: { name: string }[];
  options?: { mapEntry?: boolean };
}
interface DescribedFile {
  package: string;
  messageType: DescribedMessage[];
  enumType?: { name: string }[];
}

/**
 * What protoc would write and strict reflection clients check (grpcurl goes through Go's protodesc): type
 * references fully qualified and declared, map entries named `<FieldName>Entry`, proto3 `optional` flagged.
 */
function expectProtocShaped(file: DescribedFile): void {
  const declared = new Set<string>();
  const declare = (message: DescribedMessage, scope: string) => {
    declared.add(`${scope}.${message.name}`);
    for (const e of message.enumType ?? []) declared.add(`${scope}.${message.name}.${e.name}`);
    for (const nested of message.nestedType ?? []) declare(nested, `${scope}.${message.name}`);
  };
  for (const e of file.enumType ?? []) declared.add(`.${file.package}.${e.name}`);
  for (const message of file.messageType) declare(message, `.${file.package}`);
  const check = (message: DescribedMessage, scope: string) => {
    const fullName = `${scope}.${message.name}`;
    for (const field of message.field ?? []) {
      if (field.typeName !== undefined) expect(declared, `${fullName}.${field.name} → ${field.typeName}`).toContain(field.typeName);
      expect(field.jsonName, `${fullName}.${field.name} json_name`).toBe(field.name.replace(/_(\w)/g, (_, c: string) => c.toUpperCase()));
    }
    for (const nested of message.nestedType ?? []) {
      if (nested.options?.mapEntry) {
        const field = message.field!.find((f) => f.typeName === `${fullName}.${nested.name}`)!;
        const camel = field.name
          .split('_')
          .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
          .join('');
        expect(nested.name).toBe(`${camel}Entry`);
      }
      check(nested, fullName);
    }
  };
  for (const message of file.messageType) check(message, `.${file.package}`);
  if (file.package === 'encoder') {
    const result = file.messageType.find((m) => m.name === 'SequenceClassificationResult')!;
    expect(result.field!.find((f) => f.name === 'predicted_label')).toMatchObject({ proto3Optional: true, oneofIndex: 0 });
    const metadata = file.messageType.find((m) => m.name === 'GetModelMetadataResponse')!;
    expect(metadata.field!.find((f) => f.name === 'id2label')!.typeName).toBe('.encoder.GetModelMetadataResponse.Id2labelEntry');
    expect(metadata.field!.find((f) => f.name === 'model_type')).toMatchObject({ typeName: '.encoder.ModelType', jsonName: 'modelType' });
  }
}

describe('server reflection', () => {
  function reflectionClient(version: 'v1' | 'v1alpha', address: string): grpc.Client {
    const file = path.join(repoRoot, `node_modules/@grpc/reflection/build/proto/grpc/reflection/${version}/reflection.proto`);
    const reflection = ((packageFromFile(file).grpc as grpc.GrpcObject).reflection as grpc.GrpcObject)[version] as grpc.GrpcObject;
    return clientOf(reflection, 'ServerReflection', address);
  }

  /** One request on a ServerReflectionInfo stream, as grpcurl sends them. */
  function ask(c: grpc.Client, request: object): Promise<ReflectionResponse> {
    const stream = (c as unknown as { ServerReflectionInfo(options: grpc.CallOptions): grpc.ClientDuplexStream<object, ReflectionResponse> }).ServerReflectionInfo({
      deadline: Date.now() + DEADLINE_MS,
    });
    return new Promise((resolve, reject) => {
      stream.on('data', (response: ReflectionResponse) => {
        resolve(response);
        stream.end();
      });
      stream.on('error', reject);
      stream.write(request);
    });
  }

  let address: string;
  beforeAll(async () => {
    const echo = new StubPredictor('embedding', (body) => ({ results: [], model_id: 'm', metadata: (body as { metadata?: Record<string, string> }).metadata }));
    address = (await serve(echo)).address;
  });

  it.each(['v1', 'v1alpha'] as const)('%s: list_services names the served encoder services (ours and encoderfile\'s), health and reflection', async (version) => {
    const response = await ask(reflectionClient(version, address), { list_services: '*' });
    const names = response.list_services_response!.service.map((s) => s.name).sort();
    expect(names).toEqual([
      'encoder.Embedding',
      'encoderfile.embedding.EmbeddingInference',
      'grpc.health.v1.Health',
      'grpc.reflection.v1.ServerReflection',
      'grpc.reflection.v1alpha.ServerReflection',
    ]);
  });

  it.each(['v1', 'v1alpha'] as const)('%s: file_containing_symbol gives encoder.proto with its services and snake_case fields', async (version) => {
    const response = await ask(reflectionClient(version, address), { file_containing_symbol: 'encoder.Embedding' });
    const files = response.file_descriptor_response!.file_descriptor_proto.map(
      (bytes) => FileDescriptorProto.toObject(FileDescriptorProto.decode(bytes), { enums: String }) as Record<string, never>,
    );
    expect(files).toHaveLength(1);
    const file = files[0] as unknown as { name: string; package: string; service: { name: string; method: { name: string; inputType: string; outputType: string }[] }[]; messageType: { name: string; field: { name: string; number: number; type: string; label: string }[] }[] };
    expect(file).toMatchObject({ name: 'encoder.proto', package: 'encoder' });
    expect(file.service.map((s) => s.name)).toEqual(['Embedding', 'SentenceEmbedding', 'SequenceClassification', 'TokenClassification', 'ImageClassification', 'ImageEmbedding']);
    expect(file.service[0].method).toEqual([
      expect.objectContaining({ name: 'Predict', inputType: '.encoder.EmbeddingRequest', outputType: '.encoder.EmbeddingResponse' }),
      expect.objectContaining({ name: 'GetModelMetadata', inputType: '.encoder.GetModelMetadataRequest', outputType: '.encoder.GetModelMetadataResponse' }),
    ]);
    const request = file.messageType.find((m) => m.name === 'EmbeddingRequest')!;
    expect(request.field.map(({ name, number, type, label }) => ({ name, number, type, label }))).toEqual([
      { name: 'inputs', number: 1, type: 'TYPE_STRING', label: 'LABEL_REPEATED' },
      { name: 'normalize', number: 2, type: 'TYPE_BOOL', label: 'LABEL_OPTIONAL' },
      { name: 'metadata', number: 3, type: 'TYPE_MESSAGE', label: 'LABEL_REPEATED' },
    ]);
    expectProtocShaped(files[0] as unknown as DescribedFile);
    // What grpcurl does: build a client from the reflected descriptors alone, and call the service with it.
    // (protobufjs 8 here: the protobufjs 7 inside proto-loader 0.8 rebuilds no map field from a descriptor.)
    const descriptorSet = protobuf.Writer.create(); // FileDescriptorSet: repeated FileDescriptorProto file = 1
    for (const bytes of response.file_descriptor_response!.file_descriptor_proto) descriptorSet.uint32((1 << 3) | 2).bytes(bytes);
    const described = protobuf.Root.fromDescriptor(descriptorSet.finish(), { keepCase: true });
    const reflected = grpc.loadPackageDefinition(fromJSON(described.toJSON() as Parameters<typeof fromJSON>[0], CLIENT_OPTIONS));
    const client = clientOf(reflected.encoder as grpc.GrpcObject, 'Embedding', address);
    expect(await unary(client, 'Predict', { inputs: ['x'], metadata: { via: 'reflection' } })).toEqual({
      results: [],
      model_id: 'm',
      metadata: { via: 'reflection' },
    });
  });

  it('a sentence_embedding server lists encoder.SentenceEmbedding, describes it, and a client made from the description calls it', async () => {
    const stub = new StubPredictor('sentence_embedding', () => ({ results: [{ embedding: [0.5, -0.5] }], model_id: 'm' }));
    const served = (await serve(stub)).address;
    const c = reflectionClient('v1', served);
    const listed = await ask(c, { list_services: '*' });
    expect(listed.list_services_response!.service.map((s) => s.name).sort()).toEqual([
      'encoder.SentenceEmbedding',
      'encoderfile.sentence_embedding.SentenceEmbeddingInference',
      'grpc.health.v1.Health',
      'grpc.reflection.v1.ServerReflection',
      'grpc.reflection.v1alpha.ServerReflection',
    ]);
    const response = await ask(c, { file_containing_symbol: 'encoder.SentenceEmbedding' });
    const [bytes] = response.file_descriptor_response!.file_descriptor_proto;
    type Field = { name: string; number: number; label: string; typeName?: string; proto3Optional?: boolean };
    const described = FileDescriptorProto.toObject(FileDescriptorProto.decode(bytes), { enums: String });
    expectProtocShaped(described as unknown as DescribedFile);
    const file = described as unknown as { messageType: { name: string; field: Field[] }[]; enumType: unknown[] };
    const message = (name: string) => file.messageType.find((m) => m.name === name)!;
    expect(message('SentenceEmbeddingRequest').field.map(({ name, number, proto3Optional }) => ({ name, number, optional: proto3Optional ?? false }))).toEqual([
      { name: 'inputs', number: 1, optional: false },
      { name: 'normalize', number: 2, optional: true },
      { name: 'metadata', number: 3, optional: false },
    ]);
    expect(message('SentenceEmbeddingResponse').field.find((f) => f.name === 'results')).toMatchObject({
      number: 1,
      label: 'LABEL_REPEATED',
      typeName: '.encoder.SentenceEmbeddingResponse.SentenceEmbedding',
    });
    expect(message('SequenceClassificationRequest').field.find((f) => f.name === 'pairs')).toMatchObject({ number: 3, label: 'LABEL_REPEATED', typeName: '.encoder.TextPair' });
    expect(file.enumType).toEqual([expect.objectContaining({ name: 'ModelType', value: expect.arrayContaining([{ name: 'SENTENCE_EMBEDDING', number: 4 }]) })]);
    // as grpcurl would: normalize false only reaches the server if the description kept it optional (present on the wire)
    const descriptorSet = protobuf.Writer.create();
    descriptorSet.uint32((1 << 3) | 2).bytes(bytes);
    const root = protobuf.Root.fromDescriptor(descriptorSet.finish(), { keepCase: true });
    const reflected = grpc.loadPackageDefinition(fromJSON(root.toJSON() as Parameters<typeof fromJSON>[0], CLIENT_OPTIONS));
    const client = clientOf(reflected.encoder as grpc.GrpcObject, 'SentenceEmbedding', served);
    expect(await unary(client, 'Predict', { inputs: ['x'], normalize: false })).toEqual({ results: [{ embedding: [0.5, -0.5] }], model_id: 'm', metadata: {} });
    expect(stub.bodies).toEqual([{ inputs: ['x'], normalize: false }]);
  });

  it("an image classifier's server lists and describes encoder.ImageClassification, and a client made from the description alone calls it", async () => {
    const work = mkdtempSync(path.join(os.tmpdir(), 'grpc-image-'));
    try {
      await writeVitModelDirectory(path.join(work, 'vit'));
      const pkg = readImageModelPackage(parseBuildConfig('encoder:\n  name: tiny-vit\n  path: vit\n  model_type: image_classification\n', { baseDir: work }));
      const pipeline = await ImagePipeline.load(pkg);
      pipelines.push(pipeline);
      const frontEnd = createImageGrpcServer(pipeline, { protoText });
      frontEnds.push(frontEnd);
      const served = await new Promise<string>((resolve, reject) =>
        frontEnd.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(`127.0.0.1:${port}`))),
      );
      const c = reflectionClient('v1', served);
      const listed = await ask(c, { list_services: '*' });
      expect(listed.list_services_response!.service.map((s) => s.name).sort()).toEqual([
        'encoder.ImageClassification',
        'encoderfile.image_classification.ImageClassificationInference',
        'grpc.health.v1.Health',
        'grpc.reflection.v1.ServerReflection',
        'grpc.reflection.v1alpha.ServerReflection',
      ]);
      const response = await ask(c, { file_containing_symbol: 'encoder.ImageClassification' });
      const [bytes] = response.file_descriptor_response!.file_descriptor_proto;
      const described = FileDescriptorProto.toObject(FileDescriptorProto.decode(bytes), { enums: String });
      expectProtocShaped(described as unknown as DescribedFile);
      type Field = { name: string; number: number; type: string; proto3Optional?: boolean };
      const messages = (described as unknown as { messageType: { name: string; field: Field[] }[] }).messageType;
      const fields = (name: string) => messages.find((m) => m.name === name)!.field.map((f) => [f.name, f.number, f.type, f.proto3Optional ?? false]);
      expect(fields('ImageClassificationRequest')).toEqual([
        ['inputs', 1, 'TYPE_MESSAGE', false],
        ['top_k', 2, 'TYPE_UINT32', true],
        ['metadata', 11, 'TYPE_MESSAGE', false],
      ]);
      expect(fields('ImageInput')).toEqual([['image', 1, 'TYPE_BYTES', false]]);
      // as grpcurl would: a client from the description alone, sending the image's bytes
      const descriptorSet = protobuf.Writer.create();
      descriptorSet.uint32((1 << 3) | 2).bytes(bytes);
      const root = protobuf.Root.fromDescriptor(descriptorSet.finish(), { keepCase: true });
      const reflected = grpc.loadPackageDefinition(fromJSON(root.toJSON() as Parameters<typeof fromJSON>[0], CLIENT_OPTIONS));
      const client = clientOf(reflected.encoder as grpc.GrpcObject, 'ImageClassification', served);
      const png = await sharp(Buffer.alloc(20 * 10 * 3, 200), { raw: { width: 20, height: 10, channels: 3 } }).png().toBuffer();
      const answer = await unary<{ results: { labels: { label: string }[] }[]; model_id: string }>(client, 'Predict', { inputs: [{ image: png }], top_k: 2 });
      expect(answer.model_id).toBe('tiny-vit');
      expect(answer.results).toHaveLength(1);
      expect(answer.results[0].labels).toHaveLength(2);
      for (const { label } of answer.results[0].labels) expect(TINY_VIT.labels).toContain(label);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  it('describes the health service and the unserved encoder services by symbol; unknown symbols are NOT_FOUND', async () => {
    const c = reflectionClient('v1', address);
    const health = await ask(c, { file_containing_symbol: 'grpc.health.v1.Health' });
    const healthFile = FileDescriptorProto.toObject(FileDescriptorProto.decode(health.file_descriptor_response!.file_descriptor_proto[0])) as DescribedFile;
    expect(healthFile.package).toBe('grpc.health.v1');
    expectProtocShaped(healthFile);
    const reflectionItself = await ask(c, { file_containing_symbol: 'grpc.reflection.v1.ServerReflection' });
    const reflectionFile = FileDescriptorProto.toObject(FileDescriptorProto.decode(reflectionItself.file_descriptor_response!.file_descriptor_proto[0])) as DescribedFile;
    expect(reflectionFile.messageType.find((m) => m.name === 'ServerReflectionRequest')!.field!.map((f) => f.name)).toContain('file_containing_symbol');
    const unserved = await ask(c, { file_containing_symbol: 'encoder.TokenClassification' });
    expect(unserved.file_descriptor_response!.file_descriptor_proto).toHaveLength(1);
    const byName = await ask(c, { file_by_filename: 'encoder.proto' });
    expect(byName.file_descriptor_response!.file_descriptor_proto).toHaveLength(1);
    const missing = await ask(c, { file_containing_symbol: 'encoder.Nope' });
    expect(missing.error_response).toEqual({ error_code: grpc.status.NOT_FOUND, error_message: 'Symbol not found: encoder.Nope' });
  });
});
