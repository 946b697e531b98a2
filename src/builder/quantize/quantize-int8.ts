/**
 * int8 dynamic quantization of an ONNX graph (issue 13): every MatMul, and every Gemm that is a plain matrix product
 * plus bias, whose weight is a constant float32 matrix becomes com.microsoft DynamicQuantizeMatMul with per-output-
 * column symmetric int8 weights: scale[n] = max_k |W[k, n]| / 127, q = round(W / scale), zero points 0. The
 * activations are quantized by onnxruntime at run time. A bias the product feeds straight into (MatMul → Add of a
 * constant vector) becomes the operator's bias input. Every other node is left as it is; float weights no longer used
 * are dropped, so the file shrinks by ~4x in its matrices.
 */
import { ConfigError } from '../../encoder/errors.ts';
import { DataType, decodeModel, encodeModel, toNumber, type Graph, type Node, type Tensor } from './onnx-format.ts';

export interface QuantizationReport {
  /** Nodes rewritten, by their original operator. */
  rewritten: { MatMul: number; Gemm: number };
  /** Biases folded into the quantized products (the Add nodes removed). */
  foldedBiases: number;
  /** MatMul and Gemm nodes left in float, with why. */
  skipped: { node: string; reason: string }[];
  bytesBefore: number;
  bytesAfter: number;
}

const MS_DOMAIN = 'com.microsoft';

/** The quantized model's bytes and what was done; a graph with nothing to quantize is a ConfigError. */
export function quantizeInt8(modelBytes: Uint8Array): { model: Uint8Array; report: QuantizationReport } {
  const model = decodeModel(modelBytes);
  const graph = model.graph;
  if (!graph) throw new ConfigError('the ONNX model has no graph to quantize');
  const rewriter = new GraphRewriter(graph);
  const report: QuantizationReport = { rewritten: { MatMul: 0, Gemm: 0 }, foldedBiases: 0, skipped: [], bytesBefore: modelBytes.byteLength, bytesAfter: 0 };
  for (const node of [...graph.node]) {
    if (node.domain && node.domain !== 'ai.onnx') continue;
    const op = node.op_type;
    if (op !== 'MatMul' && op !== 'Gemm') continue;
    const outcome = op === 'MatMul' ? rewriter.quantizeMatMul(node) : rewriter.quantizeGemm(node);
    if (typeof outcome === 'string') report.skipped.push({ node: node.name || node.output[0], reason: outcome });
    else {
      report.rewritten[op]++;
      if (outcome.foldedBias) report.foldedBiases++;
    }
  }
  if (report.rewritten.MatMul + report.rewritten.Gemm === 0) {
    const why = report.skipped.length === 0 ? 'it has no MatMul or Gemm node' : `no MatMul or Gemm has a constant float32 weight (${report.skipped[0].node}: ${report.skipped[0].reason})`;
    throw new ConfigError(`quantize: int8 found nothing to quantize: ${why}; build with quantize: none`);
  }
  rewriter.dropUnusedInitializers();
  if (!model.opset_import.some((opset) => opset.domain === MS_DOMAIN)) model.opset_import.push({ domain: MS_DOMAIN, version: 1 });
  const bytes = encodeModel(model);
  report.bytesAfter = bytes.byteLength;
  return { model: bytes, report };
}

class GraphRewriter {
  readonly #graph: Graph;
  readonly #initializers = new Map<string, Tensor>();
  readonly #graphInputs: Set<string>;

  constructor(graph: Graph) {
    this.#graph = graph;
    for (const tensor of graph.initializer) if (tensor.name) this.#initializers.set(tensor.name, tensor);
    this.#graphInputs = new Set(graph.input.map((input) => input.name ?? ''));
  }

  quantizeMatMul(node: Node): { foldedBias: boolean } | string {
    const weight = this.#constantMatrix(node.input[1]);
    if (typeof weight === 'string') return weight;
    const bias = this.#foldableBias(node.output[0], weight.columns);
    return this.#replace(node, weight, bias);
  }

  /** Gemm(A, B, C) = alpha·A·B(ᵀ) + beta·C: only alpha = beta = 1 and A not transposed are a MatMul with a bias. */
  quantizeGemm(node: Node): { foldedBias: boolean } | string {
    const attribute = (name: string, fallback: number) => {
      const found = node.attribute.find((a) => a.name === name);
      return found === undefined ? fallback : found.f !== undefined && found.type === 1 ? found.f : toNumber(found.i);
    };
    if (attribute('alpha', 1) !== 1 || attribute('beta', 1) !== 1 || attribute('transA', 0) !== 0) return 'Gemm with alpha, beta or transA other than 1, 1, 0';
    let weight = this.#constantMatrix(node.input[1]);
    if (typeof weight === 'string') return weight;
    if (attribute('transB', 0) === 1) weight = transposed(weight);
    let bias: { name: string; add: Node | null } | null = null;
    if (node.input[2]) {
      const c = this.#initializers.get(node.input[2]);
      if (!c || c.data_type !== DataType.FLOAT || (c.dims ?? []).length !== 1 || toNumber(c.dims![0]) !== weight.columns) return 'Gemm whose C is not a constant vector of the output width';
      bias = { name: node.input[2], add: null };
    }
    return this.#replace(node, weight, bias);
  }

