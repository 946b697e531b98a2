/**
 * int8 dynamic quantization of an ONNX graph (issue 13).
 *
 * Every MatMul, and every Gemm, whose weight is a constant float32 matrix becomes com.microsoft DynamicQuantizeMatMul
 * with per-output-column symmetric int8 weights and zero point 0 (the input left out: the operator's default, and
 * what onnxruntime's Arm KleidiAI path asks for); onnxruntime quantizes the activations at run time. A bias the
 * product feeds straight into (MatMul → Add of a constant vector) becomes the operator's bias input; Gemm's alpha,
 * beta and transB are folded into the weights and the bias.
 *
 * An embedding table (a Gather along axis 0 of a constant float32 matrix of at least 1 MiB, read by nothing else) is
 * stored int8 with one scale per row, and the lookup becomes Gather int8 rows → Cast → Mul by the rows' scales, so
 * only the looked-up rows are widened. On the MiniLM shape this takes the file from 58.5 MB to 23.5 MB at no
 * measurable run-time cost (1x40, 8x40, 32x128 within 1-2%, the noise); DequantizeLinear of the whole table before
 * the Gather is not an option: onnxruntime does not fold it, and it adds ~2 ms to every run.
 *
 * Every other node is left as it is; float weights no longer read are dropped.
 */
import { ConfigError } from '../../encoder/errors.ts';
import { GraphEdit, isStandard, type ConstantValue } from './graph-edit.ts';
import { quantizeColumns, quantizeRows, transposed, type Matrix } from './int8-values.ts';
import { AttributeType, DataType, decodeModel, encodeModel, toNumber, type Node } from './onnx-format.ts';

export interface QuantizeOptions {
  /** Store embedding tables of at least MIN_TABLE_BYTES int8 too (default true). */
  embeddingTables?: boolean;
}

export interface QuantizationReport {
  /** Nodes rewritten, by their original operator (Gather: embedding lookups from an int8 table). */
  rewritten: { MatMul: number; Gemm: number; Gather: number };
  /** Biases folded into the quantized products (the Add nodes removed). */
  foldedBiases: number;
  /** MatMul and Gemm nodes left in float, and Gathers of a constant float32 table left in float, with why. */
  skipped: { node: string; op: 'MatMul' | 'Gemm' | 'Gather'; reason: string }[];
  /** The float32 bytes of the matrices and tables that became int8, and the bytes of what replaced them (int8, scales). */
  weightBytesBefore: number;
  weightBytesAfter: number;
  /** The whole file, before and after. */
  bytesBefore: number;
  bytesAfter: number;
}

const MS_DOMAIN = 'com.microsoft';
/** Smaller tables (position and token-type embeddings) save too little to be worth four nodes instead of one. */
export const MIN_TABLE_BYTES = 1 << 20;

/** The quantized model's bytes and what was done; a graph with no MatMul or Gemm to quantize is a ConfigError. */
export function quantizeInt8(modelBytes: Uint8Array, options: QuantizeOptions = {}): { model: Uint8Array; report: QuantizationReport } {
  const model = decodeModel(modelBytes);
  if (!model.graph) throw new ConfigError('quantize: int8 found nothing to quantize: the ONNX model has no graph; build with quantize: none');
  const rewriter = new Int8Rewriter(new GraphEdit(model.graph));
  const report: QuantizationReport = {
    rewritten: { MatMul: 0, Gemm: 0, Gather: 0 },
    foldedBiases: 0,
    skipped: [],
    weightBytesBefore: 0,
    weightBytesAfter: 0,
    bytesBefore: modelBytes.byteLength,
    bytesAfter: 0,
  };
  for (const node of [...model.graph.node]) {
    const op = node.op_type;
    if (!isStandard(node) || (op !== 'MatMul' && op !== 'Gemm' && op !== 'Gather') || (op === 'Gather' && options.embeddingTables === false)) continue;
    const outcome = op === 'MatMul' ? rewriter.matMul(node) : op === 'Gemm' ? rewriter.gemm(node) : rewriter.gather(node);
    if (outcome === null) continue;
    if (typeof outcome === 'string') {
      report.skipped.push({ node: node.name || node.output[0], op, reason: outcome });
      continue;
    }
    report.rewritten[op]++;
    if (outcome.foldedBias) report.foldedBiases++;
    report.weightBytesBefore += outcome.bytesBefore;
    report.weightBytesAfter += outcome.bytesAfter;
  }
  if (report.rewritten.MatMul + report.rewritten.Gemm === 0) {
    const first = report.skipped.find((skip) => skip.op !== 'Gather');
    const why = first === undefined ? 'it has no MatMul or Gemm node' : `no MatMul or Gemm has a constant float32 weight (${first.node}: ${first.reason})`;
    throw new ConfigError(`quantize: int8 found nothing to quantize: ${why}; build with quantize: none`);
  }
  rewriter.edit.dropReleased();
  if (!model.opset_import.some((opset) => opset.domain === MS_DOMAIN)) model.opset_import.push({ domain: MS_DOMAIN, version: 1 });
  const bytes = encodeModel(model);
  report.bytesAfter = bytes.byteLength;
  return { model: bytes, report };
}

