import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type * as ort from 'onnxruntime-node';
import type { ModelType } from './config.ts';
import { ConfigError, InternalError } from './errors.ts';
import { Tensor } from './tensor.ts';
import { disableOnnxruntimeTelemetry, WARM_UP_MODEL_BASE64 } from './onnxruntime-environment.ts';
import type { PaddedBatch } from './tokenizer/index.ts';

/** A model input or output as onnxruntime describes it. */
export interface ValueInfo {
  name: string;
  type: string;
  shape: readonly (number | string)[];
}

/** How this program binds to a model: inputs by name, and the one output it reads. */
export interface ModelSignature {
  hasTokenTypeIds: boolean;
  output: ValueInfo;
  /** Set when the output was chosen by a fallback rule, to be shown to the user once. */
  note: string | null;
}

const REQUIRED_INPUTS = ['input_ids', 'attention_mask'] as const;
const KNOWN_INPUTS = [...REQUIRED_INPUTS, 'token_type_ids'];
const FLOAT_TYPES = new Set(['float32']);

const EXPECTED_OUTPUT: Record<ModelType, { name: string; rank: number; layout: string }> = {
  embedding: { name: 'last_hidden_state', rank: 3, layout: '[batch, sequence, hidden]' },
  sentence_embedding: { name: 'last_hidden_state', rank: 3, layout: '[batch, sequence, hidden]' },
  sequence_classification: { name: 'logits', rank: 2, layout: '[batch, labels]' },
  token_classification: { name: 'logits', rank: 3, layout: '[batch, sequence, labels]' },
};

/** Checks that a model's inputs and outputs fit the model type; throws a ConfigError naming what does not. */
export function validateSignature(modelType: ModelType, inputs: readonly ValueInfo[], outputs: readonly ValueInfo[]): ModelSignature {
  for (const name of REQUIRED_INPUTS) {
    if (!inputs.some((input) => input.name === name)) {
      throw new ConfigError(`model has no input "${name}"; inputs: ${describeValues(inputs)}`);
    }
  }
  for (const input of inputs) {
    if (!KNOWN_INPUTS.includes(input.name)) {
      throw new ConfigError(`model input "${input.name}" is not supported; inputs are bound by name: ${KNOWN_INPUTS.join(', ')}`);
    }
    if (input.type !== 'int64') {
      throw new ConfigError(`model input "${input.name}" has type ${input.type}; it must be int64`);
    }
  }

  const expected = EXPECTED_OUTPUT[modelType];
  const named = outputs.find((output) => output.name === expected.name);
  if (named) {
    if (named.shape.length !== expected.rank || !FLOAT_TYPES.has(named.type)) {
      throw new ConfigError(
        `model output "${named.name}" is ${named.type} ${describeShape(named.shape)} (rank ${named.shape.length}); ` +
          `a ${modelType} model needs float32 of rank ${expected.rank} ${expected.layout}`,
      );
    }
    return { hasTokenTypeIds: inputs.some((i) => i.name === 'token_type_ids'), output: named, note: null };
  }
  const tokenVectors = modelType === 'embedding' || modelType === 'sentence_embedding';
  if (tokenVectors) {
    const fallback = outputs.find((output) => output.shape.length === 3 && FLOAT_TYPES.has(output.type));
    if (fallback) {
      return {
        hasTokenTypeIds: inputs.some((i) => i.name === 'token_type_ids'),
        output: fallback,
        note: `model has no output "last_hidden_state"; using "${fallback.name}" ${describeShape(fallback.shape)} as token embeddings`,
      };
    }
  }
  throw new ConfigError(
    `a ${modelType} model needs output "${expected.name}" of rank ${expected.rank} ${expected.layout}` +
      `${tokenVectors ? ' (or another float output of rank 3)' : ''}; outputs: ${describeValues(outputs)}`,
  );
}

type Onnxruntime = typeof ort;
let onnxruntime: Promise<Onnxruntime> | undefined;

/**
 * onnxruntime is loaded on first use, not at start-up: loading its native library costs time that commands such
 * as `--version` or `inspect` should not pay (and in a single executable it is dlopened from extracted assets).
 */
function loadOnnxruntime(): Promise<Onnxruntime> {
  if (!onnxruntime) {
    disableOnnxruntimeTelemetry();
    onnxruntime = import('onnxruntime-node');
  }
  return onnxruntime;
}

/**
 * Loads onnxruntime and creates, then releases, a session of WARM_UP_MODEL_BASE64: onnxruntime's first session in a
 * process sets up its environment, operator schemas and CPU kernels, several times a later session's cost whatever the
 * model. A thread that does this before its model arrives has that done when it does.
 */
