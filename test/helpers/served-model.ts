import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { executableEnv } from './executables.ts';
import { repoRoot } from './shared-fixtures.ts';

/** A model executable running `serve` on loopback ports chosen by the system, and real clients for it. */
export interface ServedModel {
  process: ChildProcess;
  httpUrl: string;
  grpcAddress: string;
  banner: string;
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export async function serveModel(executable: string, options: { cacheDir: string; args?: string[]; env?: NodeJS.ProcessEnv }): Promise<ServedModel> {
  const child = spawn(
    executable,
    ['serve', '--http-hostname', '127.0.0.1', '--http-port', '0', '--grpc-hostname', '127.0.0.1', '--grpc-port', '0', ...(options.args ?? [])],
    { env: executableEnv(options), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let banner = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start within 60 s: ${banner}`)), 60_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      banner += chunk.toString();
      if (/batching: .*\n/.test(banner)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code}: ${banner}`));
    });
  });
  const httpUrl = /HTTP +(http:\/\/\S+)/.exec(banner)?.[1] ?? '';
  const grpcAddress = /gRPC +(\S+)/.exec(banner)?.[1] ?? '';
  return {
    process: child,
    httpUrl,
    grpcAddress,
    banner,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
  };
}

const packageDefinition = protoLoader.loadSync(path.join(repoRoot, 'proto', 'encoder.proto'), {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});
const encoderPackage = grpc.loadPackageDefinition(packageDefinition).encoder as grpc.GrpcObject;

const SERVICE_OF = {
  embedding: 'Embedding',
  sequence_classification: 'SequenceClassification',
  token_classification: 'TokenClassification',
} as const;

/** A @grpc/grpc-js client of the model type's service, with promise-returning calls. */
export function grpcClient(address: string, modelType: keyof typeof SERVICE_OF) {
  const Service = encoderPackage[SERVICE_OF[modelType]] as grpc.ServiceClientConstructor;
  const client = new Service(address, grpc.credentials.createInsecure());
  const call =
    (method: string) =>
    (request: object): Promise<Record<string, unknown>> =>
      new Promise((resolve, reject) =>
        (client[method] as (r: object, cb: (e: grpc.ServiceError | null, v: Record<string, unknown>) => void) => void).call(
          client,
          request,
          (error, value) => (error ? reject(error) : resolve(value)),
        ),
      );
  return { predict: call('Predict'), metadata: call('GetModelMetadata'), close: () => client.close() };
}

export async function mcpClient(httpUrl: string): Promise<McpClient> {
  const client = new McpClient({ name: 'encoder-tests', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${httpUrl}/mcp`)));
  return client;
}
