/**
 * The deployment flags in the single executable (what the bundle carries, not the sources): a model built with the
 * runtime serves HTTPS and gRPC over TLS (--cert-file, --key-file), exports OpenTelemetry traces to a local OTLP/HTTP
 * receiver (--enable-otel, OTEL_EXPORTER_OTLP_ENDPOINT) and creates its session with the options given
 * (--execution-provider, --inter-op-threads) over those of its configuration's `session:` block, packed into the
 * executable (its graph optimization level and intra-op threads, which no flag replaces, hold).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selfSignedCertificate } from '../helpers/certificates.ts';
import { baseRuntimePath, hasBaseRuntime, runExecutable, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { callerContext, SPAN_KIND_SERVER, startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.ts';
import { grpcClient, serveModel, type ServedModel } from '../helpers/served-model.ts';

warnIfNoBaseRuntime('serve deployment flags');
describe.skipIf(!hasBaseRuntime())('serve deployment flags in the executable', () => {
  const work = mkdtempSync(path.join(os.tmpdir(), 'e2e-deploy-flags-'));
  const cacheDir = path.join(work, 'cache');
  const certificate = selfSignedCertificate(work, 'server');
  let receiver: OtlpReceiver;
  let served: ServedModel;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    const model = await generateTinyModel({ modelType: 'embedding' });
    const config = path.join(work, 'model.yaml');
    writeFileSync(
      config,
      `encoder:\n  name: flags-model\n  path: ${model}\n  model_type: embedding\n  session:\n    intra_op_threads: 1\n    inter_op_threads: 3\n    graph_optimization_level: layout\n`,
    );
    const executable = path.join(work, 'flags-model');
    const built = runExecutable(baseRuntimePath(), ['build', '-f', config, '--base-binary-path', baseRuntimePath(), '-o', executable], { cacheDir });
    expect(built.status, built.stderr).toBe(0);
    served = await serveModel(executable, {
      cacheDir,
      args: [
        ...['--cert-file', certificate.certFile, '--key-file', certificate.certFile.replace(/\.pem$/, '.key')],
        '--enable-otel', // where to: the standard variable (test/serve/otel.test.ts gives --otel-exporter-url)
        ...['--execution-provider', 'cpu', '--inter-op-threads', '2'],
      ],
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50' },
    });
  }, 180_000);

  afterAll(async () => {
    await served?.stop();
    await receiver?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('serves HTTPS and gRPC over TLS, traced, with the session options given over those it was built with', async () => {
    // the level (never the default, all) and intra-op threads from the manifest; the flag's 2 inter-op threads over its 3
    expect(served.stderr()).toContain('onnxruntime: execution provider cpu, graph optimization layout, intra-op threads 1 per worker, inter-op threads 2 (parallel)');
    expect(served.stderr()).toContain(`OpenTelemetry: traces of requests to ${receiver.url}/v1/traces (OTLP/HTTP)`);
    const { traceId, spanId, traceparent } = callerContext();
    const https = await import('node:https');
    const status = await new Promise<number>((resolve, reject) => {
      const body = JSON.stringify({ inputs: ['over https'], normalize: true });
      const request = https.request(`${served.httpUrl}/predict`, { method: 'POST', ca: certificate.cert, headers: { 'content-type': 'application/json', traceparent } }, (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode!));
      });
      request.on('error', reject);
      request.end(body);
    });
    expect(status).toBe(200);

    const client = grpcClient(served.grpcAddress, 'embedding', grpc.credentials.createSsl(certificate.cert), { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' });
    try {
      expect(((await client.predict({ inputs: ['over grpc with tls'], normalize: true })).results as unknown[]).length).toBe(1);
    } finally {
      client.close();
    }

    await expect.poll(() => receiver.spans().filter((span) => span.traceId === traceId).length, { timeout: 15_000 }).toBeGreaterThanOrEqual(4);
    const spans = receiver.spans().filter((span) => span.traceId === traceId);
    const server = spans.find((span) => span.kind === SPAN_KIND_SERVER)!;
    expect(server).toMatchObject({ name: 'POST /predict', parentSpanId: spanId });
    expect(spans.filter((span) => span.parentSpanId === server.spanId).map((span) => span.name).sort()).toEqual(['onnxruntime run', 'queue wait', 'tokenize']);
  });
});
