/**
 * mozilla-ai/encoderfile 0.7.0's gRPC interface, served beside ours (issue 33): clients made with @grpc/grpc-js and
 * @grpc/proto-loader from .proto files written from encoderfile's published definitions (test/fixtures/encoderfile-0.7.0),
 * with no project code on the client side, call a server of each model type of the real model exports in
 * ../shared/models, and get what the same server's HTTP /predict answers, in encoderfile's messages.
 */
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { fromJSON, loadSync, type Options } from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import 'protobufjs/ext/descriptor.js'; // adds Root.fromDescriptor
import descriptorJson from 'protobufjs/google/protobuf/descriptor.json' with { type: 'json' };
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelType } from '../../src/encoder/config.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';
import { hasShared, repoRoot, sharedModel, warnIfSharedMissing } from '../helpers/shared-fixtures.ts';

const FIXTURES = path.join(repoRoot, 'test', 'fixtures', 'encoderfile-0.7.0');
const DEADLINE_MS = 15_000;
/** What an encoderfile user's Node client gets with the usual options: field names as written, enums by name, defaults. */
const CLIENT_OPTIONS: Options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: false, includeDirs: [FIXTURES] };

/** Each model type, the shared export it is served from, its encoderfile package and service, and the ModelType name. */
const CASES = {
  embedding: { model: 'tiny-bert-embedding', pkg: 'embedding', service: 'EmbeddingInference', enumName: 'EMBEDDING' },
  sentence_embedding: { model: 'tiny-bert-sentence-embedding', pkg: 'sentence_embedding', service: 'SentenceEmbeddingInference', enumName: 'SENTENCE_EMBEDDING' },
  sequence_classification: { model: 'tiny-bert-sequence-classification', pkg: 'sequence_classification', service: 'SequenceClassificationInference', enumName: 'SEQUENCE_CLASSIFICATION' },
  token_classification: { model: 'tiny-bert-token-classification', pkg: 'token_classification', service: 'TokenClassificationInference', enumName: 'TOKEN_CLASSIFICATION' },
} as const satisfies Record<ModelType, object>;
const MODEL_TYPES = Object.keys(CASES) as ModelType[];
const TEXTS = ['the cat sat on the mat', 'Zoë naïve café', 'hi'];
/** Far beyond the exports' 512 tokens: encoderfile truncates such an input to the model's length, and so does this server. */
const LONG_TEXT = 'word '.repeat(3000).trim();

/** The client constructor of one encoderfile service, from the fixture .proto files alone. */
function serviceClient(modelType: ModelType, address: string): grpc.Client {
  const { pkg, service } = CASES[modelType];
  const loaded = grpc.loadPackageDefinition(loadSync(`proto/${pkg}.proto`, CLIENT_OPTIONS));
  const Client = ((loaded.encoderfile as grpc.GrpcObject)[pkg] as grpc.GrpcObject)[service] as grpc.ServiceClientConstructor;
  const client = new Client(address, grpc.credentials.createInsecure());
  clients.push(client);
  return client;
}

type Callback = (error: grpc.ServiceError | null, value: unknown) => void;

function unary<T>(client: grpc.Client, method: string, request: object): Promise<T> {
  const call = (client as unknown as Record<string, (req: object, options: grpc.CallOptions, cb: Callback) => void>)[method];
  return new Promise((resolve, reject) => {
    call.call(client, request, { deadline: Date.now() + DEADLINE_MS }, (error, value) => (error ? reject(error) : resolve(value as T)));
  });
}

async function expectStatus(promise: Promise<unknown>, code: grpc.status, details: RegExp): Promise<void> {
  const error = (await promise.then(
    () => expect.fail(`expected status ${grpc.status[code]}`),
    (e: unknown) => e,
  )) as grpc.ServiceError;
  expect(grpc.status[error.code]).toBe(grpc.status[code]);
  expect(error.details).toMatch(details);
}

