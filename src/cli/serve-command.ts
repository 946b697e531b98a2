import { type Command, InvalidArgumentError, Option } from 'commander';
import { POOLED_MODEL_TYPES, type ModelType } from '../encoder/config.ts';
import { ConfigError } from '../encoder/errors.ts';
import { defaultWorkerCount } from '../encoder/inference-workers.ts';
import { isImageModelPackage } from '../encoder/image-model-package.ts';
import { DEFAULT_MAX_BATCH_IMAGES } from '../encoder/image-pipeline.ts';
import { LatePredictor } from '../encoder/late-predictor.ts';
import { DEFAULT_MAX_REQUEST_INPUTS, DEFAULT_MAX_REQUEST_TOKENS } from '../encoder/pipeline-options.ts';
import { PredictPipeline } from '../encoder/predict-pipeline.ts';
import type { RunningServer } from '../serve/encoder-server.ts';
import { MCP_PATH } from '../serve/http/errors.ts';
import { modelNamesProblem } from '../serve/model-names.ts';
import { parseHostname, parseNonNegativeInteger, parseNonNegativeNumber, parsePort, parsePositiveInteger } from './arguments.ts';
import { addConfigOption, type ModelSource } from './model-source.ts';
import { traceStartup } from '../shared/startup-trace.ts';
import { RUNTIME_VERSION, type CliContext, type CliIo } from './program.ts';
import { addServeNetworkOptions, serveNetworkSettings, type ServeNetworkOptions, type ServeNetworkSettings } from './serve-network.ts';
import { addSessionOptions, sessionLine, sessionSettingsOf, type SessionCommandOptions } from './serve-session.ts';
import { serveUntilStopped } from './serve-shutdown.ts';
import { addTracingOptions, tracerOf, type TracingCommandOptions } from './serve-tracing.ts';

/**
 * The options `serve` and `mcp` share: the model, its limits and batching, its names and key; the network, TLS,
 * session and tracing ones (addDeploymentOptions).
 */
export interface ModelServingOptions extends ServeNetworkOptions, SessionCommandOptions, TracingCommandOptions {
  config?: string;
  bodyLimit: number;
  maxBatchTokens?: number;
  /** Image models: most images in one onnxruntime run (ImagePipeline's DEFAULT_MAX_BATCH_IMAGES when absent). */
  maxBatchImages?: number;
  maxWaitMs?: number;
  maxRequestTokens: number;
  maxRequestInputs: number;
  maxTokenResults: number;
  threads?: number;
  soloThreads?: number;
  workers: number;
  apiKey?: string;
  servedModelName?: string[];
  strictModelName?: boolean;
}

interface ServeCommandOptions extends ModelServingOptions {
  httpPort: number;
  httpHostname: string;
  grpcPort: number;
  grpcHostname: string;
  disableHttp?: boolean;
  disableGrpc?: boolean;
}

/**
 * Most tokens a request may hold when its response carries a result per token (`/predict` of embedding and
 * token_classification models). 16,384 is 32 inputs of 512 tokens (what text-embeddings-inference allows by default)
 * and keeps the largest such response of a 1024-wide model (~340 MB of JSON) within what one process can build.
 * Pooled results (embeddings, rerank, sequence classification) are bounded by OpenAI's limits instead
 * (DEFAULT_MAX_REQUEST_INPUTS, DEFAULT_MAX_REQUEST_TOKENS): a large request runs in pieces of one batch each.
 */
const DEFAULT_MAX_TOKEN_RESULTS = 16_384;

