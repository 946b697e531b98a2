/**
 * `serve --enable-otel --otel-exporter-url`: traces reach a local OTLP/HTTP receiver (a node:http server in this
 * test that decodes the exporter's OTLP JSON bodies): one SERVER span per HTTP request and gRPC call, child of the
 * caller's W3C `traceparent` (header, metadata) in the caller's trace, with tokenize, queue wait and onnxruntime run
 * spans under it whose times nest in the request's. `serve` runs from the sources in a child process.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { callerContext, SPAN_KIND_INTERNAL, SPAN_KIND_SERVER, STATUS_CODE_ERROR, startOtlpReceiver, type OtlpReceiver, type OtlpSpan } from '../helpers/otlp-receiver.ts';
import { tracerOf } from '../../src/cli/serve-tracing.ts';
import { tracesUrlOf } from '../../src/serve/tracing/index.ts';
import { serveRefusal } from '../helpers/run-cli.ts';
import { grpcClient, serveFromSource, type ServedModel } from '../helpers/served-model.ts';

const work = mkdtempSync(path.join(os.tmpdir(), 'serve-otel-'));
let receiver: OtlpReceiver;
let served: ServedModel;
let config: string;

const spans = () => receiver.spans();
const inTrace = (traceId: string) => spans().filter((span) => span.traceId === traceId);
const attribute = (span: OtlpSpan, key: string) => span.attributes?.find((a) => a.key === key)?.value;

/** The spans of `traceId` once `count` have arrived (the exporter sends every 50 ms here). */
async function trace(traceId: string, count: number): Promise<OtlpSpan[]> {
  await expect.poll(() => inTrace(traceId).length, { timeout: 15_000, interval: 50 }).toBeGreaterThanOrEqual(count);
  return inTrace(traceId);
}

/** The request's span, child of the caller's, and its phases under it, each within the request's time. */
function expectRequestTree(found: OtlpSpan[], callerSpanId: string, name: string): OtlpSpan {
  const server = found.find((span) => span.kind === SPAN_KIND_SERVER)!;
  expect(server, 'the SERVER span').toBeDefined();
  expect(server.name).toBe(name);
  expect(server.parentSpanId).toBe(callerSpanId);
  const children = found.filter((span) => span.parentSpanId === server.spanId);
  expect(children.map((span) => span.name).sort()).toEqual(['onnxruntime run', 'queue wait', 'tokenize']);
  const [start, end] = [BigInt(server.startTimeUnixNano), BigInt(server.endTimeUnixNano)];
  for (const child of children) {
    expect(child.kind, child.name).toBe(SPAN_KIND_INTERNAL);
    expect(BigInt(child.startTimeUnixNano) >= start, `${child.name} starts within the request`).toBe(true);
    expect(BigInt(child.endTimeUnixNano) <= end, `${child.name} ends within the request`).toBe(true);
    expect(BigInt(child.endTimeUnixNano) >= BigInt(child.startTimeUnixNano), `${child.name} ends after it starts`).toBe(true);
  }
  const byName = Object.fromEntries(children.map((span) => [span.name, span]));
  // in the order they happened: tokenized, then queued, then run
  expect(BigInt(byName['queue wait'].startTimeUnixNano) >= BigInt(byName.tokenize.endTimeUnixNano)).toBe(true);
  expect(BigInt(byName['onnxruntime run'].startTimeUnixNano) >= BigInt(byName['queue wait'].startTimeUnixNano)).toBe(true);
  expect(attribute(byName.tokenize, 'inputs')).toEqual({ intValue: 2 });
  expect(Number(attribute(byName['onnxruntime run'], 'batch.rows')?.intValue)).toBeGreaterThanOrEqual(2);
  return server;
}

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  const model = await generateTinyModel({ modelType: 'embedding' });
  config = path.join(work, 'otel.yaml');
  writeFileSync(config, `encoder:\n  name: otel-model\n  path: ${model}\n  model_type: embedding\n`);
  const collector = receiver.url;
  served = await serveFromSource(config, {
    cacheDir: path.join(work, 'cache'),
    args: ['--enable-otel', '--otel-exporter-url', collector],
    env: { OTEL_BSP_SCHEDULE_DELAY: '50' },
  });
}, 120_000);