async function httpPredict(server: InProcessEncoder, body: object): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.httpUrl}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(response.status, await response.clone().text()).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

/** `actual` equals `expected`, numbers within a relative 1e-5 (two runs of the model, float32 on both paths). */
function expectClose(actual: unknown, expected: unknown, where = 'response'): void {
  if (typeof expected === 'number') {
    expect(typeof actual, where).toBe('number');
    expect(Math.abs((actual as number) - expected), `${where}: ${String(actual)} vs ${expected}`).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(expected)));
  } else if (Array.isArray(expected)) {
    expect((actual as unknown[]).length, `${where}.length`).toBe(expected.length);
    expected.forEach((item, i) => expectClose((actual as unknown[])[i], item, `${where}[${i}]`));
  } else if (expected !== null && typeof expected === 'object') {
    expect(Object.keys(actual as object).sort(), `${where} keys`).toEqual(Object.keys(expected).sort());
    for (const [key, value] of Object.entries(expected)) expectClose((actual as Record<string, unknown>)[key], value, `${where}.${key}`);
  } else {
    expect(actual, where).toEqual(expected);
  }
}

/** HTTP's /predict answer in encoderfile's messages: what protobuf leaves out (token logits) out, metadata always a map. */
function asEncoderfileMessage(modelType: ModelType, http: Record<string, unknown>): Record<string, unknown> {
  const results = (http.results as Record<string, unknown>[]).map((result) => {
    if (modelType !== 'token_classification') return result;
    return { tokens: (result.tokens as Record<string, unknown>[]).map(({ logits: _logits, ...token }) => token) };
  });
  return { ...http, results, metadata: http.metadata ?? {} };
}

const clients: grpc.Client[] = [];
const servers = {} as Record<ModelType, InProcessEncoder>;

warnIfSharedMissing('encoderfile gRPC');