interface Rewritten {
  foldedBias: boolean;
  /** Counted once per source tensor: a weight shared by several nodes is quantized once. */
  bytesBefore: number;
  bytesAfter: number;
}

/** The bias input of the quantized node: an initializer read as it is, or new values (a Constant's, Gemm's beta·C). */
type Bias = { name: string } | { values: Float32Array; base: string };

/** Names of the int8 copies made so far, by source tensor and how it was read. */
type Int8Copies = Map<string, { values: string; scales: string }>;

class Int8Rewriter {
  readonly edit: GraphEdit;
  readonly #copies: Int8Copies = new Map();

  constructor(edit: GraphEdit) {
    this.edit = edit;
  }

  matMul(node: Node): Rewritten | string {
    const weight = this.#constantMatrix(node.input[1]);
    if (typeof weight === 'string') return weight;
    const add = this.#foldableAdd(node.output[0], weight.matrix.columns);
    return this.#toDynamicQuantizeMatMul(node, weight.matrix, weight.source, add?.bias ?? null, add?.node ?? null);
  }

  /** Gemm(A, B, C) = alpha·A·op(B) + beta·C, op(B) = Bᵀ when transB: alpha and transB go into the weights, beta into the bias. */
  gemm(node: Node): Rewritten | string {
    const alpha = floatAttribute(node, 'alpha', 1);
    const beta = floatAttribute(node, 'beta', 1);
    if (intAttribute(node, 'transA', 0) !== 0) return 'Gemm with transA = 1 (the input, not the weight, is transposed)';
    const transB = intAttribute(node, 'transB', 0) !== 0;
    const stored = this.#constantMatrix(node.input[1]);
    if (typeof stored === 'string') return stored;
    let weight = transB ? transposed(stored.matrix) : stored.matrix;
    if (alpha !== 1) weight = { ...weight, values: weight.values.map((value) => value * alpha) };
    const bias = this.#gemmBias(node.input[2], beta, weight.columns);
    if (typeof bias === 'string') return bias;
    // a weight read as it is stored shares its int8 copy with the MatMuls that read it
    const key = transB || alpha !== 1 ? `${stored.source}|transB=${transB}|alpha=${alpha}` : stored.source;
    return this.#toDynamicQuantizeMatMul(node, weight, key, bias, null);
  }

