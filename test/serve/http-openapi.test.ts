import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv } from 'ajv';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import packageJson from '../../package.json' with { type: 'json' };
import { parseBuildConfig, type ModelType } from '../../src/encoder/config.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { Predictor } from '../../src/encoder/predictor.ts';
import { parsePredictRequest } from '../../src/encoder/requests.ts';
import { MODEL_METADATA_SCHEMA, REQUEST_SCHEMAS, RESPONSE_SCHEMAS, type ModelMetadata } from '../../src/encoder/schemas.ts';
import { ServedModelNames } from '../../src/serve/model-names.ts';
import { COHERE_EMBED_REQUEST_SCHEMA } from '../../src/serve/http/cohere-embed.ts';
import { createHttpApp } from '../../src/serve/http/index.ts';
import { EMBEDDINGS_REQUEST_SCHEMA } from '../../src/serve/http/openai-embeddings.ts';
import {
  COHERE_EMBED_RESPONSE_SCHEMA,
  EMBEDDINGS_RESPONSE_SCHEMA,
  MODEL_LIST_SCHEMA,
  MODEL_SCHEMA,
  OPENAI_ERROR_SCHEMA,
  RERANK_RESPONSE_SCHEMA,
} from '../../src/serve/http/openapi-field-apis.ts';
import { toOpenApiSchema } from '../../src/serve/http/openapi-schema.ts';
import { RERANK_REQUEST_SCHEMA } from '../../src/serve/http/rerank.ts';
import { serverInfo } from '../../src/serve/server-info.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { stubServingLimits } from '../helpers/predict-responses.ts';

type Json = Record<string, unknown>;

const INFO = serverInfo({ target: 'aarch64-unknown-linux-gnu' });
const BODY_LIMIT = 4096;
const COMPONENTS: Record<ModelType, [string, string]> = {
  embedding: ['EmbeddingRequest', 'EmbeddingResponse'],
  sentence_embedding: ['SentenceEmbeddingRequest', 'SentenceEmbeddingResponse'],
  sequence_classification: ['SequenceClassificationRequest', 'SequenceClassificationResponse'],
  token_classification: ['TokenClassificationRequest', 'TokenClassificationResponse'],
};

/** The document depends on the model's metadata only; predict answers with the real validator's errors. */
function metadataOnlyPredictor(metadata: ModelMetadata): Predictor {
  return {
    modelId: metadata.model_id,
    modelType: metadata.model_type,
    metadata: () => metadata,
    predict: async (body) => {
      parsePredictRequest(metadata.model_type, body);
      throw new Error('not a model');
    },
    embed: () => Promise.reject(new Error('not a model')),
    rerank: () => Promise.reject(new Error('not a model')),
    tokenize: () => Promise.reject(new Error('not a model')),
    decode: () => Promise.reject(new Error('not a model')),
    servingLimits: stubServingLimits,
  };
}

const MODELS: ModelMetadata[] = [
  { model_id: 'embedder', model_type: 'embedding', pooling: 'mean', normalize: true },
  { model_id: 'sentences', model_type: 'sentence_embedding', pooling: 'cls', normalize: false },
  { model_id: 'sentiment', model_type: 'sequence_classification', id2label: { 0: 'negative', 1: 'positive', 2: 'neutral' } },
  { model_id: 'unlabelled', model_type: 'sequence_classification', id2label: {} },
  { model_id: 'ner', model_type: 'token_classification', id2label: { 0: 'O', 1: 'B-PER', 2: 'I-PER', 3: 'B-LOC', 4: 'I-LOC' } },
];

const apps = new Map<string, FastifyInstance>();
const documents = new Map<string, Json>();

beforeAll(async () => {
  for (const metadata of MODELS) {
    const app = await createHttpApp(metadataOnlyPredictor(metadata), { bodyLimitBytes: BODY_LIMIT, serverInfo: INFO });
    apps.set(metadata.model_id, app);
    const response = await app.inject('/openapi.json');
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
    documents.set(metadata.model_id, response.json());
  }
});

afterAll(async () => {
  await Promise.all([...apps.values()].map((app) => app.close()));
});

/** Inlines `#/components/schemas/…` references, for Ajv. */
function deref(schema: unknown, document: Json): unknown {
  if (Array.isArray(schema)) return schema.map((item) => deref(item, document));
  if (typeof schema !== 'object' || schema === null) return schema;
  const ref = (schema as Json).$ref;
  if (typeof ref === 'string') {
    const name = ref.replace('#/components/schemas/', '');
    return deref(((document.components as Json).schemas as Json)[name], document);
  }
  return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, deref(value, document)]));
}

interface ExampleSite {
  where: string;
  schema: unknown;
  examples: { name: string; value: unknown }[];
}

/** Every media type of every request body and response that carries examples, with its schema. */
function exampleSites(document: Json): ExampleSite[] {
  const sites: ExampleSite[] = [];
  const collect = (where: string, content: Json | undefined) => {
    for (const [mediaType, media] of Object.entries(content ?? {}) as [string, Json][]) {
      const examples = Object.entries((media.examples ?? {}) as Record<string, { value: unknown }>).map(([name, e]) => ({ name, value: e.value }));
      if ('example' in media) examples.push({ name: 'example', value: media.example });
      sites.push({ where: `${where} ${mediaType}`, schema: media.schema, examples });
    }
  };
  for (const [path, item] of Object.entries(document.paths as Json)) {
    for (const [method, operation] of Object.entries(item as Json) as [string, Json][]) {
      collect(`${method.toUpperCase()} ${path} request`, (operation.requestBody as Json | undefined)?.content as Json | undefined);
      for (const [status, response] of Object.entries(operation.responses as Json)) {
        collect(`${method.toUpperCase()} ${path} ${status}`, (response as Json).content as Json | undefined);
      }
    }
  }
  return sites;
}

