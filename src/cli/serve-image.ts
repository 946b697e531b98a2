/**
 * `serve` of an image model: its pipeline (image threads that decode, preprocess and run the model), HTTP (POST
 * /predict with base64 images, POST /predict/multipart as encoderfile has it) and gRPC (encoder.ImageClassification or
 * encoder.ImageEmbedding, and encoderfile's ImageClassificationInference for a classifier), until SIGTERM or SIGINT, with the same network, TLS, API key and shutdown options as a
 * text model (`--enable-otel`: a span per request), and MCP (run_encoder taking image content blocks) at /mcp and for
 * `mcp`.
 */
import { DEFAULT_IMAGE_LIMITS } from '../encoder/image/index.ts';
import type { CodecFiles } from '../encoder/image-codecs.ts';
import { MCP_PATH } from '../serve/http/errors.ts';
import type { ImageModelPackage } from '../encoder/image-model-package.ts';
import { ImagePipeline } from '../encoder/image-pipeline.ts';
import type { ApiKey } from '../serve/api-key.ts';
import type { HttpServerOptions } from '../serve/encoder-server.ts';
import type { TlsCertificates } from '../serve/tls-certificates.ts';
import type { CliContext, CliIo } from './program.ts';
import type { ModelServingOptions, ServedFrontEnds } from './serve-command.ts';
import type { ServeNetworkSettings } from './serve-network.ts';
import { sessionLine, sessionSettingsOf } from './serve-session.ts';
import { serveUntilStopped } from './serve-shutdown.ts';
import { tracerOf } from './serve-tracing.ts';
import { RUNTIME_VERSION } from './program.ts';

export async function serveImageModel(
  { io, context }: { io: CliIo; context: CliContext },
  pkg: ImageModelPackage,
  options: ModelServingOptions,
  network: ServeNetworkSettings,
  frontEnds: ServedFrontEnds,
  served: {
    http: HttpServerOptions | null;
    grpc: { host: string; port: number; protoText: string; maxMessageBytes?: number } | null;
    apiKey?: ApiKey;
    tls?: TlsCertificates;
    codecFiles?: CodecFiles;
  },
): Promise<void> {
  const notes: string[] = [];
  // a span per request (HTTP, gRPC), its phases (decode and preprocess, queue wait, onnxruntime run) under it
  const tracer = (await tracerOf(options, { name: pkg.name, version: RUNTIME_VERSION, modelId: pkg.name }, notes)) ?? undefined;
  const session = sessionSettingsOf(options, pkg.session);
  const pipeline = await ImagePipeline.load(pkg, {
    workers: options.workers,
    inferenceWorker: context.inferenceWorker?.(),
    threads: session.threads,
    soloThreads: options.soloThreads,
    sessionOptions: session.sessionOptions,
    maxBatchImages: options.maxBatchImages,
    maxWaitMs: options.maxWaitMs,
    maxRequestInputs: options.maxRequestInputs,
    codecFiles: served.codecFiles,
  });
  const { apiKey, tls } = served;
  const maxImageBytes = Math.min(DEFAULT_IMAGE_LIMITS.maxBytes, options.bodyLimit);
  let server;
  try {
    const { prepareImageServer } = await import('../serve/encoder-server.ts');
    const modelNames = { aliases: options.servedModelName, strict: options.strictModelName };
    server = await (await prepareImageServer(pipeline, { http: served.http, grpc: served.grpc, target: context.target, apiKey, tls, tracer, modelNames, maxImageBytes })).listen();
  } catch (error) {
    await pipeline.close();
    await tracer?.shutdown();
    throw error;
  }
  const reload = tls ? { what: `the TLS certificate (${tls.certFile}, ${tls.keyFile})`, run: () => tls.reload() } : undefined;
  const stopped = serveUntilStopped(server, network.shutdown, io, {}, reload);
  for (const note of notes) io.stderr(`note: ${note}\n`);
  const settings = pipeline.batchingSettings;
  const lines = [
    `serving ${pipeline.modelId} (${pipeline.modelType})`,
    ...(frontEnds.mcpFirst && server.httpUrl ? [`  MCP   ${server.httpUrl}${MCP_PATH}  the model's one tool, run_encoder, taking image content blocks (Streamable HTTP)`] : []),
    ...(server.httpUrl ? [`  HTTP  ${server.httpUrl}  POST /predict /predict/multipart${pkg.modelType === 'image_embedding' ? ' /v1/embeddings' : ''}, GET /model /health /openapi.json /metrics, MCP at /mcp`] : []),
    ...(server.grpcAddress ? [`  gRPC  ${server.grpcAddress}  ${server.grpcServices.join(', ')}`] : []),
    ...(tls ? [`  TLS: certificate ${tls.certFile}, key ${tls.keyFile}; SIGHUP reads them again for new connections`] : []),
    ...(tracer ? [`  OpenTelemetry: traces of requests to ${tracer.endpoint} (OTLP/HTTP)`] : []),
    `  limits: ${pipeline.maxRequestInputs} images per request, ${maxImageBytes} bytes and ${DEFAULT_IMAGE_LIMITS.maxPixels} pixels per image`,
    sessionLine(pipeline.sessionSettings, pipeline.soloSessionSettings),
    `  batching: up to ${settings.maxBatchTokens} images per onnxruntime run on ${options.workers} image thread(s), waiting up to ${settings.maxWaitMs} ms for more requests`,
    ...(apiKey ? ['  API key: required (Authorization: Bearer <key>) on every call but GET /health, GET /metrics and gRPC health'] : []),
  ];
  io.stderr(`${lines.join('\n')}\n`);
  await stopped;
  await pipeline.close();
  await tracer?.shutdown(); // exports the spans still buffered
  io.stderr('stopped\n');
}
