import type { Command } from 'commander';
import type { AssetSection } from '../../runtime/asset-section.ts';
import { isImageModelType } from '../encoder/config-names.ts';
import { readPackagedImageModel, readPackagedModel } from '../encoder/packaged-model.ts';
import { registerInferCommand } from './infer-command.ts';
import type { ModelSource } from './model-source.ts';
import { registerMcpCommand } from './mcp-command.ts';
import { registerServeCommand } from './serve-command.ts';
import { baseProgram, type CliContext, type CliIo } from './program.ts';

/** The command line of a built model executable: its model comes from the asset section of its own file. */
export function createModelProgram(section: AssetSection, io: CliIo, context: CliContext): Command {
  const { manifest } = section;
  const { model } = manifest;
  const version = [
    `${model.name} ${model.version} (${model.model_type}${model.quantization === 'int8' ? ', int8' : ''})`,
    `runtime: encoder ${manifest.runtime_version}, Node ${process.versions.node}`,
    `target: ${manifest.target}`,
  ].join('\n');
  const program = baseProgram(model.name, io, version).description(`${model.name} ${model.version}: ${model.model_type.replaceAll("_", " ")} model in one executable`);

  const packaged: ModelSource = {
    configOption: false,
    load: () => (isImageModelType(model.model_type) ? readPackagedImageModel(section) : readPackagedModel(section)),
    pipelineOptions: { luaWasmPath: context.luaWasmPath },
    imageCodecFiles: context.imageCodecFiles,
  };
  registerInferCommand(program, io, packaged);
  registerServeCommand(program, io, packaged, context);
  registerMcpCommand(program, io, packaged, context);

  program
    .command('inspect')
    .description('Print the manifest of the packed assets as JSON')
    .action(() => io.stdout(`${JSON.stringify(manifest, null, 2)}\n`));
  return program;
}