describe.each(MODELS)('the OpenAPI document of $model_type model $model_id', (metadata) => {
  const documentOf = () => documents.get(metadata.model_id)!;

  it('is a valid OpenAPI 3.0 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(documentOf()));
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.0');
  });

  it('names the server and its build in info', () => {
    const info = documentOf().info as Json;
    expect(info.title).toBe('encoder');
    expect(info.version).toBe(packageJson.version);
    expect(info['x-build']).toEqual(INFO.build);
    expect(info.description).toContain(`"${metadata.model_id}"`);
    expect(info.description).toContain(INFO.build.onnxruntime);
  });

  it('holds exactly this model type’s schemas, equal to src/encoder/schemas.ts', () => {
    const schemas = (documentOf().components as Json).schemas as Json;
    const [request, response] = COMPONENTS[metadata.model_type];
    expect(schemas[request]).toEqual(REQUEST_SCHEMAS[metadata.model_type]);
    expect(schemas[response]).toEqual(RESPONSE_SCHEMAS[metadata.model_type]);
    expect(schemas.ModelMetadata).toEqual(MODEL_METADATA_SCHEMA);
    const otherTypes = Object.entries(COMPONENTS).filter(([type]) => type !== metadata.model_type);
    for (const name of otherTypes.flatMap(([, names]) => names)) expect(schemas[name]).toBeUndefined();
  });

  it('holds the field APIs’ schemas of this model type only, converted from the route files’ JSON schemas', () => {
    const schemas = (documentOf().components as Json).schemas as Json;
    const pooled = metadata.model_type === 'embedding' || metadata.model_type === 'sentence_embedding';
    const reranks = metadata.model_type === 'sequence_classification';
    const expected: [string, object, boolean][] = [
      ['OpenAiError', OPENAI_ERROR_SCHEMA, true],
      ['Model', MODEL_SCHEMA, true],
      ['ModelList', MODEL_LIST_SCHEMA, true],
      ['EmbeddingsRequest', EMBEDDINGS_REQUEST_SCHEMA, pooled],
      ['EmbeddingsResponse', EMBEDDINGS_RESPONSE_SCHEMA, pooled],
      ['CohereEmbedRequest', COHERE_EMBED_REQUEST_SCHEMA, pooled],
      ['CohereEmbedResponse', COHERE_EMBED_RESPONSE_SCHEMA, pooled],
      ['RerankRequest', RERANK_REQUEST_SCHEMA, reranks],
      ['RerankResponse', RERANK_RESPONSE_SCHEMA, reranks],
    ];
    for (const [name, schema, present] of expected) {
      if (present) expect(schemas[name], name).toEqual(toOpenApiSchema(schema));
      else expect(schemas[name], name).toBeUndefined();
    }
    // OpenAI's null param and code are OpenAPI 3.0's nullable, not a type list
    expect(((schemas.OpenAiError as Json).properties as { error: { properties: Json } }).error.properties.param).toMatchObject({ type: 'string', nullable: true });
    // and so is every optional field of a request, which null leaves unset; an enum says null too (OpenAPI 3.0.3)
    if (pooled) {
      const properties = (schemas.EmbeddingsRequest as { properties: Json }).properties;
      expect(properties.encoding_format).toMatchObject({ type: 'string', nullable: true, enum: ['float', 'base64', null] });
      expect(properties.dimensions).toMatchObject({ type: 'integer', nullable: true });
    }
    if (reranks) expect((schemas.RerankRequest as { properties: Json }).properties.top_n).toMatchObject({ type: 'integer', nullable: true });
  });

  it('documents exactly the field APIs this server serves: the others answer 404 in OpenAI’s shape', async () => {
    const app = apps.get(metadata.model_id)!;
    const paths = documentOf().paths as Json;
    for (const route of ['/v1/embeddings', '/v1/embed', '/v2/embed', '/v1/rerank', '/v2/rerank']) {
      const response = await app.inject({ method: 'POST', url: route, payload: '{}', headers: { 'content-type': 'application/json' } });
      const body = response.json() as { error: { message: string; type: string; param: string | null } };
      if (route in paths) {
        // served: the empty body reaches the route's own validation
        expect(response.statusCode, route).toBe(400);
        expect(body.error).toMatchObject({ type: 'invalid_request_error', message: expect.stringMatching(/^Missing required parameter: '(input|texts|query)'$/) });
      } else {
        expect(response.statusCode, route).toBe(404);
        expect(body.error).toMatchObject({ type: 'invalid_request_error', param: null, message: expect.stringContaining(`serves a ${metadata.model_type} model`) });
      }
    }
  });

  it('describes every path with every status it can answer', () => {
    const paths = documentOf().paths as Record<string, Record<string, { responses: Json; requestBody?: Json }>>;
    const statuses = (path: string, method: string) => Object.keys(paths[path][method].responses).sort();
    const fieldApis = {
      embedding: ['/v1/embeddings', '/v1/embed', '/v2/embed'],
      sentence_embedding: ['/v1/embeddings', '/v1/embed', '/v2/embed'],
      sequence_classification: ['/v1/rerank', '/v2/rerank'],
      token_classification: [],
    }[metadata.model_type];
    const teiRoutes: string[] = {
      embedding: ['/embed', '/embed_all'],
      sentence_embedding: ['/embed'],
      sequence_classification: ['/rerank'],
      token_classification: [],
    }[metadata.model_type];
    const infinityRoutes: string[] = {
      embedding: ['/embeddings'],
      sentence_embedding: ['/embeddings'],
      sequence_classification: ['/classify'],
      token_classification: [],
    }[metadata.model_type];
    expect(Object.keys(paths).sort()).toEqual(
      ['/health', '/ping', '/livez', '/mcp', '/model', '/openapi.json', '/predict', '/v1/models', '/v1/models/{model}', ...fieldApis, '/info', '/tokenize', '/decode', ...teiRoutes, '/', '/invocations', '/models', ...infinityRoutes].sort(),
    );
    // TEI's default route and SageMaker's: the operation of the route of the model's kind, under their own ids
    const reranker = metadata.model_type === 'sequence_classification' && Object.keys(metadata.id2label ?? {}).length === 1;
    const target = teiRoutes.includes('/embed') ? '/embed' : reranker ? '/rerank' : '/predict';
    for (const [path, operationId] of [['/', 'teiDefault'], ['/invocations', 'sagemakerInvocations']]) {
      const { operationId: id, summary: _summary, ...operation } = paths[path].post as Json;
      const { operationId: _id, summary: _targetSummary, ...targetOperation } = paths[target].post as Json;
      expect(id).toBe(operationId);
      expect(operation).toEqual(targetOperation);
    }
    expect(statuses('/ping', 'get')).toEqual(statuses('/health', 'get'));
    // TEI's routes: TEI's statuses, every error in TEI's body (/rerank: Infinity's body and its 422 too)
    expect(statuses('/info', 'get')).toEqual(['200']);
    const schemaOf = (path: string, status: string) => ((paths[path].post.responses[status] as Json).content as Json)['application/json'] as { schema: Json };
    for (const path of ['/tokenize', '/decode', ...teiRoutes]) {
      const errors = teiRoutes.includes(path) ? ['400', '413', '415', '422', '424'] : ['400', '413', '415', '422'];
      expect(statuses(path, 'post'), path).toEqual(['200', ...errors]);
      for (const status of errors) {
        const tei = { $ref: '#/components/schemas/TeiError' };
        expect(schemaOf(path, status).schema).toEqual(path === '/rerank' && status === '422' ? { oneOf: [tei, { $ref: '#/components/schemas/InfinityValidationError' }] } : tei);
      }
    }
    // Infinity's routes: its statuses and bodies
    expect(statuses('/models', 'get')).toEqual(['200']);
    for (const path of infinityRoutes) {
      expect(statuses(path, 'post'), path).toEqual(['200', '400', '413', '415', '422', '500']);
      const schemas = { 400: 'InfinityError', 500: 'InfinityError', 413: 'InfinityHttpError', 415: 'InfinityHttpError', 422: 'InfinityValidationError' };
      for (const [status, schema] of Object.entries(schemas)) expect(schemaOf(path, status).schema, `${path} ${status}`).toEqual({ $ref: `#/components/schemas/${schema}` });
    }
    expect(statuses('/v1/models', 'get')).toEqual(['200']);
    // any model name is this model (no --strict-model-name): no 404 for a name (strict servers: below)
    expect(statuses('/v1/models/{model}', 'get')).toEqual(['200']);
    for (const path of fieldApis) {
      expect(statuses(path, 'post')).toEqual(['200', '400', '413', '415', '500']);
      for (const status of ['400', '413', '415', '500']) {
        expect(((paths[path].post.responses[status] as Json).content as Json)['application/json']).toMatchObject({ schema: { $ref: '#/components/schemas/OpenAiError' } });
      }
    }
    expect(statuses('/health', 'get')).toEqual(['200', '503']);
    expect(statuses('/livez', 'get')).toEqual(['200']);
    expect(statuses('/model', 'get')).toEqual(['200']);
    expect(statuses('/openapi.json', 'get')).toEqual(['200']);
    expect(statuses('/predict', 'post')).toEqual(['200', '400', '413', '415', '422', '500']);
    expect(statuses('/mcp', 'post')).toEqual(['200', '202', '400', '403', '406', '413', '415']);
    expect(statuses('/mcp', 'get')).toEqual(['405']);
    expect(statuses('/mcp', 'delete')).toEqual(['405']);
    for (const status of ['400', '413', '415', '422', '500']) {
      expect(Object.keys((paths['/predict'].post.responses[status] as Json).content as Json)).toEqual(['text/plain']);
    }
    const [request, response] = COMPONENTS[metadata.model_type];
    expect(((paths['/predict'].post.requestBody!.content as Json)['application/json'] as Json).schema).toEqual({ $ref: `#/components/schemas/${request}` });
    expect((((paths['/predict'].post.responses['200'] as Json).content as Json)['application/json'] as Json).schema).toEqual({
      $ref: `#/components/schemas/${response}`,
    });
  });

  it('gives examples that the schemas it gives for them accept', () => {
    const document = documentOf();
    const ajv = new Ajv({ strict: false });
    const sites = exampleSites(document);
    const checked = sites.flatMap((site) => site.examples.map((example) => ({ site, example })));
    // requests, responses and errors of /predict, and the JSON-RPC messages of /mcp, all carry examples
    expect(sites.filter((site) => site.examples.length === 0).map((site) => site.where)).toEqual(['GET /openapi.json 200 application/json']);
    expect(checked.length).toBeGreaterThan(20);
    const validate = ajv.compile(deref({ $ref: '#/components/schemas/JsonRpcMessage' }, document) as object);
    expect(validate({ jsonrpc: '2.0', id: 1, method: 'ping' })).toBe(true);
    for (const { site, example } of checked) {
      const valid = ajv.validate(deref(site.schema, document) as object, example.value);
      expect(valid, `${site.where} example "${example.name}": ${ajv.errorsText()}`).toBe(true);
    }
  });

  it('gives response examples shaped like this model: its id, its labels, one result per input', () => {
    const post = ((documentOf().paths as Json)['/predict'] as Json).post as Json;
    const requests = ((post.requestBody as Json).content as Json)['application/json'] as { examples: Record<string, { value: { inputs: string[] } }> };
    const responses = ((post.responses as Json)['200'] as Json).content as Json;
    const examples = (responses['application/json'] as { examples: Record<string, { value: Json }> }).examples;
    expect(Object.keys(examples)).toEqual(Object.keys(requests.examples));
    const labels = Object.values(metadata.id2label ?? {});
    for (const [name, { value }] of Object.entries(examples)) {
      expect(value.model_id).toBe(metadata.model_id);
      expect(value.results).toHaveLength(requests.examples[name].value.inputs.length);
      const results = value.results as Json[];
      if (metadata.model_type === 'sequence_classification') {
        for (const result of results) {
          expect(result.logits).toHaveLength(Math.max(2, labels.length));
          if (labels.length > 0) expect(labels).toContain(result.predicted_label);
          else expect(result).not.toHaveProperty('predicted_label');
        }
      }
      if (metadata.model_type === 'token_classification') {
        for (const token of results.flatMap((result) => result.tokens as Json[])) expect(labels).toContain(token.label);
      }
      if (metadata.model_type === 'sentence_embedding') {
        // one vector per text, unit length exactly when the request (else the model) normalises
        const request = requests.examples[name].value as { normalize?: boolean };
        const unit = request.normalize ?? metadata.normalize;
        for (const result of results) {
          expect(Object.keys(result)).toEqual(['embedding']);
          expect(Math.abs(Math.hypot(...(result.embedding as number[])) - 1) < 1e-3, `${name}: unit length ${String(unit)}`).toBe(unit);
        }
      }
    }
  });

  it('gives the OpenAI-shaped errors the field APIs really answer', async () => {
    const app = apps.get(metadata.model_id)!;
    const paths = documentOf().paths as Record<string, Record<string, { responses: Record<string, Json> }>>;
    const route = Object.keys(paths).find((path) => path === '/v1/embeddings' || path === '/v1/rerank');
    if (route === undefined) return; // token classification: /v1/models only
    const examplesOf = (status: string) =>
      Object.values((((paths[route].post.responses[status].content as Json)['application/json'] as Json).examples as Json)) as { value: unknown }[];
    const badJson = await app.inject({ method: 'POST', url: route, payload: '{"inputs": ["hello",]}', headers: { 'content-type': 'application/json' } });
    expect(badJson.statusCode).toBe(400);
    expect(examplesOf('400').map((example) => example.value)).toContainEqual(JSON.parse(badJson.body));
    const wrongMediaType = await app.inject({ method: 'POST', url: route, payload: '{}', headers: { 'content-type': 'text/plain' } });
    expect(wrongMediaType.statusCode).toBe(415);
    expect(JSON.parse(wrongMediaType.body)).toEqual(examplesOf('415')[0].value);
    // any name is the one model served, under its own name
    const models = await app.inject({ method: 'GET', url: '/v1/models/nope' });
    expect(models.statusCode).toBe(200);
    expect(JSON.parse(models.body)).toMatchObject({ id: metadata.model_id, object: 'model' });
  });

  it("gives the Infinity-shaped errors and answers Infinity's routes really answer", async () => {
    const app = apps.get(metadata.model_id)!;
    const paths = documentOf().paths as Record<string, Record<string, { responses: Record<string, Json> }>>;
    const examplesOf = (route: string, method: string, status: string) =>
      ((paths[route][method].responses[status].content as Json)['application/json'] as Json).examples as Record<string, { value: unknown }>;
    const requests: Record<string, Record<string, unknown>> = {
      '/embeddings': { missing_input: {}, empty_input: { input: [] }, bad_json: '{"inputs": ["hello",]}' },
      '/classify': { missing_input: {}, a_text: { input: 'I am not having a great day.' }, bad_json: '{"inputs": ["hello",]}' },
    };
    for (const [route, byName] of Object.entries(requests)) {
      if (!(route in paths)) continue;
      const documented = examplesOf(route, 'post', '422');
      expect(Object.keys(documented).sort(), route).toEqual(Object.keys(byName).sort());
      for (const [name, request] of Object.entries(byName)) {
        const payload = typeof request === 'string' ? request : JSON.stringify(request);
        const response = await app.inject({ method: 'POST', url: route, payload, headers: { 'content-type': 'application/json' } });
        expect(response.statusCode, `${route} ${name}`).toBe(422);
        expect(response.json(), `${route} ${name}`).toEqual(documented[name].value);
      }
      const wrongMediaType = await app.inject({ method: 'POST', url: route, payload: '{}', headers: { 'content-type': 'text/plain' } });
      expect(wrongMediaType.statusCode).toBe(415);
      expect(wrongMediaType.json()).toEqual(Object.values(examplesOf(route, 'post', '415'))[0].value);
    }
    const models = await app.inject({ method: 'GET', url: '/models' });
    const documentedModels = Object.values(examplesOf('/models', 'get', '200'))[0].value as { data: Record<string, unknown>[] };
    expect(Object.keys((models.json() as typeof documentedModels).data[0]).sort()).toEqual(Object.keys(documentedModels.data[0]).sort());
  });

  it("gives the TEI-shaped errors TEI's routes really answer", async () => {
    const app = apps.get(metadata.model_id)!;
    const paths = documentOf().paths as Record<string, Record<string, { responses: Record<string, Json> }>>;
    const examplesOf = (route: string, status: string) =>
      Object.values((((paths[route].post.responses[status].content as Json)['application/json'] as Json).examples as Json)) as { value: unknown }[];
    // /decode's `ids: []` is one empty list (as in TEI), not an empty batch
    const routes: [string, object][] = [['/tokenize', { inputs: [] }]];
    if ('/embed' in paths) routes.push(['/embed', { inputs: [] }]);
    if ('/embed_all' in paths) routes.push(['/embed_all', { inputs: [] }]);
    if ('/rerank' in paths) routes.push(['/rerank', { query: 'q', texts: [] }]);
    for (const [route, emptyBatch] of routes) {
      const badJson = await app.inject({ method: 'POST', url: route, payload: '{"inputs": ["hello",]}', headers: { 'content-type': 'application/json' } });
      expect(badJson.statusCode, route).toBe(400);
      expect(examplesOf(route, '400').map((example) => example.value)).toContainEqual(JSON.parse(badJson.body));
      const empty = await app.inject({ method: 'POST', url: route, payload: JSON.stringify(emptyBatch), headers: { 'content-type': 'application/json' } });
      expect(empty.statusCode, route).toBe(400);
      expect(examplesOf(route, '400').map((example) => example.value)).toContainEqual(JSON.parse(empty.body));
      const wrongMediaType = await app.inject({ method: 'POST', url: route, payload: '{}', headers: { 'content-type': 'text/plain' } });
      expect(wrongMediaType.statusCode).toBe(415);
      expect(JSON.parse(wrongMediaType.body)).toEqual(examplesOf(route, '415')[0].value);
    }
  });

  it('gives the error messages the server really answers', async () => {
    const app = apps.get(metadata.model_id)!;
    const responses = (((documentOf().paths as Json)['/predict'] as Json).post as Json).responses as Record<string, Json>;
    const exampleOf = (status: string) => Object.values(((responses[status].content as Json)['text/plain'] as Json).examples as Json) as { value: string }[];
    const post = (payload: string, contentType: string) => app.inject({ method: 'POST', url: '/predict', payload, headers: { 'content-type': contentType } });

    expect((await post('{"inputs": ["hello",]}', 'application/json')).body).toBe(exampleOf('400')[0].value);
    expect((await post('{}', 'text/plain')).body).toBe(exampleOf('415')[0].value);
    const tooLarge = await post(JSON.stringify({ inputs: ['x'.repeat(BODY_LIMIT)] }), 'application/json');
    expect(tooLarge.statusCode).toBe(413);
    expect(tooLarge.body).toBe(exampleOf('413')[0].value);
    const inputErrors = exampleOf('422').map((example) => example.value);
    expect(inputErrors.length).toBeGreaterThanOrEqual(metadata.model_type === 'embedding' ? 8 : 7);
    for (const message of inputErrors) expect(message).toMatch(/^Invalid input: /);
    const missing = await post(JSON.stringify(metadata.model_type === 'embedding' ? { normalize: true } : {}), 'application/json');
    expect(missing.statusCode).toBe(422);
    expect(inputErrors).toContain(missing.body);
  });
});

