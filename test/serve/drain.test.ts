/**
 * A graceful shutdown as Kubernetes expects it, at the level of RunningServer (src/serve/encoder-server.ts):
 * drain() takes readiness away at once (GET /health 503, gRPC health NOT_SERVING) and serves everything else;
 * close() stops accepting and finishes what is in flight; its deadline, or cut(), ends what is still open.
 * In-process, with a predictor the test holds back, over real sockets on 127.0.0.1.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { afterEach, describe, expect, it } from 'vitest';
import type { BatchingPredictor } from '../../src/encoder/predictor.ts';
import type { PredictResponse } from '../../src/encoder/schemas.ts';
import { startEncoderServer, type RunningServer } from '../../src/serve/encoder-server.ts';
import { sample } from '../helpers/prometheus-text.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';
import { stubServingLimits } from '../helpers/predict-responses.ts';

const protoText = readFileSync(path.join(repoRoot, 'proto', 'encoder.proto'), 'utf8');

/** A predictor whose predictions wait until the test releases them (`hold`), or answer at once. */
class HeldPredictor implements BatchingPredictor {
  readonly modelId = 'm';
  readonly modelType = 'embedding' as const;
  holding = false;
  readonly waiting: (() => void)[] = [];
  metadata() {
    return { model_id: 'm', model_type: 'embedding' as const };
  }
  async predict(): Promise<PredictResponse> {
    if (this.holding) await new Promise<void>((resolve) => this.waiting.push(resolve));
    return { results: [], model_id: 'm' };
  }
  release(): void {
    this.holding = false;
    for (const resolve of this.waiting.splice(0)) resolve();
  }
  embed() {
    return Promise.resolve({ model_id: 'm', vectors: [], promptTokens: 0 });
  }
  rerank(): never {
    throw new Error('unused');
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
  batchingStats() {
    return { requests: 0, runs: 0, failedRuns: 0, isolatedRuns: 0, sequences: 0, tokens: 0, paddedTokens: 0, largestBatchTokens: 0, oversizeRuns: 0, queuedSequences: 0, runsInFlight: 0 };
  }
  observeBatches() {
    return () => {};
  }
}

const servers: RunningServer[] = [];
const clients: grpc.Client[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  await Promise.all(servers.splice(0).map((server) => server.close({ deadlineMs: 0 })));
});

async function start(predictor: BatchingPredictor): Promise<RunningServer & { url: string }> {
  const server = await startEncoderServer(predictor, {
    http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 },
    grpc: { host: '127.0.0.1', port: 0, protoText },
    target: 't',
  });
  servers.push(server);
  return Object.assign(server, { url: `http://127.0.0.1:${server.httpPort}` });
}

interface Answer {
  status: number;
  connection: string | undefined;
  body: string;
}

/** One request on a connection of its own (so that a closed listener shows as a refused connection). */
function request(url: string, method: string, route: string, body?: string): Promise<Answer> {
  const target = new URL(route, url);
  return new Promise((resolve, reject) => {
    const outgoing = http.request(
      { host: target.hostname, port: target.port, path: target.pathname, method, agent: false, headers: body === undefined ? {} : { 'content-type': 'application/json' } },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode!, connection: response.headers.connection, body: text }));
      },
    );
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

const predict = (url: string) => request(url, 'POST', '/predict', '{"inputs": ["a"], "normalize": true}');

function healthClient(address: string): grpc.Client {
  const file = path.join(repoRoot, 'node_modules/grpc-health-check/proto/health/v1/health.proto');
  const v1 = (((grpc.loadPackageDefinition(loadSync(file, { keepCase: true, enums: String })).grpc as grpc.GrpcObject).health as grpc.GrpcObject).v1 as grpc.GrpcObject).Health as grpc.ServiceClientConstructor;
  const client = new v1(address, grpc.credentials.createInsecure());
  clients.push(client);
  return client;
}

function healthCheck(client: grpc.Client): Promise<string> {
  return new Promise((resolve, reject) => {
    (client as unknown as { Check(request: object, callback: (error: Error | null, value: { status: string }) => void): void }).Check({ service: '' }, (error, value) =>
      error ? reject(error) : resolve(value.status),
    );
  });
}

