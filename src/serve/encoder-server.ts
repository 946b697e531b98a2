import type * as grpc from '@grpc/grpc-js';
import type { FastifyInstance } from 'fastify';
import { ConfigError } from '../encoder/errors.ts';
import type { Predictor } from '../encoder/predict-pipeline.ts';
import { closeHttp } from '../shared/close-http.ts';
import { traceStartup } from '../shared/startup-trace.ts';
import type { GrpcFrontEnd } from './grpc/index.ts';
import { serverInfo } from './server-info.ts';

export interface EncoderServerOptions {
  http: { host: string; port: number; bodyLimitBytes: number } | null;
  grpc: { host: string; port: number; protoText: string } | null;
  target: string;
}

export interface RunningServer {
  /** e.g. http://0.0.0.0:8080; null when HTTP is disabled. */
  httpUrl: string | null;
  /** e.g. [::]:50051; null when gRPC is disabled. */
  grpcAddress: string | null;
  grpcServices: string[];
  /** The ports actually bound (useful with port 0). */
  httpPort: number | null;
  grpcPort: number | null;
  /** Stops accepting, finishes requests in flight, then resolves. */
  close(): Promise<void>;
}

/**
 * Loads the code of the enabled front ends (fastify, grpc-js and protobufjs are a large part of start-up). `serve`
 * calls it while the model loads on worker threads; startEncoderServer then finds them loaded.
 */
export async function loadFrontEnds(options: Pick<EncoderServerOptions, 'http' | 'grpc'>): Promise<void> {
  await Promise.all([options.http ? import('./http/index.ts') : undefined, options.grpc ? import('./grpc/index.ts') : undefined]);
}

/** Starts the enabled front ends over one predictor. Either both start or none stays open. */
export async function startEncoderServer(predictor: Predictor, options: EncoderServerOptions): Promise<RunningServer> {
  let http: FastifyInstance | null = null;
  let grpcFrontEnd: GrpcFrontEnd | null = null;
  let httpPort: number | null = null;
  let grpcPort: number | null = null;
  try {
    if (options.http) {
      const { createHttpApp } = await import('./http/index.ts');
      http = await createHttpApp(predictor, { bodyLimitBytes: options.http.bodyLimitBytes, serverInfo: serverInfo({ target: options.target }) });
      const { host, port } = options.http;
      await http.listen({ host, port }).catch((error: unknown) => {
        throw listenError('HTTP', hostPort(host, port), error, '--http-port, --http-hostname');
      });
      traceStartup('HTTP listening');
      const address = http.server.address();
      httpPort = typeof address === 'object' && address ? address.port : options.http.port;
    }
    if (options.grpc) {
      const [{ createGrpcServer }, { ServerCredentials }] = await Promise.all([import('./grpc/index.ts'), import('@grpc/grpc-js')]);
      grpcFrontEnd = createGrpcServer(predictor, { protoText: options.grpc.protoText });
      const address = hostPort(options.grpc.host, options.grpc.port);
      grpcPort = await bindGrpc(grpcFrontEnd.server, address, ServerCredentials.createInsecure()).catch((error: unknown) => {
        throw listenError('gRPC', address, error, '--grpc-port, --grpc-hostname');
      });
      traceStartup('gRPC listening');
    }
  } catch (error) {
    await http?.close();
    grpcFrontEnd?.server.forceShutdown();
    throw error;
  }

  return {
    httpUrl: options.http ? `http://${hostPort(options.http.host, httpPort!)}` : null,
    grpcAddress: options.grpc ? hostPort(options.grpc.host, grpcPort!) : null,
    grpcServices: grpcFrontEnd?.services ?? [],
    httpPort,
    grpcPort,
    async close() {
      grpcFrontEnd?.setServing(false);
      await Promise.all([http ? closeHttp(http) : undefined, grpcFrontEnd ? shutdownGrpc(grpcFrontEnd.server) : undefined]);
    },
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

/** Lets calls in flight finish; tryShutdown refuses new ones at once. */
function shutdownGrpc(server: grpc.Server): Promise<void> {
  return new Promise((resolve) => server.tryShutdown(() => resolve()));
}
