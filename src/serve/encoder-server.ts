import * as grpc from '@grpc/grpc-js';
import type { FastifyInstance } from 'fastify';
import type { Predictor } from '../encoder/predict-pipeline.ts';
import { closeHttp } from '../shared/close-http.ts';
import { createGrpcServer, type GrpcFrontEnd } from './grpc/index.ts';
import { createHttpApp } from './http/index.ts';
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

/** Starts the enabled front ends over one predictor. Either both start or none stays open. */
export async function startEncoderServer(predictor: Predictor, options: EncoderServerOptions): Promise<RunningServer> {
  let http: FastifyInstance | null = null;
  let grpcFrontEnd: GrpcFrontEnd | null = null;
  let httpPort: number | null = null;
  let grpcPort: number | null = null;
  try {
    if (options.http) {
      http = await createHttpApp(predictor, { bodyLimitBytes: options.http.bodyLimitBytes, serverInfo: serverInfo({ target: options.target }) });
      await http.listen({ host: options.http.host, port: options.http.port });
      const address = http.server.address();
      httpPort = typeof address === 'object' && address ? address.port : options.http.port;
    }
    if (options.grpc) {
      grpcFrontEnd = createGrpcServer(predictor, { protoText: options.grpc.protoText });
      grpcPort = await bindGrpc(grpcFrontEnd.server, hostPort(options.grpc.host, options.grpc.port));
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

function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

function bindGrpc(server: grpc.Server, address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port)));
  });
}

/** Lets calls in flight finish; tryShutdown refuses new ones at once. */
function shutdownGrpc(server: grpc.Server): Promise<void> {
  return new Promise((resolve) => server.tryShutdown(() => resolve()));
}
