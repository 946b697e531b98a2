import type * as grpc from '@grpc/grpc-js';
import type { FastifyInstance } from 'fastify';
import type { Server as TlsServer } from 'node:tls';
import { ConfigError } from '../encoder/errors.ts';
import type { ImagePipeline } from '../encoder/image-pipeline.ts';
import type { BatchingPredictor } from '../encoder/predictor.ts';
import { closeHttp } from '../shared/close-http.ts';
import { traceStartup } from '../shared/startup-trace.ts';
import type { ApiKey } from './api-key.ts';
import type { RequestTracer } from './tracing/index.ts';
import type { TlsCertificates } from './tls-certificates.ts';
import type { GrpcFrontEnd } from './grpc/index.ts';
import { HttpDrain } from './http/drain.ts';
import { ServerMetrics } from './metrics/server-metrics.ts';
import { ServedModelNames, type ModelNameOptions } from './model-names.ts';
import { serverInfo, type ServerInfo } from './server-info.ts';
import type { HttpAppOptions } from './http/app.ts';

/** HTTP's address and limits; the optional ones have createHttpApp's defaults. */
export interface HttpServerOptions {
  host: string;
  port: number;
  bodyLimitBytes: number;
  /** `--request-timeout`: longest a client may take to send a whole request. */
  requestTimeoutMs?: number;
  /** `--body-buffer-limit`: most bytes of request bodies held at once while they arrive. */
  bodyBufferLimitBytes?: number;
  /** `--allowed-hosts`, `--allowed-origins` (host-guard.ts). */
  allowedHosts?: readonly string[];
  allowedOrigins?: readonly string[];
  /** The options that set host and port, named when they cannot be listened on; default serve's. */
  listenFlags?: string;
}

export interface EncoderServerOptions {
  http: HttpServerOptions | null;
  grpc: { host: string; port: number; protoText: string; maxMessageBytes?: number } | null;
  target: string;
  /** The key both front ends require of every call but health checks and metrics (`serve --api-key`). */
  apiKey?: ApiKey;
  /** Traces requests of both front ends (`serve --enable-otel`); its owner shuts it down. */
  tracer?: RequestTracer;
  /** HTTPS and gRPC over TLS with this certificate, which reloads for new connections (`serve --cert-file --key-file`). */
  tls?: TlsCertificates;
  /** The names the model answers to on the HTTP field APIs (`serve --served-model-name`, `--strict-model-name`). */
  modelNames?: ModelNameOptions;
}

export interface RunningServer {
  /** e.g. http://0.0.0.0:8080 (https:// with TLS); null when HTTP is disabled. */
  httpUrl: string | null;
  /** e.g. [::]:50051; null when gRPC is disabled. */
  grpcAddress: string | null;
  grpcServices: string[];
  /** The ports actually bound (useful with port 0). */
  httpPort: number | null;
  grpcPort: number | null;
  /**
   * Starts a graceful shutdown without stopping anything: GET /health answers 503 and gRPC health NOT_SERVING (so
   * that probes and load balancers stop sending), while every request is still accepted and served.
   */
  drain(): void;
  /**
   * Drains (if not yet), stops accepting, finishes what is in flight, then resolves. With `deadlineMs`, whatever is
   * still open that long from now is cut (HTTP connections destroyed, gRPC calls cancelled); `cut` says whether
   * anything was.
   */
  close(options?: { deadlineMs?: number }): Promise<{ cut: boolean }>;
  /** Cuts at once whatever a close() in progress still waits for (a second stop signal); nothing before close(). */
  cut(): void;
  /** HTTP requests received and not yet answered (0 without HTTP). */
  readonly httpRequestsInFlight: number;
}

/** The enabled front ends, built around a predictor but not listening yet (prepareEncoderServer). */
export interface PreparedServer {
  /** Listens on the front ends' addresses: either both listen or none stays open. */
  listen(): Promise<RunningServer>;
  /** Drops front ends that will not listen (the model failed to load). */
  discard(): Promise<void>;
}

/** The front ends built by prepareEncoderServer, and the metrics they record into (served when HTTP is on). */
interface FrontEnds {
  http: FastifyInstance | null;
  drain: HttpDrain;
  grpc: GrpcFrontEnd | null;
  metrics: ServerMetrics | null;
  /** Stops recording the predictor's runs into the metrics. */
  unobserve(): void;
  /** Stop passing reloaded certificates to the HTTPS server. */
  stopReloads: (() => void)[];
}

/**
 * Loads the code of the enabled front ends (fastify, grpc-js and protobufjs are a large part of start-up) and builds
 * them around `predictor`, without listening. `serve` calls it while the model loads on worker threads, with a
 * predictor that is bound to the pipeline before `listen` (LatePredictor).
 */
