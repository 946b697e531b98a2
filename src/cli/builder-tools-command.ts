/**
 * The builder's small commands, named as mozilla-ai/encoderfile names them: `version`, `runtime list|add|remove`,
 * `new-transform -m <model type>` (a transform to start from) and `inspect <file>` (what a built executable carries).
 */
import type { Command } from 'commander';
import { Option } from 'commander';
import { AssetSection } from '../../runtime/asset-section.ts';
import { MODEL_TYPES, type ModelType } from '../encoder/config-names.ts';
import { ConfigError } from '../encoder/errors.ts';
import { RUNTIME_VERSION, type CliIo } from './program.ts';
import { registerRuntimeCommand } from './runtime-command.ts';

export function registerBuilderTools(program: Command, io: CliIo): void {
  program
    .command('version')
    .description('Print the version of encoder')
    .action(() => io.stdout(`encoder ${RUNTIME_VERSION}\n`));
  registerRuntimeCommand(program, io);
  program
    .command('new-transform')
    .description('Print a Lua transform to start from, for a model type (save it and name it in the configuration\'s transform)')
    .addOption(new Option('-m, --model-type <type>', 'model type').choices(MODEL_TYPES).makeOptionMandatory())
    .action((options: { modelType: ModelType }) => io.stdout(transformTemplate(options.modelType)));
  program
    .command('inspect')
    .description('Print what a built model executable carries: its manifest and its model\'s config.json, as JSON')
    .argument('<file>', 'a model executable made by `encoder build`')
    .action(async (file: string) => {
      const section = await AssetSection.open(file).catch((error: NodeJS.ErrnoException) => {
        throw error.code === 'ENOENT' || error.code === 'EISDIR' || error.code === 'EACCES' ? new ConfigError(`cannot read ${file}: ${error.message}`) : error;
      });
      if (section === null) throw new ConfigError(`${file} carries no model: it is not an executable made by \`encoder build\` (a base runtime has none)`);
      try {
        const modelConfig = JSON.parse((await section.read('model_config')).toString('utf8')) as unknown;
        io.stdout(`${JSON.stringify({ manifest: section.manifest, model_config: modelConfig }, null, 2)}\n`);
      } finally {
        await section.close();
      }
    });
}

/** What each model type's Postprocess receives and must give back (docs/transforms.md). */
const SHAPES: Record<ModelType, { input: string; output: string }> = {
  embedding: { input: '3D tensor [batch, tokens, hidden]', output: '3D tensor [batch, tokens, any hidden size]' },
  sentence_embedding: { input: '3D tensor [batch, tokens, hidden] (pooled after the transform)', output: '3D tensor [batch, tokens, any hidden size]' },
  sequence_classification: { input: '2D tensor [batch, labels] (logits)', output: '2D tensor [batch, labels]' },
  token_classification: { input: '3D tensor [batch, tokens, labels] (logits)', output: '3D tensor [batch, tokens, labels]' },
};

/** A transform that returns what it is given, with the contract of its model type in its comments. */
export function transformTemplate(modelType: ModelType): string {
  const { input, output } = SHAPES[modelType];
  return [
    `-- A transform for a ${modelType} model, made by \`encoder new-transform\`.`,
    '-- Axes are 1-based, as in Lua. The tensor methods are listed in docs/transforms.md.',
    '',
    `-- arr: ${input}`,
    '-- mask: 2D tensor [batch, tokens], 1 for a token, 0 for padding',
    `-- returns: ${output}`,
    'function Postprocess(arr, mask)',
    '  -- replace with your own steps, e.g. arr:lp_normalize(2, 3)',
    '  return arr',
    'end',
    '',
  ].join('\n');
}
