/**
 * The BERT forward pass as an ONNX graph (opset 17, standard operators only), in the form HF
 * exports have: inputs input_ids / attention_mask / token_type_ids [batch_size, sequence_length]
 * int64, output `last_hidden_state` (embedding) or `logits` (classification).
 */
import { normalizeOptions } from './options.ts';
import type { GeneratorOptions } from './options.ts';
import { OnnxGraphBuilder } from './onnx-graph-builder.ts';
import { TensorDataType, encodeOnnxModel } from './onnx-proto.ts';
import { LAYER_NORM_EPS, TYPE_VOCAB_SIZE, requireWeight } from './weights.ts';
import type { BertWeights } from './weights.ts';

export const OPSET_VERSION = 17;
/** IR version 8 is the one that goes with opset 17 (ONNX 1.12). */
export const IR_VERSION = 8;
export const PRODUCER_NAME = 'encoder-model-generator';

const BATCH = 'batch_size';
const SEQUENCE = 'sequence_length';
/** Added to attention scores of padding keys: float32's lowest value, as HF's extended attention mask uses. */
const MASKED_SCORE = -3.4028234663852886e38;

export function buildOnnxModel(options: GeneratorOptions, weights: BertWeights): Uint8Array {
  const opts = normalizeOptions(options);
  const { hidden, heads, intermediate } = opts;
  const headSize = hidden / heads;
  const g = new OnnxGraphBuilder();
  const weight = (name: string, dims: number[]): string =>
    g.floatTensor(name, dims, requireWeight(weights, name, dims).data);
  /** ONNX MatMul wants [in, out]; HF Linear weights are [out, in], so the initializer holds the transpose. */
  const linear = (x: string, prefix: string, inFeatures: number, outFeatures: number): string => {
    const w = requireWeight(weights, `${prefix}.weight`, [outFeatures, inFeatures]);
    const transposed = transpose(w.data, outFeatures, inFeatures);
    const wT = g.floatTensor(`${prefix}.weight.T`, [inFeatures, outFeatures], transposed);
    const b = weight(`${prefix}.bias`, [outFeatures]);
    return g.node('Add', [g.node('MatMul', [x, wT], prefix), b], prefix);
  };
  const layerNorm = (x: string, prefix: string): string =>
    g.node(
      'LayerNormalization',
      [x, weight(`${prefix}.weight`, [hidden]), weight(`${prefix}.bias`, [hidden])],
      prefix,
      { axis: -1, epsilon: { float: LAYER_NORM_EPS } },
    );

  const inputIds = g.input('input_ids', TensorDataType.INT64, [BATCH, SEQUENCE]);
  const attentionMask = g.input('attention_mask', TensorDataType.INT64, [BATCH, SEQUENCE]);
  const tokenTypeIds = g.input('token_type_ids', TensorDataType.INT64, [BATCH, SEQUENCE]);

  // Shared constants.
  const one = g.floatScalar('const.one', 1);
  const half = g.floatScalar('const.half', 0.5);
  const sqrt2 = g.floatScalar('const.sqrt2', Math.SQRT2);
  const maskedScore = g.floatScalar('const.masked_score', MASKED_SCORE);
  const attentionScale = g.floatScalar('const.attention_scale', Math.sqrt(headSize));
  const splitHeadsShape = g.int64Tensor('const.split_heads_shape', [4], [0, 0, heads, headSize]);
  const mergeHeadsShape = g.int64Tensor('const.merge_heads_shape', [3], [0, 0, hidden]);

  // Embeddings: word + position + token type, then LayerNorm. Positions are 0..seq-1, taken by
  // slicing the position table to the input's sequence length.
  const wordTable = weight('embeddings.word_embeddings.weight', [opts.vocabSize, hidden]);
  const words = g.node('Gather', [wordTable, inputIds], 'embeddings.word', { axis: 0 });
  const shape = g.node('Shape', [inputIds], 'embeddings.position');
  const seqLength = g.node(
    'Slice',
    [shape, g.int64Tensor('const.seq_dim_start', [1], [1]), g.int64Tensor('const.seq_dim_end', [1], [2])],
    'embeddings.position',
  );
  const positions = g.node(
    'Slice',
    [
      weight('embeddings.position_embeddings.weight', [opts.maxPositions, hidden]),
      g.int64Tensor('const.zero_1d', [1], [0]),
      seqLength,
      g.int64Tensor('const.axis_0', [1], [0]),
    ],
    'embeddings.position',
  );
  const tokenTypeTable = weight('embeddings.token_type_embeddings.weight', [TYPE_VOCAB_SIZE, hidden]);
  const tokenTypes = g.node('Gather', [tokenTypeTable, tokenTypeIds], 'embeddings.token_type', { axis: 0 });
  const embedded = g.node('Add', [g.node('Add', [words, positions], 'embeddings'), tokenTypes], 'embeddings');
  let hiddenStates = layerNorm(embedded, 'embeddings.LayerNorm');

  // Additive attention mask [batch, 1, 1, seq]: 0 for tokens, a large negative for padding.
  const maskPrefix = 'extended_attention_mask';
  const maskFloat = g.node('Cast', [attentionMask], maskPrefix, { to: TensorDataType.FLOAT });
  const maskAxes = g.int64Tensor('const.mask_axes', [2], [1, 2]);
  const maskUnsqueezed = g.node('Unsqueeze', [maskFloat, maskAxes], maskPrefix);
  const padding = g.node('Sub', [one, maskUnsqueezed], maskPrefix);
  const additiveMask = g.node('Mul', [padding, maskedScore], maskPrefix);

  const splitHeads = (x: string, prefix: string, perm: number[]): string =>
    g.node('Transpose', [g.node('Reshape', [x, splitHeadsShape], prefix)], prefix, { perm });

  for (let layer = 0; layer < opts.layers; layer++) {
    const p = `encoder.layer.${layer}`;
    const attention = `${p}.attention.self`;
    // Heads: query and value as [batch, heads, seq, head_size], key as [batch, heads, head_size, seq].
    const projection = (name: string) => linear(hiddenStates, `${attention}.${name}`, hidden, hidden);
    const query = splitHeads(projection('query'), `${attention}.query`, [0, 2, 1, 3]);
    const keyT = splitHeads(projection('key'), `${attention}.key`, [0, 2, 3, 1]);
    const value = splitHeads(projection('value'), `${attention}.value`, [0, 2, 1, 3]);
    const scores = g.node('Div', [g.node('MatMul', [query, keyT], attention), attentionScale], attention);
    const maskedScores = g.node('Add', [scores, additiveMask], attention);
    const probabilities = g.node('Softmax', [maskedScores], attention, { axis: -1 });
    const context = g.node('MatMul', [probabilities, value], attention);
    const contextBySequence = g.node('Transpose', [context], attention, { perm: [0, 2, 1, 3] });
    const merged = g.node('Reshape', [contextBySequence, mergeHeadsShape], attention);
    const attentionOut = linear(merged, `${p}.attention.output.dense`, hidden, hidden);
    const attentionResidual = g.node('Add', [attentionOut, hiddenStates], `${p}.attention.output`);
    hiddenStates = layerNorm(attentionResidual, `${p}.attention.output.LayerNorm`);

    // Feed-forward with exact GELU: x * 0.5 * (1 + erf(x / sqrt(2))).
    const up = linear(hiddenStates, `${p}.intermediate.dense`, hidden, intermediate);
    const geluPrefix = `${p}.intermediate.gelu`;
    const erf = g.node('Erf', [g.node('Div', [up, sqrt2], geluPrefix)], geluPrefix);
    const onePlusErf = g.node('Add', [erf, one], geluPrefix);
    const gelu = g.node('Mul', [g.node('Mul', [up, onePlusErf], geluPrefix), half], geluPrefix);
    const down = linear(gelu, `${p}.output.dense`, intermediate, hidden);
    hiddenStates = layerNorm(g.node('Add', [down, hiddenStates], `${p}.output`), `${p}.output.LayerNorm`);
  }

  const labelCount = opts.labels?.length ?? 0;
  if (opts.modelType === 'embedding' || opts.modelType === 'sentence_embedding') {
    g.node('Identity', [hiddenStates], 'output', {}, 'last_hidden_state');
    g.output('last_hidden_state', TensorDataType.FLOAT, [BATCH, SEQUENCE, hidden]);
  } else if (opts.modelType === 'sequence_classification') {
    // Pooler: dense + tanh on the [CLS] (first) token, then the classifier.
    const cls = g.node('Gather', [hiddenStates, g.int64Tensor('const.cls_index', [], [0])], 'pooler', { axis: 1 });
    const pooled = g.node('Tanh', [linear(cls, 'pooler.dense', hidden, hidden)], 'pooler');
    const logits = linear(pooled, 'classifier', hidden, labelCount);
    g.node('Identity', [logits], 'output', {}, 'logits');
    g.output('logits', TensorDataType.FLOAT, [BATCH, labelCount]);
  } else {
    const logits = linear(hiddenStates, 'classifier', hidden, labelCount);
    g.node('Identity', [logits], 'output', {}, 'logits');
    g.output('logits', TensorDataType.FLOAT, [BATCH, SEQUENCE, labelCount]);
  }

  return encodeOnnxModel({
    ir_version: IR_VERSION,
    opset_import: [{ domain: '', version: OPSET_VERSION }],
    producer_name: PRODUCER_NAME,
    producer_version: '1',
    doc_string: `Random-weight BERT (${opts.modelType}) for tests; seed ${opts.seed}`,
    graph: g.build('bert'),
  });
}

/** A row-major [rows, cols] matrix as [cols, rows]. */
export function transpose(data: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(data.length);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) out[c * rows + r] = data[r * cols + c];
  }
  return out;
}