export async function prepareEncoderServer(predictor: BatchingPredictor, options: EncoderServerOptions): Promise<PreparedServer> {
  const [httpModule, grpcModule] = await Promise.all([options.http ? import('./http/index.ts') : undefined, options.grpc ? import('./grpc/index.ts') : undefined]);
  const info = serverInfo({ target: options.target });
  // Metrics are served on the HTTP port; a gRPC-only server has nowhere to serve them, so it keeps none.
  const drain = new HttpDrain();
  const metrics = options.http
    ? new ServerMetrics({ modelId: predictor.modelId, modelType: predictor.modelType, serverInfo: info, batchingStats: () => predictor.batchingStats(), httpRequestsInFlight: () => drain.inFlight })
    : null;
  const frontEnds: FrontEnds = { http: null, drain, grpc: null, metrics, unobserve: metrics ? predictor.observeBatches((run) => metrics.batchRun(run)) : () => {}, stopReloads: [] };
  try {
    const shared = { metrics: metrics ?? undefined, apiKey: options.apiKey, tracer: options.tracer };
    const modelNames = new ServedModelNames(predictor.modelId, options.modelNames);
    if (options.http) {
      frontEnds.http = await httpModule!.createHttpApp(predictor, { ...httpAppOptionsOf(options.http, options, drain, info), modelNames, ...shared });
    }
    if (options.grpc) frontEnds.grpc = grpcModule!.createGrpcServer(predictor, { protoText: options.grpc.protoText, maxMessageBytes: options.grpc.maxMessageBytes, ...shared });
  } catch (error) {
    await drop(frontEnds);
    throw error;
  }
  return { listen: () => listen(frontEnds, options), discard: () => drop(frontEnds) };
}

/**
 * The front ends of an image model, not listening yet: HTTP (image-app.ts, with MCP) with metrics, gRPC with our
 * image services and, for a classifier, encoderfile's (grpc/image-services.ts); what prepareEncoderServer is for text
 * models.
 */
export async function prepareImageServer(pipeline: ImagePipeline, options: Omit<EncoderServerOptions, 'http'> & { http: HttpServerOptions | null; maxImageBytes: number }): Promise<PreparedServer> {
  const [{ createImageHttpApp }, { createImageGrpcServer }] = await Promise.all([import('./http/image-app.ts'), import('./grpc/image-services.ts')]);
  const info = serverInfo({ target: options.target });
  const drain = new HttpDrain();
  const metrics = new ServerMetrics({ modelId: pipeline.modelId, modelType: pipeline.modelType, serverInfo: info, batchingStats: () => pipeline.batchingStats(), httpRequestsInFlight: () => drain.inFlight });
  const frontEnds: FrontEnds = { http: null, drain, grpc: null, metrics, unobserve: pipeline.observeBatches((run) => metrics.batchRun(run)), stopReloads: [] };
  const shared = { metrics, apiKey: options.apiKey, tracer: options.tracer };
  try {
    if (options.http) {
      const http = httpAppOptionsOf(options.http, options, drain, info);
      const modelNames = new ServedModelNames(pipeline.modelId, options.modelNames);
      frontEnds.http = await createImageHttpApp(pipeline, { ...http, ...shared, modelNames, maxRequestInputs: pipeline.maxRequestInputs, maxImageBytes: options.maxImageBytes });
    }
    if (options.grpc) frontEnds.grpc = createImageGrpcServer(pipeline, { protoText: options.grpc.protoText, maxMessageBytes: options.grpc.maxMessageBytes, ...shared });
  } catch (error) {
    await drop(frontEnds);
    throw error;
  }
  return { listen: () => listen(frontEnds, options), discard: () => drop(frontEnds) };
}

/** What both HTTP apps are given of serve's HTTP settings. */
function httpAppOptionsOf(http: HttpServerOptions, options: Pick<EncoderServerOptions, 'tls'>, drain: HttpDrain, info: ServerInfo): HttpAppOptions {
  const { host, bodyLimitBytes, requestTimeoutMs, bodyBufferLimitBytes, allowedHosts, allowedOrigins } = http;
  return { bodyLimitBytes, requestTimeoutMs, bodyBufferLimitBytes, hostGuard: { listenHost: host, allowedHosts, allowedOrigins }, drain, serverInfo: info, tls: options.tls?.current };
}

/** Closes front ends at once, without waiting for calls: they never listened, or only one of them could. */
async function drop({ http, grpc, metrics, unobserve, stopReloads }: FrontEnds): Promise<void> {
  unobserve();
  for (const stop of stopReloads) stop();
  metrics?.close();
  await http?.close();
  grpc?.server.forceShutdown();
}

/** Starts the enabled front ends over one predictor. Either both start or none stays open. */
export async function startEncoderServer(predictor: BatchingPredictor, options: EncoderServerOptions): Promise<RunningServer> {
  return (await prepareEncoderServer(predictor, options)).listen();
}

