import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { InternalError } from '../encoder/errors.ts';
import { PredictPipeline } from '../encoder/predict-pipeline.ts';
import { stringifyJson } from '../shared/float32-json.ts';
import { traceStartup } from '../shared/startup-trace.ts';
import { parseFileName, parsePositiveInteger } from './arguments.ts';
import type { ModelSource } from './model-source.ts';
import type { CliIo } from './program.ts';

export interface InferOptions {
  config?: string;
  output?: string;
  /** Unset: an embedding model normalises, a sentence_embedding model follows its own setting. */
  normalize?: boolean;
  threads?: number;
}

export function registerInferCommand(program: Command, io: CliIo, source: ModelSource): void {
  const command = program
    .command('infer')
    .description('Run the model on one or more texts and print the results as JSON (one result per text, in order)')
    .argument('<texts...>', 'texts to run');
  if (source.configOption) command.requiredOption('-c, --config <file>', 'build configuration (YAML, top-level key encoder)');
  command
    .option('-o, --output <file>', 'write the JSON results to this file instead of standard output', parseFileName)
    .option('--normalize', 'embedding models: scale vectors to unit length (default: token vectors yes, sentence vectors as the model says)')
    .option('--no-normalize', 'embedding models: do not scale vectors to unit length')
    .option('--threads <n>', 'onnxruntime threads (default: all cores)', parsePositiveInteger)
    .action(async (texts: string[], options: InferOptions) => {
      const pkg = await source.load(options);
      traceStartup('model package read');
      const pipeline = await PredictPipeline.load(pkg, { ...source.pipelineOptions, threads: options.threads });
      try {
        for (const note of pipeline.notes) io.stderr(`note: ${note}\n`);
        const body: Record<string, unknown> = { inputs: texts };
        if (pipeline.modelType === 'embedding') body.normalize = options.normalize ?? true;
        if (pipeline.modelType === 'sentence_embedding' && options.normalize !== undefined) body.normalize = options.normalize;
        const json = `${stringifyJson(await pipeline.predict(body))}\n`;
        traceStartup('first result');
        if (options.output !== undefined) await writeOutput(options.output, json);
        else io.stdout(json);
        traceStartup('output written');
      } finally {
        await pipeline.close();
      }
    });
}

async function writeOutput(file: string, json: string): Promise<void> {
  try {
    await writeFile(file, json);
  } catch (error) {
    throw new InternalError(`cannot write ${file}: ${(error as Error).message}`, { cause: error });
  }
}
