import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseBuildConfig, type ModelType } from '../../src/encoder/config.ts';
import { readModelDirectory } from '../../src/builder/model-directory.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { PipelineOptions } from '../../src/encoder/pipeline-options.ts';
import type { ApiKey } from '../../src/serve/api-key.ts';
import { startEncoderServer, type HttpServerOptions, type RunningServer } from '../../src/serve/encoder-server.ts';
import type { ModelNameOptions } from '../../src/serve/model-names.ts';
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

export interface InProcessEncoderOptions {
  grpc?: boolean;
  apiKey?: ApiKey;
  /** The Lua transform of the build configuration (the script's text). */
  transform?: string;
  /** How the pipeline runs (workers and how to start them, the transform's limits, …); default: in process, defaults. */
  pipeline?: PipelineOptions;
  /** HTTP options added or replaced (timeouts, Host and Origin). */
  http?: Partial<HttpServerOptions>;
  modelNames?: ModelNameOptions;
  /** The configuration's format: this project's `encoder:` (default) or mozilla-ai/encoderfile's `encoderfile:`. */
  format?: 'encoder' | 'encoderfile';
}

/**
 * Serves the model folder `dir` as `name` (what `serve` does after `build`, without the executable): HTTP only unless
 * `grpc` is set, with `apiKey` required when given; `http` adds or replaces HTTP options (timeouts, Host and Origin);
 * `modelNames`: the field APIs' model names (`serve --served-model-name`, `--strict-model-name`; default: any name).
 */
export async function serveInProcess(dir: string, name: string, modelType: ModelType, options: InProcessEncoderOptions = {}): Promise<InProcessEncoder> {
  const transform = options.transform === undefined ? '' : `  transform: |\n${options.transform.trimEnd().replace(/^/gm, '    ')}\n`;
  const config = parseBuildConfig(`${options.format ?? 'encoder'}:\n  name: ${name}\n  path: ${dir}\n  model_type: ${modelType}\n${transform}`, { baseDir: dir });
  // as `serve --config` reads a folder: with the maximum length its ONNX graph runs
  const pipeline = await PredictPipeline.load(readModelDirectory(config), options.pipeline);
  try {
    const protoText = readFileSync(path.join(repoRoot, 'proto', 'encoder.proto'), 'utf8');
    const server = await startEncoderServer(pipeline, {
      http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 * 1024, ...options.http },
      grpc: options.grpc ? { host: '127.0.0.1', port: 0, protoText } : null,
      target: 'x86_64-unknown-linux-gnu',
      apiKey: options.apiKey,
      modelNames: options.modelNames,
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