// ---- the field APIs' examples against what a real model answers ----

type Operation = { requestBody?: { content: Json }; responses: Record<string, { content?: Json }> };

/** The examples of one media type of a documented request body or response, by name. */
function examplesAt(document: Json, path: string, method: string, status?: string): Record<string, unknown> {
  const operation = ((document.paths as Json)[path] as Record<string, Operation>)[method];
  const content = status === undefined ? operation.requestBody!.content : operation.responses[status].content!;
  const examples = (content['application/json'] as { examples: Record<string, { value: unknown }> }).examples;
  return Object.fromEntries(Object.entries(examples).map(([name, { value }]) => [name, value]));
}

/** Numbers depend on the model (width, maximum length) and the server's limits; the words do not. */
const wordsOf = (body: unknown) => JSON.stringify(body).replace(/\d+/g, '#');

/** What an embeddings response must be for its request: one item per input, in order, in the format asked for. */
function expectEmbeddingsAnswer(request: Json, response: Json, modelId: string, where: string): void {
  const inputs = typeof request.input === 'string' || typeof (request.input as unknown[])[0] === 'number' ? 1 : (request.input as unknown[]).length;
  expect(response, where).toMatchObject({ object: 'list', model: modelId, usage: { prompt_tokens: expect.any(Number), total_tokens: expect.any(Number) } });
  const data = response.data as { object: string; index: number; embedding: number[] | string }[];
  expect(data.map((item) => [item.object, item.index]), where).toEqual(Array.from({ length: inputs }, (_, i) => ['embedding', i]));
  for (const { embedding } of data) {
    expect(typeof embedding, where).toBe(request.encoding_format === 'base64' ? 'string' : 'object');
    const vector = typeof embedding === 'string' ? [...new Float32Array(new Uint8Array(Buffer.from(embedding, 'base64')).buffer)] : embedding;
    if (request.dimensions !== undefined) {
      expect(vector, where).toHaveLength(request.dimensions as number);
      expect(Math.hypot(...vector), where).toBeCloseTo(1, 5);
    }
  }
}

