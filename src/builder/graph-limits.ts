/**
 * What an ONNX graph shows about the longest input it can run (issue 30): the rows of its absolute position-embedding
 * table, and any fixed sequence dimension of its inputs. Read from the model's protobuf with the builder's ONNX reader
 * (quantize/onnx-format.ts); only dims are read, never the weights' bytes, so a model whose initializers are ONNX
 * external data is read the same way.
 *
 * The position table is the initializer that a Gather (axis 0) looks positions up in, or that a Slice cuts to the
 * sequence length, or the position input of a fused EmbedLayerNormalization. Which of the graph's tables that is, is
 * told by its name (`…position…`, HF exports keep `embeddings.position_embeddings.weight`) and by where the looked-up
 * indices come from: a Range, a CumSum (RoBERTa's ids numbered after the padding id), or a constant 0, 1, 2, … (the
 * `position_ids` buffer of HF's BERT). A table whose name says relative positions or a bias, or whose indices pass
 * through a Log (the relative buckets of T5 and DeBERTa), is not one: relative positions do not bound the length.
 * Two different tables that both look like it: none is taken (the files' lengths decide, and the build's check at that
 * length catches a graph that cannot run it).
 */
import type { GraphLimits } from '../encoder/max-length.ts';
import { DataType, decodeModel, toNumber, type Graph, type Int64, type Node, type Tensor } from './quantize/onnx-format.ts';
import { isStandard } from './quantize/graph-edit.ts';

/** The inputs the server feeds (src/encoder/onnx-model.ts); a fixed sequence dimension on any of them bounds the length. */
const FED_INPUTS = ['input_ids', 'attention_mask', 'token_type_ids'];
const POSITION_NAME = /position|pos_emb/i;
const NOT_ABSOLUTE = /relative|rel_|bias/i;
/** How far back the indices of a lookup are followed (an HF BERT's take ~10 nodes, RoBERTa's ~8). */
const MAX_TRACE_NODES = 64;
/** Constants larger than this are not read as a 0, 1, 2, … buffer (BERT's is the table's length). */
const MAX_ARANGE_VALUES = 1 << 20;
const INT32 = 6;

/** The graph's limits; null when the bytes are not an ONNX model this reader can decode (onnxruntime then says why). */
export function readGraphLimits(weights: Uint8Array): GraphLimits | null {
  let graph: Graph | undefined;
  try {
    graph = decodeModel(weights, { readOnly: true }).graph;
  } catch {
    return null;
  }
  if (!graph) return null;
  return { positionTable: findPositionTable(graph), fixedSequence: findFixedSequence(graph) };
}

interface Table {
  name: string;
  rows: number;
  /** 2: the name says positions; +1: the indices, or the slice, do. */
  score: number;
}

function findPositionTable(graph: Graph): GraphLimits['positionTable'] {
  const values = new GraphValues(graph);
  const tables: Table[] = [];
  for (const node of graph.node) {
    const table = values.table(tableInputOf(node));
    if (table === null || NOT_ABSOLUTE.test(table.name) || (node.op_type === 'Slice' && !values.slicesRows(node))) continue;
    const named = POSITION_NAME.test(table.name) ? 2 : 0;
    const structure = node.op_type === 'EmbedLayerNormalization' ? 1 : node.op_type === 'Gather' ? values.indicesArePositions(node.input[1]) : values.slicesToSequence(node);
    if (named + structure > 0) tables.push({ ...table, score: named + structure });
  }
  const best = Math.max(0, ...tables.map((table) => table.score));
  const chosen = tables.filter((table) => table.score === best);
  if (chosen.length === 0 || chosen.some((table) => table.rows !== chosen[0].rows)) return null;
  return { name: chosen[0].name, rows: chosen[0].rows };
}

/** The value a node reads a table from: a Gather along axis 0, a Slice's data, a fused embedding's position table. */
function tableInputOf(node: Node): string | undefined {
  if (node.op_type === 'EmbedLayerNormalization' && node.domain === 'com.microsoft') return node.input[3];
  if (!isStandard(node)) return undefined;
  if (node.op_type === 'Gather') {
    const axis = node.attribute.find((attribute) => attribute.name === 'axis');
    return axis === undefined || toNumber(axis.i) === 0 ? node.input[0] : undefined;
  }
  return node.op_type === 'Slice' ? node.input[0] : undefined;
}