export async function warmUpOnnxruntime(): Promise<void> {
  const runtime = await loadOnnxruntime();
  const session = await runtime.InferenceSession.create(Buffer.from(WARM_UP_MODEL_BASE64, 'base64'), { intraOpNumThreads: 1, interOpNumThreads: 1 });
  await session.release();
}

/**
 * The model as onnxruntime leaves it after its graph optimisations up to the 'extended' level (constant folding,
 * redundant nodes removed, attention, layer-normalisation and GELU fusions), for the builder to pack: a session of
 * it then finds them done, which a session otherwise redoes at every start (~25% of a first session's time,
 * docs/benchmarks.md). Sessions still ask for every level, so the hardware-specific layout level runs where the model
 * does; 'extended' is the last level whose result onnxruntime's CPU provider can run on any machine. The outputs are
 * those of the original model run with all optimisations, as every session already did.
 */
export async function optimizeGraph(weights: Uint8Array): Promise<Uint8Array> {
  const runtime = await loadOnnxruntime();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'encoder-optimize-'));
  try {
    const file = path.join(dir, 'model.onnx');
    const session = await runtime.InferenceSession.create(weights, { graphOptimizationLevel: 'extended', optimizedModelFilePath: file, intraOpNumThreads: 1 });
    await session.release();
    return new Uint8Array(readFileSync(file));
  } catch (error) {
    throw new ConfigError(`onnxruntime could not optimize the model's graph: ${(error as Error).message}`, { cause: error });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface OnnxModelOptions {
  /** Intra-op threads; default: onnxruntime's choice, one per physical core (the calling thread is one of them). */
  threads?: number;
  /**
   * false: the intra-op threads stop spinning as soon as a run ends (onnxruntime's `session.force_spinning_stop`)
   * instead of spinning ~25 ms for the next one; they still spin between the steps of a run. Default true.
   */
  spinAfterRun?: boolean;
  /** Replaces single session options; for benchmarks that compare them (bench/batching.bench.ts). */
  sessionOptions?: ort.InferenceSession.SessionOptions;
  /** Where the file named by the weights' external initializers is (ModelPackage.weightsDataDir). */
  weightsDataDir?: string;
}

/**
 * The session options, set on purpose and measured with `node bench/batching.bench.ts` on 2 cores (docs/decisions.md,
 * "Batching and onnxruntime settings"). The binding runs a session synchronously on the JavaScript thread, so a
 * process has one run at a time however many are started; what matters is making that one run fast:
 * - intra-op threads: onnxruntime's default, one per physical core, the calling thread being one of them. One
 *   thread nearly doubled latency and cut throughput by ~40%; four (oversubscribed) cost 2.5–3x the CPU per sequence;
 * - sequential execution without an inter-op pool: a BERT graph is a chain, and the parallel executor cost 2.5–3x
 *   the CPU per sequence;
 * - all graph optimisations (attention, layer-norm and GELU fusions);
 * - the CPU memory arena on (off: 7–21% more CPU per sequence) and memory patterns on (no measurable difference);
 * - intra-op threads spin between the steps of a run (off: ~20% higher latency for one short request), and by default
 *   for ~25 ms after it (`spinAfterRun`; the solo session of inference-workers.ts stops them at the end of its run).
 */
export function sessionOptionsFor(options: OnnxModelOptions = {}): ort.InferenceSession.SessionOptions {
  const chosen: ort.InferenceSession.SessionOptions = {
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    interOpNumThreads: 1,
    ...(options.threads ? { intraOpNumThreads: options.threads } : {}),
    enableCpuMemArena: true,
    enableMemPattern: true,
    extra: { session: { intra_op: { allow_spinning: '1' }, ...(options.spinAfterRun === false ? { force_spinning_stop: '1' } : {}) } },
    ...options.sessionOptions,
  };
  // An option replaced by undefined goes back to onnxruntime's default.
  return Object.fromEntries(Object.entries(chosen).filter(([, value]) => value !== undefined));
}

/**
 * Session options that find external initializers in `dir`: a session made from bytes has no file beside which to
 * look for them. onnxruntime maps that file into memory instead of copying it.
 */
function withWeightsData(options: ort.InferenceSession.SessionOptions, dir: string | undefined): ort.InferenceSession.SessionOptions {
  if (dir === undefined) return options;
  const extra = (options.extra ?? {}) as { session?: Record<string, unknown> };
  return { ...options, extra: { ...extra, session: { ...extra.session, model_external_initializers_file_folder_path: dir } } };
}

/**
 * The settings a session was created with, as the server's banner shows them: what the user can set (`serve
 * --execution-provider`, `--graph-optimization-level`, `--threads`, `--inter-op-threads`) read back from the options
 * that were passed to onnxruntime, not from the command line.
 */
export interface SessionSettings {
  executionProviders: string[];
  graphOptimizationLevel: string;
  /** null: onnxruntime's default (one per physical core). */
  intraOpThreads: number | null;
  interOpThreads: number | null;
  executionMode: string;
}

export function settingsOf(options: ort.InferenceSession.SessionOptions): SessionSettings {
  const providers = (options.executionProviders ?? ['cpu']).map((provider) => (typeof provider === 'string' ? provider : provider.name));
  return {
    executionProviders: providers,
    graphOptimizationLevel: options.graphOptimizationLevel ?? 'all',
    intraOpThreads: options.intraOpNumThreads ?? null,
    interOpThreads: options.interOpNumThreads ?? null,
    executionMode: options.executionMode ?? 'sequential',
  };
}

/**
 * A session of the weights with the options (sessionOptionsFor), its inputs and outputs held to `validate` (which
 * throws a ConfigError naming what does not fit; the session is then released). Weights onnxruntime cannot load are a
 * ConfigError too.
 */
export async function createSession<S>(
  weights: Uint8Array,
  options: OnnxModelOptions,
  validate: (inputs: ValueInfo[], outputs: ValueInfo[]) => S,
): Promise<{ runtime: Onnxruntime; session: ort.InferenceSession; signature: S; settings: SessionSettings }> {
  const runtime = await loadOnnxruntime();
  const sessionOptions = sessionOptionsFor(options);
  let session: ort.InferenceSession;
  try {
    session = await runtime.InferenceSession.create(weights, withWeightsData(sessionOptions, options.weightsDataDir));
  } catch (error) {
    throw new ConfigError(`model weights are not a loadable ONNX model: ${(error as Error).message}`, { cause: error });
  }
  try {
    return { runtime, session, signature: validate(toValueInfo(session.inputMetadata), toValueInfo(session.outputMetadata)), settings: settingsOf(sessionOptions) };
  } catch (error) {
    await session.release();
    throw error;
  }
}

/** An onnxruntime session and the signature it was validated against (createSession); subclasses feed it. */
export abstract class SessionModel<S extends { output: ValueInfo }> {
  readonly signature: S;
  /** The options the session was created with (SessionSettings). */
  readonly settings: SessionSettings;
  readonly #session: ort.InferenceSession;
  /** The runtime's Tensor class, for the feeds. */
  protected readonly Tensor: Onnxruntime['Tensor'];

  protected constructor(created: { runtime: Onnxruntime; session: ort.InferenceSession; signature: S; settings: SessionSettings }) {
    this.#session = created.session;
    this.Tensor = created.runtime.Tensor;
    this.signature = created.signature;
    this.settings = created.settings;
  }

  /** The signature's output for `feeds`; onnxruntime's failure is an InternalError. */
  protected async runFeeds(feeds: Record<string, ort.Tensor>): Promise<Tensor> {
    const name = this.signature.output.name;
    let result: ort.InferenceSession.OnnxValueMapType;
    try {
      result = await this.#session.run(feeds, [name]);
    } catch (error) {
      throw new InternalError(`onnxruntime failed: ${(error as Error).message}`, { cause: error });
    }
    const output = result[name];
    return new Tensor(output.data as Float32Array, output.dims.map(Number));
  }

  async close(): Promise<void> {
    await this.#session.release();
  }
}

/** A text model's session: token ids, attention mask and (when the graph takes them) token type ids in. */
export class OnnxModel extends SessionModel<ModelSignature> {
  static async load(weights: Uint8Array, modelType: ModelType, options: OnnxModelOptions = {}): Promise<OnnxModel> {
    return new OnnxModel(await createSession(weights, options, (inputs, outputs) => validateSignature(modelType, inputs, outputs)));
  }

  /** Runs one padded batch and returns the signature's output. */
  async run(batch: PaddedBatch): Promise<Tensor> {
    const dims = [batch.batchSize, batch.sequenceLength];
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new this.Tensor('int64', batch.inputIds, dims),
      attention_mask: new this.Tensor('int64', batch.attentionMask, dims),
    };
    if (this.signature.hasTokenTypeIds) feeds.token_type_ids = new this.Tensor('int64', batch.tokenTypeIds, dims);
    return this.runFeeds(feeds);
  }
}

function toValueInfo(metadata: readonly ort.InferenceSession.ValueMetadata[]): ValueInfo[] {
  return metadata.map((value) =>
    value.isTensor ? { name: value.name, type: value.type, shape: value.shape } : { name: value.name, type: 'non-tensor', shape: [] },
  );
}

export function describeShape(shape: readonly (number | string)[]): string {
  return `[${shape.join(', ')}]`;
}

export function describeValues(values: readonly ValueInfo[]): string {
  return values.length === 0 ? '(none)' : values.map((v) => `${v.name} ${v.type} ${describeShape(v.shape)}`).join('; ');
}
