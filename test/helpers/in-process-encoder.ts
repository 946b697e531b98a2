import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseBuildConfig, type ModelType } from '../../src/encoder/config.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { ApiKey } from '../../src/serve/api-key.ts';
import { startEncoderServer, type HttpServerOptions, type RunningServer } from '../../src/serve/encoder-server.ts';
import { repoRoot } from './shared-fixtures.ts';

/** This project's encoder server running in the test's process, on loopback ports the system chose. */
export interface InProcessEncoder {
  httpUrl: string;
  /** host:port of gRPC when it was asked for, else null. */
  grpcAddress: string | null;
  pipeline: PredictPipeline;
  server: RunningServer;
  /** Stops the server, then its pipeline. */
  close(): Promise<void>;
}

/**
 * Serves the model folder `dir` as `name` (what `serve` does after `build`, without the executable): HTTP only unless
 * `grpc` is set, with `apiKey` required when given; `http` adds or replaces HTTP options (timeouts, Host and Origin).
 */
export async function serveInProcess(
  dir: string,
  name: string,
  modelType: ModelType,
  options: { grpc?: boolean; apiKey?: ApiKey; http?: Partial<HttpServerOptions> } = {},
): Promise<InProcessEncoder> {
  const config = parseBuildConfig(`encoder:\n  name: ${name}\n  path: ${dir}\n  model_type: ${modelType}\n`, { baseDir: dir });
  const pipeline = await PredictPipeline.load(readModelPackage(config));
  try {
    const protoText = readFileSync(path.join(repoRoot, 'proto', 'encoder.proto'), 'utf8');
    const server = await startEncoderServer(pipeline, {
      http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 * 1024, ...options.http },
      grpc: options.grpc ? { host: '127.0.0.1', port: 0, protoText } : null,
      target: 'x86_64-unknown-linux-gnu',
      apiKey: options.apiKey,
    });
    return {
      httpUrl: server.httpUrl!,
      grpcAddress: server.grpcPort === null ? null : `127.0.0.1:${server.grpcPort}`,
      pipeline,
      server,
      async close() {
        await server.close();
        await pipeline.close();
      },
    };
  } catch (error) {
    await pipeline.close();
    throw error;
  }
}