/** What a rerank response must be for its request: best first, top_n of them, each document's own text when asked. */
function expectRerankAnswer(request: Json, response: Json, modelId: string, where: string): void {
  const documents = request.documents as string[];
  const results = response.results as { index: number; relevance_score: number; document?: { text: string } }[];
  expect(response, where).toMatchObject({ id: expect.any(String), model: modelId, meta: { billed_units: { search_units: 1 } } });
  expect(results, where).toHaveLength(Math.min((request.top_n as number | undefined) ?? documents.length, documents.length));
  expect(new Set(results.map((result) => result.index)).size, where).toBe(results.length);
  for (const [i, result] of results.entries()) {
    if (i > 0) expect(result.relevance_score, where).toBeLessThanOrEqual(results[i - 1].relevance_score);
    if (request.return_documents === true) expect(result.document, where).toEqual({ text: documents[result.index] });
    else expect(result, where).not.toHaveProperty('document');
  }
}

/** The float32 values of a base64 vector. */
const float32sOf = (text: string) => [...new Float32Array(new Uint8Array(Buffer.from(text, 'base64')).buffer)];

/**
 * What a Cohere embed response must be for its request: one entry per text of each type asked for (v1 without
 * embedding_types: the vectors themselves), base64 the same float32 values, ubinary the sign bits of the floats (most
 * significant first) and binary those bytes minus 128, vectors of output_dimension components at unit length.
 */