  /** An embedding lookup from an int8 table; null for a Gather that is not a lookup in a constant float32 matrix. */
  gather(node: Node): Rewritten | string | null {
    const value = this.edit.constant(node.input[0], 'table');
    if (typeof value === 'string' || value.dims.length !== 2 || value.tensor.data_type !== DataType.FLOAT) return null;
    const axis = intAttribute(node, 'axis', 0);
    if (axis !== 0 && axis !== -2) return `it gathers along axis ${axis}, not the table's rows`;
    const [rows, columns] = value.dims;
    if (rows * columns * 4 < MIN_TABLE_BYTES) return `its table holds ${rows * columns * 4} bytes, below the ${MIN_TABLE_BYTES} worth storing as int8`;
    const otherReader = this.#otherTableReader(value);
    if (otherReader !== null) return `its table is also read by ${otherReader}, which needs it in float`;
    const values = this.edit.floats(value, 'table');
    if (typeof values === 'string') return values;
    this.edit.release(value);
    const { names, bytesBefore, bytesAfter } = this.#int8Copy(value.source, { name: node.input[0], rows, columns, values }, 'rows');
    const ids = node.input[1];
    const name = node.name || node.output[0];
    const out = (suffix: string) => this.edit.uniqueName(`${node.output[0]}_${suffix}`);
    const [int8Rows, rowScales, floatRows] = [out('int8'), out('scale'), out('float')];
    const axis0 = [{ name: 'axis', type: AttributeType.INT, i: 0 }];
    const lookup: Node[] = [
      { name: `${name}_int8`, op_type: 'Gather', input: [names.values, ids], output: [int8Rows], attribute: axis0 },
      { name: `${name}_scale`, op_type: 'Gather', input: [names.scales, ids], output: [rowScales], attribute: axis0 },
      { name: `${name}_cast`, op_type: 'Cast', input: [int8Rows], output: [floatRows], attribute: [{ name: 'to', type: AttributeType.INT, i: DataType.FLOAT }] },
      // scales are stored [rows, 1], so each looked-up row brings its scale as a broadcastable last axis
      { name: `${name}_scaled`, op_type: 'Mul', input: [floatRows, rowScales], output: [node.output[0]], attribute: [] },
    ];
    this.edit.graph.node.splice(this.edit.graph.node.indexOf(node), 1, ...lookup);
    return { foldedBias: false, bytesBefore, bytesAfter };
  }

