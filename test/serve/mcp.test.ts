import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Ajv } from 'ajv';
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import packageJson from '../../package.json' with { type: 'json' };
import { parseBuildConfig, type ModelType } from '../../src/encoder/config.ts';
import { ConfigError, InternalError } from '../../src/encoder/errors.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { Predictor } from '../../src/encoder/predictor.ts';
import { parsePredictRequest } from '../../src/encoder/requests.ts';
import { REQUEST_SCHEMAS, RESPONSE_SCHEMAS } from '../../src/encoder/schemas.ts';
import { createHttpApp } from '../../src/serve/http/index.ts';
import { serverInfo } from '../../src/serve/server-info.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { stubServingLimits } from '../helpers/predict-responses.ts';

const MODEL_TYPES = ['embedding', 'sentence_embedding', 'sequence_classification', 'token_classification'] as const;
const LABELS: Partial<Record<ModelType, string[]>> = {
  sequence_classification: ['negative', 'positive'],
  token_classification: ['O', 'B-LOC', 'I-LOC'],
};
const INFO = serverInfo({ target: 'x86_64-unknown-linux-gnu' });
const ACCEPT = 'application/json, text/event-stream';

const apps: FastifyInstance[] = [];
const pipelines: PredictPipeline[] = [];
const clients: Client[] = [];
const urls = {} as Record<ModelType, string>;

async function listen(predictor: Predictor): Promise<string> {
  const app = await createHttpApp(predictor, { bodyLimitBytes: 1024 * 1024, serverInfo: INFO });
  apps.push(app);
  return app.listen({ host: '127.0.0.1', port: 0 });
}

async function connect(url: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'encoder-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`));
  await client.connect(transport);
  clients.push(client);
  return { client, transport };
}

/** One JSON-RPC exchange without the SDK, to see exactly what is on the wire. */
async function rpc(url: string, message: object, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: ACCEPT, 'mcp-protocol-version': '2025-06-18', ...headers },
    body: JSON.stringify(message),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

function failingPredictor(error: unknown): Predictor {
  return {
    modelId: 'stub',
    modelType: 'sequence_classification',
    metadata: () => ({ model_id: 'stub', model_type: 'sequence_classification', id2label: {} }),
    embed: () => Promise.reject(error),
    rerank: () => Promise.reject(error),
    tokenize: () => Promise.reject(error),
    decode: () => Promise.reject(error),
    servingLimits: stubServingLimits,
    // validates like the pipeline, then fails while "running"
    predict: async (body) => {
      parsePredictRequest('sequence_classification', body);
      throw error;
    },
  };
}

const validArguments = (modelType: ModelType, inputs: string[]) => (modelType === 'embedding' ? { inputs, normalize: false } : { inputs });

beforeAll(async () => {
  await Promise.all(
    MODEL_TYPES.map(async (modelType) => {
      const dir = await generateTinyModel({ modelType, ...(LABELS[modelType] ? { labels: LABELS[modelType] } : {}) });
      const config = parseBuildConfig(`encoder:\n  name: mcp-${modelType}\n  path: ${dir}\n  model_type: ${modelType}\n`, { baseDir: dir });
      const pipeline = await PredictPipeline.load(readModelPackage(config));
      pipelines.push(pipeline);
      urls[modelType] = await listen(pipeline);
    }),
  );
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
});

afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
  await Promise.all(pipelines.map((pipeline) => pipeline.close()));
});

