import type { HostBaseRuntime } from '../builder/base-runtime.ts';
import type { ThreadScript } from '../shared/thread-script.ts';
import type { CodecFiles } from '../encoder/image-codecs.ts';
import type { InferenceWorkerScript } from '../encoder/inference-workers.ts';
import { Command, CommanderError } from 'commander';
import packageJson from '../../package.json' with { type: 'json' };
import { isEncoderError } from '../encoder/errors.ts';
import { isImageModelType, loadBuildConfig } from '../encoder/config.ts';
import { registerBuildCommand } from './build-command.ts';
import { registerGatewayCommand } from './gateway-command.ts';
import { registerInferCommand } from './infer-command.ts';
import type { ModelSource } from './model-source.ts';
import type { SwaggerUiFiles } from '../tools/http/docs-page.ts';
import type { DashboardFiles } from '../gateway/dashboard/files.ts';
import { registerMcpCommand } from './mcp-command.ts';
import { registerServeCommand } from './serve-command.ts';
import { registerBuilderTools } from './builder-tools-command.ts';
import { registerToolsCommand } from './tools-command.ts';

/** Where a command writes; tests pass their own. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Whether stderr is a terminal (progress bars only then). */
  isTerminal?: boolean;
  /** All of standard input (`infer -`: texts in UTF-8, or one image's bytes). */
  readStdin?: () => Promise<Buffer>;
}

/**
 * What the process that runs the command line provides: from source, files of the repository; in the single
 * executable, SEA assets and the extracted native files.
 */
export interface CliContext {
  luaWasmPath?: string;
  /** The image codecs' .wasm files in the single executable (extracted); absent: the installed packages'. */
  imageCodecFiles?: CodecFiles;
  /** How `serve` starts its inference workers; absent: src/encoder/onnx-worker.ts (running from source). */
  inferenceWorker?: () => InferenceWorkerScript;
  /** The text of proto/encoder.proto (the gRPC contract). */
  protoText: () => string;
  /** Swagger UI's files, for the tool server's /docs. */
  swaggerUiFiles: SwaggerUiFiles;
  /** The gateway dashboard's files: from source bundled on demand, in the single executable SEA assets. */
  dashboardFiles: () => Promise<DashboardFiles>;
  /** The program of the gateway's SQLite reader thread (src/gateway/storage/sqlite-reader.ts). */
  sqliteReader: () => ThreadScript;
  /** The target triple this process runs as. */
  target: string;
  /** The host's base runtime for `build`: the running executable when it is one, or the repository's build from source. */
  hostBase?: () => HostBaseRuntime | undefined;
}

export const EXIT_OK = 0;
export const EXIT_INTERNAL_ERROR = 1;
export const EXIT_INPUT_ERROR = 2;

export const RUNTIME_VERSION: string = packageJson.version;

export const processIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  isTerminal: process.stderr.isTTY === true,
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  },
};

/**
 * A reader that goes away (`infer … | head`) makes writes to stdout or stderr fail with EPIPE, an unhandled 'error'
 * event that crashed the process with a stack trace. Output nobody reads is dropped instead; the command finishes.
 * For the entry points only (it changes the process's streams).
 */
export function dropOutputOfClosedPipes(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE') throw error;
    });
  }
}

/** The builder's command line: what `encoder` (from source, or the base runtime without model assets) runs. */
export function createProgram(io: CliIo, context: CliContext): Command {
  const program = baseProgram('encoder', io).description('Build an encoder model into one executable, or run it from its model directory');
  const fromConfig: ModelSource = {
    configOption: true,
    // the builder's reader adds what the ONNX graph shows (its maximum length); loaded only when a folder is run
    load: async (options) => {
      const config = loadBuildConfig(options.config!);
      if (isImageModelType(config.modelType)) return (await import('../encoder/image-model-package.ts')).readImageModelPackage(config);
      return (await import('../builder/model-directory.ts')).readModelDirectory(config);
    },
    pipelineOptions: { luaWasmPath: context.luaWasmPath },
  };
  // encoderfile's global option; build and runtime read it (before or after the command's name)
  program.option('--cache-dir <dir>', 'cache of base runtimes (default: ENCODER_CACHE_DIR, else the platform\'s cache)');
  registerBuildCommand(program, io, context);
  registerInferCommand(program, io, fromConfig);
  registerServeCommand(program, io, fromConfig, context);
  registerMcpCommand(program, io, fromConfig, context);
  registerGatewayCommand(program, io, context);
  registerToolsCommand(program, io, context);
  registerBuilderTools(program, io);
  return program;
}

/** A commander program with this project's output, version and error conventions. */
export function baseProgram(name: string, io: CliIo, version: string = RUNTIME_VERSION): Command {
  return new Command(name)
    .version(version)
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
}

/** Runs the builder's command line; see `runProgram`. */
export function runCli(argv: readonly string[], io: CliIo, context: CliContext): Promise<number> {
  return runProgram(createProgram(io, context), argv, io);
}

/**
 * Runs a program and returns the exit code: 0 ok, 2 input or configuration error (including bad arguments),
 * 1 internal error. Never calls process.exit, so tests can run it in-process.
 */
export async function runProgram(program: Command, argv: readonly string[], io: CliIo): Promise<number> {
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
