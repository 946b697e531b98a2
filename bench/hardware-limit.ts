/**
 * How close to the hardware a model runs: the arithmetic an encoder's forward pass needs, from its shape, against the
 * rate onnxruntime reaches on one large matrix product of the same width on this machine, measured in the same run.
 */
import * as ort from 'onnxruntime-node';
import { OnnxGraphBuilder } from '../scripts/model-generator/onnx-graph-builder.ts';
import { encodeOnnxModel, TensorDataType } from '../scripts/model-generator/onnx-proto.ts';
import { IR_VERSION, OPSET_VERSION } from '../scripts/model-generator/index.ts';

/** The shape of a BERT-style encoder, as config.json gives it. */
export interface EncoderShape {
  layers: number;
  hidden: number;
  intermediate: number;
}

export function encoderShapeOf(config: { num_hidden_layers: number; hidden_size: number; intermediate_size: number }): EncoderShape {
  return { layers: config.num_hidden_layers, hidden: config.hidden_size, intermediate: config.intermediate_size };
}

/**
 * Floating-point operations (a multiply-add is two) of one sequence of `tokens` tokens through the encoder, counting
 * its matrix products, which are all but a few percent of the work: per layer, the query, key, value and output
 * projections (4 · 2·n·h²), the feed-forward up and down (2 · 2·n·h·i), and attention's scores Q·Kᵀ and their
 * weighted sum of V (2 · 2·n²·h over all heads). Embeddings, layer norms, softmax, GELU and pooling (O(n·h) each) are
 * left out, so the rates derived from it are slightly low.
 */
export function encoderFlops(shape: EncoderShape, tokens: number): number {
  const { layers, hidden: h, intermediate: i } = shape;
  const n = tokens;
  return layers * (8 * n * h * h + 4 * n * h * i + 4 * n * n * h);
}

export interface MatMulRate {
  /** [rows, hidden] · [hidden, intermediate] */
  rows: number;
  hidden: number;
  intermediate: number;
  /** GFLOP/s of each timed run. */
  samples: number[];
}

/**
 * GFLOP/s of onnxruntime (default session options: its default threads, one per physical core) on Y = X·W with X
 * [rows, hidden] an input and W [hidden, intermediate] a constant, as a model's feed-forward layer has it: a graph of
 * one MatMul built in memory, run `runs` times after two warm-up runs. On a shared machine the runs spread widely
 * (a run that loses a core to another process is half as fast): the best is what the hardware gives onnxruntime, the
 * median what it gave while this ran.
 */
export async function matMulRate(hidden: number, intermediate: number, options: { rows?: number; runs?: number } = {}): Promise<MatMulRate> {
  const rows = options.rows ?? 2048;
  const runs = options.runs ?? 25;
  const g = new OnnxGraphBuilder();
  const x = g.input('x', TensorDataType.FLOAT, [rows, hidden]);
  const weights = new Float32Array(hidden * intermediate);
  for (let k = 0; k < weights.length; k++) weights[k] = ((k * 2654435761) % 1000) / 1000 - 0.5;
  const w = g.floatTensor('w', [hidden, intermediate], weights);
  g.node('MatMul', [x, w], 'matmul', {}, 'y');
  g.output('y', TensorDataType.FLOAT, [rows, intermediate]);
  const bytes = encodeOnnxModel({
    ir_version: IR_VERSION,
    opset_import: [{ domain: '', version: OPSET_VERSION }],
    producer_name: 'bench',
    producer_version: '1',
    graph: g.build('matmul'),
  });
  const session = await ort.InferenceSession.create(bytes, { graphOptimizationLevel: 'all' });
  try {
    const input = new Float32Array(rows * hidden);
    for (let k = 0; k < input.length; k++) input[k] = ((k * 40503) % 997) / 997 - 0.5;
    const feeds = { x: new ort.Tensor('float32', input, [rows, hidden]) };
    for (let k = 0; k < 2; k++) await session.run(feeds);
    const flops = 2 * rows * hidden * intermediate;
    const rates: number[] = [];
    for (let k = 0; k < runs; k++) {
      const started = performance.now();
      await session.run(feeds);
      rates.push(flops / ((performance.now() - started) / 1000) / 1e9);
    }
    return { rows, hidden, intermediate, samples: rates };
  } finally {
    await session.release();
  }
}
