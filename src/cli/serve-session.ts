import { type Command, InvalidArgumentError } from 'commander';
import type * as ort from 'onnxruntime-node';
import type { SessionSettings } from '../encoder/onnx-model.ts';
import { ConfigError } from '../encoder/errors.ts';
import { parseExecutionProvider, parseGraphOptimizationLevel, SessionOptionError, sessionOptionsOf, type GraphOptimizationLevel, type SessionChoices } from '../encoder/session-options.ts';
import { parsePositiveInteger } from './arguments.ts';

/** What commander gives for the options of this module (`--threads` is serve's own, read here too). */
export interface SessionCommandOptions {
  threads?: number;
  intraOpThreads?: number;
  interOpThreads?: number;
  graphOptimizationLevel?: GraphOptimizationLevel;
  executionProvider?: string;
}

/** Adds serve's onnxruntime session options (encoderfile's names where it has them). */
export function addSessionOptions(command: Command): Command {
  return command
    .option('--intra-op-threads <n>', 'the same as --threads: onnxruntime intra-op threads per worker', parsePositiveInteger)
    .option(
      '--inter-op-threads <n>',
      'onnxruntime inter-op threads: more than 1 runs independent branches of the graph in parallel (executionMode parallel); default 1, sequential',
      parsePositiveInteger,
    )
    .option('--graph-optimization-level <level>', 'onnxruntime graph optimisations: disable, 1 (basic), 2 (extended), 3 (all, the default); or basic, extended, layout, all', commanderParser(parseGraphOptimizationLevel))
    .option('--execution-provider <name>', 'onnxruntime execution provider: cpu (the only one this executable carries)', commanderParser(parseExecutionProvider))
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

/** A value parser of commander: the shared one's refusal as commander's error (exit 2, the flag named). */
function commanderParser<T>(parse: (value: string) => T): (value: string) => T {
  return (value) => {
    try {
      return parse(value);
    } catch (error) {
      if (error instanceof SessionOptionError) throw new InvalidArgumentError(error.message);
      throw error;
    }
  };
}

/**
 * The intra-op threads (`--threads` or `--intra-op-threads`) and the session options that replace the measured
 * defaults of onnx-model.ts (sessionOptionsFor) only where the user gave one: each flag given wins over the model's
 * `session:` choices (its build configuration's, or a built model's manifest's), which win over the defaults.
 */
export function sessionSettingsOf(
  options: SessionCommandOptions,
  configured: SessionChoices = {},
): { threads?: number; sessionOptions: ort.InferenceSession.SessionOptions } {
  if (options.threads !== undefined && options.intraOpThreads !== undefined && options.threads !== options.intraOpThreads) {
    throw new ConfigError(`--threads ${options.threads} and --intra-op-threads ${options.intraOpThreads} disagree; they are one setting, give one of them`);
  }
  const chosen: SessionChoices = {
    intraOpThreads: options.threads ?? options.intraOpThreads ?? configured.intraOpThreads,
    interOpThreads: options.interOpThreads ?? configured.interOpThreads,
    graphOptimizationLevel: options.graphOptimizationLevel ?? configured.graphOptimizationLevel,
    executionProvider: options.executionProvider ?? configured.executionProvider,
  };
  return { threads: chosen.intraOpThreads, sessionOptions: sessionOptionsOf(chosen) };
}

/**
 * The banner's line on the session: what onnxruntime was given; with a solo session (null: none), its intra-op
 * threads too.
 */
export function sessionLine(settings: SessionSettings, solo: SessionSettings | null = null): string {
  const threads = (count: number | null) => (count === null ? 'onnxruntime default' : String(count));
  return (
    `  onnxruntime: execution provider ${settings.executionProviders.join(', ')}, graph optimization ${settings.graphOptimizationLevel}, ` +
    `intra-op threads ${threads(settings.intraOpThreads)} per worker, inter-op threads ${threads(settings.interOpThreads)} (${settings.executionMode})` +
    (solo ? `; a batch that runs alone: the first worker's solo session, intra-op threads ${threads(solo.intraOpThreads)}` : '')
  );
}
