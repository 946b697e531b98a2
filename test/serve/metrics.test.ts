/**
 * GET /metrics on serve's HTTP port: Prometheus counters of what the front ends answered and of the onnxruntime runs
 * the batch scheduler made, checked against the scheduler's own counters, with real HTTP and gRPC clients.
 */
import * as grpc from '@grpc/grpc-js';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import { METRICS_LOAD_DELAY_MS, ServerMetrics } from '../../src/serve/metrics/server-metrics.ts';
import { serverInfo } from '../../src/serve/server-info.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';
import { sample } from '../helpers/prometheus-text.ts';
import { grpcClient } from '../helpers/served-model.ts';

async function scrape(url: string): Promise<string> {
  const response = await fetch(`${url}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
  return response.text();
}

function post(url: string, route: string, body: unknown): Promise<Response> {
  return fetch(`${url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

let encoder: InProcessEncoder;
let pipeline: PredictPipeline;
let url: string;
let client: ReturnType<typeof grpcClient>;

beforeAll(async () => {
  encoder = await serveInProcess(await generateTinyModel({ modelType: 'embedding' }), 'counted', 'embedding', { grpc: true });
  ({ pipeline, httpUrl: url } = encoder);
  client = grpcClient(encoder.grpcAddress!, 'embedding');
});

afterAll(async () => {
  client?.close();
  await encoder?.close();
});

describe('GET /metrics', () => {
  it('counts requests by route, method and status, gRPC calls by method and code, and the runs that served them', async () => {
    // before the first scrape and within METRICS_LOAD_DELAY_MS of listening: recorded before prom-client has loaded
    expect((await post(url, '/predict', { inputs: ['one text', 'a second text', 'and a third one'], normalize: true })).status).toBe(200);
    expect((await post(url, '/predict', { inputs: [], normalize: true })).status).toBe(422);
    expect((await post(url, '/v1/embeddings', { input: ['pooled'], model: 'counted' })).status).toBe(200);
    expect((await fetch(`${url}/nowhere/${Math.random()}`)).status).toBe(404);
    expect((await fetch(`${url}/predict`)).status).toBe(405);
    await client.predict({ inputs: ['over grpc', 'twice'], normalize: true });
    await expect(client.predict({ inputs: [], normalize: true })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    await client.metadata({});

    const text = await scrape(url);
    expect(sample(text, 'encoder_http_requests_total{route="/predict",method="POST",status="200"}')).toBe(1);
    expect(sample(text, 'encoder_http_requests_total{route="/predict",method="POST",status="422"}')).toBe(1);
    expect(sample(text, 'encoder_http_requests_total{route="/v1/embeddings",method="POST",status="200"}')).toBe(1);
    // a path no route matches is one label value, however many paths are tried
    expect(sample(text, 'encoder_http_requests_total{route="unmatched",method="GET",status="404"}')).toBe(1);
    expect(sample(text, 'encoder_http_requests_total{route="unmatched",method="GET",status="405"}')).toBe(1);
    expect(sample(text, 'encoder_http_request_duration_seconds_count{route="/predict",method="POST"}')).toBe(2);
    expect(sample(text, 'encoder_grpc_requests_total{method="/encoder.Embedding/Predict",code="OK"}')).toBe(1);
    expect(sample(text, 'encoder_grpc_requests_total{method="/encoder.Embedding/Predict",code="INVALID_ARGUMENT"}')).toBe(1);
    expect(sample(text, 'encoder_grpc_requests_total{method="/encoder.Embedding/GetModelMetadata",code="OK"}')).toBe(1);
    expect(sample(text, 'encoder_grpc_request_duration_seconds_count{method="/encoder.Embedding/Predict"}')).toBe(2);

    // the runs: 3 + 1 + 2 inputs, however the scheduler grouped them, and the same tokens as its own counters
    const stats = pipeline.batchingStats();
    expect(stats.sequences).toBe(6);
    expect(sample(text, 'encoder_inference_runs_total{outcome="ok"}')).toBe(stats.runs);
    expect(sample(text, 'encoder_inference_run_duration_seconds_count')).toBe(stats.runs);
    expect(sample(text, 'encoder_batch_rows_count')).toBe(stats.runs);
    expect(sample(text, 'encoder_batch_rows_sum')).toBe(6);
    expect(sample(text, 'encoder_batch_tokens_sum')).toBe(stats.paddedTokens);
    expect(sample(text, 'encoder_tokens_total{kind="input"}')).toBe(stats.tokens);
    expect(sample(text, 'encoder_tokens_total{kind="padding"}')).toBe(stats.paddedTokens - stats.tokens);
    expect(sample(text, 'encoder_queue_wait_seconds_count')).toBe(6);
    expect(sample(text, 'encoder_queue_inputs')).toBe(0);
    expect(sample(text, 'encoder_inference_runs_in_flight')).toBe(0);

    const info = serverInfo({ target: 'x86_64-unknown-linux-gnu' });
    const { node, onnxruntime, target } = info.build;
    expect(sample(text, `encoder_info{model_id="counted",model_type="embedding",version="${info.version}",node="${node}",onnxruntime="${onnxruntime}",target="${target}"}`)).toBe(1);
    expect(sample(text, 'encoder_process_resident_memory_bytes')).toBeGreaterThan(0);

    // every line is a comment or a sample: the text exposition format (prom-client writes NaN as "Nan", which Prometheus reads)
    for (const line of text.split('\n').filter(Boolean)) expect(line).toMatch(/^(# (HELP|TYPE) \w+ .+|\w+(\{[^}]*\})? -?[\d.e+-]+|\w+(\{[^}]*\})? (NaN|Nan|[+-]Inf))$/);

    // the scrape is counted by the next one, and the counters only grow
    await post(url, '/predict', { inputs: ['again'], normalize: true });
    const later = await scrape(url);
    expect(sample(later, 'encoder_http_requests_total{route="/metrics",method="GET",status="200"}')).toBe(1);
    expect(sample(later, 'encoder_http_requests_total{route="/predict",method="POST",status="200"}')).toBe(2);
    expect(sample(later, 'encoder_batch_rows_sum')).toBe(7);
  });

  it('is in the OpenAPI document, which stays valid', async () => {
    const document = (await (await fetch(`${url}/openapi.json`)).json()) as { paths: Record<string, { get?: { responses: Record<string, { content: object }> } }> };
    expect(Object.keys(document.paths['/metrics'].get!.responses[200].content)).toEqual(['text/plain; version=0.0.4; charset=utf-8']);
    const result = await new Validator().validate(structuredClone(document));
    expect(result.errors).toBeUndefined();
  });
});

describe('ServerMetrics', () => {
  const source = {
    modelId: 'm',
    modelType: 'embedding',
    serverInfo: serverInfo({ target: 'x86_64-unknown-linux-gnu' }),
    batchingStats: () => ({ requests: 0, runs: 0, failedRuns: 0, isolatedRuns: 0, sequences: 0, tokens: 0, paddedTokens: 0, largestBatchTokens: 0, oversizeRuns: 0, queuedSequences: 3, runsInFlight: 1 }),
  };

  it('keeps what is recorded before prom-client loads and records it when a scrape loads it', async () => {
    const metrics = new ServerMetrics(source);
    metrics.httpRequest('/predict', 'POST', 200, 0.004);
    metrics.grpcRequest('/encoder.Embedding/Predict', 'INTERNAL', 0.002);
    metrics.batchRun({ rows: 2, tokens: 7, paddedTokens: 8, queueWaitsMs: [3, 0], durationMs: 6, failed: true });
    const text = (await metrics.exposition()).text;
    expect(sample(text, 'encoder_http_requests_total{route="/predict",method="POST",status="200"}')).toBe(1);
    expect(sample(text, 'encoder_http_request_duration_seconds_bucket{le="0.005",route="/predict",method="POST"}')).toBe(1);
    expect(sample(text, 'encoder_grpc_requests_total{method="/encoder.Embedding/Predict",code="INTERNAL"}')).toBe(1);
    expect(sample(text, 'encoder_inference_runs_total{outcome="failed"}')).toBe(1);
    expect(sample(text, 'encoder_tokens_total{kind="padding"}')).toBe(1);
    expect(sample(text, 'encoder_queue_wait_seconds_sum')).toBeCloseTo(0.003, 9);
    expect(sample(text, 'encoder_queue_inputs')).toBe(3);
    expect(sample(text, 'encoder_inference_runs_in_flight')).toBe(1);

    // once loaded, straight into the registry
    metrics.httpRequest('/predict', 'POST', 200, 0.5);
    expect(sample((await metrics.exposition()).text, 'encoder_http_requests_total{route="/predict",method="POST",status="200"}')).toBe(2);
  });

  it(`loads by itself ${METRICS_LOAD_DELAY_MS} ms after the server listens, and not once the server has closed`, async () => {
    const soon = new ServerMetrics(source);
    const closed = new ServerMetrics(source);
    const started = performance.now();
    soon.loadSoon();
    closed.loadSoon();
    closed.close();
    expect(soon.loaded).toBe(false);
    await vi.waitFor(() => expect(soon.loaded).toBe(true), { timeout: METRICS_LOAD_DELAY_MS + 10_000, interval: 20 });
    expect(performance.now() - started).toBeGreaterThanOrEqual(METRICS_LOAD_DELAY_MS - 1);
    expect(closed.loaded).toBe(false);
  });
});