/** A connection that sent the start of a request head and nothing more; resolves once the server has read it. */
async function stalledClient(port: number): Promise<{ closed: Promise<void> }> {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  await new Promise((resolve) => socket.once('connect', resolve));
  await new Promise((resolve) => socket.write('POST /predict HTTP/1.1\r\nHost: localhost\r\n', resolve));
  // the bytes are in the server's socket (same process): one pass of the event loop's poll phase reads them
  await new Promise((resolve) => setTimeout(resolve, 20));
  return { closed };
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > 5000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('drain', () => {
  it('answers /health (and /ping) 503 and gRPC health NOT_SERVING at once, /livez 200, and serves every other request (Connection: close)', async () => {
    const predictor = new HeldPredictor();
    const server = await start(predictor);
    const health = healthClient(`127.0.0.1:${server.grpcPort}`);
    expect((await request(server.url, 'GET', '/health')).status).toBe(200);
    expect(await request(server.url, 'GET', '/ping')).toMatchObject({ status: 200, body: '"OK!"' });
    expect(await healthCheck(health)).toBe('SERVING');

    server.drain();
    const draining = await request(server.url, 'GET', '/health');
    expect(draining).toEqual({ status: 503, connection: 'close', body: 'Service Unavailable: the server is shutting down' });
    expect((await request(server.url, 'HEAD', '/health')).status).toBe(503);
    // SageMaker's health check is readiness too
    expect(await request(server.url, 'GET', '/ping')).toEqual(draining);
    expect(await healthCheck(health)).toBe('NOT_SERVING');
    // liveness: a drain is no reason for the kubelet to kill the pod
    expect(await request(server.url, 'GET', '/livez')).toEqual({ status: 200, connection: 'close', body: '"OK!"' });
    const served = await predict(server.url);
    expect(served.status).toBe(200);
    expect(served.connection).toBe('close');
    expect((await request(server.url, 'GET', '/model')).status).toBe(200);
  });

  it('counts the HTTP requests in flight, at GET /metrics too', async () => {
    const predictor = new HeldPredictor();
    const server = await start(predictor);
    predictor.holding = true;
    const held = [predict(server.url), predict(server.url)];
    await until(() => predictor.waiting.length === 2, 'both requests to reach the predictor');
    expect(server.httpRequestsInFlight).toBe(2);
    const metrics = await request(server.url, 'GET', '/metrics');
    expect(sample(metrics.body, 'encoder_http_requests_in_flight')).toBe(3); // the two and the scrape
    predictor.release();
    await Promise.all(held);
    await until(() => server.httpRequestsInFlight === 0, 'the count to go back to 0');
  });
});

describe('close', () => {
  it('stops accepting, finishes the requests in flight, then resolves', async () => {
    const predictor = new HeldPredictor();
    const server = await start(predictor);
    predictor.holding = true;
    const inFlight = predict(server.url);
    await until(() => predictor.waiting.length === 1, 'the request to reach the predictor');
    let closed = false;
    const closing = server.close({ deadlineMs: 10_000 }).then((outcome) => {
      closed = true;
      return outcome;
    });
    await expect(request(server.url, 'GET', '/health')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(closed).toBe(false);
    predictor.release();
    expect((await inFlight).status).toBe(200);
    expect(await closing).toEqual({ cut: false });
  });

  it('cuts at its deadline a client stalled in its headers, and a request still being answered', async () => {
    const predictor = new HeldPredictor();
    const server = await start(predictor);
    const stalled = await stalledClient(server.httpPort!);
    predictor.holding = true;
    const answering = predict(server.url).catch((error: unknown) => error);
    await until(() => predictor.waiting.length === 1, 'the request to reach the predictor');
    const started = Date.now();
    expect(await server.close({ deadlineMs: 300 })).toEqual({ cut: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(Date.now() - started).toBeLessThan(3000);
    await stalled.closed;
    expect(await answering).toMatchObject({ message: expect.stringMatching(/socket hang up|ECONNRESET/) });
    predictor.release();
  });

  it('cut() ends at once what a close() without deadline waits for', async () => {
    const predictor = new HeldPredictor();
    const server = await start(predictor);
    const stalled = await stalledClient(server.httpPort!);
    predictor.holding = true;
    const answering = predict(server.url).catch((error: unknown) => error);
    await until(() => predictor.waiting.length === 1, 'the request to reach the predictor');
    let closed = false;
    const closing = server.close().finally(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(closed).toBe(false);
    server.cut();
    expect(await closing).toEqual({ cut: true });
    await stalled.closed;
    expect(await answering).toBeInstanceOf(Error);
    predictor.release();
  });
});
