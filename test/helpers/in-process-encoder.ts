import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseBuildConfig, type ModelType } from '../../src/encoder/config.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { ApiKey } from '../../src/serve/api-key.ts';
import { startEncoderServer } from '../../src/serve/encoder-server.ts';
import type { ModelNameOptions } from '../../src/serve/model-names.ts';
import { repoRoot } from './shared-fixtures.ts';

/** This project's encoder server running in the test's process, on loopback ports the system chose. */
export interface InProcessEncoder {
  httpUrl: string;
  /** host:port of gRPC when it was asked for, else null. */
  grpcAddress: string | null;
  pipeline: PredictPipeline;
  /** Stops the server, then its pipeline. */
  close(): Promise<void>;
}

/**
 * Serves the model folder `dir` as `name` (what `serve` does after `build`, without the executable): HTTP only unless
 * `grpc` is set, with `apiKey` required when given, and the field APIs' model names of `modelNames` (`serve
 * --served-model-name`, `--strict-model-name`; default: any name). The pipeline's limits are its defaults.
 */
export async function serveInProcess(
  dir: string,
  name: string,
  modelType: ModelType,
  options: { grpc?: boolean; apiKey?: ApiKey; modelNames?: ModelNameOptions } = {},
): Promise<InProcessEncoder> {
  const config = parseBuildConfig(`encoder:\n  name: ${name}\n  path: ${dir}\n  model_type: ${modelType}\n`, { baseDir: dir });
  const pipeline = await PredictPipeline.load(readModelPackage(config));
  try {
    const protoText = readFileSync(path.join(repoRoot, 'proto', 'encoder.proto'), 'utf8');
    const server = await startEncoderServer(pipeline, {
      http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 * 1024 },
      grpc: options.grpc ? { host: '127.0.0.1', port: 0, protoText } : null,
      target: 'x86_64-unknown-linux-gnu',
      apiKey: options.apiKey,
      modelNames: options.modelNames,
    });
    return {
      httpUrl: server.httpUrl!,
      grpcAddress: server.grpcPort === null ? null : `127.0.0.1:${server.grpcPort}`,
      pipeline,
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
