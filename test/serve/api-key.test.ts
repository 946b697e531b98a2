/**
 * `serve --api-key`: every HTTP route but /health and /metrics, MCP at /mcp and every gRPC call but health require
 * `Authorization: Bearer <key>`; a request without it, or with another key, is refused before any work is done,
 * in each front end's own terms. Driven by the official clients (openai, the MCP SDK, grpc-js).
 */
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Validator } from '@seriousme/openapi-schema-validator';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/encoder/errors.ts';
import { ApiKey } from '../../src/serve/api-key.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';
import { grpcClient } from '../helpers/served-model.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

const KEY = 'sk-test_0123456789abcdef';
const MISSING = 'Unauthorized: this server requires an API key; send it as "Authorization: Bearer <key>"';
const INVALID = 'Unauthorized: the API key is not valid';

let encoder: InProcessEncoder;
let url: string;
let grpcAddress: string;
const grpcClients: grpc.Client[] = [];

beforeAll(async () => {
  encoder = await serveInProcess(await generateTinyModel({ modelType: 'embedding' }), 'guarded', 'embedding', { grpc: true, apiKey: new ApiKey(KEY) });
  url = encoder.httpUrl;
  grpcAddress = encoder.grpcAddress!;
});

afterAll(async () => {
  for (const client of grpcClients) client.close();
  await encoder?.close();
});

const predictBody = JSON.stringify({ inputs: ['a guarded text'], normalize: true });

function request(route: string, authorization?: string, init: RequestInit = {}): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(authorization === undefined ? {} : { authorization }) };
  return fetch(`${url}${route}`, { ...init, headers: { ...headers, ...(init.headers as Record<string, string> | undefined) } });
}

describe('HTTP with an API key', () => {
  it('answers /predict with the key, in any case of "Bearer"', async () => {
    for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
      const response = await request('/predict', `${scheme} ${KEY}`, { method: 'POST', body: predictBody });
      expect(response.status).toBe(200);
      expect(((await response.json()) as { model_id: string }).model_id).toBe('guarded');
    }
  });

  it('refuses /predict without the key, with another key, or another scheme: 401 text/plain and WWW-Authenticate, the body unread', async () => {
    const cases: [string | undefined, string, string][] = [
      [undefined, MISSING, 'Bearer'],
      ['', MISSING, 'Bearer'],
      [`Bearer ${KEY}x`, INVALID, 'Bearer error="invalid_token"'],
      [`Bearer ${KEY.slice(0, -1)}`, INVALID, 'Bearer error="invalid_token"'],
      [`Basic ${Buffer.from(`user:${KEY}`).toString('base64')}`, INVALID, 'Bearer error="invalid_token"'],
      [KEY, INVALID, 'Bearer error="invalid_token"'],
      [`Bearer ${KEY} extra`, INVALID, 'Bearer error="invalid_token"'],
    ];
    for (const [authorization, message, challenge] of cases) {
      // a body that does not even parse: refused for the key, not for the body
      const response = await request('/predict', authorization, { method: 'POST', body: '{"inputs": [' });
      expect(response.status, String(authorization)).toBe(401);
      expect(response.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(response.headers.get('www-authenticate')).toBe(challenge);
      expect(await response.text()).toBe(message);
    }
  });

  it('leaves /health and /metrics open, and guards /model, /openapi.json and paths that do not exist', async () => {
    expect(await (await request('/health')).json()).toBe('OK!');
    expect((await request('/health', 'Bearer wrong')).status).toBe(200);
    expect((await request('/metrics')).status).toBe(200);
    for (const route of ['/model', '/openapi.json', '/v1/models', '/nowhere']) {
      expect((await request(route)).status, route).toBe(401);
    }
    expect((await request('/model', `Bearer ${KEY}`)).status).toBe(200);
    expect((await request('/nowhere', `Bearer ${KEY}`)).status).toBe(404);
    expect((await request('/health', undefined, { method: 'HEAD' })).status).toBe(200);
    expect((await request('/model', undefined, { method: 'HEAD' })).status).toBe(401);
  });

  it("/v1/embeddings: OpenAI's client gets AuthenticationError with code invalid_api_key, and vectors with the key", async () => {
    const wrong = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'not-the-key', maxRetries: 0 });
    const error = await wrong.embeddings.create({ model: 'guarded', input: 'hello' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((error as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe('invalid_api_key');
    expect((error as Error).message).toContain(INVALID);

    const right = new OpenAI({ baseURL: `${url}/v1`, apiKey: KEY, maxRetries: 0 });
    const embeddings = await right.embeddings.create({ model: 'guarded', input: ['hello', 'world'] });
    expect(embeddings.data).toHaveLength(2);
  });

  it("MCP: the SDK's client cannot connect without the key and calls run_encoder with it", async () => {
    const refused = new McpClient({ name: 'no-key', version: '1.0.0' });
    const error = (await refused.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`))).catch((e: unknown) => e)) as Error & { code?: number };
    expect(error.code).toBe(401);
    expect(error.message).toContain('Unauthorized: this server requires an API key');

    const client = new McpClient({ name: 'with-key', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${KEY}` } } }));
    try {
      const result = await client.callTool({ name: 'run_encoder', arguments: { inputs: ['over mcp'], normalize: true } });
      expect((result.structuredContent as { model_id: string }).model_id).toBe('guarded');
    } finally {
      await client.close();
    }
  });

  it('counts the refusals in /metrics by route and status', async () => {
    const text = await (await request('/metrics')).text();
    expect(text).toMatch(/^encoder_http_requests_total\{route="\/predict",method="POST",status="401"\} ([7-9]|\d\d+)$/m);
    expect(text).toMatch(/^encoder_http_requests_total\{route="unmatched",method="GET",status="401"\} 1$/m);
  });

  it('says so in the OpenAPI document: a bearer scheme on every operation but health and metrics, each with its 401', async () => {
    const document = (await (await request('/openapi.json', `Bearer ${KEY}`)).json()) as {
      paths: Record<string, Record<string, { security?: object[]; responses: Record<string, { content?: Record<string, unknown> }> }>>;
      components: { securitySchemes: Record<string, object> };
    };
    expect(document.components.securitySchemes.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    for (const [route, item] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const open = route === '/health' || route === '/ping' || route === '/livez' || route === '/metrics';
        expect(operation.security, `${method} ${route}`).toEqual(open ? undefined : [{ apiKey: [] }]);
        expect(operation.responses[401] === undefined, `${method} ${route}`).toBe(open);
      }
    }
    expect(Object.keys(document.paths['/predict'].post.responses[401].content!)).toEqual(['text/plain']);
    expect(Object.keys(document.paths['/v1/embeddings'].post.responses[401].content!)).toEqual(['application/json']);
    const result = await new Validator().validate(structuredClone(document));
    expect(result.errors).toBeUndefined();
  });
});

