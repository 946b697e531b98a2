import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv } from 'ajv';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import packageJson from '../../package.json' with { type: 'json' };
import type { ModelType } from '../../src/encoder/config.ts';
import type { Predictor } from '../../src/encoder/predict-pipeline.ts';
import { parsePredictRequest } from '../../src/encoder/requests.ts';
import { MODEL_METADATA_SCHEMA, REQUEST_SCHEMAS, RESPONSE_SCHEMAS, type ModelMetadata } from '../../src/encoder/schemas.ts';
import { createHttpApp } from '../../src/serve/http/index.ts';
import { toOpenApiSchema } from '../../src/serve/http/openapi-schema.ts';
import { serverInfo } from '../../src/serve/server-info.ts';

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

  it('describes every path with every status it can answer', () => {
    const paths = documentOf().paths as Record<string, Record<string, { responses: Json; requestBody?: Json }>>;
    const statuses = (path: string, method: string) => Object.keys(paths[path][method].responses).sort();
    const fieldApis = {
      embedding: ['/v1/embeddings'],
      sentence_embedding: ['/v1/embeddings'],
      sequence_classification: ['/v1/rerank', '/v2/rerank'],
      token_classification: [],
    }[metadata.model_type];
    expect(Object.keys(paths).sort()).toEqual(['/health', '/mcp', '/model', '/openapi.json', '/predict', '/v1/models', '/v1/models/{model}', ...fieldApis].sort());
    expect(statuses('/v1/models', 'get')).toEqual(['200']);
    expect(statuses('/v1/models/{model}', 'get')).toEqual(['200', '404']);
    for (const path of fieldApis) {
      expect(statuses(path, 'post')).toEqual(['200', '400', '404', '413', '415', '500']);
      for (const status of ['400', '404', '413', '415', '500']) {
        expect(((paths[path].post.responses[status] as Json).content as Json)['application/json']).toMatchObject({ schema: { $ref: '#/components/schemas/OpenAiError' } });
      }
    }
    expect(statuses('/health', 'get')).toEqual(['200']);
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
    const models = await app.inject({ method: 'GET', url: '/v1/models/nope' });
    expect(models.statusCode).toBe(404);
    expect(JSON.parse(models.body)).toMatchObject({ error: { param: 'model', code: 'model_not_found' } });
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
