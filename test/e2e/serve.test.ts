import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import * as grpcJs from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import type { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelType } from '../../src/encoder/config.ts';
import { baseRuntimePath, hasBaseRuntime, runExecutable, startListening, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { sample } from '../helpers/prometheus-text.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';
import { grpcClient, mcpClient, serveModel, type ServedModel } from '../helpers/served-model.ts';

const GRPC_INVALID_ARGUMENT = 3;
const GRPC_UNIMPLEMENTED = 12;
const GRPC_INTERNAL = 13;
const GRPC_UNAUTHENTICATED = 16;

let work: string;
let cacheDir: string;

/** Builds a model executable with a transform that fails on long batches, to reach the runtime-error rows. */
async function buildServedModel(modelType: ModelType): Promise<string> {
  const dir = await generateTinyModel({ modelType, ...(modelType === 'embedding' ? {} : { labels: ['O', 'B-X', 'I-X'] }) });
  const config = path.join(work, `${modelType}.yaml`);
  const transform =
    modelType === 'sequence_classification'
      ? '  transform: |\n    function Postprocess(arr, mask)\n      if mask ~= nil and mask:shape()[2] > 40 then error("batch too long for this test") end\n      return arr\n    end\n'
      : '  transform: |\n    function Postprocess(arr)\n      if arr:shape()[2] > 40 then error("batch too long for this test") end\n      return arr\n    end\n';
  writeFileSync(config, `encoder:\n  name: served-${modelType}\n  path: ${dir}\n  model_type: ${modelType}\n${transform}`);
  const output = path.join(work, `served-${modelType}`);
  const built = runExecutable(baseRuntimePath(), ['build', '-f', config, '--base-binary-path', baseRuntimePath(), '-o', output], { cacheDir });
  expect(built.status, built.stderr).toBe(0);
  return output;
}

/** Every value of the HTTP response is in the gRPC one; floats equal after rounding to float32 (the wire type). */
function expectSameAsGrpc(http: unknown, viaGrpc: unknown, where = 'response'): void {
  if (typeof http === 'number') {
    expect(viaGrpc, where).toBeTypeOf('number');
    expect(Math.abs(Math.fround(http) - (viaGrpc as number)), where).toBeLessThanOrEqual(Math.abs(Math.fround(http)) * 1e-7);
  } else if (Array.isArray(http)) {
    expect((viaGrpc as unknown[]).length, where).toBe(http.length);
    http.forEach((value, i) => expectSameAsGrpc(value, (viaGrpc as unknown[])[i], `${where}[${i}]`));
  } else if (http && typeof http === 'object') {
    for (const [key, value] of Object.entries(http)) expectSameAsGrpc(value, (viaGrpc as Record<string, unknown>)[key], `${where}.${key}`);
  } else {
    expect(viaGrpc, where).toEqual(http);
  }
}

function postHeadOf(contentLength: number): string {
  return `POST /predict HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${contentLength}\r\n\r\n`;
}

/** A raw connection to the server that sends `head` and no more; `closed` has what the server sent when it closed. */
function rawConnect(httpUrl: string, head: string): Promise<{ socket: net.Socket; closed: Promise<{ text: string; afterMs: number }> }> {
  const { hostname, port } = new URL(httpUrl);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(Number(port), hostname);
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    const closed = new Promise<{ text: string; afterMs: number }>((done) => socket.on('close', () => done({ text, afterMs: Date.now() - started })));
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.off('error', reject);
      socket.on('error', () => {}); // a reset after the answer is the server closing
      socket.write(head, () => resolve({ socket, closed }));
    });
  });
}