describe('gRPC with an API key', () => {
  const CLIENT_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: false };
  type Callback = (error: grpc.ServiceError | null, value: unknown) => void;

  function clientOf(pkg: grpc.GrpcObject, service: string): grpc.Client {
    const client = new (pkg[service] as grpc.ServiceClientConstructor)(grpcAddress, grpc.credentials.createInsecure());
    grpcClients.push(client);
    return client;
  }

  function unary(client: grpc.Client, method: string, message: object, metadata = new grpc.Metadata()): Promise<unknown> {
    const call = (client as unknown as Record<string, (req: object, md: grpc.Metadata, cb: Callback) => void>)[method];
    return new Promise((resolve, reject) => call.call(client, message, metadata, (error, value) => (error ? reject(error) : resolve(value))));
  }

  const withKey = (value: string) => {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', value);
    return metadata;
  };

  it('answers Predict with the key in the authorization metadata and refuses it without: UNAUTHENTICATED', async () => {
    const client = grpcClient(grpcAddress, 'embedding');
    const inputs = { inputs: ['over grpc'], normalize: true };
    try {
      expect((await client.predict(inputs, withKey(`Bearer ${KEY}`))).model_id).toBe('guarded');
      await expect(client.predict(inputs)).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED, details: MISSING });
      await expect(client.predict(inputs, withKey('Bearer nope'))).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED, details: INVALID });
      await expect(client.metadata({})).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    } finally {
      client.close();
    }
    const text = await (await request('/metrics')).text();
    expect(text).toMatch(/^encoder_grpc_requests_total\{method="\/encoder\.Embedding\/Predict",code="OK"\} 1$/m);
    expect(text).toMatch(/^encoder_grpc_requests_total\{method="\/encoder\.Embedding\/Predict",code="UNAUTHENTICATED"\} 2$/m);
  });

  it('leaves health open and guards reflection', async () => {
    const health = loadSync(path.join(repoRoot, 'node_modules/grpc-health-check/proto/health/v1/health.proto'), CLIENT_OPTIONS);
    const v1 = ((grpc.loadPackageDefinition(health).grpc as grpc.GrpcObject).health as grpc.GrpcObject).v1 as grpc.GrpcObject;
    expect(await unary(clientOf(v1, 'Health'), 'Check', { service: '' })).toEqual({ status: 'SERVING' });

    const file = path.join(repoRoot, 'node_modules/@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto');
    const reflection = ((grpc.loadPackageDefinition(loadSync(file, CLIENT_OPTIONS)).grpc as grpc.GrpcObject).reflection as grpc.GrpcObject).v1 as grpc.GrpcObject;
    const ask = (metadata?: grpc.Metadata) =>
      new Promise<unknown>((resolve, reject) => {
        const stream = (clientOf(reflection, 'ServerReflection') as unknown as { ServerReflectionInfo(md?: grpc.Metadata): grpc.ClientDuplexStream<object, unknown> }).ServerReflectionInfo(metadata);
        stream.on('data', (response) => {
          resolve(response);
          stream.end();
        });
        stream.on('error', reject);
        stream.write({ list_services: '' });
      });
    await expect(ask()).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    expect(await ask(withKey(`Bearer ${KEY}`))).toMatchObject({ list_services_response: { service: expect.arrayContaining([{ name: 'encoder.Embedding' }]) } });
  });
});

describe('ApiKey', () => {
  it('refuses keys that cannot travel as a bearer token with a ConfigError', () => {
    for (const key of ['', 'has space', 'tab\there', 'ünïcode', 'a=b', 'quote"d']) {
      expect(() => new ApiKey(key), JSON.stringify(key)).toThrow(ConfigError);
    }
    for (const key of ['k', 'sk-live_ABC.def~ghi+jkl/mno', 'YWJj==']) expect(new ApiKey(key).refusalOf(`Bearer ${key}`)).toBeNull();
  });
});
