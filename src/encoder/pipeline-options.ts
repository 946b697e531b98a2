import type * as ort from 'onnxruntime-node';
import type { BatchSchedulerOptions } from './batch-scheduler.ts';
import { ConfigError } from './errors.ts';
import type { InferenceWorkerScript } from './inference-workers.ts';

// How a PredictPipeline is loaded: its options, their defaults, and the limits each request is held to.

/**
 * Requests whose texts are longer than this, in UTF-16 units in all, are tokenized on a tokenizer thread when the
 * pipeline has one (workers > 0). Below it, the worst text measured (CJK through a byte-level BPE) tokenizes in a few
 * milliseconds, less than the round trip to a thread costs a short query (docs/decisions.md).
 */
export const DEFAULT_INLINE_TOKENIZE_UNITS = 1024;

/** OpenAI's limits per embeddings request, the defaults here: 2,048 inputs and 300,000 tokens. */
export const DEFAULT_MAX_REQUEST_INPUTS = 2048;
export const DEFAULT_MAX_REQUEST_TOKENS = 300_000;

export interface PipelineOptions {
  /**
   * onnxruntime intra-op threads (per worker); default: onnxruntime's choice (one per physical core), or with several
   * workers the cores divided between them.
   */
  threads?: number;
  /**
   * Worker threads that run onnxruntime, each with its own session, so that a batch never holds the event loop
   * (`serve` uses 1 by default). 0, the default here: the session runs on the calling thread (`infer`, build checks).
   */
  workers?: number;
  /**
   * Intra-op threads of the solo session, a second session in the first worker that runs a batch when no other batch
   * is running (inference-workers.ts, soloSessionThreads); 0: none. Default: onnxruntime's own threads with several
   * workers and `threads` not given, else none. Workers only.
   */
  soloThreads?: number;
  /** How to start an inference worker (required with workers > 0): its file from source, its bundled text in the executable. */
  inferenceWorker?: InferenceWorkerScript;
  /**
   * Largest padded size of one onnxruntime run (rows × longest row, in tokens), over the sequences of all waiting
   * requests; a single longer sequence runs alone. Default: DEFAULT_BATCH_SETTINGS (measured, docs/decisions.md).
   */
  maxBatchTokens?: number;
  /** Longest the oldest waiting sequence waits for others to join its run while onnxruntime is idle (0: none). */
  maxWaitMs?: number;
  /** Largest number of sequences in one run; default: only maxBatchTokens bounds a run. */
  maxBatchSequences?: number;
  /**
   * Most tokens one request may hold (its inputs after tokenization, special tokens included); more is an
   * InputError. Bounds what a single request can make the process hold: its outputs, and for embeddings a response
   * of one vector per token. Default: no limit (the command line's `serve` sets one, docs/http-api.md).
   */
  maxRequestTokens?: number;
  /**
   * Longest the Lua transform may run on one batch before that batch fails with an InternalError; default
   * DEFAULT_TRANSFORM_TIMEOUT_MS. Lua runs in each inference worker after its session (on the calling thread without
   * workers), so without a limit a script that never returns (e.g. a loop that depends on the input) would hold that
   * thread, and every batch sent to it, for good.
   */
  transformTimeoutMs?: number;
  /**
   * Most bytes the Lua transform's state may hold (its tables and strings; tensors are not counted); default
   * DEFAULT_MEMORY_LIMIT_BYTES (256 MiB). A batch that needs more fails with an InternalError (docs/transforms.md).
   */
  transformMemoryLimitBytes?: number;
  /** wasmoon's glue.wasm, when it is not beside the wasmoon package (single executable). */
  luaWasmPath?: string;
  /** The scheduler's other settings and clock; for benchmarks and tests (the defaults are the measured ones). */
  schedulerTuning?: Omit<BatchSchedulerOptions, 'maxBatchTokens' | 'maxWaitMs' | 'maxBatchSequences'>;
  /** Replaces onnxruntime session options; for benchmarks that compare them. */
  sessionOptions?: ort.InferenceSession.SessionOptions;
  /** Most inputs one request may hold; more is an InputError. Default: no limit (`serve` sets OpenAI's 2,048). */
  maxRequestInputs?: number;
  /**
   * Most tokens a request may hold when its response carries one result per token (`predict` of embedding and
   * token_classification models): what bounds the size of such a response. Default: maxRequestTokens.
   */
  maxTokenResults?: number;
  /**
   * Threads that tokenize large requests (workers > 0 only; they run the inference worker's script). Default 1;
   * 0: every request is tokenized on the calling thread, in slices.
   */
  tokenizerThreads?: number;
  /** Requests longer than this (UTF-16 units of all their texts) go to a tokenizer thread; default DEFAULT_INLINE_TOKENIZE_UNITS. */
  inlineTokenizeUnits?: number;
}

/** The limits one request is held to (Infinity: none). */
export interface RequestLimits {
  inputs: number;
  tokens: number;
  tokenResults: number;
}

/** The request limits the options set; a limit below 1 is a ConfigError. */
export function requestLimitsOf(options: Pick<PipelineOptions, 'maxRequestInputs' | 'maxRequestTokens' | 'maxTokenResults'>): RequestLimits {
  const tokens = atLeastOne('maxRequestTokens', options.maxRequestTokens);
  return {
    inputs: atLeastOne('maxRequestInputs', options.maxRequestInputs),
    tokens,
    tokenResults: Math.min(atLeastOne('maxTokenResults', options.maxTokenResults), tokens),
  };
}

function atLeastOne(name: string, value: number | undefined): number {
  if (value === undefined) return Infinity;
  if (!(value >= 1)) throw new ConfigError(`${name} must be at least 1, got ${value}`);
  return value;
}
