import { readFileSync } from 'node:fs';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { compareEmbeddings, compareLogits } from '../../src/builder/quantize/accuracy.ts';
import { compareModels, enforceGate, type GateResult } from '../../src/builder/quantize/accuracy-gate.ts';
import { quantizeColumns, quantizeRows, WEIGHT_LEVELS } from '../../src/builder/quantize/int8-values.ts';
import { DataType, decodeModel, encodeModel, toNumber, type Model, type Node, type Tensor } from '../../src/builder/quantize/onnx-format.ts';
import { quantizeInt8, type QuantizationReport } from '../../src/builder/quantize/quantize-int8.ts';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { ConfigError } from '../../src/encoder/errors.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { sessionOptionsFor } from '../../src/encoder/onnx-model.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import { EncoderTokenizer } from '../../src/encoder/tokenizer/index.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { hasShared, sharedModel, warnIfSharedMissing } from '../helpers/shared-fixtures.ts';

warnIfSharedMissing('int8 quantization on the shared models');

const TEXTS = [
  'The quick brown fox jumps over the lazy dog.',
  'What is the capital of France?',
  'hello',
  'Stock markets fell sharply on Tuesday after the central bank raised interest rates by half a percentage point.',
];

interface Outputs {
  outputs: Record<string, { data: Float32Array; dims: number[] }>;
  mask: BigInt64Array;
}

/** Runs a text model on a padded batch of `texts`. */
async function runOnTexts(model: Uint8Array, tokenizerDir: string, texts: string[]): Promise<Outputs> {
  const tokenizer = EncoderTokenizer.fromJson(readFileSync(path.join(tokenizerDir, 'tokenizer.json'), 'utf8'));
  const batch = tokenizer.pad(texts.map((text) => tokenizer.encode(text)));
  const dims = [batch.batchSize, batch.sequenceLength];
  const feeds: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor('int64', batch.inputIds, dims),
    attention_mask: new ort.Tensor('int64', batch.attentionMask, dims),
    token_type_ids: new ort.Tensor('int64', batch.tokenTypeIds, dims),
  };
  return { outputs: await run(model, feeds), mask: batch.attentionMask };
}

async function run(model: Uint8Array, feeds: Record<string, ort.Tensor>): Promise<Record<string, { data: Float32Array; dims: number[] }>> {
  const session = await ort.InferenceSession.create(model, sessionOptionsFor());
  try {
    const used = Object.fromEntries(Object.entries(feeds).filter(([name]) => session.inputNames.includes(name)));
    const outputs = await session.run(used);
    return Object.fromEntries(session.outputNames.map((name) => [name, { data: outputs[name].data as Float32Array, dims: outputs[name].dims.map(Number) }]));
  } finally {
    await session.release();
  }
}

/** How an fp32 model and its int8 rewrite agree on TEXTS, per output (padding left out). */
async function agreement(fp32: Uint8Array, int8: Uint8Array, dir: string) {
  const [a, b] = [await runOnTexts(fp32, dir, TEXTS), await runOnTexts(int8, dir, TEXTS)];
  return Object.fromEntries(
    Object.entries(a.outputs).map(([name, output]) => {
      const mask = output.dims.length === 3 ? a.mask : undefined;
      return [name, name === 'logits' ? compareLogits(output, b.outputs[name], mask) : compareEmbeddings(output, b.outputs[name], mask)];
    }),
  );
}

const opTypes = (model: Uint8Array) => decodeModel(model).graph!.node.map((node) => node.op_type);