/** `serve`: HTTP (REST + MCP) and gRPC front ends over one predict pipeline, until SIGTERM or SIGINT. */
export function registerServeCommand(program: Command, io: CliIo, source: ModelSource, context: CliContext): void {
  const command = program.command('serve').description('Serve the model over HTTP (REST and MCP at /mcp) and gRPC');
  addConfigOption(command, source);
  command
    .option('--http-port <port>', 'HTTP port', parsePort, 8080)
    .option('--http-hostname <host>', 'HTTP address to listen on', parseHostname, '0.0.0.0')
    .option('--grpc-port <port>', 'gRPC port', parsePort, 50051)
    .addOption(new Option('--grpc-hostname <host>', 'gRPC address to listen on').argParser(parseHostname).default('::', '--http-hostname when that is given, else "::"'))
    .option('--disable-http', 'do not serve HTTP (REST and MCP)')
    .option('--disable-grpc', 'do not serve gRPC');
  addModelServingOptions(command)
    .action(async (options: ServeCommandOptions) => {
      if (options.disableHttp && options.disableGrpc) {
        throw new ConfigError('--disable-http and --disable-grpc together leave nothing to serve');
      }
      const network = serveNetworkSettings(options, (key) => command.getOptionValueSource(key));
      await serveModel({ io, source, context }, options, network, {
        http: options.disableHttp ? null : { host: options.httpHostname, port: options.httpPort, flags: '--http-port, --http-hostname' },
        grpc: options.disableGrpc ? null : { host: network.grpcHostname, port: options.grpcPort },
      });
    });
  addDeploymentOptions(command);
}

/**
 * Adds the options `serve` and `mcp` share after their own: timeouts, body memory, Host and Origin, shutdown, TLS
 * (serve-network.ts); onnxruntime's session (serve-session.ts); OpenTelemetry (serve-tracing.ts).
 */
export function addDeploymentOptions(command: Command): Command {
  addServeNetworkOptions(command);
  addSessionOptions(command);
  return addTracingOptions(command);
}

/** Adds the options `serve` and `mcp` share but serve-network.ts's (ModelServingOptions). */
export function addModelServingOptions(command: Command): Command {
  return command
    .option('--body-limit <bytes>', 'largest request: HTTP body (larger: 413) and gRPC message (larger: RESOURCE_EXHAUSTED)', parsePositiveInteger, 8 * 2 ** 20)
    .addOption(new Option('--max-batch-tokens <n>', 'batching, text models: most tokens (rows x padded length) in one onnxruntime run').argParser(parsePositiveInteger))
    .addOption(new Option('--max-batch-images <n>', `batching, image models: most images in one onnxruntime run (default ${DEFAULT_MAX_BATCH_IMAGES})`).argParser(parsePositiveInteger))
    .addOption(new Option('--max-wait-ms <ms>', 'batching: longest a request waits for others to share its run').argParser(parseNonNegativeNumber))
    .option('--max-request-inputs <n>', 'most inputs (texts, documents) one request may hold; more get an input error', parsePositiveInteger, DEFAULT_MAX_REQUEST_INPUTS)
    .option('--max-request-tokens <n>', 'most tokens one request may hold (its inputs after tokenization); more get an input error', parsePositiveInteger, DEFAULT_MAX_REQUEST_TOKENS)
    .option(
      '--max-token-results <n>',
      'most tokens of a request whose response has a result per token (/predict of embedding and token_classification models)',
      parsePositiveInteger,
      DEFAULT_MAX_TOKEN_RESULTS,
    )
    .option('--threads <n>', 'onnxruntime intra-op threads per worker (default: all cores, divided between the workers)', parsePositiveInteger)
    .option(
      '--solo-threads <n>',
      'onnxruntime intra-op threads of the solo session, which runs a batch when no other is running; it holds another copy of the weights (default: all cores with several workers and no --threads; 0: none)',
      parseNonNegativeInteger,
    )
    .option('--workers <n>', 'worker threads running onnxruntime, each with its own session and copy of the weights (off the event loop)', parsePositiveInteger, defaultWorkerCount())
    .addOption(
      new Option('--api-key <key>', 'require "Authorization: Bearer <key>" on every call but health checks and /metrics (the variable keeps the key out of ps)').env(
        'ENCODER_API_KEY',
      ),
    )
    .option('--served-model-name <names>', 'names of the model on /v1 and /v2 (comma-separated): the first is answered and listed by /v1/models, all are accepted', parseModelNames)
    .option('--strict-model-name', 'refuse (404 model_not_found) a "model" other than the served names (default: any name is taken as this model)');
}

/** Where the model is served: HTTP (REST and MCP) and gRPC, either absent. */
export interface ServedFrontEnds {
  /** `flags`: the options that set this address, named when it cannot be listened on. */
  http: { host: string; port: number; flags: string } | null;
  grpc: { host: string; port: number } | null;
  /** `mcp`: the banner leads with the MCP endpoint. */
  mcpFirst?: boolean;
}