function expectCohereEmbedAnswer(request: Json, response: Json, version: 1 | 2, where: string): void {
  const texts = (request.texts as string[] | undefined) ?? (request.inputs as { content: { text: string }[] }[]).map((input) => input.content.map((part) => part.text).join('\n'));
  const floats = version === 1 && request.embedding_types === undefined;
  expect(response, where).toMatchObject({
    id: expect.any(String),
    texts,
    meta: { api_version: { version: String(version) }, billed_units: { input_tokens: expect.any(Number) } },
    response_type: floats ? 'embeddings_floats' : 'embeddings_by_type',
  });
  if (floats) {
    expect(response.embeddings, where).toHaveLength(texts.length);
    return;
  }
  const embeddings = response.embeddings as Record<string, unknown[]>;
  expect(Object.keys(embeddings).sort(), where).toEqual([...((request.embedding_types as string[] | undefined) ?? ['float'])].sort());
  for (const list of Object.values(embeddings)) expect(list, where).toHaveLength(texts.length);
  texts.forEach((_text, i) => {
    const vector = (embeddings.float?.[i] as number[] | undefined) ?? float32sOf(embeddings.base64[i] as string);
    if (embeddings.base64) expect(float32sOf(embeddings.base64[i] as string), where).toEqual(vector.map(Math.fround));
    if (request.output_dimension !== undefined) {
      expect(vector, where).toHaveLength(request.output_dimension as number);
      expect(Math.hypot(...vector), where).toBeCloseTo(1, 5);
    }
    const bits = vector.map((value) => (value > 0 ? 1 : 0));
    const packed = Array.from({ length: Math.ceil(bits.length / 8) }, (_, byte) => bits.slice(byte * 8, byte * 8 + 8).reduce((sum: number, bit, k) => sum + bit * 2 ** (7 - k), 0));
    if (embeddings.ubinary) expect(embeddings.ubinary[i], where).toEqual(packed);
    if (embeddings.binary) expect(embeddings.binary[i], where).toEqual(packed.map((byte) => byte - 128));
  });
}

