import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startListening, type ListeningExecutable } from './executables.ts';
import { repoRoot } from './shared-fixtures.ts';

/** A model executable running `serve` on loopback ports chosen by the system; `stderr()` holds its banner. */
export interface ServedModel extends ListeningExecutable {
  httpUrl: string;
  grpcAddress: string;
}

/**
 * Starts `serve` with both front ends on 127.0.0.1, ports 0, and resolves once the banner's last line is out. No
 * shutdown grace (a test's server has no load balancer to wait for, and `stop()` should not take 5 s); `args`
 * come last, so a test of the shutdown gives its own.
 */
export async function serveModel(executable: string, options: { cacheDir: string; args?: string[]; env?: NodeJS.ProcessEnv }): Promise<ServedModel> {
  return startServe(executable, ['serve'], options);
}

/** `file ...command serve` on loopback ports 0, no shutdown grace, `options.args` last; resolves once the banner is out. */
async function startServe(file: string, command: string[], options: { cacheDir: string; args?: string[]; env?: NodeJS.ProcessEnv }): Promise<ServedModel> {
  const args = [...command, '--http-hostname', '127.0.0.1', '--http-port', '0', '--grpc-hostname', '127.0.0.1', '--grpc-port', '0', '--shutdown-grace', '0', ...(options.args ?? [])];
  const served = await startListening(file, args, options, /batching: .*\n/);
  const banner = served.stderr();
  return { ...served, httpUrl: /HTTP +(https?:\/\/\S+)/.exec(banner)?.[1] ?? '', grpcAddress: /gRPC +(\S+)/.exec(banner)?.[1] ?? '' };
}

/**
 * `serve` run from the sources (node src/cli/main.ts serve --config), as serveModel runs an executable: for tests of
 * the server that need no built runtime. The banner's URL is https:// with --cert-file.
 */
export async function serveFromSource(config: string, options: { cacheDir: string; args?: string[]; env?: NodeJS.ProcessEnv }): Promise<ServedModel> {
  return startServe(process.execPath, [path.join(repoRoot, 'src', 'cli', 'main.ts'), 'serve', '--config', config], options);
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
  sentence_embedding: 'SentenceEmbedding',
  sequence_classification: 'SequenceClassification',
  token_classification: 'TokenClassification',
  image_classification: 'ImageClassification',
  image_embedding: 'ImageEmbedding',
} as const;

/** A @grpc/grpc-js client of the model type's service, with promise-returning calls (metadata optional). */
export function grpcClient(address: string, modelType: keyof typeof SERVICE_OF, credentials = grpc.credentials.createInsecure(), options: grpc.ChannelOptions = {}) {
  const Service = encoderPackage[SERVICE_OF[modelType]] as grpc.ServiceClientConstructor;
  return promisedCalls(new Service(address, credentials, options));
}

/** encoderfile 0.7's proto files, as its published encoderfile/proto/*.proto define them (test/fixtures). */
const ENCODERFILE_PROTOS = path.join(repoRoot, 'test', 'fixtures', 'encoderfile-0.7.0');

/** A client of encoderfile's ImageClassificationInference, generated from encoderfile's own .proto files. */
export function encoderfileImageClient(address: string) {
  const definition = protoLoader.loadSync('proto/image_classification.proto', { includeDirs: [ENCODERFILE_PROTOS], keepCase: true, enums: String, defaults: true });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as { encoderfile: { image_classification: { ImageClassificationInference: grpc.ServiceClientConstructor } } };
  return promisedCalls(new pkg.encoderfile.image_classification.ImageClassificationInference(address, grpc.credentials.createInsecure()));
}

/** Predict and GetModelMetadata of `client` as promises. */
function promisedCalls(client: grpc.Client) {
  const call =
    (method: string) =>
    (request: object, metadata = new grpc.Metadata()): Promise<Record<string, unknown>> =>
      new Promise((resolve, reject) =>
        (client[method as keyof grpc.Client] as unknown as (r: object, m: grpc.Metadata, cb: (e: grpc.ServiceError | null, v: Record<string, unknown>) => void) => void).call(
          client,
          request,
          metadata,
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
