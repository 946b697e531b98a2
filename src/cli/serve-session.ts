import { type Command, InvalidArgumentError } from 'commander';
import type * as ort from 'onnxruntime-node';
import type { SessionSettings } from '../encoder/onnx-model.ts';
import { ConfigError } from '../encoder/errors.ts';
import { parsePositiveInteger } from './arguments.ts';

/** What commander gives for the options of this module (`--threads` is serve's own, read here too). */
export interface SessionCommandOptions {
  threads?: number;
  intraOpThreads?: number;
  interOpThreads?: number;
  graphOptimizationLevel?: GraphOptimizationLevel;
  executionProvider?: string;
}

type GraphOptimizationLevel = NonNullable<ort.InferenceSession.SessionOptions['graphOptimizationLevel']>;

/**
 * `--graph-optimization-level`: encoderfile's values (disable, 1, 2, 3) and onnxruntime's own names. encoderfile's
 * 3 is onnxruntime's "all" (ORT_ENABLE_ALL, its default), as the `ort` crate maps its Level3.
 */
const GRAPH_OPTIMIZATION_LEVELS: Record<string, GraphOptimizationLevel> = {
  disable: 'disabled',
  disabled: 'disabled',
  '0': 'disabled',
  '1': 'basic',
  basic: 'basic',
  '2': 'extended',
  extended: 'extended',
  layout: 'layout',
  '3': 'all',
  all: 'all',
};

/** The one execution provider this executable carries; the others onnxruntime (or encoderfile) knows, and why not here. */
const AVAILABLE_PROVIDERS = ['cpu'];
const KNOWN_PROVIDERS = ['cuda', 'tensorrt', 'coreml', 'directml', 'dml', 'webgpu', 'rocm', 'migraphx', 'openvino', 'qnn', 'xnnpack', 'nnapi'];

/** Adds serve's onnxruntime session options (encoderfile's names where it has them). */
export function addSessionOptions(command: Command): Command {
  return command
    .option('--intra-op-threads <n>', 'the same as --threads: onnxruntime intra-op threads per worker', parsePositiveInteger)
    .option(
      '--inter-op-threads <n>',
      'onnxruntime inter-op threads: more than 1 runs independent branches of the graph in parallel (executionMode parallel); default 1, sequential',
      parsePositiveInteger,
    )
    .option('--graph-optimization-level <level>', 'onnxruntime graph optimisations: disable, 1 (basic), 2 (extended), 3 (all, the default); or basic, extended, layout, all', parseGraphOptimizationLevel)
    .option('--execution-provider <name>', 'onnxruntime execution provider: cpu (the only one this executable carries)', parseExecutionProvider)
    // encoderfile's other session flags: two that hold here as they are, two that tune providers this build lacks
    .option('--disable-cpu-fallback', 'accepted for encoderfile: with the CPU provider there is nothing to fall back from')
    .option('--with-arena-allocator', "accepted for encoderfile: onnxruntime's CPU memory arena is always on here (measured faster)")
    .option('--device-id <n>', 'encoderfile: the GPU of cuda or tensorrt; refused, this executable has no GPU provider', refuseGpuOption('--device-id', 'cuda and tensorrt'))
    .option('--compute-units <units>', 'encoderfile: CoreML compute units; refused, this executable has no CoreML provider', refuseGpuOption('--compute-units', 'coreml'));
}

function refuseGpuOption(flag: string, providers: string): (value: string) => never {
  return () => {
    throw new InvalidArgumentError(`${flag} tunes the ${providers} execution providers, which this executable does not carry (it has onnxruntime's CPU provider only)`);
  };
}

function parseGraphOptimizationLevel(value: string): GraphOptimizationLevel {
  const level = GRAPH_OPTIMIZATION_LEVELS[value.trim().toLowerCase()];
  if (!level) throw new InvalidArgumentError(`"${value}" is not a graph optimization level; use disable, 1, 2 or 3 (or basic, extended, layout, all)`);
  return level;
}

function parseExecutionProvider(value: string): string {
  const name = value.trim().toLowerCase();
  if (AVAILABLE_PROVIDERS.includes(name)) return name;
  if (KNOWN_PROVIDERS.includes(name)) {
    throw new InvalidArgumentError(
      `"${value}" is not available: this executable carries onnxruntime's CPU execution provider only (no GPU or accelerator libraries); use cpu`,
    );
  }
  throw new InvalidArgumentError(`"${value}" is not an execution provider; available: ${AVAILABLE_PROVIDERS.join(', ')}`);
}

/**
 * The intra-op threads (`--threads` or `--intra-op-threads`) and the session options that replace the measured
 * defaults of onnx-model.ts (sessionOptionsFor) only where the user gave one.
 */
export function sessionSettingsOf(options: SessionCommandOptions): { threads?: number; sessionOptions: ort.InferenceSession.SessionOptions } {
  if (options.threads !== undefined && options.intraOpThreads !== undefined && options.threads !== options.intraOpThreads) {
    throw new ConfigError(`--threads ${options.threads} and --intra-op-threads ${options.intraOpThreads} disagree; they are one setting, give one of them`);
  }
  const sessionOptions: ort.InferenceSession.SessionOptions = {};
  if (options.graphOptimizationLevel) sessionOptions.graphOptimizationLevel = options.graphOptimizationLevel;
  if (options.executionProvider) sessionOptions.executionProviders = [options.executionProvider];
  if (options.interOpThreads !== undefined) {
    sessionOptions.interOpNumThreads = options.interOpThreads;
    sessionOptions.executionMode = options.interOpThreads > 1 ? 'parallel' : 'sequential';
  }
  return { threads: options.threads ?? options.intraOpThreads, sessionOptions };
}

/** The banner's line on the session: what onnxruntime was given. */
export function sessionLine(settings: SessionSettings): string {
  const intra = settings.intraOpThreads === null ? 'onnxruntime default' : String(settings.intraOpThreads);
  const inter = settings.interOpThreads === null ? 'onnxruntime default' : String(settings.interOpThreads);
  return (
    `  onnxruntime: execution provider ${settings.executionProviders.join(', ')}, graph optimization ${settings.graphOptimizationLevel}, ` +
    `intra-op threads ${intra} per worker, inter-op threads ${inter} (${settings.executionMode})`
  );
}
