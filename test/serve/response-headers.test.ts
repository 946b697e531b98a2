/**
 * Every HTTP response carries `X-Content-Type-Options: nosniff` and `Cache-Control: no-store`
 * (src/serve/http/response-headers.ts): model outputs, live state, descriptions and errors alike, those fastify
 * answers before any hook (a URL that does not decode) included.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';

let encoder: InProcessEncoder;

beforeAll(async () => {
  encoder = await serveInProcess(await generateTinyModel({ modelType: 'embedding' }), 'headers', 'embedding');
});
afterAll(() => encoder?.close());

/** The status and headers of one request, raw (fetch would normalise the path). */
function exchange(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  const url = new URL(encoder.httpUrl);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const request = http.request(
      { host: url.hostname, port: url.port, path, method, agent: false, headers: { ...(payload === undefined ? {} : { 'content-type': 'application/json' }), ...headers } },
      (response) => {
        response.resume();
        response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers }));
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

const MCP = { accept: 'application/json, text/event-stream' };
const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };

describe('response headers', () => {
  it.each([
    ['model outputs', 'POST', '/predict', { inputs: ['a text'], normalize: true }, {}, 200],
    ['model outputs', 'POST', '/v1/embeddings', { input: 'a text' }, {}, 200],
    ['model outputs', 'POST', '/mcp', INITIALIZE, MCP, 200],
    ['model outputs', 'POST', '/mcp', { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_encoder', arguments: { inputs: ['a'], normalize: true } } }, MCP, 200],
    ['live state', 'GET', '/health', undefined, {}, 200],
    ['live state', 'GET', '/metrics', undefined, {}, 200],
    ['descriptions', 'GET', '/openapi.json', undefined, {}, 200],
    ['descriptions', 'GET', '/model', undefined, {}, 200],
    ['descriptions', 'GET', '/v1/models', undefined, {}, 200],
    ['errors', 'POST', '/predict', { inputs: [] }, {}, 422],
    ['errors', 'GET', '/nope', undefined, {}, 404],
    ['errors', 'GET', '/predict', undefined, {}, 405],
    ['errors', 'GET', '/%zz', undefined, {}, 400],
    ['errors', 'POST', '/predict', { inputs: ['x'] }, { origin: 'https://evil.example' }, 403],
  ] as const)('%s: %s %s', async (_kind, method, path, body, headers, status) => {
    const answer = await exchange(method, path, body, headers);
    expect(answer.status).toBe(status);
    expect(answer.headers['x-content-type-options']).toBe('nosniff');
    expect(answer.headers['cache-control']).toBe('no-store');
  });
});