describe.each(MODEL_TYPES)('MCP of a %s model', (modelType) => {
  it('initializes with protocol 2025-06-18, tools only, and the server information', async () => {
    const { client, transport } = await connect(urls[modelType]);
    expect(transport.protocolVersion).toBe('2025-06-18');
    expect(client.getServerCapabilities()).toEqual({ tools: {} });
    expect(client.getServerVersion()).toEqual({ name: 'encoder', title: `encoder: mcp-${modelType} (${modelType})`, version: packageJson.version });
    const instructions = client.getInstructions()!;
    for (const detail of [`Node.js ${INFO.build.node}`, `onnxruntime ${INFO.build.onnxruntime}`, `target ${INFO.build.target}`, 'run_encoder']) {
      expect(instructions).toContain(detail);
    }
    expect(transport.sessionId).toBeUndefined();
  });

  it('lists exactly one tool, run_encoder, whose schemas are the HTTP request and response schemas', async () => {
    const { client } = await connect(urls[modelType]);
    const { tools, nextCursor } = await client.listTools();
    expect(nextCursor).toBeUndefined();
    expect(tools.map((tool) => tool.name)).toEqual(['run_encoder']);
    expect(tools[0].inputSchema).toEqual(REQUEST_SCHEMAS[modelType]);
    expect(tools[0].outputSchema).toEqual(RESPONSE_SCHEMAS[modelType]);
    expect(tools[0].annotations).toMatchObject({ readOnlyHint: true, openWorldHint: false });
  });

  it('answers tools/call with the response of POST /predict, as structured content and as JSON text', async () => {
    const { client } = await connect(urls[modelType]);
    const args = { ...validArguments(modelType, ['the river bank', 'a walk in Paris']), metadata: { via: 'mcp' } };
    const result = (await client.callTool({ name: 'run_encoder', arguments: args })) as CallToolResult;
    const http = await fetch(`${urls[modelType]}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(args) });
    expect(http.status).toBe(200);
    const expected = await http.json();
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toEqual(expected);
    expect(result.content).toHaveLength(1);
    expect(result.content[0].type).toBe('text');
    expect(JSON.parse((result.content[0] as { text: string }).text)).toEqual(expected);
    expect(new Ajv().validate(RESPONSE_SCHEMAS[modelType], result.structuredContent)).toBe(true);
  });

  it('answers invalid arguments with JSON-RPC error -32600, the message of a 422, and data null', async () => {
    const { client } = await connect(urls[modelType]);
    const error = await client.callTool({ name: 'run_encoder', arguments: { inputs: [] } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32600);
    expect((error as McpError).data).toBeNull();
    expect((error as McpError).message).toBe('MCP error -32600: Invalid input: inputs must not be empty');

    const wire = await rpc(urls[modelType], { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'run_encoder', arguments: { ...validArguments(modelType, ['a']), extra: 1 } } });
    expect(wire).toEqual({
      status: 200,
      body: { jsonrpc: '2.0', id: 7, error: { code: -32600, message: 'Invalid input: unknown field "extra"', data: null } },
    });
    const missing = await rpc(urls[modelType], { jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'run_encoder' } });
    expect(missing.body.error).toEqual({ code: -32600, message: 'Invalid input: missing required field "inputs"', data: null });
  });
});

describe('MCP carries the new request fields as /predict does', () => {
  async function viaBoth(modelType: ModelType, args: Record<string, unknown>): Promise<{ tool: CallToolResult; http: unknown }> {
    const { client } = await connect(urls[modelType]);
    const tool = (await client.callTool({ name: 'run_encoder', arguments: args })) as CallToolResult;
    const response = await fetch(`${urls[modelType]}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(args) });
    expect(response.status).toBe(200);
    return { tool, http: await response.json() };
  }

  it('sentence_embedding: normalize false gives the raw pooled vectors, true unit ones, as on HTTP', async () => {
    const raw = await viaBoth('sentence_embedding', { inputs: ['the river bank'], normalize: false });
    expect(raw.tool.structuredContent).toEqual(raw.http);
    const [vector] = (raw.tool.structuredContent as { results: { embedding: number[] }[] }).results.map((result) => result.embedding);
    expect(Math.hypot(...vector)).not.toBeCloseTo(1, 3);
    const unit = await viaBoth('sentence_embedding', { inputs: ['the river bank'], normalize: true });
    expect(unit.tool.structuredContent).toEqual(unit.http);
    expect(Math.hypot(...(unit.tool.structuredContent as { results: { embedding: number[] }[] }).results[0].embedding)).toBeCloseTo(1, 5);
  });

  it('sequence_classification: [text, text_pair] items are pairs, as on HTTP; a one-text pair is -32600', async () => {
    const pairs = await viaBoth('sequence_classification', { inputs: [['what is the capital of france', 'paris'], 'paris'] });
    expect(pairs.tool.structuredContent).toEqual(pairs.http);
    const [pair, single] = (pairs.tool.structuredContent as { results: { logits: number[] }[] }).results;
    expect(pair.logits).not.toEqual(single.logits);
    const { client } = await connect(urls.sequence_classification);
    // (a one-text item on HTTP is text-embeddings-inference's batch form, answered as TEI does: a three-text one is refused by both)
    const error = (await client.callTool({ name: 'run_encoder', arguments: { inputs: [['one', 'two', 'three']] } }).catch((e: unknown) => e)) as McpError;
    expect(error).toBeInstanceOf(McpError);
    expect(error.code).toBe(-32600);
    const http = await fetch(`${urls.sequence_classification}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ inputs: [['one', 'two', 'three']] }) });
    expect(http.status).toBe(422);
    expect(error.message).toBe(`MCP error -32600: ${await http.text()}`);
  });
});

describe('MCP errors and protocol details', () => {
  it('answers a failure of the model with JSON-RPC error -32603 and data null, for InternalError and ConfigError', async () => {
    for (const failure of [new InternalError('onnxruntime: the run failed'), new ConfigError('transform: Postprocess is missing')]) {
      const { client } = await connect(await listen(failingPredictor(failure)));
      const error = (await client.callTool({ name: 'run_encoder', arguments: { inputs: ['x'] } }).catch((e: unknown) => e)) as McpError;
      expect(error).toBeInstanceOf(McpError);
      expect(error.code).toBe(-32603);
      expect(error.data).toBeNull();
      expect(error.message).toBe(`MCP error -32603: ${failure.message}`);
    }
    const url = await listen(failingPredictor(new RangeError('out of memory')));
    const wire = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'run_encoder', arguments: { inputs: ['x'] } } });
    expect(wire.body.error).toEqual({ code: -32603, message: 'Internal error: out of memory', data: null });
    // input errors still win over the stub's failure: validation comes first
    const invalid = await rpc(url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_encoder', arguments: {} } });
    expect((invalid.body.error as { code: number }).code).toBe(-32600);
  });

  it('answers an unknown tool with -32602 (invalid params) and an unknown method with -32601', async () => {
    const url = urls.sequence_classification;
    const unknownTool = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'run_decoder', arguments: {} } });
    expect(unknownTool.body.error).toEqual({ code: -32602, message: 'Unknown tool "run_decoder"; the only tool is run_encoder', data: null });
    const unknownMethod = await rpc(url, { jsonrpc: '2.0', id: 2, method: 'resources/list' });
    expect((unknownMethod.body.error as { code: number }).code).toBe(-32601);
  });

  it('answers 2025-06-18 whatever version the client asks for, with the build details in _meta', async () => {
    for (const asked of ['2025-11-25', '2025-06-18', '2024-11-05', '1999-01-01']) {
      const { status, body } = await rpc(urls.embedding, {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: asked, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
      });
      expect(status).toBe(200);
      const result = body.result as Record<string, unknown>;
      expect(result.protocolVersion).toBe('2025-06-18');
      expect(result.capabilities).toEqual({ tools: {} });
      expect(result._meta).toEqual({ 'encoder/build': INFO.build, 'encoder/model': { model_id: 'mcp-embedding', model_type: 'embedding', pooling: 'mean', normalize: true } });
    }
  });

  it('accepts notifications with 202 and no body', async () => {
    const response = await fetch(`${urls.embedding}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: ACCEPT, 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    expect(response.status).toBe(202);
    expect(await response.text()).toBe('');
  });

  it('answers GET and DELETE /mcp with 405 and Allow: POST (stateless: no stream, no session)', async () => {
    for (const method of ['GET', 'DELETE']) {
      const response = await fetch(`${urls.embedding}/mcp`, { method, headers: { accept: 'text/event-stream' } });
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('POST');
      expect(await response.json()).toEqual({
        jsonrpc: '2.0',
        error: { code: -32000, message: `Method Not Allowed: ${method} /mcp; allowed: POST`, data: null },
        id: null,
      });
    }
  });

  it('answers HTTP-level failures on /mcp with JSON-RPC error objects', async () => {
    const url = urls.embedding;
    const post = (body: string, headers: Record<string, string>) => fetch(`${url}/mcp`, { method: 'POST', headers, body });
    const badJson = await post('{"jsonrpc": ', { 'content-type': 'application/json', accept: ACCEPT });
    expect(badJson.status).toBe(400);
    expect(await badJson.json()).toEqual({
      jsonrpc: '2.0',
      error: { code: -32700, message: 'Invalid JSON body: Unexpected end of JSON input', data: null },
      id: null,
    });
    const wrongType = await post('{}', { 'content-type': 'text/plain', accept: ACCEPT });
    expect(wrongType.status).toBe(415);
    expect(((await wrongType.json()) as { error: { code: number } }).error.code).toBe(-32000);
    // the SDK's transport checks Accept itself
    const notAcceptable = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), { 'content-type': 'application/json', accept: 'application/json' });
    expect(notAcceptable.status).toBe(406);
    expect(((await notAcceptable.json()) as { error: { code: number } }).error.code).toBe(-32000);
    // a request from a web page: refused against DNS rebinding, as MCP requires
    const fromPage = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), {
      'content-type': 'application/json',
      accept: ACCEPT,
      origin: 'http://rebound.example:8080',
    });
    expect(fromPage.status).toBe(403);
    expect(await fromPage.json()).toEqual({
      jsonrpc: '2.0',
      error: { code: -32000, message: 'Forbidden: requests from web pages (Origin http://rebound.example:8080) are not accepted; only loopback origins are (--allowed-origins adds others)', data: null },
      id: null,
    });
    // not a JSON-RPC message
    const notRpc = await post(JSON.stringify({ hello: 'world' }), { 'content-type': 'application/json', accept: ACCEPT });
    expect(notRpc.status).toBe(400);
  });

  it('serves concurrent tool calls from several clients, each with its own result', async () => {
    const url = urls.sequence_classification;
    const connections = await Promise.all([0, 1, 2, 3].map(() => connect(url)));
    const texts = ['first text', 'a second, longer text', 'third', 'the fourth and last one'];
    const results = await Promise.all(
      connections.map(({ client }, i) => client.callTool({ name: 'run_encoder', arguments: { inputs: [texts[i]], metadata: { i: String(i) } } })),
    );
    results.forEach((result, i) => expect((result as CallToolResult).structuredContent).toMatchObject({ metadata: { i: String(i) }, model_id: 'mcp-sequence_classification' }));
  });
});