/** A POST whose head and first `sent` bytes of `body` go now, the rest at `finish()`, which resolves with the answer. */
function partialPost(url: string, body: string, sent: number): { finish(): Promise<{ status: number; body: string }> } {
  const target = new URL(url);
  const request = http.request({
    host: target.hostname,
    port: target.port,
    path: target.pathname,
    method: 'POST',
    agent: false,
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
  });
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    request.on('error', reject);
    request.on('response', (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, body: text }));
    });
  });
  answer.catch(() => {});
  request.write(body.slice(0, sent));
  return {
    finish() {
      request.end(body.slice(sent));
      return answer;
    },
  };
}

/** One series of GET /metrics. */
async function metric(httpUrl: string, series: string): Promise<number | undefined> {
  return sample(await (await fetch(`${httpUrl}/metrics`)).text(), series);
}

/** Polls `check` every 20 ms until it gives a value (truthy), for at most 10 s. */
async function until<T>(check: () => Promise<T | undefined | false>, what: string): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() - started > 10_000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The resident memory of a process (Linux: /proc/<pid>/status). */
function rssBytes(pid: number): number {
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kib) * 1024;
}

async function postPredict(served: ServedModel, body: unknown): Promise<Response> {
  return fetch(`${served.httpUrl}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

async function mcpError(served: ServedModel, args: Record<string, unknown>): Promise<McpError> {
  const client = await mcpClient(served.httpUrl);
  try {
    await client.callTool({ name: 'run_encoder', arguments: args });
  } catch (error) {
    return error as McpError;
  } finally {
    await client.close();
  }
  throw new Error('expected an MCP error');
}

warnIfNoBaseRuntime('serve');
describe.skipIf(!hasBaseRuntime())('serve from a built model executable', () => {
  beforeAll(() => {
    work = mkdtempSync(path.join(os.tmpdir(), 'e2e-serve-'));
    cacheDir = path.join(work, 'cache');
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  for (const modelType of ['embedding', 'sequence_classification', 'token_classification'] as const) {
    describe(modelType, () => {
      let served: ServedModel;
      let grpc: ReturnType<typeof grpcClient>;
      const body = { inputs: ['the first text', 'a second and longer text here'], metadata: { request: '1' }, ...(modelType === 'embedding' ? { normalize: true } : {}) };

      beforeAll(async () => {
        served = await serveModel(await buildServedModel(modelType), { cacheDir });
        grpc = grpcClient(served.grpcAddress, modelType);
      }, 120_000);
      afterAll(async () => {
        grpc?.close();
        expect(await served?.stop()).toBe(0);
      });

      it('names the model, the addresses and the batching settings at start-up', () => {
        expect(served.stderr()).toContain(`serving served-${modelType} (${modelType})`);
        expect(served.httpUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
        expect(served.grpcAddress).toMatch(/^127\.0\.0\.1:\d+$/);
        expect(served.stderr()).toMatch(/batching: up to \d+ tokens per onnxruntime run, waiting up to [\d.]+ ms/);
      });

      it('answers the same over HTTP, gRPC and MCP', async () => {
        const response = await postPredict(served, body);
        expect(response.status).toBe(200);
        const http = (await response.json()) as { model_id: string; metadata: Record<string, string> };
        expect(http.model_id).toBe(`served-${modelType}`);
        expect(http.metadata).toEqual({ request: '1' });

        const client = await mcpClient(served.httpUrl);
        const result = await client.callTool({ name: 'run_encoder', arguments: body });
        await client.close();
        expect(result.structuredContent).toEqual(http);
        expect(JSON.parse((result.content as { type: string; text: string }[])[0].text)).toEqual(http);

        expectSameAsGrpc(http, await grpc.predict(body));
        const metadata = (await (await fetch(`${served.httpUrl}/model`)).json()) as { model_id: string; id2label?: object };
        const grpcMetadata = await grpc.metadata({});
        expect(grpcMetadata.model_id).toBe(metadata.model_id);
        expect(grpcMetadata.model_type).toBe(modelType.toUpperCase());
        if (modelType !== 'embedding') expect(grpcMetadata.id2label).toEqual(metadata.id2label);
      });

      it("answers encoderfile 0.7.0's gRPC service as its own: the same results, in encoderfile's messages", async () => {
        // a client from encoderfile's .proto files (test/fixtures), as an encoderfile user has it
        const pkg = { embedding: 'embedding', sequence_classification: 'sequence_classification', token_classification: 'token_classification' }[modelType];
        const service = { embedding: 'EmbeddingInference', sequence_classification: 'SequenceClassificationInference', token_classification: 'TokenClassificationInference' }[modelType];
        const definition = loadSync(`proto/${pkg}.proto`, { keepCase: true, longs: String, enums: String, defaults: true, includeDirs: [path.join(repoRoot, 'test/fixtures/encoderfile-0.7.0')] });
        const Client = ((grpcJs.loadPackageDefinition(definition).encoderfile as grpcJs.GrpcObject)[pkg] as grpcJs.GrpcObject)[service] as grpcJs.ServiceClientConstructor;
        const client = new Client(served.grpcAddress, grpcJs.credentials.createInsecure());
        try {
          const request = { inputs: body.inputs, metadata: body.metadata };
          const answer = await new Promise<Record<string, unknown>>((resolve, reject) =>
            (client.Predict as (r: object, cb: (e: ServiceError | null, v: Record<string, unknown>) => void) => void).call(client, request, (error, value) => (error ? reject(error) : resolve(value))),
          );
          const http = (await (await postPredict(served, modelType === 'embedding' ? { ...request, normalize: false } : request)).json()) as { results: unknown[] };
          expect(answer.model_id).toBe(`served-${modelType}`);
          expect(answer.metadata).toEqual({ request: '1' });
          expect((answer.results as unknown[]).length).toBe(http.results.length);
          // the predicted class or label of each result is HTTP's (the numbers are compared in test/serve/grpc-encoderfile.test.ts)
          const pick = (result: unknown) => JSON.stringify(result, ['predicted_index', 'predicted_label', 'tokens', 'label', 'embeddings', 'token_info', 'token']);
          expect((answer.results as unknown[]).map(pick)).toEqual(http.results.map(pick));
        } finally {
          client.close();
        }
      });

      it('answers health and the OpenAPI document', async () => {
        const health = await fetch(`${served.httpUrl}/health`);
        expect(await health.json()).toBe('OK!');
        const openapi = (await (await fetch(`${served.httpUrl}/openapi.json`)).json()) as { openapi: string; paths: object };
        expect(openapi.openapi).toMatch(/^3\.0\./);
        expect(Object.keys(openapi.paths)).toEqual(expect.arrayContaining(['/health', '/model', '/openapi.json', '/predict', '/mcp']));
      });

      it('gives every input error its code on every front end', async () => {
        const bad = { ...body, inputs: ['fine', ''] };
        const http = await postPredict(served, bad);
        expect(http.status).toBe(422);
        expect(http.headers.get('content-type')).toMatch(/^text\/plain/);
        expect(await http.text()).toBe('Invalid input: inputs[1] is an empty string');

        const grpcError = (await grpc.predict(bad).catch((e: unknown) => e)) as ServiceError;
        expect(grpcError.code).toBe(GRPC_INVALID_ARGUMENT);
        expect(grpcError.details).toBe('Invalid input: inputs[1] is an empty string');

        const mcp = await mcpError(served, bad);
        expect(mcp.code).toBe(-32600);
        expect(mcp.message).toContain('Invalid input: inputs[1] is an empty string');
        expect(mcp.data ?? null).toBeNull();
      });

      it('refuses a request over its limits, naming them, on every front end', async () => {
        const [, inputs, tokens] = /limits: (\d+) inputs and (\d+) tokens per request/.exec(served.stderr())!.map(Number);
        expect([inputs, tokens]).toEqual([2048, 300_000]); // OpenAI's, the defaults
        // more inputs than the limit are refused before tokenizing
        const many = await postPredict(served, { ...body, inputs: Array.from({ length: inputs + 1 }, () => 'a') });
        expect(many.status).toBe(422);
        expect(await many.text()).toBe(`Invalid input: the request holds ${inputs + 1} inputs, more than the limit of ${inputs} inputs per request; send fewer inputs per request`);
        const manyBody = { ...body, inputs: Array.from({ length: inputs + 1 }, () => 'a') };
        const grpcMany = (await grpc.predict(manyBody).catch((e: unknown) => e)) as ServiceError;
        expect(grpcMany.code).toBe(GRPC_INVALID_ARGUMENT);
        expect(grpcMany.details).toMatch(/more than the limit of 2048 inputs per request/);
        expect((await mcpError(served, manyBody)).code).toBe(-32600);
        // results per token are held to --max-token-results (16,384): 746 inputs of 22 tokens with [CLS] and [SEP]
        const limit = modelType === 'sequence_classification' ? null : 16_384;
        const text = Array.from({ length: 20 }, () => 'word').join(' ');
        const over = { ...body, inputs: Array.from({ length: Math.ceil(16_384 / 22) + 1 }, () => text) };
        if (limit !== null) {
          const reason = /^Invalid input: the request holds \d+ tokens, more than the limit of 16384 tokens per request; send fewer or shorter inputs$/;
          const http = await postPredict(served, over);
          expect(http.status).toBe(422);
          expect(await http.text()).toMatch(reason);
          const grpcError = (await grpc.predict(over).catch((e: unknown) => e)) as ServiceError;
          expect(grpcError.code).toBe(GRPC_INVALID_ARGUMENT);
          expect(grpcError.details).toMatch(reason);
          const mcp = await mcpError(served, over);
          expect(mcp.code).toBe(-32600);
          expect(mcp.message).toMatch(/Invalid input: the request holds \d+ tokens, more than the limit/);
        } else {
          // pooled results: the same request is within 300,000 tokens, run in pieces
          const answered = await postPredict(served, over);
          expect(answered.status).toBe(200);
          expect(((await answered.json()) as { results: unknown[] }).results).toHaveLength(over.inputs.length);
          const empty = await postPredict(served, { ...body, inputs: [''] });
          expect(empty.status).toBe(422);
          expect(await empty.text()).toBe('Invalid input: inputs[0] is an empty string');
        }
        // a request within the limits is answered
        expect((await postPredict(served, { ...body, inputs: over.inputs.slice(0, 100) })).status).toBe(200);
      });

      it('gives every runtime error its code on every front end', async () => {
        const long = { ...body, inputs: [Array.from({ length: 60 }, () => 'word').join(' ')] };
        const http = await postPredict(served, long);
        expect(http.status).toBe(500);
        expect(await http.text()).toContain('batch too long for this test');

        const grpcError = (await grpc.predict(long).catch((e: unknown) => e)) as ServiceError;
        expect(grpcError.code).toBe(GRPC_INTERNAL);
        expect(grpcError.details).toContain('batch too long for this test');

        const mcp = await mcpError(served, long);
        expect(mcp.code).toBe(-32603);
        expect(mcp.data ?? null).toBeNull();

        // the failure was one batch's: the server goes on answering
        expect((await postPredict(served, body)).status).toBe(200);
      });

      it('leaves the services of other model types unimplemented', async () => {
        const other = modelType === 'embedding' ? 'token_classification' : 'embedding';
        const client = grpcClient(served.grpcAddress, other);
        const error = (await client.predict({ inputs: ['x'] }).catch((e: unknown) => e)) as ServiceError;
        client.close();
        expect(error.code).toBe(GRPC_UNIMPLEMENTED);
      });

      it('counts what it answered, and the runs that failed, at GET /metrics', async () => {
        const response = await fetch(`${served.httpUrl}/metrics`);
        expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
        const text = await response.text();
        // at least what the tests above sent
        const count = (series: string) => sample(text, series) ?? 0;
        const service = `/encoder.${{ embedding: 'Embedding', sequence_classification: 'SequenceClassification', token_classification: 'TokenClassification' }[modelType]}`;
        expect(count('encoder_http_requests_total{route="/predict",method="POST",status="200"}')).toBeGreaterThanOrEqual(3);
        expect(count('encoder_http_requests_total{route="/predict",method="POST",status="422"}')).toBeGreaterThanOrEqual(3);
        expect(count('encoder_http_requests_total{route="/predict",method="POST",status="500"}')).toBeGreaterThanOrEqual(1);
        expect(count('encoder_http_requests_total{route="/mcp",method="POST",status="200"}')).toBeGreaterThanOrEqual(4);
        expect(count(`encoder_grpc_requests_total{method="${service}/Predict",code="INVALID_ARGUMENT"}`)).toBeGreaterThanOrEqual(2);
        expect(count(`encoder_grpc_requests_total{method="${service}/Predict",code="INTERNAL"}`)).toBeGreaterThanOrEqual(1);
        expect(count('encoder_inference_runs_total{outcome="failed"}')).toBeGreaterThanOrEqual(3);
        expect(count('encoder_inference_runs_total{outcome="ok"}')).toBeGreaterThanOrEqual(4);
        expect(text).toMatch(new RegExp(`^encoder_info\\{model_id="served-${modelType}",model_type="${modelType}",version="[^"]+",node="[^"]+",onnxruntime="[^"]+",target="x86_64-unknown-linux-gnu"\\} 1$`, 'm'));
      });
    });
  }

  describe('stopping, and slow or stalled clients', () => {
    let executable: string;
    beforeAll(async () => {
      executable = await buildServedModel('embedding');
    }, 120_000);

    it('drains on SIGTERM as Kubernetes expects: /health 503 at once, requests arriving during the grace served, the one in flight finished, exit 0', async () => {
      const served = await serveModel(executable, { cacheDir, args: ['--shutdown-grace', '3000'] });
      const inputs = Array.from({ length: 200 }, (_, i) => `request number ${i} with a few words`);
      const body = JSON.stringify({ inputs, normalize: true });
      // the request in flight: the server has its head and half its body when the signal comes
      const inFlight = partialPost(`${served.httpUrl}/predict`, body, body.length >> 1);
      await until(async () => ((await metric(served.httpUrl, 'encoder_http_requests_in_flight')) ?? 0) >= 2, 'the server to hold the request (and the scrape)');
      const exited = served.stop(); // SIGTERM
      // readiness goes at once (the signal reaches the process asynchronously: at most a few polls)
      const health = await until(async () => {
        const response = await fetch(`${served.httpUrl}/health`);
        return response.status === 503 ? response : undefined;
      }, '/health to answer 503');
      expect(health.headers.get('connection')).toBe('close');
      expect(await health.text()).toBe('Service Unavailable: the server is shutting down');
      // a request arriving during the grace is served
      const arriving = await postPredict(served, { inputs: ['arrived after the signal'], normalize: true });
      expect(arriving.status).toBe(200);
      expect(((await arriving.json()) as { results: unknown[] }).results).toHaveLength(1);
      // the request in flight completes
      const completed = await inFlight.finish();
      expect(completed.status).toBe(200);
      expect((JSON.parse(completed.body) as { results: unknown[] }).results).toHaveLength(200);
      expect(await exited).toBe(0);
      expect(served.stderr()).toContain('SIGTERM: stopping; finishing requests in flight. /health answers 503 now; requests are still accepted for 3000 ms (--shutdown-grace)');
      expect(served.stderr()).toMatch(/no longer accepting; \d+ HTTP requests? in flight\nstopped\n$/);
      await expect(fetch(`${served.httpUrl}/health`)).rejects.toThrow();
    });

    it('is not kept alive past --shutdown-timeout by a client stalled in its headers', async () => {
      const served = await serveModel(executable, { cacheDir, args: ['--shutdown-grace', '500', '--shutdown-timeout', '2000'] });
      const stalled = await rawConnect(served.httpUrl, 'POST /predict HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n');
      const signalled = Date.now();
      expect(await served.stop()).toBe(0);
      const took = Date.now() - signalled;
      expect(took).toBeGreaterThanOrEqual(1900);
      expect(took).toBeLessThan(10_000);
      expect(served.stderr()).toContain('shutdown timeout: cut what was still open 2000 ms after the signal\n');
      expect(served.stderr()).toMatch(/stopped\n$/);
      await stalled.closed;
    });

    it('with only --http-hostname given listens for gRPC on that address too; SIGHUP leaves it serving', async () => {
      const args = ['serve', '--http-hostname', '127.0.0.1', '--http-port', '0', '--grpc-port', '0', '--shutdown-grace', '0'];
      const served = await startListening(executable, args, { cacheDir }, /batching: .*\n/);
      const grpcAddress = /gRPC +(\S+)/.exec(served.stderr())?.[1] ?? '';
      const httpUrl = /HTTP +(http:\/\/\S+)/.exec(served.stderr())?.[1] ?? '';
      expect(grpcAddress).toMatch(/^127\.0\.0\.1:\d+$/);
      const grpc = grpcClient(grpcAddress, 'embedding');
      try {
        served.child.kill('SIGHUP');
        await until(() => Promise.resolve(served.stderr().includes('SIGHUP: ignored; serve has nothing to reload (SIGTERM or SIGINT stops it)\n')), 'the SIGHUP line');
        expect(served.child.exitCode).toBeNull();
        expect((await fetch(`${httpUrl}/health`)).status).toBe(200);
        expect(((await grpc.predict({ inputs: ['still serving'], normalize: true })).results as unknown[]).length).toBe(1);
      } finally {
        grpc.close();
      }
      expect(await served.stop()).toBe(0);
    });

    it.skipIf(process.platform !== 'linux')('cuts 200 clients sending a body a byte every 10 s at --request-timeout (408), its memory bounded, /health answering throughout', async () => {
      const served = await serveModel(executable, { cacheDir, args: ['--request-timeout', '2000'] });
      try {
        // warm: a request, and prom-client loaded (a scrape), so that what grows later is the slow clients'
        expect((await postPredict(served, { inputs: ['warm'], normalize: true })).status).toBe(200);
        await fetch(`${served.httpUrl}/metrics`).then((response) => response.text());
        const baseline = rssBytes(served.child.pid!);
        let peak = baseline;
        const probes: number[] = [];
        let probing = true;
        const prober = (async () => {
          while (probing) {
            const started = Date.now();
            const response = await fetch(`${served.httpUrl}/health`);
            expect(response.status).toBe(200);
            await response.text();
            probes.push(Date.now() - started);
            peak = Math.max(peak, rssBytes(served.child.pid!));
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        })();
        const clients = await Promise.all(
          Array.from({ length: 200 }, () => rawConnect(served.httpUrl, 'POST /predict HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{')),
        );
        const trickle = setInterval(() => clients.forEach((client) => client.socket.writable && client.socket.write(' ')), 10_000);
        let answers: { text: string; afterMs: number }[];
        try {
          answers = await Promise.all(clients.map((client) => client.closed));
        } finally {
          clearInterval(trickle);
          probing = false;
          await prober;
        }
        for (const answer of answers) {
          expect(answer.text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n[\s\S]*\r\n\r\nRequest Timeout: the request was not received in time$/);
          expect(answer.afterMs).toBeGreaterThanOrEqual(1900);
          expect(answer.afterMs).toBeLessThan(10_000);
        }
        expect(probes.length).toBeGreaterThan(5);
        expect(Math.max(...probes)).toBeLessThan(1000);
        expect(peak - baseline).toBeLessThan(64 * 2 ** 20);
        expect((await fetch(`${served.httpUrl}/health`)).status).toBe(200);
      } finally {
        expect(await served.stop()).toBe(0);
      }
    });

    it.skipIf(process.platform !== 'linux')('holds at most --body-buffer-limit of bodies still arriving: 60 clients stalling after 3 MiB, the ones beyond get 503', async () => {
      const served = await serveModel(executable, { cacheDir, args: ['--request-timeout', '3000', '--body-limit', String(4 * 2 ** 20), '--body-buffer-limit', String(24 * 2 ** 20)] });
      try {
        await fetch(`${served.httpUrl}/metrics`).then((response) => response.text());
        const baseline = rssBytes(served.child.pid!);
        let peak = baseline;
        const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(served.child.pid!))), 50);
        const chunk = `{"inputs": ["${'x'.repeat(3 * 2 ** 20)}`;
        const clients = await Promise.all(Array.from({ length: 60 }, () => rawConnect(served.httpUrl, `${postHeadOf(4 * 2 ** 20)}${chunk}`)));
        const answers = await Promise.all(clients.map((client) => client.closed)).finally(() => clearInterval(sampler));
        const statuses = answers.map((answer) => /^HTTP\/1\.1 (\d+)/.exec(answer.text)?.[1] ?? 'none');
        const refused = statuses.filter((status) => status === '503').length;
        // 24 MiB hold eight bodies of 3 MiB: the rest are refused at once, the eight cut by the request timeout
        expect(refused).toBeGreaterThanOrEqual(60 - 9);
        expect(statuses.filter((status) => status !== '503').every((status) => status === '408' || status === 'none')).toBe(true);
        // measured: ~100 MiB of growth with this limit, ~260 MiB without (the 60 bodies are 180 MiB of text alone)
        expect(peak - baseline).toBeLessThan(160 * 2 ** 20);
        expect((await postPredict(served, { inputs: ['after'], normalize: true })).status).toBe(200);
      } finally {
        expect(await served.stop()).toBe(0);
      }
    });
  });

  it('with ENCODER_API_KEY requires the key on HTTP and gRPC, not on /health, and says so at start-up; a key that is no bearer token stops it', async () => {
    const executable = await buildServedModel('embedding');
    const served = await serveModel(executable, { cacheDir, env: { ENCODER_API_KEY: 'e2e-key_1' } });
    const grpc = grpcClient(served.grpcAddress, 'embedding');
    try {
      expect(served.stderr()).toContain('API key: required (Authorization: Bearer <key>) on every call but GET /health, GET /metrics and gRPC health');
      expect((await fetch(`${served.httpUrl}/health`)).status).toBe(200);
      const body = JSON.stringify({ inputs: ['a text'], normalize: true });
      const refused = await postPredict(served, { inputs: ['a text'], normalize: true });
      expect(refused.status).toBe(401);
      expect(await refused.text()).toBe('Unauthorized: this server requires an API key; send it as "Authorization: Bearer <key>"');
      const answered = await fetch(`${served.httpUrl}/predict`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer e2e-key_1' }, body });
      expect(answered.status).toBe(200);
      const grpcError = (await grpc.predict({ inputs: ['a text'], normalize: true }).catch((e: unknown) => e)) as ServiceError;
      expect(grpcError.code).toBe(GRPC_UNAUTHENTICATED);
    } finally {
      grpc.close();
      expect(await served.stop()).toBe(0);
    }
    const empty = runExecutable(executable, ['serve', '--api-key', 'two words'], { cacheDir });
    expect(empty.status).toBe(2);
    expect(empty.stderr).toContain('the API key must be a bearer token');
  });

  it('refuses to start with both front ends disabled', async () => {
    const executable = await buildServedModel('sequence_classification');
    const result = runExecutable(executable, ['serve', '--disable-http', '--disable-grpc'], { cacheDir });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('--disable-http and --disable-grpc together leave nothing to serve');
  });
});
