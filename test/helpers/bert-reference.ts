/**
 * An independent BERT forward pass in plain TypeScript (float64), straight from the HF weight
 * names and the BERT paper's formulas, used to check the generated ONNX graphs. It shares no
 * code with the generator: padding is handled by leaving padded keys out of each softmax
 * instead of an additive mask, and GELU uses its own erf.
 */
import type { BertWeights } from '../../scripts/model-generator/index.ts';

export type ReferenceModelType = 'embedding' | 'sequence_classification' | 'token_classification';

export interface ReferenceInputs {
  /** [batch][sequence] token ids; every row has the same length (already padded). */
  inputIds: number[][];
  attentionMask: number[][];
  tokenTypeIds: number[][];
}

export interface ReferenceOutput {
  /** [batch, sequence, hidden] for embedding, [batch, labels] or [batch, sequence, labels] for classification. */
  dims: number[];
  data: Float64Array;
}

const LAYER_NORM_EPS = 1e-12;

export type Matrix = Float64Array[]; // rows

export function bertReferenceForward(
  weights: BertWeights,
  model: { heads: number; modelType: ReferenceModelType },
  inputs: ReferenceInputs,
): ReferenceOutput {
  const tensor = (name: string) => {
    const t = weights.tensors.get(name);
    if (!t) throw new Error(`reference: weight ${name} missing`);
    return t;
  };
  const hidden = tensor('embeddings.word_embeddings.weight').dims[1];
  let layers = 0;
  while (weights.tensors.has(`encoder.layer.${layers}.attention.self.query.weight`)) layers++;

  const results: Float64Array[] = [];
  let outputDims: number[] = [];
  const batch = inputs.inputIds.length;
  const sequence = inputs.inputIds[0].length;
  for (let b = 0; b < batch; b++) {
    const ids = inputs.inputIds[b];
    const mask = inputs.attentionMask[b];
    const types = inputs.tokenTypeIds[b];
    const word = tensor('embeddings.word_embeddings.weight').data;
    const position = tensor('embeddings.position_embeddings.weight').data;
    const tokenType = tensor('embeddings.token_type_embeddings.weight').data;
    let x: Matrix = ids.map((id, s) => {
      const row = new Float64Array(hidden);
      for (let h = 0; h < hidden; h++) {
        row[h] = word[id * hidden + h] + position[s * hidden + h] + tokenType[types[s] * hidden + h];
      }
      return row;
    });
    x = layerNorm(x, tensor('embeddings.LayerNorm.weight').data, tensor('embeddings.LayerNorm.bias').data);

    for (let l = 0; l < layers; l++) {
      const p = `encoder.layer.${l}`;
      const dense = (input: Matrix, name: string) => linear(input, tensor(`${name}.weight`), tensor(`${name}.bias`).data);
      const q = dense(x, `${p}.attention.self.query`);
      const k = dense(x, `${p}.attention.self.key`);
      const v = dense(x, `${p}.attention.self.value`);
      const context = selfAttention(q, k, v, mask, model.heads);
      const attended = dense(context, `${p}.attention.output.dense`);
      const norm = (input: Matrix, name: string) =>
        layerNorm(input, tensor(`${name}.weight`).data, tensor(`${name}.bias`).data);
      x = norm(add(attended, x), `${p}.attention.output.LayerNorm`);
      const up = dense(x, `${p}.intermediate.dense`).map((row) => row.map(gelu));
      const down = dense(up, `${p}.output.dense`);
      x = norm(add(down, x), `${p}.output.LayerNorm`);
    }

    if (model.modelType === 'embedding') {
      results.push(flatten(x));
      outputDims = [batch, sequence, hidden];
    } else if (model.modelType === 'sequence_classification') {
      // Pooler on the first ([CLS]) token.
      const pooled = linear([x[0]], tensor('pooler.dense.weight'), tensor('pooler.dense.bias').data).map((row) =>
        row.map(Math.tanh),
      );
      const logits = linear(pooled, tensor('classifier.weight'), tensor('classifier.bias').data);
      results.push(logits[0]);
      outputDims = [batch, logits[0].length];
    } else {
      const logits = linear(x, tensor('classifier.weight'), tensor('classifier.bias').data);
      results.push(flatten(logits));
      outputDims = [batch, sequence, logits[0].length];
    }
  }
  const data = new Float64Array(results.reduce((n, r) => n + r.length, 0));
  let offset = 0;
  for (const r of results) {
    data.set(r, offset);
    offset += r.length;
  }
  return { dims: outputDims, data };
}

/** y = x W^T + b with W stored [out, in] as in torch.nn.Linear. */
export function linear(x: Matrix, w: { dims: readonly number[]; data: Float32Array }, bias: Float32Array): Matrix {
  const [outFeatures, inFeatures] = w.dims;
  return x.map((row) => {
    const out = new Float64Array(outFeatures);
    for (let o = 0; o < outFeatures; o++) {
      let sum = bias[o];
      for (let i = 0; i < inFeatures; i++) sum += row[i] * w.data[o * inFeatures + i];
      out[o] = sum;
    }
    return out;
  });
}

export function selfAttention(q: Matrix, k: Matrix, v: Matrix, mask: number[], heads: number): Matrix {
  const sequence = q.length;
  const hidden = q[0].length;
  const headSize = hidden / heads;
  const out: Matrix = q.map(() => new Float64Array(hidden));
  const keys = mask.flatMap((m, s) => (m === 1 ? [s] : []));
  for (let h = 0; h < heads; h++) {
    const base = h * headSize;
    for (let i = 0; i < sequence; i++) {
      const scores = keys.map((j) => {
        let dot = 0;
        for (let d = 0; d < headSize; d++) dot += q[i][base + d] * k[j][base + d];
        return dot / Math.sqrt(headSize);
      });
      const max = Math.max(...scores);
      const exps = scores.map((s) => Math.exp(s - max));
      const total = exps.reduce((a, b) => a + b, 0);
      keys.forEach((j, n) => {
        const p = exps[n] / total;
        for (let d = 0; d < headSize; d++) out[i][base + d] += p * v[j][base + d];
      });
    }
  }
  return out;
}

export function layerNorm(x: Matrix, gamma: Float32Array, beta: Float32Array): Matrix {
  return x.map((row) => {
    const mean = row.reduce((a, b) => a + b, 0) / row.length;
    const variance = row.reduce((a, b) => a + (b - mean) ** 2, 0) / row.length;
    const scale = 1 / Math.sqrt(variance + LAYER_NORM_EPS);
    return row.map((value, h) => (value - mean) * scale * gamma[h] + beta[h]);
  });
}

export function add(a: Matrix, b: Matrix): Matrix {
  return a.map((row, s) => row.map((value, h) => value + b[s][h]));
}

function flatten(x: Matrix): Float64Array {
  const out = new Float64Array(x.length * x[0].length);
  x.forEach((row, s) => out.set(row, s * row.length));
  return out;
}

/** Exact GELU: x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)). */
export function gelu(x: number): number {
  return 0.5 * x * (1 + erf(x / Math.SQRT2));
}

/** erf via the Chebyshev fit of erfc from Numerical Recipes (fractional error below 1.2e-7). */
const ERFC_COEFFICIENTS = [
  -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587, -0.82215223,
  0.17087277,
];

function erf(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  let polynomial = 0;
  for (let i = ERFC_COEFFICIENTS.length - 1; i >= 0; i--) polynomial = ERFC_COEFFICIENTS[i] + t * polynomial;
  const erfc = t * Math.exp(-z * z + polynomial);
  return x >= 0 ? 1 - erfc : erfc - 1;
}