  #toDynamicQuantizeMatMul(node: Node, weight: Matrix, key: string, bias: Bias | null, add: Node | null): Rewritten {
    const { names, bytesBefore, bytesAfter } = this.#int8Copy(key, weight, 'columns');
    let biasName = '';
    if (bias !== null && 'values' in bias) {
      biasName = this.edit.uniqueName(`${bias.base}_bias`);
      this.edit.addInitializer({ name: biasName, dims: [bias.values.length], data_type: DataType.FLOAT, raw_data: bytesOf(bias.values) });
    } else if (bias !== null) {
      biasName = bias.name;
    }
    // inputs: A, B, b_scale, b_zero_point (left out: 0), bias
    const inputs = [node.input[0], names.values, names.scales, ...(biasName ? ['', biasName] : [])];
    // A folded Add is removed: the quantized product writes the Add's output directly.
    const output = add ? add.output[0] : node.output[0];
    if (add) this.edit.removeNode(add, [node.output[0]]);
    Object.assign(node, { op_type: 'DynamicQuantizeMatMul', domain: MS_DOMAIN, input: inputs, output: [output], attribute: [] });
    return { foldedBias: add !== null, bytesBefore, bytesAfter };
  }

  /** The int8 copy of a matrix (made once per key), scaled per column (a weight) or per row (a table, scales [rows, 1]). */
  #int8Copy(key: string, matrix: Matrix, per: 'columns' | 'rows'): { names: { values: string; scales: string }; bytesBefore: number; bytesAfter: number } {
    const made = this.#copies.get(key);
    if (made) return { names: made, bytesBefore: 0, bytesAfter: 0 };
    const { quantized, scales } = per === 'columns' ? quantizeColumns(matrix) : quantizeRows(matrix);
    const names = { values: this.edit.uniqueName(`${matrix.name}_int8`), scales: this.edit.uniqueName(`${matrix.name}_int8_scale`) };
    this.edit.addInitializer({ name: names.values, dims: [matrix.rows, matrix.columns], data_type: DataType.INT8, raw_data: bytesOf(quantized) });
    this.edit.addInitializer({ name: names.scales, dims: per === 'columns' ? [matrix.columns] : [matrix.rows, 1], data_type: DataType.FLOAT, raw_data: bytesOf(scales) });
    this.#copies.set(key, names);
    return { names, bytesBefore: matrix.values.byteLength, bytesAfter: quantized.byteLength + scales.byteLength };
  }

  /** A constant float32 matrix, with what identifies it for sharing; or why `name` is not one. */
  #constantMatrix(name: string | undefined): { matrix: Matrix; source: string } | string {
    const value = this.edit.constant(name, 'weight');
    if (typeof value === 'string') return value;
    if (value.dims.length !== 2) return `its weight has rank ${value.dims.length}, not 2`;
    const values = this.edit.floats(value, 'weight');
    if (typeof values === 'string') return values;
    this.edit.release(value);
    return { matrix: { name: name!, rows: value.dims[0], columns: value.dims[1], values }, source: value.source };
  }

  /** Gemm's beta·C as a bias of `columns` values; C may be [columns], [1, columns] or a single value. */
  #gemmBias(name: string | undefined, beta: number, columns: number): Bias | null | string {
    if (!name) return null;
    const refused = `Gemm whose C is not a constant float32 of shape [${columns}], [1, ${columns}] or a single value`;
    const value = this.edit.constant(name, 'C');
    if (typeof value === 'string') return `${refused} (${value})`;
    const { dims } = value;
    const count = dims.reduce((product, dim) => product * dim, 1);
    if (count !== 1 && !(count === columns && dims[dims.length - 1] === columns && dims.length <= 2)) return `${refused} (its shape is [${dims.join(', ')}])`;
    const values = this.edit.floats(value, 'C');
    if (typeof values === 'string') return `${refused} (${values})`;
    this.edit.release(value);
    if (beta === 0) return null; // C is not read
    if (beta === 1 && value.initializer !== null && dims.length === 1 && count === columns) return { name: value.initializer };
    const bias = new Float32Array(columns);
    for (let n = 0; n < columns; n++) bias[n] = beta * values[count === 1 ? 0 : n];
    return { values: bias, base: name };
  }

  /** The Add that `output` feeds when it is its only reader and adds a constant float32 vector of `columns` values. */
  #foldableAdd(output: string, columns: number): { node: Node; bias: Bias } | null {
    const readers = this.edit.readersOf(output);
    if (readers.length !== 1 || this.edit.isReadOutside(output)) return null;
    const add = readers[0];
    if (add.op_type !== 'Add' || !isStandard(add) || add.input.length !== 2) return null;
    const other = add.input[0] === output ? add.input[1] : add.input[0];
    const value = this.edit.constant(other, 'bias');
    if (typeof value === 'string' || value.dims.length !== 1 || value.dims[0] !== columns) return null;
    const values = this.edit.floats(value, 'bias');
    if (typeof values === 'string') return null;
    this.edit.release(value);
    return { node: add, bias: value.initializer !== null ? { name: value.initializer } : { values, base: other } };
  }

  /** What else reads the table than row lookups (and the Identity nodes leading to it), or null. */
  #otherTableReader(value: ConstantValue): string | null {
    for (const name of [value.source, ...value.producers.map((node) => node.output[0])]) {
      if (this.edit.isReadOutside(name)) return 'a graph output or a subgraph';
      for (const reader of this.edit.readersOf(name)) {
        const lookup = reader.op_type === 'Gather' && isStandard(reader) && reader.input[0] === name && [0, -2].includes(intAttribute(reader, 'axis', 0));
        if (!lookup && !value.producers.includes(reader)) return `a ${reader.op_type} node`;
      }
    }
    return null;
  }
}

function floatAttribute(node: Node, name: string, fallback: number): number {
  const attribute = node.attribute.find((a) => a.name === name);
  if (attribute === undefined) return fallback;
  return attribute.type === AttributeType.INT ? toNumber(attribute.i) : (attribute.f ?? 0);
}

function intAttribute(node: Node, name: string, fallback: number): number {
  const attribute = node.attribute.find((a) => a.name === name);
  return attribute === undefined ? fallback : toNumber(attribute.i);
}

function bytesOf(values: Int8Array | Float32Array): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}
