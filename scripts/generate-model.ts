/**
 * CLI: writes a BERT-architecture test model directory (model.onnx, config.json, tokenizer files).
 *
 *   node scripts/generate-model.ts --preset tiny|example|minilm --out <dir> [--type ...] [--layers N]
 *     [--hidden N] [--heads N] [--intermediate N] [--vocab N] [--max-positions N]
 *     [--labels O,B-PER,I-PER | --labels 3] [--seed N]
 *     [--type sentence_embedding [--pooling mean|cls|max|last] [--no-normalize]]   (a sentence-transformers layout)
 *     [--type sequence_classification --labels 1 | --cross-encoder]                 (a one-logit cross-encoder)
 */
import { stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { isEncoderError } from '../src/encoder/errors.ts';
import {
  MODEL_TYPES,
  PRESETS,
  PRESET_NAMES,
  normalizeOptions,
  numberedLabels,
  writeModelDirectory,
} from './model-generator/index.ts';
import type { GeneratorOptions, ModelType, PresetName } from './model-generator/index.ts';
import { POOLING_MODES, type Pooling } from '../src/encoder/config.ts';

interface CliOptions {
  preset: PresetName;
  out: string;
  type?: ModelType;
  layers?: number;
  hidden?: number;
  heads?: number;
  intermediate?: number;
  vocab?: number;
  maxPositions?: number;
  labels?: string[];
  seed?: number;
  pooling?: Pooling;
  normalize?: boolean;
  crossEncoder?: boolean;
}

function integerParser(minimum: number) {
  return (value: string): number => {
    const parsed = /^\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
    if (!Number.isSafeInteger(parsed) || parsed < minimum) {
      throw new InvalidArgumentError(minimum === 0 ? 'Must be a non-negative integer.' : 'Must be a positive integer.');
    }
    return parsed;
  };
}

/** `--labels 3` means LABEL_0..LABEL_2 (HF's default names); otherwise a comma-separated list. */
function parseLabels(value: string): string[] {
  if (/^\d+$/.test(value.trim())) return numberedLabels(Number(value));
  const labels = value.split(',').map((label) => label.trim());
  if (labels.some((label) => label === '')) throw new InvalidArgumentError('Label names must not be empty.');
  return labels;
}

function optionsFrom(cli: CliOptions): GeneratorOptions {
  const preset = PRESETS[cli.preset];
  // A cross-encoder is a sequence classifier with one relevance logit (commander refuses --type/--labels beside it).
  const crossEncoder = cli.crossEncoder === true;
  return normalizeOptions({
    modelType: crossEncoder ? 'sequence_classification' : (cli.type ?? preset.modelType),
    layers: cli.layers ?? preset.layers,
    hidden: cli.hidden ?? preset.hidden,
    heads: cli.heads ?? preset.heads,
    intermediate: cli.intermediate ?? preset.intermediate,
    vocabSize: cli.vocab ?? preset.vocabSize,
    maxPositions: cli.maxPositions ?? preset.maxPositions,
    labels: crossEncoder ? numberedLabels(1) : (cli.labels ?? preset.labels),
    seed: cli.seed ?? preset.seed,
    pooling: cli.pooling,
    // commander sets normalize: true unless --no-normalize is given; only the flag itself is an option here
    normalize: cli.normalize === false ? false : undefined,
  });
}

function formatSize(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${bytes} B`;
}

async function main(argv: string[]): Promise<void> {
  const program = new Command()
    .name('generate-model')
    .description('Write a BERT-architecture ONNX test model with deterministic random weights and its tokenizer files.')
    .addOption(new Option('--preset <name>', 'base shape').choices(PRESET_NAMES).default('example'))
    .requiredOption('--out <dir>', 'output directory (created if missing)')
    .addOption(new Option('--type <model-type>', 'model type (default: the preset\'s)').choices(MODEL_TYPES))
    .option('--layers <n>', 'number of encoder layers', integerParser(1))
    .option('--hidden <n>', 'hidden size', integerParser(1))
    .option('--heads <n>', 'attention heads (must divide the hidden size)', integerParser(1))
    .option('--intermediate <n>', 'feed-forward size', integerParser(1))
    .option('--vocab <n>', 'vocabulary size', integerParser(1))
    .option('--max-positions <n>', 'maximum sequence length (position embeddings)', integerParser(1))
    .option('--labels <labels>', 'classification labels: comma-separated names, or a count', parseLabels)
    .option('--seed <n>', 'random seed', integerParser(0))
    .addOption(new Option('--pooling <mode>', 'sentence_embedding: the pooling of its sentence-transformers layout (default mean)').choices(POOLING_MODES))
    .option('--no-normalize', 'sentence_embedding: no Normalize module in its layout')
    .addOption(
      new Option('--cross-encoder', 'a one-logit sequence classifier (--type sequence_classification --labels 1)').conflicts([
        'type',
        'labels',
      ]),
    )
    .showHelpAfterError('(run with --help for usage)');
  program.parse(argv);
  const cli = program.opts<CliOptions>();

  const options = optionsFrom(cli);
  const started = performance.now();
  const out = resolve(cli.out);
  const files = await writeModelDirectory(out, options);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);

  const labels = options.labels ? `, labels ${options.labels.join(',')}` : '';
  const layout =
    options.modelType === 'sentence_embedding'
      ? `, pooling ${options.pooling ?? 'mean'}${options.normalize === false ? '' : ', normalized'}`
      : '';
  console.log(
    `Wrote ${options.modelType} model (layers ${options.layers}, hidden ${options.hidden}, heads ${options.heads}, ` +
      `intermediate ${options.intermediate}, vocab ${options.vocabSize}, max positions ${options.maxPositions}` +
      `${labels}${layout}, seed ${options.seed}) to ${out} in ${seconds}s:`,
  );
  for (const file of files) {
    const { size } = await stat(join(out, file));
    console.log(`  ${file.padEnd(34)} ${formatSize(size)}`);
  }
}

main(process.argv).catch((error: unknown) => {
  // Option errors are the user's to fix: one line, no stack trace.
  if (isEncoderError(error)) console.error(`error: ${error.message}`);
  else console.error(error);
  process.exitCode = 1;
});
