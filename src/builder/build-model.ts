import { mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { writeModelExecutable, type AssetSource, type ManifestModel } from '../../runtime/asset-section.ts';
import { cacheDirFromEnvironment } from '../encoder/cache/cache-dir.ts';
import { defaultOutputPath, isImageModelType, loadBuildConfig, type BuildConfig, type Quantization } from '../encoder/config.ts';
import { describeMaxLength } from '../encoder/max-length.ts';
import type { ModelPackage } from '../encoder/model-package.ts';
import { optimizeGraph } from '../encoder/onnx-model.ts';
import { manifestModelOf, packageAssets } from '../encoder/packaged-model.ts';
import { PredictPipeline } from '../encoder/predict-pipeline.ts';
import type { PipelineOptions } from '../encoder/pipeline-options.ts';
import { resolveBaseRuntime, type BaseRuntime, type HostBaseRuntime } from './base-runtime.ts';
import { splitExternalData } from './external-data.ts';
import { checkImageModel, quantizeImageModel } from './image-model-check.ts';
import { checkMaxLength } from './max-length-check.ts';
import { readModelDirectory } from './model-directory.ts';
import { compareModels, DEFAULT_CHECK_TEXTS, describeGate, enforceGate } from './quantize/accuracy-gate.ts';
import { quantizeInt8 } from './quantize/quantize-int8.ts';
import { executableExtension, hostTarget, parseTarget, requireBuildableTarget, type Target } from './targets.ts';
import { ConfigError } from '../encoder/errors.ts';

export interface BuildModelOptions {
  configFile: string;
  /** Target triple; default: this machine's. */
  platform?: string;
  baseBinaryPath?: string;
  /** The host's own base runtime (the running executable, or the repository's build): used for the host's target. */
  hostBase?: HostBaseRuntime;
  /** Overrides the configuration's output_path. */
  outputPath?: string;
  /** `--output-dir`: the output file goes to this folder (its name as output_path or the default gives it). */
  outputDir?: string;
  /** `--cache-dir`: overrides the configuration's cache_dir and ENCODER_CACHE_DIR. */
  cacheDir?: string;
  /** false (`--no-download`): a base runtime must be local or cached. */
  download?: boolean;
  /** false (`--no-build`): every check runs (base runtime, configuration, files, ONNX, max length), nothing is written. */
  write?: boolean;
  /** Overrides the configuration's quantize (`encoder build --quantize`). */
  quantize?: Quantization;
  runtimeVersion: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  pipelineOptions?: PipelineOptions;
}

/** What the build tells its user: one line per finished step, and byte progress of downloads and appends. */
export interface BuildReporter {
  step(index: number, title: string, detail: string): void;
  progress(label: string, doneBytes: number, totalBytes: number | null): void;
}

export interface BuiltModel {
  outputPath: string;
  target: Target;
  bytes: number;
  /** false for `--no-build`: checked, not written. */
  written: boolean;
}

export const BUILD_STEPS = [
  'detect platform and fetch the base runtime',
  'load and validate the configuration',
  'check required model files',
  'validate the ONNX model structure',
  'append the assets to the base runtime',
  'write the output file',
] as const;

/** Spec 2's build steps, in order. Every failure is an EncoderError naming what is wrong. */
export async function buildModel(options: BuildModelOptions, reporter: BuildReporter): Promise<BuiltModel> {
  const cwd = options.cwd ?? process.cwd();
  const env = options.env ?? process.env;

  // Read once; a broken configuration is reported in its own step, after the base runtime.
  const loaded = tryLoadBuildConfig(options.configFile, cwd, env);
  const configured = 'config' in loaded ? loaded.config : null;
  // the flags win over an encoderfile configuration's target and base_binary_path
  const target = options.platform ? parseTarget(options.platform) : configured?.target ? configuredTarget(configured.target) : hostTarget();
  requireBuildableTarget(target);
  const base = await resolveBaseRuntime({
    target,
    version: options.runtimeVersion,
    cacheDir: options.cacheDir ?? configured?.cacheDir ?? cacheDirFromEnvironment(env),
    baseBinaryPath: options.baseBinaryPath ?? configured?.baseBinaryPath ?? undefined,
    hostBase: options.hostBase,
    env,
    download: options.download,
    onProgress: (event) => reporter.progress('download', event.doneBytes, event.totalBytes),
  }).catch((error: unknown) => {
    // a broken configuration may be why (its target or base_binary_path unread): it is the first thing to fix
    throw 'error' in loaded ? loaded.error : error;
  });
  reporter.step(1, BUILD_STEPS[0], `${target}, ${describeBase(base)}${base.note ? ` (${base.note})` : ''}`);

  if ('error' in loaded) throw loaded.error;
  const { config } = loaded;
  reporter.step(2, BUILD_STEPS[1], `${config.name} ${config.version} (${config.modelType})${describeFormat(config)}`);

  const checked = isImageModelType(config.modelType)
    ? await checkImageModelStep(config, options, reporter)
    : await checkTextModel(config, options, reporter);
  // the executable carries only the graph it runs: quantized if asked, optimized ahead of its sessions, and with its
  // large initializers apart, for onnxruntime to map
  const optimized = await optimizeGraph(checked.weights);
  const split = splitExternalData(optimized);
  const weightAssets: AssetSource[] = split
    ? [{ name: 'model_weights', data: split.graph }, { name: 'model_data', data: split.data }]
    : [{ name: 'model_weights', data: optimized }];
  reporter.step(4, BUILD_STEPS[3], `${checked.detail}; graph optimized`);

  let outputPath = options.outputPath !== undefined
    ? path.resolve(cwd, options.outputPath)
    : (config.outputPath ?? defaultOutputPath(config.name, cwd, executableExtension(target)));
  if (options.outputDir !== undefined) outputPath = path.resolve(cwd, options.outputDir, path.basename(outputPath));
  // a folder named by --output-dir is made, as encoderfile makes it; an output_path or -o must name an existing one
  if (options.outputDir !== undefined && options.write !== false) mkdirSync(path.dirname(outputPath), { recursive: true });
  if (options.write === false) {
    reporter.step(5, BUILD_STEPS[4], 'skipped (--no-build)');
    reporter.step(6, BUILD_STEPS[5], `skipped (--no-build): would be ${outputPath}`);
    return { outputPath, target, bytes: 0, written: false };
  }
  const manifest = await writeModelExecutable({
    baseBinaryPath: base.path,
    outputPath,
    assets: packageAssets(config).flatMap((asset) => (asset.name === 'model_weights' ? weightAssets : [asset])),
    manifest: { runtime_version: options.runtimeVersion, target, model: checked.manifestModel },
    onProgress: (done, total) => reporter.progress('append', done, total),
  });
  reporter.step(5, BUILD_STEPS[4], manifest.assets.map((asset) => `${asset.name} ${formatBytes(asset.length)}`).join(', '));

  const bytes = statSync(outputPath).size;
  reporter.step(6, BUILD_STEPS[5], `${outputPath} (${formatBytes(bytes)})`);
  return { outputPath, target, bytes, written: true };
}

/** Step 4's input: the graph to pack (quantized if asked), what the step line says, the manifest's model. */
interface CheckedModel {
  weights: Uint8Array;
  detail: string;
  manifestModel: ManifestModel;
}

/** Steps 3 and 4 of a text model: files read, graph run at the longest input, transform checked, int8 if asked. */
async function checkTextModel(config: BuildConfig, options: BuildModelOptions, reporter: BuildReporter): Promise<CheckedModel> {
  const pkg = readModelDirectory(config);
  reporter.step(3, BUILD_STEPS[2], path.dirname(config.paths.modelWeightsPath));

  const quantize = options.quantize ?? config.quantize;
  const pipeline = await PredictPipeline.load(pkg, options.pipelineOptions);
  const output = pipeline.signature.output;
  let quantized: { weights: Uint8Array; detail: string } | null = null;
  try {
    // the longest input it will be served runs now, or the build stops here; the model alone: a transform may refuse
    // some inputs on purpose, which is a request's 500 to report then, not a length the graph cannot run
    if (pkg.transform === null) await checkMaxLength(pipeline, pkg.maxLength);
    else {
      const model = await PredictPipeline.load({ ...pkg, transform: null }, options.pipelineOptions);
      await checkMaxLength(model, pkg.maxLength).finally(() => model.close());
    }
    if (quantize === 'int8') quantized = await quantizeChecked(pkg, pipeline, config, options.pipelineOptions);
  } finally {
    await pipeline.close();
  }
  return {
    weights: quantized?.weights ?? pkg.weights,
    detail:
      `output "${output.name}" [${output.shape.join(', ')}]${pkg.transform !== null ? ', transform checked' : ''}; ` +
      `${describeMaxLength(pkg.maxLength)}, run once at that length${quantized ? `; ${quantized.detail}` : ''}`,
    manifestModel: manifestModelOf(config, quantized ? 'int8' : 'none', pkg.maxLength, pkg.truncation),
  };
}

/** Steps 3 and 4 of an image model (image-model-check.ts), int8 behind the gate on check images if asked. */
async function checkImageModelStep(config: BuildConfig, options: BuildModelOptions, reporter: BuildReporter): Promise<CheckedModel> {
  const sessions = { threads: options.pipelineOptions?.threads, sessionOptions: options.pipelineOptions?.sessionOptions };
  const checked = await checkImageModel(config, sessions);
  reporter.step(3, BUILD_STEPS[2], path.dirname(config.paths.modelWeightsPath));
  const quantized = (options.quantize ?? config.quantize) === 'int8' ? await quantizeImageModel(checked, config.quantizeGate, sessions) : null;
  return {
    weights: quantized?.weights ?? checked.pkg.weights,
    detail: `${checked.detail}${quantized ? `; ${quantized.detail}` : ''}`,
    manifestModel: manifestModelOf(config, quantized ? 'int8' : 'none'),
  };
}

/**
 * Rewrites the weights to int8 and runs the accuracy gate: the fp32 pipeline (already loaded) and an int8 one on the
 * check texts. Below a floor is a ConfigError, so nothing is written.
 */
async function quantizeChecked(pkg: ModelPackage, fp32: PredictPipeline, config: BuildConfig, pipelineOptions: PipelineOptions | undefined) {
  const { model, report } = quantizeInt8(pkg.weights);
  const int8 = await PredictPipeline.load({ ...pkg, weights: model }, pipelineOptions);
  try {
    const result = await compareModels(fp32, int8, config.quantizeGate.checkTexts ?? DEFAULT_CHECK_TEXTS);
    enforceGate(result, config.quantizeGate);
    const rewritten = `${report.rewritten.MatMul + report.rewritten.Gemm} MatMul/Gemm → int8 DynamicQuantizeMatMul`;
    return { weights: model, detail: `${rewritten}, ${formatBytes(report.bytesBefore)} → ${formatBytes(report.bytesAfter)}; ${describeGate(result)}` };
  } finally {
    await int8.close();
  }
}

/** An encoderfile configuration says so; the keys that do nothing here follow, each with why (one line). */
function describeFormat(config: BuildConfig): string {
  const format = config.format === 'encoderfile' ? ', a mozilla-ai/encoderfile configuration' : '';
  return `${format}${config.notes.length > 0 ? `; accepted without effect here: ${config.notes.join('; ')}` : ''}`;
}

/** An encoderfile configuration's `target`, as `--platform` takes it. */
function configuredTarget(value: string): Target {
  try {
    return parseTarget(value);
  } catch (error) {
    throw new ConfigError(`"encoderfile.target" ${(error as Error).message.replace(/^unknown platform/, 'names an unknown target')}`, { cause: error });
  }
}

function describeBase(base: BaseRuntime): string {
  if (base.source === 'self') return 'base runtime: this executable';
  if (base.source === 'repository') return `base runtime: this repository's build, ${base.path}`;
  return `${base.source}: ${base.path}`;
}

function tryLoadBuildConfig(configFile: string, cwd: string, env: NodeJS.ProcessEnv): { config: BuildConfig } | { error: unknown } {
  try {
    return { config: loadBuildConfig(configFile, { cwd, env }) };
  } catch (error) {
    return { error };
  }
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 2 ** 20) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}