describe('the field APIs’ examples are what a real model answers', () => {
  const servers = {} as Record<'embedding' | 'sentence_embedding' | 'sequence_classification', { app: FastifyInstance; pipeline: PredictPipeline; document: Json }>;
  const pipelines: PredictPipeline[] = [];

  beforeAll(async () => {
    // bert-base-uncased's vocabulary size, so that the documented token ids exist; hidden size 32
    const embedder = await generateTinyModel({ modelType: 'embedding', vocabSize: 30522 });
    const classifier = await generateTinyModel({ modelType: 'sequence_classification', labels: ['irrelevant', 'relevant'] });
    const load = async (modelType: keyof typeof servers, dir: string) => {
      const yaml = `encoder:\n  name: real-${modelType}\n  path: ${dir}\n  model_type: ${modelType}\n`;
      const pipeline = await PredictPipeline.load(readModelPackage(parseBuildConfig(yaml, { baseDir: dir })), { maxRequestTokens: 64 });
      pipelines.push(pipeline);
      // strict about model names, so that the documented 404s for another name are there to check
      const modelNames = new ServedModelNames(pipeline.modelId, { strict: true });
      const app = await createHttpApp(pipeline, { bodyLimitBytes: BODY_LIMIT, serverInfo: INFO, modelNames });
      servers[modelType] = { app, pipeline, document: (await app.inject('/openapi.json')).json() };
    };
    await Promise.all([load('embedding', embedder), load('sentence_embedding', embedder), load('sequence_classification', classifier)]);
  });

  afterAll(async () => {
    await Promise.all(Object.values(servers).map(({ app }) => app.close()));
    await Promise.all(pipelines.map((pipeline) => pipeline.close()));
  });

  const post = (app: FastifyInstance, url: string, body: unknown) =>
    app.inject({ method: 'POST', url, payload: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json' } });

  it.each(['embedding', 'sentence_embedding'] as const)('%s: every documented 400, 404, 413 and 415 of /v1/embeddings', async (modelType) => {
    const { app, pipeline, document } = servers[modelType];
    const manyWords = Array.from({ length: 70 }, (_, i) => `word${i}`).join(' ');
    const requestFor: Record<string, unknown> = {
      bad_json: '{"inputs": ["hello",]}',
      missing_input: { inputs: ['hello world'] },
      empty: { input: '' },
      dimensions: { input: 'hello world', dimensions: 1024 },
      unknown_token: { input: [101, 99999999] },
      too_many_ids: { input: Array.from({ length: pipeline.tokenizer.maxLength + 1 }, () => 101) },
      too_many_tokens: { input: manyWords },
      modality: { input: 'hello', modality: 'image' },
    };
    const documented = examplesAt(document, '/v1/embeddings', 'post', '400');
    expect(Object.keys(documented).sort()).toEqual(Object.keys(requestFor).sort());
    for (const [name, request] of Object.entries(requestFor)) {
      const response = await post(app, '/v1/embeddings', request);
      expect(response.statusCode, name).toBe(400);
      expect(wordsOf(response.json()), name).toBe(wordsOf(documented[name]));
    }
    const otherModel = await post(app, '/v1/embeddings', { input: 'hello', model: 'text-embedding-3-small' });
    expect(otherModel.statusCode).toBe(404);
    expect(Object.values(examplesAt(document, '/v1/embeddings', 'post', '404'))).toEqual([otherModel.json()]);
    const tooLarge = await post(app, '/v1/embeddings', { input: 'x'.repeat(BODY_LIMIT) });
    expect(tooLarge.statusCode).toBe(413);
    expect(Object.values(examplesAt(document, '/v1/embeddings', 'post', '413'))).toEqual([tooLarge.json()]);
    const text = await app.inject({ method: 'POST', url: '/v1/embeddings', payload: '{}', headers: { 'content-type': 'text/plain' } });
    expect(text.statusCode).toBe(415);
    expect(Object.values(examplesAt(document, '/v1/embeddings', 'post', '415'))).toEqual([text.json()]);
  });

  it.each(['embedding', 'sentence_embedding'] as const)('%s: each documented request of /v1/embeddings gets the shape of its documented response', async (modelType) => {
    const { app, document } = servers[modelType];
    const requests = examplesAt(document, '/v1/embeddings', 'post') as Record<string, Json>;
    const responses = examplesAt(document, '/v1/embeddings', 'post', '200') as Record<string, Json>;
    expect(Object.keys(responses)).toEqual(Object.keys(requests));
    for (const [name, request] of Object.entries(requests)) {
      expectEmbeddingsAnswer(request, responses[name], `real-${modelType}`, `documented ${name}`);
      const response = await post(app, '/v1/embeddings', request);
      expect(response.statusCode, `${name}: ${response.body}`).toBe(200);
      expectEmbeddingsAnswer(request, response.json(), `real-${modelType}`, `answered ${name}`);
    }
  });

  it.each(['/v1/rerank', '/v2/rerank'])('%s: every documented 400 and 404, and the documented request gets the documented shape', async (route) => {
    const { app, document } = servers.sequence_classification;
    const requestFor: Record<string, unknown> = {
      bad_json: '{"inputs": ["hello",]}',
      missing_query: { documents: ['paris'] },
      no_documents: { query: 'capital of france', documents: [] },
      empty_document: { query: 'capital of france', documents: ['paris', ''] },
      top_n: { query: 'capital of france', documents: ['paris'], top_n: 0 },
      raw_scores: { query: 'capital of france', documents: ['paris'], raw_scores: 'yes' },
    };
    const documented = examplesAt(document, route, 'post', '400');
    expect(Object.keys(documented).sort()).toEqual(Object.keys(requestFor).sort());
    for (const [name, request] of Object.entries(requestFor)) {
      const response = await post(app, route, request);
      expect(response.statusCode, name).toBe(400);
      expect(response.json(), name).toEqual(documented[name]);
    }
    const otherModel = await post(app, route, { query: 'q', documents: ['d'], model: 'rerank-v3.5' });
    expect(otherModel.statusCode).toBe(404);
    expect(Object.values(examplesAt(document, route, 'post', '404'))).toEqual([otherModel.json()]);

    const requests = examplesAt(document, route, 'post') as Record<string, Json>;
    const responses = examplesAt(document, route, 'post', '200') as Record<string, Json>;
    expect(Object.keys(responses)).toEqual(Object.keys(requests));
    for (const [name, request] of Object.entries(requests)) {
      expectRerankAnswer(request, responses[name], 'real-sequence_classification', `documented ${name}`);
      const response = await post(app, route, request);
      expect(response.statusCode, name).toBe(200);
      expectRerankAnswer(request, response.json(), 'real-sequence_classification', `answered ${name}`);
    }
  });

  it('strict about model names: every field API and /v1/models/{model} document the 404 for another name', () => {
    for (const { document } of Object.values(servers)) {
      const paths = document.paths as Record<string, Record<string, { responses: Json }>>;
      expect(Object.keys(paths['/v1/models/{model}'].get.responses).sort()).toEqual(['200', '404']);
      const fieldApis = Object.keys(paths).filter((path) => /^\/v[12]\/(embeddings|embed|rerank)$/.test(path));
      expect(fieldApis.length).toBeGreaterThan(0);
      for (const path of fieldApis) expect(Object.keys(paths[path].post.responses).sort(), path).toEqual(['200', '400', '404', '413', '415', '500']);
    }
  });

  it.each([1, 2] as const)('/v%s/embed: every documented 400 and 404, and each documented request gets the shape of its documented response', async (version) => {
    const route = `/v${version}/embed`;
    for (const modelType of ['embedding', 'sentence_embedding'] as const) {
      const { app, document } = servers[modelType];
      const requestFor: Record<string, unknown> = {
        bad_json: '{"inputs": ["hello",]}',
        missing_texts: { input_type: 'search_query' },
        empty_texts: { texts: [] },
        int8: { texts: ['hello'], embedding_types: ['int8'] },
        images: { images: ['data:image/png;base64,iVBORw0KGgo='] },
        truncate_start: { texts: ['hello'], truncate: 'START' },
      };
      const documented = examplesAt(document, route, 'post', '400');
      expect(Object.keys(documented).sort()).toEqual(Object.keys(requestFor).sort());
      for (const [name, request] of Object.entries(requestFor)) {
        const response = await post(app, route, request);
        expect(response.statusCode, name).toBe(400);
        expect(response.json(), name).toEqual(documented[name]);
      }
      const otherModel = await post(app, route, { texts: ['hello'], model: 'embed-v4.0' });
      expect(otherModel.statusCode).toBe(404);
      expect(Object.values(examplesAt(document, route, 'post', '404'))).toEqual([otherModel.json()]);

      const requests = examplesAt(document, route, 'post') as Record<string, Json>;
      const responses = examplesAt(document, route, 'post', '200') as Record<string, Json>;
      expect(Object.keys(responses)).toEqual(Object.keys(requests));
      for (const [name, request] of Object.entries(requests)) {
        expectCohereEmbedAnswer(request, responses[name], version, `documented ${name}`);
        const response = await post(app, route, { ...request, model: `real-${modelType}` });
        expect(response.statusCode, `${name}: ${response.body}`).toBe(200);
        expectCohereEmbedAnswer(request, response.json(), version, `answered ${name}`);
      }
    }
  });

  it('/v1/models and /v1/models/{model}: the documented bodies, but for when the server started', async () => {
    for (const { app, document, pipeline } of Object.values(servers)) {
      const list = (await app.inject('/v1/models')).json() as { data: Json[] };
      const model = (await app.inject(`/v1/models/${pipeline.modelId}`)).json() as Json;
      expect(model.created).toBeTypeOf('number');
      const [documentedList] = Object.values(examplesAt(document, '/v1/models', 'get', '200')) as { data: Json[] }[];
      const [documentedModel] = Object.values(examplesAt(document, '/v1/models/{model}', 'get', '200')) as Json[];
      expect({ ...documentedModel, created: model.created }).toEqual(model);
      expect({ ...documentedList, data: documentedList.data.map((item) => ({ ...item, created: model.created })) }).toEqual(list);
      const other = await app.inject('/v1/models/text-embedding-3-small');
      expect(other.statusCode).toBe(404);
      expect(Object.values(examplesAt(document, '/v1/models/{model}', 'get', '404'))).toEqual([
        expect.objectContaining({ error: expect.objectContaining({ code: 'model_not_found', param: 'model' }) }),
      ]);
      expect(other.json()).toEqual(Object.values(examplesAt(document, '/v1/models/{model}', 'get', '404'))[0]);
    }
  });
});

describe('JSON Schema to OpenAPI 3.0 schema', () => {
  it('keeps what both dialects share, recursively', () => {
    for (const schema of [...Object.values(REQUEST_SCHEMAS), ...Object.values(RESPONSE_SCHEMAS), MODEL_METADATA_SCHEMA]) {
      expect(toOpenApiSchema(schema)).toEqual(schema);
    }
  });

  it('rewrites what OpenAPI 3.0 spells differently, at any depth', () => {
    const schema = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      $id: 'x',
      type: 'object',
      properties: {
        kind: { const: 'a', examples: ['a', 'b'] },
        name: { type: ['string', 'null'] },
        list: { type: 'array', items: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 } },
        map: { type: 'object', additionalProperties: { type: ['integer', 'null'] } },
        either: { oneOf: [{ const: 1 }, { type: 'string' }] },
      },
    };
    expect(toOpenApiSchema(schema)).toEqual({
      type: 'object',
      properties: {
        kind: { enum: ['a'], example: 'a' },
        name: { type: 'string', nullable: true },
        list: { type: 'array', items: { type: 'number', minimum: 0, exclusiveMinimum: true, maximum: 1, exclusiveMaximum: true } },
        map: { type: 'object', additionalProperties: { type: 'integer', nullable: true } },
        either: { oneOf: [{ enum: [1] }, { type: 'string' }] },
      },
    });
  });

  it('refuses what OpenAPI 3.0 cannot express, naming where', () => {
    expect(() => toOpenApiSchema({ type: 'object', properties: { a: { type: 'array', prefixItems: [] } } })).toThrow(
      '#/properties/a/prefixItems: JSON schema keyword "prefixItems" has no OpenAPI 3.0 equivalent here',
    );
    expect(() => toOpenApiSchema({ $defs: {} })).toThrow('"$defs"');
    expect(() => toOpenApiSchema({ type: ['string', 'number'] })).toThrow('#/type: OpenAPI 3.0 takes exactly one type besides null');
    expect(() => toOpenApiSchema({ items: true })).toThrow('#/items: a JSON schema must be an object');
    expect(() => toOpenApiSchema({ exclusiveMinimum: true })).toThrow('#/exclusiveMinimum: expected a number');
  });
});