/**
 * Loads the model and serves it on `frontEnds` until SIGTERM or SIGINT (serve-shutdown.ts), for `serve` and `mcp`:
 * the banner on stderr says when it is ready.
 */
export async function serveModel(
  { io, source, context }: { io: CliIo; source: ModelSource; context: CliContext },
  options: ModelServingOptions,
  network: ServeNetworkSettings,
  frontEnds: ServedFrontEnds,
): Promise<void> {
  sessionSettingsOf(options); // the flags checked before the model loads
  // loaded here, like the front ends, so that `infer` starts without it (and node:crypto)
  const apiKey = options.apiKey === undefined ? undefined : new (await import('../serve/api-key.ts')).ApiKey(options.apiKey);
  // read (and checked) before the model loads: a wrong path fails at once
  const tls = network.tls ? await (await import('../serve/tls-certificates.ts')).TlsCertificates.load(network.tls.certFile, network.tls.keyFile) : undefined;
  const pkg = await source.load(options);
  traceStartup('model package read');
  const session = sessionSettingsOf(options, pkg.session);
  const http = frontEnds.http ? { host: frontEnds.http.host, port: frontEnds.http.port, listenFlags: frontEnds.http.flags, bodyLimitBytes: options.bodyLimit, ...network.http } : null;
  const grpc = frontEnds.grpc ? { ...frontEnds.grpc, protoText: context.protoText(), maxMessageBytes: options.bodyLimit } : null;
  checkBatchOption(options, isImageModelPackage(pkg) ? 'image' : 'text', pkg.modelType);
  if (isImageModelPackage(pkg)) {
    await (await import('./serve-image.ts')).serveImageModel({ io, context }, pkg, options, network, frontEnds, { http, grpc, apiKey, tls, codecFiles: source.imageCodecFiles });
    return;
  }
  const loading = PredictPipeline.load(pkg, {
    ...source.pipelineOptions,
    threads: session.threads,
    sessionOptions: session.sessionOptions,
    soloThreads: options.soloThreads,
    workers: options.workers,
    inferenceWorker: context.inferenceWorker?.(),
    maxBatchTokens: options.maxBatchTokens,
    maxWaitMs: options.maxWaitMs,
    maxRequestTokens: options.maxRequestTokens,
    maxRequestInputs: options.maxRequestInputs,
    maxTokenResults: options.maxTokenResults,
  });
  // The front ends (fastify, gRPC) load only when serving (`infer` and `inspect` start without them), and are
  // built here while the workers create their onnxruntime sessions on their own threads; they listen once the
  // model has loaded.
  const predictor = new LatePredictor(pkg.name, pkg.modelType);
  const notes: string[] = [];
  // the OpenTelemetry SDK loads (when asked for) beside the front ends
  const tracing = tracerOf(options, { name: pkg.name, version: RUNTIME_VERSION, modelId: pkg.name }, notes);
  tracing.catch(() => {}); // reported where preparing awaits it
  const stopTracing = () => tracing.then((tracer) => tracer?.shutdown(), () => {}); // exports the spans still buffered
  const preparing = import('../serve/encoder-server.ts').then(async ({ prepareEncoderServer }) => {
    const modelNames = { aliases: options.servedModelName, strict: options.strictModelName };
    const tracer = (await tracing) ?? undefined;
    const prepared = await prepareEncoderServer(predictor, { http, grpc, target: context.target, apiKey, modelNames, tls, tracer });
    traceStartup('front ends ready');
    return prepared;
  });
  preparing.catch(() => {}); // reported where it is awaited, unless the model fails to load first
  let pipeline: PredictPipeline;
  try {
    pipeline = await loading;
  } catch (error) {
    await preparing.then((prepared) => prepared.discard(), () => {}); // the model's failure is the one to report
    await stopTracing();
    throw error;
  }
  predictor.bind(pipeline);
  let server: RunningServer;
  try {
    server = await (await preparing).listen();
  } catch (error) {
    await pipeline.close();
    await stopTracing();
    throw error;
  }
  // signals are handled from before the banner, which scripts and tests take as "ready"
  const reload = tls ? { what: `the TLS certificate (${tls.certFile}, ${tls.keyFile})`, run: () => tls.reload() } : undefined;
  const stopped = serveUntilStopped(server, network.shutdown, io, {}, reload);
  for (const note of [...pipeline.notes, ...notes]) io.stderr(`note: ${note}\n`);
  const tracer = await tracing;
  const extras = [
    ...(tls ? [`  TLS: certificate ${tls.certFile}, key ${tls.keyFile}; SIGHUP reads them again for new connections`] : []),
    ...(tracer ? [`  OpenTelemetry: traces of requests to ${tracer.endpoint} (OTLP/HTTP)`] : []),
  ];
  io.stderr(banner(pipeline, server, apiKey !== undefined, options, extras, frontEnds.mcpFirst === true));
  await stopped;
  await pipeline.close();
  await stopTracing();
  io.stderr('stopped\n');
}

