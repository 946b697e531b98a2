/**
 * The longest input a model is served with (issue 30): the smallest of what its graph shows and what its files claim.
 * A position-embedding table shorter than config.json or tokenizer_config.json say made every longer input fail inside
 * onnxruntime (`broadcast … 100 by 152`, a 500); truncating to the real length makes every input length answerable.
 *
 * Pure: the graph's facts are read by src/builder/graph-limits.ts (ONNX protobuf parsing, loaded only where a model
 * folder is read); a built executable carries the result in its manifest (`model.max_length`).
 */
import type { ModelConfigJson } from './model-package.ts';

/** What the ONNX graph shows about the longest input it can run. */
export interface GraphLimits {
  /** The absolute position-embedding table (its initializer's name and row count), or null when none was found. */
  positionTable: { name: string; rows: number } | null;
  /** The smallest fixed (non-symbolic) sequence dimension among the model's inputs, or null when all are symbolic. */
  fixedSequence: { input: string; length: number } | null;
}

/** The length the tokenizer truncates to and token-id inputs are checked against, and why. */
export interface ModelMaxLength {
  /** Most tokens of one input, special tokens included. */
  tokens: number;
  /** The deciding source first, then what the others said (the build prints it). */
  reason: string;
}

/** What the length is reconciled from; the file names are for the messages. */
export interface MaxLengthSources {
  /** Null: the graph was not read (readModelPackage) or could not be. */
  graph: GraphLimits | null;
  weightsFile: string;
  modelConfig: ModelConfigJson;
  modelConfigFile: string;
  tokenizerConfig: unknown;
}

/** With no source at all: what the tokenizer has always used (HF's BERT default). */
export const DEFAULT_MAX_LENGTH = 512;
/** A length above this is HF's "no limit" sentinel (1e30) or nonsense, and says nothing. */
const MAX_SANE_LENGTH = 1_000_000;

/**
 * Model types whose position ids start after the padding id (HF's `create_position_ids_from_input_ids`): with
 * pad_token_id 1, a 514-row table holds 512 usable positions. TEI applies the same offset to roberta, xlm-roberta and
 * camembert; the others here copy RobertaEmbeddings. Two positions too few for a model not listed costs two tokens;
 * two too many would be a 500 at the full length, which the build's check at that length catches.
 */
export const POSITION_OFFSET_MODEL_TYPES: readonly string[] = [
  'roberta',
  'xlm-roberta',
  'xlm-roberta-xl',
  'camembert',
  'roberta-prelayernorm',
  'data2vec-text',
  'mpnet',
  'longformer',
  'ibert',
];

interface Source {
  tokens: number;
  /** How the source is named when it decides ("position table of model.onnx (…): 100 rows"). */
  fact: string;
  /** How it is named when another one decided ("config.json max_position_embeddings says 512"). */
  claim: string;
}

/** Positions before the first usable one: pad_token_id + 1 for the RoBERTa family (default pad id 1), else 0. */
export function positionOffset(modelConfig: ModelConfigJson): number {
  if (typeof modelConfig.model_type !== 'string' || !POSITION_OFFSET_MODEL_TYPES.includes(modelConfig.model_type)) return 0;
  const pad = modelConfig.pad_token_id;
  return (typeof pad === 'number' && Number.isInteger(pad) && pad >= 0 ? pad : 1) + 1;
}

/**
 * The smallest of: the position table's rows (less the RoBERTa offset), a fixed sequence dimension of the inputs,
 * config.json `max_position_embeddings` (less the offset) and tokenizer_config.json `model_max_length`. The graph's
 * facts come first among equals. Nothing stated: DEFAULT_MAX_LENGTH.
 */
export function resolveMaxLength(sources: MaxLengthSources): ModelMaxLength {
  const { graph, weightsFile, modelConfig, modelConfigFile } = sources;
  const offset = positionOffset(modelConfig);
  const afterOffset = offset === 0 ? '' : `, ${offset} fewer positions: ${String(modelConfig.model_type)} numbers them from pad_token_id + 1`;
  const found: Source[] = [];
  if (graph?.positionTable) {
    const { name, rows } = graph.positionTable;
    const fact = `position table of ${weightsFile} (${name}): ${rows} rows${afterOffset}`;
    found.push({ tokens: rows - offset, fact, claim: fact });
  }
  if (graph?.fixedSequence) {
    const { input, length } = graph.fixedSequence;
    const fact = `input "${input}" of ${weightsFile}: fixed sequence length ${length}`;
    found.push({ tokens: length, fact, claim: fact });
  }
  const positions = saneLength(modelConfig.max_position_embeddings);
  if (positions !== null) {
    const what = `${modelConfigFile} max_position_embeddings`;
    found.push({ tokens: positions - offset, fact: `${what}: ${positions}${afterOffset}`, claim: `${what} says ${positions}` });
  }
  const tokenizerConfig = sources.tokenizerConfig;
  const claimed = isObject(tokenizerConfig) ? saneLength(tokenizerConfig.model_max_length) : null;
  if (claimed !== null) {
    const what = 'tokenizer_config.json model_max_length';
    found.push({ tokens: claimed, fact: `${what}: ${claimed}`, claim: `${what} says ${claimed}` });
  }
  if (found.length === 0) {
    return { tokens: DEFAULT_MAX_LENGTH, reason: `the default: no position table found in ${weightsFile}, and neither ${modelConfigFile} nor tokenizer_config.json states a length` };
  }
  // the first smallest decides: graph facts are listed before the files' claims
  const decided = found.reduce((best, source) => (source.tokens < best.tokens ? source : best));
  const others = found.filter((source) => source !== decided).map((source) => source.claim);
  return { tokens: decided.tokens, reason: [decided.fact, ...others].join('; ') };
}

/** The build's line: `max length: 100 tokens (position table of model.onnx (…): 100 rows; …)`. */
export function describeMaxLength(maxLength: ModelMaxLength): string {
  return `max length: ${maxLength.tokens} tokens (${maxLength.reason})`;
}

function saneLength(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 && value <= MAX_SANE_LENGTH ? value : null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