async function listen(frontEnds: FrontEnds, options: EncoderServerOptions): Promise<RunningServer> {
  const { http, drain, grpc: grpcFrontEnd, metrics } = frontEnds;
  let httpPort: number | null = null;
  let grpcPort: number | null = null;
  try {
    if (http && options.http) {
      const { host, port, listenFlags = '--http-port, --http-hostname' } = options.http;
      await http.listen({ host, port }).catch((error: unknown) => {
        throw listenError('HTTP', hostPort(host, port), error, listenFlags);
      });
      traceStartup('HTTP listening');
      if (options.tls) {
        const server = http.server as unknown as TlsServer; // https.Server when the app was made with TLS
        frontEnds.stopReloads.push(options.tls.onReload((pair) => server.setSecureContext(pair)));
      }
      const address = http.server.address();
      httpPort = typeof address === 'object' && address ? address.port : port;
    }
    if (grpcFrontEnd && options.grpc) {
      const { ServerCredentials, experimental } = await import('@grpc/grpc-js');
      const address = hostPort(options.grpc.host, options.grpc.port);
      // the provider hands grpc-js each reloaded pair, which it sets on its TLS server for new connections
      const credentials = options.tls ? experimental.createCertificateProviderServerCredentials(options.tls.grpcIdentityProvider(), null, false) : ServerCredentials.createInsecure();
      grpcPort = await bindGrpc(grpcFrontEnd.server, address, credentials).catch((error: unknown) => {
        throw listenError('gRPC', address, error, '--grpc-port, --grpc-hostname');
      });
      traceStartup('gRPC listening');
    }
  } catch (error) {
    await drop(frontEnds);
    throw error;
  }
  metrics?.loadSoon();

  let cutNow = () => {};
  const startDraining = () => {
    if (drain.draining) return;
    drain.start();
    grpcFrontEnd?.setServing(false);
  };
  return {
    httpUrl: options.http ? `${options.tls ? 'https' : 'http'}://${hostPort(options.http.host, httpPort!)}` : null,
    grpcAddress: options.grpc ? hostPort(options.grpc.host, grpcPort!) : null,
    grpcServices: grpcFrontEnd?.services ?? [],
    httpPort,
    grpcPort,
    get httpRequestsInFlight() {
      return drain.inFlight;
    },
    drain: startDraining,
    async close({ deadlineMs } = {}) {
      startDraining();
      let cut = false;
      const grpcStopping = grpcFrontEnd ? shutdownGrpc(grpcFrontEnd.server) : undefined;
      cutNow = () => {
        cut = true;
        http?.server.closeAllConnections();
        grpcStopping?.force();
      };
      const deadline = deadlineMs === undefined ? undefined : setTimeout(cutNow, deadlineMs);
      try {
        await Promise.all([http ? closeHttp(http) : undefined, grpcStopping?.done]);
      } finally {
        clearTimeout(deadline);
        cutNow = () => {};
      }
      frontEnds.unobserve();
      for (const stop of frontEnds.stopReloads) stop();
      metrics?.close();
      return { cut };
    },
    cut: () => cutNow(),
  };
}

const LISTEN_PROBLEMS: Record<string, string> = {
  EADDRINUSE: 'the address is already in use',
  EADDRNOTAVAIL: 'the address is not available on this machine',
  EACCES: 'permission denied (ports below 1024 need privileges)',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name does not resolve',
};

/**
 * A listen failure is the user's setting (a port in use, a host not on this machine): a ConfigError that names the
 * front end, the address and the options to change, not an internal error with a stack trace. grpc-js reports its
 * errno only inside its message ("... errors: [listen EADDRINUSE: ...]").
 */
function listenError(frontEnd: string, address: string, error: unknown, options: string): ConfigError {
  const text = error instanceof Error ? error.message : String(error);
  const code = (error as NodeJS.ErrnoException | undefined)?.code ?? /\b(E[A-Z_]+)\b/.exec(text)?.[1];
  const problem = (code && LISTEN_PROBLEMS[code]) ?? text;
  return new ConfigError(`${frontEnd} cannot listen on ${address}: ${problem} (${options})`, { cause: error });
}

function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

function bindGrpc(server: grpc.Server, address: string, credentials: grpc.ServerCredentials): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, credentials, (error, port) => (error ? reject(error) : resolve(port)));
  });
}

/** Lets calls in flight finish (tryShutdown refuses new ones at once); `force` cancels those left. */
function shutdownGrpc(server: grpc.Server): { done: Promise<void>; force(): void } {
  const { promise, resolve } = Promise.withResolvers<void>();
  server.tryShutdown(() => resolve());
  return {
    done: promise,
    force() {
      server.forceShutdown();
      resolve();
    },
  };
}
