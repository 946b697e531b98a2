import type { SingleBar } from 'cli-progress';
import { type Command, Option } from 'commander';
import { CACHE_DIR_ENV } from '../encoder/cache/cache-dir.ts';
import { QUANTIZATIONS, type Quantization } from '../encoder/config.ts';
import { ConfigError } from '../encoder/errors.ts';
import { DEFAULT_RELEASE_URL, RELEASE_URL_ENV } from '../builder/release.ts';
import type { BuildReporter } from '../builder/build-model.ts';
import { TARGETS } from '../builder/targets.ts';
import { parseFileName } from './arguments.ts';
import { RUNTIME_VERSION, type CliContext, type CliIo } from './program.ts';

interface BuildCommandOptions {
  quantize?: Quantization;
  file: string;
  platform?: string;
  baseBinaryPath?: string;
  output?: string;
  outputDir?: string;
  cacheDir?: string;
  download: boolean;
  build: boolean;
  runtimeVersion?: string;
}

export function registerBuildCommand(program: Command, io: CliIo, context: CliContext): void {
  program
    .command('build')
    .description('Pack a model directory into one executable that serves it or runs it (spec 2 build steps)')
    .requiredOption('-f, --file <config>', 'build configuration (YAML, top-level key encoder, or encoderfile: a mozilla-ai/encoderfile configuration as it is)')
    .option('--platform <target>', `target triple (default: this machine): ${TARGETS.join(', ')}`)
    .option('--base-binary-path <path>', 'use this base runtime (from `npm run build:runtime`) instead of a release download')
    .option('-o, --output <path>', 'output file (default: output_path of the configuration, else ./<name>)', parseFileName)
    .option('--output-dir <dir>', 'write the output file into this folder (its name from -o, output_path or the model name)')
    .option('--cache-dir <dir>', 'cache of base runtimes (overrides cache_dir and ENCODER_CACHE_DIR)')
    .option('--no-download', 'never download a base runtime: use --base-binary-path, this executable or the cache')
    .option('--no-build', 'run every check (base runtime, configuration, files, ONNX model, longest input) and write nothing')
    .option('--runtime-version <version>', `base runtime version (this builder packs for ${RUNTIME_VERSION} only)`)
    .addOption(new Option('--quantize <kind>', 'int8: MatMul weights to int8 behind an accuracy gate (default: the configuration\'s quantize, else none)').choices(QUANTIZATIONS))
    .addHelpText('after', () => buildHelpFooter())
    .action(async (options: BuildCommandOptions, command: Command) => {
      requireOwnRuntimeVersion(options.runtimeVersion);
      // the builder (ONNX rewriting with protobufjs, downloads) loads only when a build runs
      const { BUILD_STEPS, buildModel, formatBytes } = await import('../builder/build-model.ts');
      const stepLine = (index: number, title: string, detail: string) => `[${index}/${BUILD_STEPS.length}] ${title}: ${detail}\n`;
      // cli-progress (and the readline module it loads) only for a terminal
      const reporter = io.isTerminal ? terminalReporter(io, stepLine, formatBytes, (await import('cli-progress')).SingleBar) : plainReporter(io, stepLine);
      const built = await buildModel(
        {
          configFile: options.file,
          platform: options.platform,
          baseBinaryPath: options.baseBinaryPath,
          hostBase: context.hostBase?.(),
          outputPath: options.output,
          outputDir: options.outputDir,
          cacheDir: options.cacheDir ?? (command.optsWithGlobals() as { cacheDir?: string }).cacheDir,
          download: options.download,
          write: options.build,
          quantize: options.quantize,
          runtimeVersion: RUNTIME_VERSION,
          pipelineOptions: { luaWasmPath: context.luaWasmPath },
        },
        reporter,
      );
      if (built.written) io.stderr(`built ${built.outputPath} for ${built.target}; run it with: ${built.outputPath} infer "some text"\n`);
      else io.stderr(`checked ${options.file} for ${built.target}; nothing written (--no-build)\n`);
    });
}

/**
 * `--runtime-version`: a model executable is a base runtime with this builder's asset section appended, which only
 * the runtime of the builder's own version is known to read; any other version cannot apply (exit 2).
 */
export function requireOwnRuntimeVersion(version: string | undefined): void {
  if (version !== undefined && version !== RUNTIME_VERSION) {
    throw new ConfigError(`--runtime-version ${version}: this builder packs models for base runtime ${RUNTIME_VERSION} only (the asset section is read by the runtime of the same version); use the builder of version ${version} to build for it`);
  }
}

/** What `build --help` ends with: the environment variables it reads, and the target without a base runtime. */
export function buildHelpFooter(): string {
  const releaseDefault = DEFAULT_RELEASE_URL ?? "none: this build of encoder names no repository, so set it or use --base-binary-path";
  return [
    '',
    'Environment:',
    `  ${RELEASE_URL_ENV}  where base runtimes of other targets are downloaded from ("{version}" is replaced by the`,
    `                       version); default: ${releaseDefault}`,
    `  ${CACHE_DIR_ENV}    cache of downloaded base runtimes (the configuration's cache_dir wins) and of the native`,
    '                       files a built model extracts; default: $XDG_CACHE_HOME/encoder or ~/.cache/encoder (Linux),',
    '                       ~/Library/Caches/encoder (macOS), %LOCALAPPDATA%\\encoder (Windows)',
    '',
    'For the target of the running executable it is its own base runtime: no cache, no download, no flag.',
    'x86_64-apple-darwin: onnxruntime-node 1.30 ships no binding for Intel Macs, so no base runtime exists for it.',
  ].join('\n');
}

type StepLine = (index: number, title: string, detail: string) => string;

/** Not a terminal (CI, pipes): one line per finished step, no progress bar. */
function plainReporter(io: CliIo, stepLine: StepLine): BuildReporter {
  return { step: (index, title, detail) => io.stderr(stepLine(index, title, detail)), progress: () => {} };
}

/** A terminal: the same lines, plus a cli-progress bar while bytes are downloaded or appended. */
function terminalReporter(io: CliIo, stepLine: StepLine, formatBytes: (bytes: number) => string, Bar: typeof SingleBar): BuildReporter {
  let bar: SingleBar | null = null;
  const stop = () => {
    bar?.stop();
    bar = null;
  };
  return {
    step(index, title, detail) {
      stop();
      io.stderr(stepLine(index, title, detail));
    },
    progress(label, done, total) {
      if (!bar) {
        bar = new Bar({
          format: `${label} [{bar}] {percentage}% {doneText} / {totalText}`,
          stream: process.stderr,
          clearOnComplete: true,
          hideCursor: true,
        });
        bar.start(total ?? 0, 0, { doneText: '0 B', totalText: total === null ? '?' : formatBytes(total) });
      }
      if (total !== null) bar.setTotal(total);
      bar.update(done, { doneText: formatBytes(done) });
    },
  };
}