function httpExtras(modelType: ModelType): string {
  if (POOLED_MODEL_TYPES.includes(modelType)) return '/v1/embeddings /v1/embed /v2/embed';
  return modelType === 'sequence_classification' ? '/v1/rerank /v2/rerank' : '';
}

/** `--served-model-name a,b`: the names, spaces around each dropped; an empty or repeated name is a usage error. */
function parseModelNames(value: string): string[] {
  const names = value.split(',').map((name) => name.trim());
  const problem = modelNamesProblem(names);
  if (problem) throw new InvalidArgumentError(`${problem}; give names separated by commas, e.g. text-embedding-3-small,my-model`);
  return names;
}

/** How `model` in /v1 and /v2 bodies is read, for the banner. */
function modelNamesLine(modelId: string, options: Pick<ModelServingOptions, 'servedModelName' | 'strictModelName'>): string {
  const [served, ...others] = options.servedModelName ?? [modelId];
  const also = others.length > 0 ? ` (also ${others.join(', ')})` : '';
  return options.strictModelName ? `  model name: ${served}${also}; any other name gets 404` : `  model name: ${served}${also}; any other name is taken as this model`;
}

function banner(
  pipeline: PredictPipeline,
  server: RunningServer,
  apiKey: boolean,
  options: Pick<ModelServingOptions, 'servedModelName' | 'strictModelName'>,
  /** Lines on TLS and tracing, before the limits. */
  extras: string[],
  mcpFirst: boolean,
): string {
  const { modelId, modelType } = pipeline;
  const lines = [`serving ${modelId} (${modelType})`];
  if (mcpFirst && server.httpUrl) lines.push(`  MCP   ${server.httpUrl}${MCP_PATH}  the model's one tool, run_encoder (Streamable HTTP)`);
  if (server.httpUrl) lines.push(`  HTTP  ${server.httpUrl}  POST /predict ${httpExtras(modelType)}, GET /model /health /openapi.json /v1/models /metrics, MCP at /mcp`);
  if (server.httpUrl) lines.push(modelNamesLine(modelId, options));
  if (server.grpcAddress) lines.push(`  gRPC  ${server.grpcAddress}  ${server.grpcServices.join(', ')}`);
  lines.push(...extras);
  const batching = pipeline.batchingSettings;
  lines.push(`  limits: ${pipeline.maxRequestInputs} inputs and ${pipeline.maxRequestTokens} tokens per request`);
  lines.push(sessionLine(pipeline.sessionSettings, pipeline.soloSessionSettings));
  lines.push(`  batching: up to ${batching.maxBatchTokens} tokens per onnxruntime run, waiting up to ${batching.maxWaitMs} ms for more requests`);
  if (apiKey) lines.push('  API key: required (Authorization: Bearer <key>) on every call but GET /health, GET /metrics and gRPC health');
  return `${lines.join('\n')}\n`;
}

/**
 * A run's budget is counted in tokens for a text model and in images for an image model, each with its own flag; the
 * other model kind's flag is refused (a ConfigError naming the right one) rather than ignored.
 */
function checkBatchOption(options: Pick<ModelServingOptions, 'maxBatchTokens' | 'maxBatchImages'>, kind: 'text' | 'image', modelType: string): void {
  if (kind === 'image' && options.maxBatchTokens !== undefined) {
    throw new ConfigError(`--max-batch-tokens sets the runs of text models; this ${modelType} model's runs are set in images: --max-batch-images`);
  }
  if (kind === 'text' && options.maxBatchImages !== undefined) {
    throw new ConfigError(`--max-batch-images sets the runs of image models; this ${modelType} model's runs are set in tokens: --max-batch-tokens`);
  }
}