describe('quantizeInt8 on real and generated BERTs', () => {
  it.skipIf(!hasShared)('tinybert-golden (pretrained-shape weights): every token within cosine 0.99 of the published fp32 rows', async () => {
    const dir = sharedModel('tinybert-golden');
    const golden = JSON.parse(readFileSync(path.join(dir, 'golden.json'), 'utf8')) as { text: string; outputs: Record<string, number[][] | number[]> };
    const rows = golden.outputs['output_0_per_token_including_CLS_and_SEP'] as number[][];
    const pooled = golden.outputs['output_1_first_row(pooled/CLS)'] as number[];
    const { model, report } = quantizeInt8(readFileSync(path.join(dir, 'model.onnx')));
    // 6 encoder matrices and the pooler's Gemm; attention's two activation products stay float
    expect(report.rewritten).toEqual({ MatMul: 6, Gemm: 1, Gather: 0 });
    expect(report.skipped.filter((skip) => skip.op === 'MatMul').map((skip) => skip.reason)).toEqual(['its weight is not a constant', 'its weight is not a constant']);
    // its word table (1656 x 50) is below the size worth storing as int8
    expect(report.skipped.filter((skip) => skip.op === 'Gather').map((skip) => skip.reason)).toContain('its table holds 331200 bytes, below the 1048576 worth storing as int8');
    expect(opTypes(model).filter((op) => op === 'DynamicQuantizeMatMul')).toHaveLength(7);
    const { outputs } = await runOnTexts(model, dir, [golden.text]);
    const perToken = { data: Float32Array.from(rows.flat()), dims: [1, rows.length, rows[0].length] };
    expect(outputs.output_0.dims).toEqual(perToken.dims);
    expect(compareEmbeddings(perToken, outputs.output_0).minCosine).toBeGreaterThanOrEqual(0.99);
    expect(compareEmbeddings({ data: Float32Array.from(pooled), dims: [1, pooled.length] }, outputs.output_1).minCosine).toBeGreaterThanOrEqual(0.99);
  });

  it.skipIf(!hasShared)('the shared tiny exports of each model type: cosine ≥ 0.99, the same labels, Identity-held biases folded', async () => {
    for (const name of ['tiny-bert-embedding', 'tiny-bert-sentence-embedding', 'tiny-bert-sequence-classification', 'tiny-bert-token-classification']) {
      const dir = sharedModel(name);
      const fp32 = readFileSync(path.join(dir, 'model.onnx'));
      const { model, report } = quantizeInt8(fp32);
      const classifier = name.includes('classification');
      expect(report.rewritten.MatMul + report.rewritten.Gemm, name).toBe(name.includes('sequence') ? 8 : name.includes('token') ? 7 : 6);
      // these exports hold every bias as Identity(initializer): each is still folded into its product
      expect(report.foldedBiases, name).toBe(report.rewritten.MatMul);
      expect(opTypes(model).filter((op) => op === 'Identity').length, name).toBeLessThan(opTypes(fp32).filter((op) => op === 'Identity').length);
      for (const [output, result] of Object.entries(await agreement(fp32, model, dir))) {
        if (result.kind === 'embedding') expect(result.minCosine, `${name} ${output}`).toBeGreaterThanOrEqual(0.99);
        else expect(result.labelAgreement, `${name} ${output}`).toBe(1);
        expect(classifier, name).toBe(result.kind === 'classification');
      }
    }
  });

  it('a generated MiniLM-width model: six matrices a layer and the word table int8, biases folded, ~4x smaller, cosine ≥ 0.99', async () => {
    const hidden = 384;
    const intermediate = 1536;
    const dir = await generateTinyModel({ modelType: 'embedding', layers: 2, hidden, heads: 12, intermediate });
    const vocab = (JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')) as { vocab_size: number }).vocab_size;
    const fp32 = readFileSync(path.join(dir, 'model.onnx'));
    const { model, report } = quantizeInt8(fp32);
    expect(report.rewritten).toEqual({ MatMul: 12, Gemm: 0, Gather: 1 });
    expect(report.foldedBiases).toBe(12);
    expect(opTypes(model).filter((op) => op === 'MatMul')).toHaveLength(4); // attention's own products stay float
    const adds = (bytes: Uint8Array) => opTypes(bytes).filter((op) => op === 'Add').length;
    expect(adds(fp32) - adds(model)).toBe(12);
    const matrixValues = 2 * (4 * hidden * hidden + 2 * hidden * intermediate);
    const scaleValues = 2 * (4 * hidden + hidden + intermediate);
    // the matrices with a scale per column, the word table with a scale per row
    expect(report.weightBytesBefore).toBe(4 * (matrixValues + vocab * hidden));
    expect(report.weightBytesAfter).toBe(matrixValues + 4 * scaleValues + vocab * hidden + 4 * vocab);
    // the file loses what the matrices lose, give or take the protobuf framing
    expect(report.bytesBefore - report.bytesAfter).toBeGreaterThan(0.99 * (report.weightBytesBefore - report.weightBytesAfter));
    expect(model.byteLength).toBe(report.bytesAfter);
    const { last_hidden_state: result } = await agreement(fp32, model, dir);
    expect(result.kind === 'embedding' && result.minCosine).toBeGreaterThanOrEqual(0.99);
  });

  it('generated classifiers: the same labels after quantization', async () => {
    for (const modelType of ['sequence_classification', 'token_classification'] as const) {
      const dir = await generateTinyModel({ modelType, hidden: 64, intermediate: 256, heads: 4, labels: ['a', 'b', 'c'] });
      const fp32 = readFileSync(path.join(dir, 'model.onnx'));
      const { model } = quantizeInt8(fp32);
      const { logits } = await agreement(fp32, model, dir);
      expect(logits.kind === 'classification' && logits.labelAgreement, modelType).toBe(1);
    }
  });

  it.skipIf(!hasShared)('the word table stored int8 too, looked up row by row: the file a third of its size (embeddingTables: false keeps it)', async () => {
    const dir = sharedModel('tiny-bert-embedding');
    const fp32 = readFileSync(path.join(dir, 'model.onnx'));
    const plain = quantizeInt8(fp32, { embeddingTables: false }).report;
    expect(plain.rewritten.Gather).toBe(0);
    expect(plain.skipped.filter((skip) => skip.op === 'Gather')).toEqual([]);
    const { model, report } = quantizeInt8(fp32);
    expect(report.rewritten).toEqual({ ...plain.rewritten, Gather: 1 });
    // the 30522 x 16 word table; position and token-type tables are too small to be worth it
    expect(report.skipped.filter((skip) => skip.op === 'Gather').map((skip) => skip.reason)).toEqual([
      'its table holds 128 bytes, below the 1048576 worth storing as int8',
      'its table holds 32768 bytes, below the 1048576 worth storing as int8',
    ]);
    expect(report.weightBytesBefore - plain.weightBytesBefore).toBe(30522 * 16 * 4);
    expect(report.weightBytesAfter - plain.weightBytesAfter).toBe(30522 * 16 + 30522 * 4);
    expect(report.bytesAfter).toBeLessThan(report.bytesBefore / 2.9);
    const graph = decodeModel(model).graph!;
    expect(graph.initializer.map((tensor) => tensor.name)).not.toContain('embeddings.word_embeddings.weight');
    expect(graph.initializer.find((tensor) => tensor.name === 'embeddings.word_embeddings.weight_int8')).toMatchObject({ data_type: DataType.INT8 });
    const { last_hidden_state: result } = await agreement(fp32, model, dir);
    expect(result.kind === 'embedding' && result.minCosine).toBeGreaterThanOrEqual(0.99);
  });
});

// ---- small graphs built here, to pin down each rule ----

/** Deterministic values in [-1, 1). */
function values(count: number, seed: number): Float32Array {
  let state = seed;
  return Float32Array.from({ length: count }, () => {
    state = (state * 1103515245 + 12345) >>> 0;
    return state / 2 ** 31 - 1;
  });
}

function floatTensor(name: string, dims: number[], data: Float32Array): Tensor {
  return { name, dims, data_type: DataType.FLOAT, raw_data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
}

function valueInfo(name: string, dims: number[], elemType: number = DataType.FLOAT) {
  return { name, type: { tensor_type: { elem_type: elemType, shape: { dim: dims.map((dim) => ({ dim_value: dim })) } } } };
}

function node(op_type: string, input: string[], output: string[], attribute: Node['attribute'] = []): Node {
  return { op_type, input, output, name: `${op_type}_${output[0]}`, attribute };
}

function graphModel(nodes: Node[], initializer: Tensor[], inputs: ReturnType<typeof valueInfo>[], outputs: ReturnType<typeof valueInfo>[]): Model {
  return { ir_version: 8, opset_import: [{ domain: '', version: 17 }], graph: { name: 'g', node: nodes, initializer, input: inputs, output: outputs } };
}

const intAttr = (name: string, i: number) => ({ name, type: 2, i });
const floatAttr = (name: string, f: number) => ({ name, type: 1, f });

/** Runs fp32 and int8 on one input `x` and returns both outputs `y`, with the report. */
async function fp32AndInt8(model: Model, x: Float32Array, xDims: number[]): Promise<{ fp32: Float32Array; int8: Float32Array; report: QuantizationReport; quantized: Model }> {
  const bytes = encodeModel(model);
  const { model: int8, report } = quantizeInt8(bytes);
  const feeds = { x: new ort.Tensor('float32', x, xDims) };
  const [a, b] = [await run(bytes, feeds), await run(int8, feeds)];
  return { fp32: a.y.data, int8: b.y.data, report, quantized: decodeModel(int8) };
}

/** The largest difference relative to the largest fp32 magnitude. */
function relativeError(fp32: Float32Array, int8: Float32Array): number {
  let largest = 0;
  let difference = 0;
  fp32.forEach((value, i) => {
    largest = Math.max(largest, Math.abs(value));
    difference = Math.max(difference, Math.abs(value - int8[i]));
  });
  return difference / largest;
}

describe('quantizeInt8 rules', () => {
  const [M, K, N] = [3, 32, 8];
  const x = values(M * K, 1);

  it('Gemm: transB, alpha and beta folded into weights and bias (C of shape [N], [1, N] or one value)', async () => {
    const w = values(N * K, 2); // stored [N, K], read transposed
    for (const [c, cDims] of [[values(N, 3), [N]], [values(N, 4), [1, N]], [Float32Array.of(0.75), []]] as const) {
      const model = graphModel(
        [node('Gemm', ['x', 'w', 'c'], ['y'], [intAttr('transB', 1), floatAttr('alpha', 0.5), floatAttr('beta', 2)])],
        [floatTensor('w', [N, K], w), floatTensor('c', [...cDims], c)],
        [valueInfo('x', [M, K])],
        [valueInfo('y', [M, N])],
      );
      const { fp32, int8, report, quantized } = await fp32AndInt8(model, x, [M, K]);
      expect(report.rewritten.Gemm, `C ${cDims}`).toBe(1);
      expect(quantized.graph!.node.map((n) => n.op_type)).toEqual(['DynamicQuantizeMatMul']);
      // the int8 weights are [K, N]; the float weight and C are gone
      expect(quantized.graph!.initializer.map((t) => [t.name, t.dims!.map(toNumber)])).toEqual([
        ['w_int8', [K, N]],
        ['w_int8_scale', [N]],
        ['c_bias', [N]],
      ]);
      expect(relativeError(fp32, int8), `C ${cDims}`).toBeLessThan(0.02);
    }
  });

  it('Gemm: leaves transA = 1 and a C of shape [M, N] in float, saying why', async () => {
    const model = graphModel(
      [
        node('MatMul', ['x', 'w'], ['h']),
        node('Gemm', ['h', 'v'], ['g'], [intAttr('transA', 1)]),
        node('Gemm', ['h', 'v2', 'full'], ['y']),
      ],
      [floatTensor('w', [K, N], values(K * N, 5)), floatTensor('v', [M, N], values(M * N, 6)), floatTensor('v2', [N, N], values(N * N, 7)), floatTensor('full', [M, N], values(M * N, 8))],
      [valueInfo('x', [M, K])],
      [valueInfo('y', [M, N]), valueInfo('g', [N, N])],
    );
    const { fp32, int8, report, quantized } = await fp32AndInt8(model, x, [M, K]);
    expect(report.rewritten).toEqual({ MatMul: 1, Gemm: 0, Gather: 0 });
    expect(report.skipped).toEqual([
      { node: 'Gemm_g', op: 'Gemm', reason: 'Gemm with transA = 1 (the input, not the weight, is transposed)' },
      { node: 'Gemm_y', op: 'Gemm', reason: `Gemm whose C is not a constant float32 of shape [${N}], [1, ${N}] or a single value (its shape is [${M}, ${N}])` },
    ]);
    expect(quantized.graph!.node.map((n) => n.op_type)).toEqual(['DynamicQuantizeMatMul', 'Gemm', 'Gemm']);
    expect(quantized.graph!.initializer.map((t) => t.name)).toEqual(['v', 'v2', 'full', 'w_int8', 'w_int8_scale']);
    expect(relativeError(fp32, int8)).toBeLessThan(0.02);
  });

  it('a weight two MatMuls share is quantized once; a bias Add read by two nodes is not folded', async () => {
    const model = graphModel(
      [node('MatMul', ['x', 'w'], ['a']), node('MatMul', ['x', 'w'], ['b']), node('Add', ['a', 'bias'], ['a1']), node('Mul', ['a', 'b'], ['m']), node('Add', ['a1', 'm'], ['y'])],
      [floatTensor('w', [K, N], values(K * N, 9)), floatTensor('bias', [N], values(N, 10))],
      [valueInfo('x', [M, K])],
      [valueInfo('y', [M, N])],
    );
    const { fp32, int8, report, quantized } = await fp32AndInt8(model, x, [M, K]);
    expect(report.rewritten.MatMul).toBe(2);
    expect(report.foldedBiases).toBe(0); // `a` is read by the Add and by the Mul
    expect(report.weightBytesBefore).toBe(K * N * 4);
    expect(quantized.graph!.initializer.map((t) => t.name)).toEqual(['bias', 'w_int8', 'w_int8_scale']);
    expect(relativeError(fp32, int8)).toBeLessThan(0.03);
  });

  it('finds weights and biases behind Identity and in Constant nodes, and removes those nodes once unread', async () => {
    const bias = values(N, 12);
    const model = graphModel(
      [
        node('Identity', ['w_stored'], ['w']),
        node('Constant', [], ['bias'], [{ name: 'value', type: 4, t: floatTensor('', [N], bias) }]),
        node('MatMul', ['x', 'w'], ['h']),
        node('Add', ['bias', 'h'], ['y']),
      ],
      [floatTensor('w_stored', [K, N], values(K * N, 11))],
      [valueInfo('x', [M, K])],
      [valueInfo('y', [M, N])],
    );
    const { fp32, int8, report, quantized } = await fp32AndInt8(model, x, [M, K]);
    expect(report.foldedBiases).toBe(1);
    expect(quantized.graph!.node.map((n) => [n.op_type, n.input])).toEqual([['DynamicQuantizeMatMul', ['x', 'w_int8', 'w_int8_scale', '', 'bias_bias']]]);
    expect(quantized.graph!.initializer.map((t) => t.name)).toEqual(['w_int8', 'w_int8_scale', 'bias_bias']);
    expect(relativeError(fp32, int8)).toBeLessThan(0.02);
  });

  it('keeps a float weight that a subgraph still reads, and the If that reads it still runs', async () => {
    const w = values(K * N, 13);
    const branch = (name: string) => ({ name, node: [node('Identity', ['w'], [`${name}_out`])], initializer: [], input: [], output: [valueInfo(`${name}_out`, [K, N])] });
    const model = graphModel(
      [node('MatMul', ['x', 'w'], ['y']), node('If', ['cond'], ['z'], [{ name: 'then_branch', type: 5, g: branch('then') }, { name: 'else_branch', type: 5, g: branch('else') }])],
      [floatTensor('w', [K, N], w)],
      [valueInfo('x', [M, K]), valueInfo('cond', [], 9)],
      [valueInfo('y', [M, N]), valueInfo('z', [K, N])],
    );
    const { model: int8 } = quantizeInt8(encodeModel(model));
    expect(decodeModel(int8).graph!.initializer.map((t) => t.name)).toEqual(['w', 'w_int8', 'w_int8_scale']);
    const outputs = await run(int8, { x: new ort.Tensor('float32', x, [M, K]), cond: new ort.Tensor('bool', [true], []) });
    expect(outputs.z.data).toEqual(w);
  });

  it('leaves alone weights that are graph inputs, not float32, not rank 2, or not finite, and says why', () => {
    const weights: [string, Tensor, string][] = [
      ['input', floatTensor('input', [K, N], values(K * N, 14)), 'its weight is a graph input, which a caller may set'],
      ['double', { name: 'double', dims: [K, N], data_type: 11, raw_data: new Uint8Array(K * N * 8) }, 'its weight is not float32 (data type 11)'],
      ['rank3', floatTensor('rank3', [1, K, N], values(K * N, 15)), 'its weight has rank 3, not 2'],
      ['nan', floatTensor('nan', [K, N], values(K * N, 16).fill(Number.NaN, 3, 4)), 'its weight holds NaN or infinite values'],
      ['external', { name: 'external', dims: [K, N], data_type: 1, data_location: 1, external_data: [{ key: 'location', value: 'w.bin' }] }, 'its weight is stored outside the model file'],
    ];
    for (const [name, tensor, reason] of weights) {
      const model = graphModel([node('MatMul', ['x', name], ['y'])], [tensor], [valueInfo('x', [M, K]), ...(name === 'input' ? [valueInfo('input', [K, N])] : [])], [valueInfo('y', [M, N])]);
      expect(() => quantizeInt8(encodeModel(model)), name).toThrow(new ConfigError(`quantize: int8 found nothing to quantize: no MatMul or Gemm has a constant float32 weight (MatMul_y: ${reason}); build with quantize: none`));
    }
  });

  it('refuses a graph with nothing to quantize (products of two inputs, no products, no graph) with a ConfigError', () => {
    const model = graphModel([node('MatMul', ['a', 'b'], ['y'])], [], [valueInfo('a', [2, 2]), valueInfo('b', [2, 2])], [valueInfo('y', [2, 2])]);
    expect(() => quantizeInt8(encodeModel(model))).toThrow(ConfigError);
    expect(() => quantizeInt8(encodeModel(model))).toThrow('quantize: int8 found nothing to quantize: no MatMul or Gemm has a constant float32 weight (MatMul_y: its weight is a graph input, which a caller may set)');
    expect(() => quantizeInt8(encodeModel({ ...model, graph: { ...model.graph!, node: [node('Relu', ['a'], ['y'])] } }))).toThrow('it has no MatMul or Gemm node');
    expect(() => quantizeInt8(encodeModel({ ir_version: 8, opset_import: [] }))).toThrow('the ONNX model has no graph');
  });

  it('a table also read by a MatMul stays float (its lookups too); the MatMul is still quantized', async () => {
    const [rows, width] = [1024, 256]; // 1 MiB of float32, the smallest table worth it
    const model = graphModel(
      [node('Gather', ['table', 'ids'], ['emb']), node('MatMul', ['x', 'table'], ['y'])],
      [floatTensor('table', [rows, width], values(rows * width, 17))],
      [valueInfo('ids', [2], DataType.INT64), valueInfo('x', [1, rows])],
      [valueInfo('emb', [2, width]), valueInfo('y', [1, width])],
    );
    const { report } = quantizeInt8(encodeModel(model));
    expect(report.rewritten).toEqual({ MatMul: 1, Gemm: 0, Gather: 0 });
    expect(report.skipped).toEqual([{ node: 'Gather_emb', op: 'Gather', reason: 'its table is also read by a MatMul node, which needs it in float' }]);
    // alone, the same table is looked up from int8, and the rows come back within one quantization step
    const alone = graphModel(
      [node('Gather', ['table', 'ids'], ['emb']), node('MatMul', ['x', 'w'], ['y'])],
      [floatTensor('table', [rows, width], values(rows * width, 17)), floatTensor('w', [4, 4], values(16, 18))],
      [valueInfo('ids', [2], DataType.INT64), valueInfo('x', [1, 4])],
      [valueInfo('emb', [2, width]), valueInfo('y', [1, 4])],
    );
    const quantized = quantizeInt8(encodeModel(alone));
    expect(quantized.report.rewritten.Gather).toBe(1);
    const feeds = { ids: new ort.Tensor('int64', BigInt64Array.from([5n, 1000n]), [2]), x: new ort.Tensor('float32', values(4, 19), [1, 4]) };
    const [a, b] = [await run(encodeModel(alone), feeds), await run(quantized.model, feeds)];
    expect(b.emb.dims).toEqual([2, width]);
    expect(relativeError(a.emb.data, b.emb.data)).toBeLessThan(1 / 127);
  });
});

describe('int8 values', () => {
  it('per column: scale = max |column| / 63 (7-bit weights), each column\'s largest value exact, halves rounded away from zero', () => {
    const matrix = { name: 'w', rows: 3, columns: 2, values: Float32Array.from([0.5, -2, 0, 0.25, 1, 0]) };
    const { quantized, scales } = quantizeColumns(matrix);
    expect(WEIGHT_LEVELS).toBe(63);
    expect(Array.from(scales)).toEqual([Math.fround(1 / 63), Math.fround(2 / 63)]);
    expect(Array.from(quantized)).toEqual([31, -63, 0, 8, 63, 0]);
    // symmetric: -w gives -q
    expect(Array.from(quantizeColumns({ ...matrix, values: matrix.values.map((v) => -v) }).quantized)).toEqual([-31, 63, 0, -8, -63, 0]);
    // an all-zero column gets scale 1, not a division by zero
    expect(Array.from(quantizeColumns({ name: 'z', rows: 2, columns: 1, values: new Float32Array(2) }).scales)).toEqual([1]);
    // with 127 levels (an embedding table's), the full int8 range; 0.5 · 127 = 63.5 rounds away from zero
    expect(Array.from(quantizeColumns(matrix, 127).quantized)).toEqual([64, -127, 0, 16, 127, 0]);
  });

  it("no product of a uint8 activation pair and a weight pair can saturate an int16 (what AVX2's vpmaddubsw adds into)", () => {
    const weights = quantizeColumns({ name: 'w', rows: 64, columns: 8, values: values(512, 21) });
    const largest = Math.max(...Array.from(weights.quantized, Math.abs));
    expect(largest).toBe(WEIGHT_LEVELS);
    expect(2 * 255 * largest).toBeLessThanOrEqual(32767);
  });

  it('per row: one scale per row, every value within half a step of the original', () => {
    const matrix = { name: 't', rows: 4, columns: 64, values: values(256, 20).map((v, i) => v * (i < 64 ? 100 : 0.01)) };
    const { quantized, scales } = quantizeRows(matrix);
    expect(scales).toHaveLength(4);
    expect(scales[0] / scales[1]).toBeGreaterThan(1000); // rows of very different size keep their own precision
    for (let i = 0; i < matrix.values.length; i++) {
      const scale = scales[Math.floor(i / 64)];
      expect(Math.abs(quantized[i] * scale - matrix.values[i])).toBeLessThanOrEqual(scale / 2 + 1e-9);
    }
  });
});

describe('the accuracy gate', () => {
  it('measures cosines for embeddings and label agreement for classification, on real pipelines', async () => {
    const dir = await generateTinyModel({ modelType: 'sequence_classification', labels: ['no', 'yes'] });
    const config = parseBuildConfig(`encoder:\n  name: g\n  path: ${dir}\n  model_type: sequence_classification\n`, { baseDir: dir });
    const pkg = readModelPackage(config);
    const fp32 = await PredictPipeline.load(pkg);
    const int8 = await PredictPipeline.load({ ...pkg, weights: quantizeInt8(pkg.weights).model });
    const same = await compareModels(fp32, fp32, ['one', 'two words', 'three more words']);
    expect(same).toEqual({ kind: 'classification', predictions: 3, labelAgreement: 1, maxScoreDifference: 0 });
    const result = await compareModels(fp32, int8, ['one', 'two words', 'three more words']);
    expect(result.kind).toBe('classification');
    if (result.kind === 'classification') {
      expect(result.maxScoreDifference).toBeGreaterThan(0); // int8 is not fp32
      expect(result.maxScoreDifference).toBeLessThan(0.05);
    }
    await Promise.all([fp32.close(), int8.close()]);
  });

  it('fails below its floors, with a message naming the floor', () => {
    const embedding: GateResult = { kind: 'embedding', vectors: 10, minCosine: 0.9991, meanCosine: 0.9998 };
    expect(() => enforceGate(embedding, { checkTexts: null, minCosine: 0.99, minLabelAgreement: 0.98 })).not.toThrow();
    expect(() => enforceGate(embedding, { checkTexts: null, minCosine: 1, minLabelAgreement: 0.98 })).toThrow(
      'int8 quantization fails the accuracy gate: the smallest cosine to fp32 is 0.99910, below quantize_min_cosine 1; nothing was written',
    );
    const labels: GateResult = { kind: 'classification', predictions: 50, labelAgreement: 0.96, maxScoreDifference: 0.2 };
    expect(() => enforceGate(labels, { checkTexts: null, minCosine: 0.99, minLabelAgreement: 0.98 })).toThrow('96.0% of the predicted labels are unchanged, below quantize_min_label_agreement 0.98');
  });
});
