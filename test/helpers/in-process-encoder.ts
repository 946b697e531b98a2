import { parseBuildConfig, type ModelType } from '../../src/encoder/config.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import { startEncoderServer } from '../../src/serve/encoder-server.ts';

/** This project's encoder server running in the test's process: HTTP only, on a loopback port the system chose. */
export interface InProcessEncoder {
  httpUrl: string;
  /** Stops the server, then its pipeline. */
  close(): Promise<void>;
}

/** Serves the model folder `dir` as `name` (what `serve` does after `build`, without the executable). */
export async function serveInProcess(dir: string, name: string, modelType: ModelType): Promise<InProcessEncoder> {
  const config = parseBuildConfig(`encoder:\n  name: ${name}\n  path: ${dir}\n  model_type: ${modelType}\n`, { baseDir: dir });
  const pipeline = await PredictPipeline.load(readModelPackage(config));
  try {
    const server = await startEncoderServer(pipeline, { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 * 1024 }, grpc: null, target: 'x86_64-unknown-linux-gnu' });
    return {
      httpUrl: server.httpUrl!,
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