function findFixedSequence(graph: Graph): GraphLimits['fixedSequence'] {
  let found: GraphLimits['fixedSequence'] = null;
  for (const input of graph.input) {
    if (!FED_INPUTS.includes(input.name ?? '')) continue;
    const dims = (input as { type?: { tensor_type?: { shape?: { dim?: { dim_value?: Int64 }[] } } } }).type?.tensor_type?.shape?.dim;
    const length = dims?.length === 2 && dims[1].dim_value !== undefined ? toNumber(dims[1].dim_value) : 0;
    if (length > 0 && (found === null || length < found.length)) found = { input: input.name!, length };
  }
  return found;
}

/** The graph's constants and producers, for following values back. */
class GraphValues {
  readonly #constants = new Map<string, Tensor>();
  readonly #producers = new Map<string, Node>();

  constructor(graph: Graph) {
    for (const tensor of graph.initializer) if (tensor.name) this.#constants.set(tensor.name, tensor);
    for (const node of graph.node) {
      for (const output of node.output) this.#producers.set(output, node);
      const value = node.op_type === 'Constant' && isStandard(node) ? node.attribute.find((attribute) => attribute.name === 'value')?.t : undefined;
      if (value && node.output[0]) this.#constants.set(node.output[0], value as Tensor);
    }
  }

  /** The rank-2 constant `name` holds (through Identity nodes), as its name and row count; else null. */
  table(name: string | undefined): Omit<Table, 'score'> | null {
    let current = name;
    for (let steps = 0; current && steps < 8; steps++) {
      const tensor = this.#constants.get(current);
      if (tensor) {
        const dims = (tensor.dims ?? []).map(toNumber);
        // a [1, n] constant is a buffer (HF's position_ids), not a table of n rows
        return dims.length === 2 && dims[0] > 1 ? { name: current, rows: dims[0] } : null;
      }
      const producer = this.#producers.get(current);
      current = producer?.op_type === 'Identity' && isStandard(producer) ? producer.input[0] : undefined;
    }
    return null;
  }

  /** 1 when the indices of a lookup come from a Range, a CumSum, a 0, 1, 2, … constant or a `…position…` value, and no Log. */
  indicesArePositions(indices: string | undefined): number {
    let positions = false;
    for (const { name, node } of this.#trace(indices)) {
      if (node?.op_type === 'Log') return 0;
      if (node?.op_type === 'Range' || node?.op_type === 'CumSum' || POSITION_NAME.test(name) || this.#isArange(name)) positions = true;
    }
    return positions ? 1 : 0;
  }

  /** Whether a Slice cuts rows only (axis 0): a table's lookup, not a cut of its columns or of a [1, n] buffer. */
  slicesRows(slice: Node): boolean {
    const axes = slice.input[3] ? this.#ints(slice.input[3]) : [0];
    return axes !== null && axes.length === 1 && axes[0] === 0;
  }

  /** 1 for a Slice (of rows) whose end comes from a Shape: a table cut to the sequence length, row i for position i. */
  slicesToSequence(slice: Node): number {
    return [...this.#trace(slice.input[2])].some(({ node }) => node?.op_type === 'Shape') ? 1 : 0;
  }

  /** The values `start` is computed from, breadth first, each with its producer (none for inputs and constants). */
  *#trace(start: string | undefined): Generator<{ name: string; node: Node | undefined }> {
    const seen = new Set<string>();
    const queue = start ? [start] : [];
    while (queue.length > 0 && seen.size < MAX_TRACE_NODES) {
      const name = queue.shift()!;
      if (seen.has(name)) continue;
      seen.add(name);
      const node = this.#constants.has(name) ? undefined : this.#producers.get(name);
      yield { name, node };
      if (node) queue.push(...node.input.filter((input) => input !== ''));
    }
  }

  /** Whether `name` is an integer constant holding 0, 1, 2, … (at least two values). */
  #isArange(name: string): boolean {
    const values = this.#ints(name);
    return values !== null && values.length >= 2 && values.every((value, index) => value === index);
  }

  /** An int64 or int32 constant's values, or null. */
  #ints(name: string): number[] | null {
    const tensor = this.#constants.get(name);
    if (!tensor || (tensor.data_type !== DataType.INT64 && tensor.data_type !== INT32)) return null;
    const raw = tensor.raw_data;
    if (raw && raw.byteLength > 0) {
      const size = tensor.data_type === DataType.INT64 ? 8 : 4;
      if (raw.byteLength % size !== 0 || raw.byteLength / size > MAX_ARANGE_VALUES) return null;
      const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
      return Array.from({ length: raw.byteLength / size }, (_, i) => (size === 8 ? Number(view.getBigInt64(i * 8, true)) : view.getInt32(i * 4, true)));
    }
    const listed = (tensor.data_type === DataType.INT64 ? tensor.int64_data : tensor.int32_data) as Int64[] | undefined;
    return listed && listed.length <= MAX_ARANGE_VALUES ? listed.map(toNumber) : null;
  }
}