afterAll(async () => {
  await served?.stop();
  await receiver?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('OpenTelemetry traces', () => {
  it('an HTTP request: its span in the caller traceparent, with tokenize, queue wait and onnxruntime run', async () => {
    expect(served.stderr()).toMatch(/OpenTelemetry: traces of requests to http:\/\/127\.0\.0\.1:\d+\/v1\/traces/);
    const { traceId, spanId: callerSpanId, traceparent } = callerContext();
    const response = await fetch(`${served.httpUrl}/predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent },
      body: JSON.stringify({ inputs: ['a traced text', 'and another one'], normalize: true }),
    });
    expect(response.status).toBe(200);
    const server = expectRequestTree(await trace(traceId, 4), callerSpanId, 'POST /predict');
    expect(attribute(server, 'http.response.status_code')).toEqual({ intValue: 200 });
    expect(server.status?.code ?? 0).not.toBe(STATUS_CODE_ERROR);
    const request = receiver.received.find((r) => r.body.resourceSpans.some((rs) => rs.scopeSpans.some((s) => s.spans.some((span) => span.traceId === traceId))))!;
    expect(request.path).toBe('/v1/traces');
    expect(request.contentType).toMatch(/^application\/json/);
    expect(request.body.resourceSpans[0].resource.attributes).toEqual(expect.arrayContaining([{ key: 'service.name', value: { stringValue: 'otel-model' } }]));
  });

  it('a gRPC call: its span in the traceparent of its metadata; a failed call is an error span', async () => {
    const client = grpcClient(served.grpcAddress, 'embedding');
    try {
      const { traceId, spanId: callerSpanId, traceparent } = callerContext();
      const metadata = new grpc.Metadata();
      metadata.set('traceparent', traceparent);
      await client.predict({ inputs: ['over grpc', 'twice over grpc'], normalize: true }, metadata);
      const server = expectRequestTree(await trace(traceId, 4), callerSpanId, 'encoder.Embedding/Predict');
      expect(attribute(server, 'rpc.grpc.status_code')).toEqual({ intValue: 0 });

      const { traceId: failedTrace, spanId: failedCaller, traceparent: failedParent } = callerContext();
      const failing = new grpc.Metadata();
      failing.set('traceparent', failedParent);
      const error = (await client.predict({ inputs: [''], normalize: true }, failing).catch((e: unknown) => e)) as grpc.ServiceError;
      expect(error.code).toBe(grpc.status.INVALID_ARGUMENT);
      const [failed] = await trace(failedTrace, 1);
      expect(failed).toMatchObject({ name: 'encoder.Embedding/Predict', parentSpanId: failedCaller, status: { code: STATUS_CODE_ERROR } });
      expect(failed.status?.message).toMatch(/^INVALID_ARGUMENT: /);
    } finally {
      client.close();
    }
  });

  it('a request without traceparent starts a trace of its own; health probes are not traced', async () => {
    const before = new Set(spans().map((span) => span.traceId));
    await fetch(`${served.httpUrl}/health`);
    const response = await fetch(`${served.httpUrl}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: ['untraced caller'] }) });
    expect(response.status).toBe(200);
    await expect.poll(() => spans().filter((span) => !before.has(span.traceId) && span.kind === SPAN_KIND_SERVER).length, { timeout: 15_000 }).toBe(1);
    const root = spans().find((span) => !before.has(span.traceId) && span.kind === SPAN_KIND_SERVER)!;
    expect(root.name).toBe('POST /v1/embeddings');
    expect(root.parentSpanId ?? '').toBe('');
    expect(spans().some((span) => span.name.includes('/health'))).toBe(false);
  });
});

describe('OpenTelemetry options', () => {
  it('export nothing without --enable-otel, and say that a given --otel-exporter-url has no effect', async () => {
    const notes: string[] = [];
    expect(await tracerOf({ otelExporterUrl: 'http://collector:4318' }, { name: 'm', version: '1', modelId: 'm' }, notes)).toBeNull();
    expect(notes).toEqual(['--otel-exporter-url has no effect without --enable-otel: no traces are exported']);
    expect(await tracerOf({}, { name: 'm', version: '1', modelId: 'm' }, notes)).toBeNull();
    expect(notes).toHaveLength(1);
  });

  it('take a collector base URL or a full traces URL', () => {
    expect(tracesUrlOf('http://collector:4318')).toBe('http://collector:4318/v1/traces');
    expect(tracesUrlOf('https://collector.example/')).toBe('https://collector.example/v1/traces');
    expect(tracesUrlOf('https://collector.example/custom/traces')).toBe('https://collector.example/custom/traces');
  });

  it('refuses an exporter URL that is not an http(s) URL (exit 2)', async () => {
    for (const url of ['not a url', 'grpc://collector:4317']) {
      expect(await serveRefusal(config, ['--enable-otel', '--otel-exporter-url', url])).toMatch(/--otel-exporter-url .*(is not a URL|is not an http:\/\/ or https:\/\/ URL)/);
    }
  });
});
