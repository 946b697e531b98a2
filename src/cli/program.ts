import { Command, CommanderError } from 'commander';
import packageJson from '../../package.json' with { type: 'json' };
import { isEncoderError } from '../encoder/errors.ts';
import { registerInferCommand } from './infer-command.ts';

/** Where a command writes; tests pass their own. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

export const EXIT_OK = 0;
export const EXIT_INTERNAL_ERROR = 1;
export const EXIT_INPUT_ERROR = 2;

const processIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
};

export function createProgram(io: CliIo = processIo): Command {
  const program = new Command('encoder')
    .description('Run an encoder model (ONNX + HuggingFace tokenizer) from the command line')
    .version(packageJson.version)
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  registerInferCommand(program, io);
  return program;
}

/**
 * Runs the command line and returns the exit code: 0 ok, 2 input or configuration error (including bad
 * arguments), 1 internal error. Never calls process.exit, so tests can run it in-process.
 */
export async function runCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const program = createProgram(io);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return EXIT_OK;
  } catch (error) {
    if (error instanceof CommanderError) {
      // help and version end with a CommanderError too, with exit code 0.
      return error.exitCode === 0 ? EXIT_OK : EXIT_INPUT_ERROR;
    }
    if (isEncoderError(error)) {
      io.stderr(`error: ${error.message}\n`);
      return error.kind === 'internal' ? EXIT_INTERNAL_ERROR : EXIT_INPUT_ERROR;
    }
    io.stderr(`internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    return EXIT_INTERNAL_ERROR;
  }
}
