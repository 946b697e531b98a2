import { readFileSync } from 'node:fs';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { compareModels, enforceGate, type GateResult } from '../../src/builder/quantize/accuracy-gate.ts';
import { DataType, decodeModel, encodeModel, type Model } from '../../src/builder/quantize/onnx-format.ts';
import { quantizeColumns, quantizeInt8 } from '../../src/builder/quantize/quantize-int8.ts';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { ConfigError } from '../../src/encoder/errors.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { sessionOptionsFor } from '../../src/encoder/onnx-model.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import { EncoderTokenizer } from '../../src/encoder/tokenizer/index.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { hasShared, sharedModel, warnIfSharedMissing } from '../helpers/shared-fixtures.ts';

warnIfSharedMissing('int8 quantization on the shared models');

async function outputsOf(model: Uint8Array, tokenizerDir: string, texts: string[]): Promise<{ data: Float32Array; dims: number[] }> {
  const tokenizer = EncoderTokenizer.fromJson(readFileSync(path.join(tokenizerDir, 'tokenizer.json'), 'utf8'));
  const batch = tokenizer.pad(texts.map((text) => tokenizer.encode(text)));
  const session = await ort.InferenceSession.create(model, sessionOptionsFor());
  try {
    const dims = [batch.batchSize, batch.sequenceLength];
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', batch.inputIds, dims),
      attention_mask: new ort.Tensor('int64', batch.attentionMask, dims),
    };
    if (session.inputNames.includes('token_type_ids')) feeds.token_type_ids = new ort.Tensor('int64', batch.tokenTypeIds, dims);
    const output = (await session.run(feeds))[session.outputNames[0]];
    return { data: output.data as Float32Array, dims: output.dims.map(Number) };
  } finally {
    await session.release();
  }
}

function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return dot / Math.sqrt(na * nb);
}

describe('quantizeInt8', () => {
  it.skipIf(!hasShared)('tinybert-golden (real weights): every token vector within cosine 0.99 of the published fp32 rows', async () => {
    const dir = sharedModel('tinybert-golden');
    const golden = JSON.parse(readFileSync(path.join(dir, 'golden.json'), 'utf8')) as { text: string; outputs: Record<string, number[][]> };
    const rows = golden.outputs['output_0_per_token_including_CLS_and_SEP'];
    const { model, report } = quantizeInt8(readFileSync(path.join(dir, 'model.onnx')));
    expect(report.rewritten.MatMul + report.rewritten.Gemm).toBeGreaterThan(0);
    const output = await outputsOf(model, dir, [golden.text]);
    const width = output.dims[2];
    expect(output.dims).toEqual([1, rows.length, rows[0].length]);
    const cosines = rows.map((row, t) => cosine(row, output.data.subarray(t * width, (t + 1) * width)));
    expect(Math.min(...cosines)).toBeGreaterThanOrEqual(0.99);
    // and it is not the fp32 graph by accident
    expect(decodeModel(model).graph!.node.some((node) => node.op_type === 'DynamicQuantizeMatMul')).toBe(true);
  });

  it('a generated model: the MatMuls become DynamicQuantizeMatMul with folded biases, the file shrinks, outputs stay close', async () => {
    const dir = await generateTinyModel({ modelType: 'embedding', hidden: 64, intermediate: 256, layers: 2 });
    const fp32 = readFileSync(path.join(dir, 'model.onnx'));
    const { model, report } = quantizeInt8(fp32);
    // 2 layers × (query, key, value, attention output, intermediate, output)
    expect(report.rewritten).toEqual({ MatMul: 12, Gemm: 0 });
    expect(report.foldedBiases).toBe(12);
    const ops = decodeModel(model).graph!.node.map((node) => node.op_type);
    expect(ops.filter((op) => op === 'MatMul')).toHaveLength(2 * 2); // attention's own products stay float
    const matrixBytes = 2 * (4 * 64 * 64 + 2 * 64 * 256) * 4;
    expect(report.bytesBefore - report.bytesAfter).toBeGreaterThan(0.7 * matrixBytes);
    expect(model.byteLength).toBe(report.bytesAfter);
    const texts = ['the quick brown fox jumps over the lazy dog', 'hello world'];
    const [a, b] = [await outputsOf(fp32, dir, texts), await outputsOf(model, dir, texts)];
    const width = a.dims[2];
    for (let i = 0; i < a.data.length; i += width) expect(cosine(a.data.subarray(i, i + width), b.data.subarray(i, i + width))).toBeGreaterThan(0.99);
  });

  it('decoding and encoding again loses nothing: the same outputs, bit for bit', async () => {
    const dir = await generateTinyModel({ modelType: 'sequence_classification', labels: ['a', 'b', 'c'] });
    const bytes = readFileSync(path.join(dir, 'model.onnx'));
    const again = encodeModel(decodeModel(bytes));
    const [a, b] = [await outputsOf(bytes, dir, ['some text']), await outputsOf(again, dir, ['some text'])];
    expect(b.data).toEqual(a.data);
  });

  it('refuses a graph with no constant MatMul weight, with a ConfigError saying so', () => {
    const input = (name: string) => ({ name, type: { tensor_type: { elem_type: DataType.FLOAT, shape: { dim: [{ dim_value: 2 }, { dim_value: 2 }] } } } });
    const model: Model = {
      ir_version: 8,
      opset_import: [{ domain: '', version: 17 }],
      graph: {
        name: 'g',
        node: [{ input: ['a', 'b'], output: ['y'], op_type: 'MatMul', name: 'product', attribute: [] }],
        initializer: [],
        input: [input('a'), input('b')],
        output: [input('y')],
      },
    };
    expect(() => quantizeInt8(encodeModel(model))).toThrow(ConfigError);
    expect(() => quantizeInt8(encodeModel(model))).toThrow('quantize: int8 found nothing to quantize: no MatMul or Gemm has a constant float32 weight (product: its weight is not a constant)');
    expect(() => quantizeInt8(encodeModel({ ...model, graph: { ...model.graph!, node: [] } }))).toThrow('it has no MatMul or Gemm node');
  });

  it('quantizes per output column, symmetric, exactly representing each column\'s largest value', () => {
    const values = Float32Array.from([0.5, -2, 0, 0.25, 1, 0]); // [3 rows, 2 columns]... read as rows × columns
    const { quantized, scales } = quantizeColumns({ name: 'w', rows: 3, columns: 2, values });
    expect(Array.from(scales)).toEqual([Math.fround(1 / 127), Math.fround(2 / 127)]);
    expect(Array.from(quantized)).toEqual([64, -127, 0, 16, 127, 0]);
    // an all-zero column gets scale 1, not a division by zero
    expect(Array.from(quantizeColumns({ name: 'z', rows: 2, columns: 1, values: new Float32Array(2) }).scales)).toEqual([1]);
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