describe.skipIf(!hasShared)("encoderfile 0.7.0's gRPC services over the shared model exports", () => {
  beforeAll(async () => {
    for (const modelType of MODEL_TYPES) servers[modelType] = await serveInProcess(sharedModel(CASES[modelType].model), `ef-${modelType}`, modelType, { grpc: true });
  });

  afterAll(async () => {
    for (const client of clients) client.close();
    await Promise.all(Object.values(servers).map((server) => server.close()));
  });

  it.each(MODEL_TYPES)('%s: Predict answers what HTTP /predict answers, in encoderfile\'s message, metadata echoed', async (modelType) => {
    const server = servers[modelType];
    const client = serviceClient(modelType, server.grpcAddress!);
    const metadata = { request_id: 'r-1', note: 'ü ✓' };
    const viaGrpc = await unary<Record<string, unknown>>(client, 'Predict', { inputs: TEXTS, metadata });
    // encoderfile's embedding requests have no normalize: the vectors come as the model gives them
    const viaHttp = await httpPredict(server, modelType === 'embedding' ? { inputs: TEXTS, normalize: false, metadata } : { inputs: TEXTS, metadata });
    expect(viaGrpc.model_id).toBe(`ef-${modelType}`);
    expect(viaGrpc.metadata).toEqual(metadata);
    expectClose(viaGrpc, asEncoderfileMessage(modelType, viaHttp));
  });

  it('embedding: vectors are not normalised (encoderfile has no normalize field), token_info as encoderfile gives it', async () => {
    const client = serviceClient('embedding', servers.embedding.grpcAddress!);
    const response = await unary<{ results: { embeddings: { embedding: number[]; token_info: Record<string, unknown> }[] }[] }>(client, 'Predict', { inputs: ['Zoë sat'] });
    const tokens = response.results[0].embeddings;
    // bert-base-uncased strips the accent; offsets stay those of the text as written
    expect(tokens.map((t) => t.token_info)).toEqual([
      { token: 'zoe', token_id: expect.any(Number), start: 0, end: 3 },
      { token: 'sat', token_id: 2938, start: 4, end: 7 },
    ]);
    const norms = tokens.map((t) => Math.hypot(...t.embedding));
    expect(norms.some((norm) => Math.abs(norm - 1) > 1e-3)).toBe(true);
  });

  it('token_classification: each token carries scores (2), label (3) and score (4), no logits, as encoderfile numbers them', async () => {
    const client = serviceClient('token_classification', servers.token_classification.grpcAddress!);
    const response = await unary<{ results: { tokens: Record<string, unknown>[] }[] }>(client, 'Predict', { inputs: ['the cat'] });
    const [first] = response.results[0].tokens;
    expect(Object.keys(first).sort()).toEqual(['label', 'score', 'scores', 'token_info']);
    const scores = first.scores as number[];
    expect(scores).toHaveLength(2);
    expect(scores[0] + scores[1]).toBeCloseTo(1, 5);
    expect(first.score).toBeCloseTo(Math.max(...scores), 6);
    expect(first.label).toBe(scores[0] >= scores[1] ? 'good' : 'bad');
    // the same bytes, read field by field: 1 token_info, 2 packed scores, 3 label, 4 score
    const proto = loadSync('proto/token_classification.proto', CLIENT_OPTIONS)['encoderfile.token_classification.TokenClassification'] as { type: { field: { name: string; number: number }[] } };
    expect(proto.type.field.map(({ name, number }) => [name, number])).toEqual([['token_info', 1], ['scores', 2], ['label', 3], ['score', 4]]);
  });

  it.each(MODEL_TYPES)('%s: GetModelMetadata answers model_id, the ModelType by encoderfile\'s number, id2label', async (modelType) => {
    const client = serviceClient(modelType, servers[modelType].grpcAddress!);
    const metadata = await unary<Record<string, unknown>>(client, 'GetModelMetadata', {});
    const classifier = modelType === 'sequence_classification' || modelType === 'token_classification';
    expect(metadata).toEqual({ model_id: `ef-${modelType}`, model_type: CASES[modelType].enumName, id2label: classifier ? { '0': 'good', '1': 'bad' } : {} });
  });

  it.each(MODEL_TYPES)('%s: empty inputs and an empty text are INVALID_ARGUMENT, as encoderfile answers them', async (modelType) => {
    const client = serviceClient(modelType, servers[modelType].grpcAddress!);
    await expectStatus(unary(client, 'Predict', { inputs: [] }), grpc.status.INVALID_ARGUMENT, /^Invalid input: inputs must not be empty$/);
    await expectStatus(unary(client, 'Predict', { inputs: ['fine', ''] }), grpc.status.INVALID_ARGUMENT, /^Invalid input: inputs\[1\] is an empty string$/);
  });

  it.each(MODEL_TYPES)('%s: an input longer than the model is truncated to its 512 tokens and answered (OK), as encoderfile does', async (modelType) => {
    const client = serviceClient(modelType, servers[modelType].grpcAddress!);
    const response = await unary<{ results: Record<string, unknown[]>[] }>(client, 'Predict', { inputs: [LONG_TEXT, 'short'] });
    expect(response.results).toHaveLength(2);
    const perToken = { embedding: 'embeddings', token_classification: 'tokens' } as Partial<Record<ModelType, string>>;
    const field = perToken[modelType];
    // 512 tokens less [CLS] and [SEP], which are not answered
    if (field) expect(response.results[0][field]).toHaveLength(510);
  });

  it.each(MODEL_TYPES)('%s: encoderfile\'s services of the other model types are UNIMPLEMENTED, naming the one to call', async (modelType) => {
    for (const other of MODEL_TYPES.filter((type) => type !== modelType)) {
      const client = serviceClient(other, servers[modelType].grpcAddress!);
      const served = `encoderfile.${CASES[modelType].pkg}.${CASES[modelType].service}`;
      await expectStatus(
        unary(client, 'Predict', { inputs: ['x'] }),
        grpc.status.UNIMPLEMENTED,
        new RegExp(`^encoderfile\\.${CASES[other].pkg}\\.${CASES[other].service} is not served: this server serves a ${modelType} model; call ${served.replace(/\./g, '\\.')}$`),
      );
    }
  });

  it('reflection lists encoderfile\'s service beside ours, and a client made from its description alone calls it', async () => {
    const address = servers.token_classification.grpcAddress!;
    const reflectionProto = path.join(repoRoot, 'node_modules/@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto');
    const v1 = ((grpc.loadPackageDefinition(loadSync(reflectionProto, CLIENT_OPTIONS)).grpc as grpc.GrpcObject).reflection as grpc.GrpcObject).v1 as grpc.GrpcObject;
    const reflection = new (v1.ServerReflection as grpc.ServiceClientConstructor)(address, grpc.credentials.createInsecure());
    clients.push(reflection);
    type Reply = { list_services_response?: { service: { name: string }[] }; file_descriptor_response?: { file_descriptor_proto: Buffer[] } };
    const ask = (request: object) =>
      new Promise<Reply>((resolve, reject) => {
        const stream = (reflection as unknown as { ServerReflectionInfo(o: grpc.CallOptions): grpc.ClientDuplexStream<object, Reply> }).ServerReflectionInfo({ deadline: Date.now() + DEADLINE_MS });
        stream.on('data', (reply: Reply) => {
          resolve(reply);
          stream.end();
        });
        stream.on('error', reject);
        stream.write(request);
      });
    const listed = (await ask({ list_services: '*' })).list_services_response!.service.map((s) => s.name);
    expect(listed).toEqual(expect.arrayContaining(['encoder.TokenClassification', 'encoderfile.token_classification.TokenClassificationInference']));

    const described = await ask({ file_containing_symbol: 'encoderfile.token_classification.TokenClassificationInference' });
    const FileDescriptorProto = protobuf.Root.fromJSON(descriptorJson as protobuf.INamespace).lookupType('google.protobuf.FileDescriptorProto');
    const files = described.file_descriptor_response!.file_descriptor_proto.map((bytes) => FileDescriptorProto.toObject(FileDescriptorProto.decode(bytes)) as { name: string; package: string; dependency?: string[] });
    // the service's file, and the files of the types it uses, each named as a dependency (what grpcurl resolves by)
    const byPackage = Object.fromEntries(files.map((file) => [file.package, file]));
    expect(Object.keys(byPackage).sort()).toEqual(['encoderfile.metadata', 'encoderfile.token', 'encoderfile.token_classification']);
    expect([...(byPackage['encoderfile.token_classification'].dependency ?? [])].sort()).toEqual([byPackage['encoderfile.metadata'].name, byPackage['encoderfile.token'].name].sort());

    const set = protobuf.Writer.create(); // FileDescriptorSet: repeated FileDescriptorProto file = 1
    for (const bytes of described.file_descriptor_response!.file_descriptor_proto) set.uint32((1 << 3) | 2).bytes(bytes);
    const root = protobuf.Root.fromDescriptor(set.finish(), { keepCase: true });
    const loaded = grpc.loadPackageDefinition(fromJSON(root.toJSON() as Parameters<typeof fromJSON>[0], CLIENT_OPTIONS));
    const Client = ((loaded.encoderfile as grpc.GrpcObject).token_classification as grpc.GrpcObject).TokenClassificationInference as grpc.ServiceClientConstructor;
    const client = new Client(address, grpc.credentials.createInsecure());
    clients.push(client);
    const response = await unary<{ results: { tokens: { token_info: { token: string }; label: string }[] }[] }>(client, 'Predict', { inputs: ['the cat'] });
    expect(response.results[0].tokens.map((t) => t.token_info.token)).toEqual(['the', 'cat']);
  });
});