  dropUnusedInitializers(): void {
    const used = new Set<string>();
    for (const node of this.#graph.node) for (const input of node.input) used.add(input);
    for (const output of this.#graph.output) used.add(output.name ?? '');
    this.#graph.initializer = this.#graph.initializer.filter((tensor) => used.has(tensor.name ?? ''));
  }

  #replace(node: Node, weight: Matrix, bias: { name: string; add: Node | null } | null): { foldedBias: boolean } {
    const base = `${weight.name}_int8`;
    const { quantized, scales } = quantizeColumns(weight);
    this.#addInitializer({ name: `${base}_quantized`, dims: [weight.rows, weight.columns], data_type: DataType.INT8, raw_data: new Uint8Array(quantized.buffer) });
    this.#addInitializer({ name: `${base}_scale`, dims: [weight.columns], data_type: DataType.FLOAT, raw_data: new Uint8Array(scales.buffer) });
    this.#addInitializer({ name: `${base}_zero_point`, dims: [weight.columns], data_type: DataType.INT8, raw_data: new Uint8Array(weight.columns) });
    const inputs = [node.input[0], `${base}_quantized`, `${base}_scale`, `${base}_zero_point`, ...(bias ? [bias.name] : [])];
    // The Add a bias came from is removed: the quantized product writes the Add's output directly.
    const output = bias?.add ? bias.add.output[0] : node.output[0];
    Object.assign(node, { op_type: 'DynamicQuantizeMatMul', domain: MS_DOMAIN, input: inputs, output: [output], attribute: [] });
    if (bias?.add) this.#graph.node.splice(this.#graph.node.indexOf(bias.add), 1);
    return { foldedBias: bias?.add !== undefined && bias.add !== null };
  }

  /** A float32 rank-2 initializer that is not also a graph input (which a caller could replace), as a matrix. */
  #constantMatrix(name: string | undefined): Matrix | string {
    const tensor = name === undefined ? undefined : this.#initializers.get(name);
    if (!tensor || this.#graphInputs.has(name!)) return 'its weight is not a constant';
    if (tensor.data_type !== DataType.FLOAT) return `its weight is not float32 (data type ${tensor.data_type})`;
    const dims = (tensor.dims ?? []).map(toNumber);
    if (dims.length !== 2) return `its weight has rank ${dims.length}, not 2`;
    if ((tensor.external_data ?? []).length > 0 || tensor.data_location === 1) return 'its weight is stored outside the model file';
    const values = floatsOf(tensor);
    if (values.length !== dims[0] * dims[1]) return 'its weight holds fewer values than its dims say';
    return { name: name!, rows: dims[0], columns: dims[1], values };
  }

  /** The bias of `output` when its only consumer is an Add of a constant float vector of `columns` values. */
  #foldableBias(output: string, columns: number): { name: string; add: Node } | null {
    const consumers = this.#graph.node.filter((node) => node.input.includes(output));
    if (consumers.length !== 1 || this.#graph.output.some((o) => o.name === output)) return null;
    const add = consumers[0];
    if (add.op_type !== 'Add' || (add.domain && add.domain !== 'ai.onnx') || add.input.length !== 2) return null;
    const other = add.input[0] === output ? add.input[1] : add.input[0];
    const tensor = this.#initializers.get(other);
    if (!tensor || this.#graphInputs.has(other) || tensor.data_type !== DataType.FLOAT) return null;
    const dims = (tensor.dims ?? []).map(toNumber);
    return dims.length === 1 && dims[0] === columns ? { name: other, add } : null;
  }

  #addInitializer(tensor: Tensor): void {
    this.#graph.initializer.push(tensor);
    this.#initializers.set(tensor.name!, tensor);
  }
}

interface Matrix {
  name: string;
  rows: number;
  columns: number;
  /** Row-major [rows, columns]. */
  values: Float32Array;
}

function floatsOf(tensor: Tensor): Float32Array {
  if (tensor.raw_data && tensor.raw_data.byteLength > 0) {
    // copied: raw_data may sit at an offset that is not a multiple of 4 in the decoded buffer
    return new Float32Array(new Uint8Array(tensor.raw_data).buffer);
  }
  return Float32Array.from(tensor.float_data ?? []);
}

function transposed(matrix: Matrix): Matrix {
  const { rows, columns, values } = matrix;
  const out = new Float32Array(values.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < columns; c++) out[c * rows + r] = values[r * columns + c];
  return { name: matrix.name, rows: columns, columns: rows, values: out };
}

/** Per-output-column symmetric int8: scale = max |column| / 127 (1 for an all-zero column), q = round(w / scale). */
export function quantizeColumns(matrix: Matrix): { quantized: Int8Array; scales: Float32Array } {
  const { rows, columns, values } = matrix;
  const scales = new Float32Array(columns);
  for (let c = 0; c < columns; c++) {
    let largest = 0;
    for (let r = 0; r < rows; r++) largest = Math.max(largest, Math.abs(values[r * columns + c]));
    scales[c] = largest === 0 ? 1 : largest / 127;
  }
  const quantized = new Int8Array(values.length);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < columns; c++) quantized[r * columns + c] = Math.max(-127, Math.min(127, Math.round(values[r * columns + c] / scales[c])));
  }
  return { quantized, scales };
}
