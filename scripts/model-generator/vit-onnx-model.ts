/**
 * A tiny ViT image classifier for tests: the forward pass of HuggingFace's ViTForImageClassification as an ONNX
 * graph (opset 17, standard operators), deterministic random weights named as its state dict, and the config.json
 * and preprocessor_config.json (ViTImageProcessor) that go with it. Input `pixel_values` [batch, 3, size, size]
 * float32; output `logits` [batch, labels]. With `head: 'embedding'` it is a vision tower instead (ViTModel without a
 * pooler): outputs `last_hidden_state` [batch, tokens, hidden] and `image_embeds` [batch, hidden], the [CLS] token's
 * final state, as an image_embedding model reads them.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigError } from '../../src/encoder/errors.ts';
import { IR_VERSION, OPSET_VERSION, PRODUCER_NAME, transpose } from './bert-onnx-model.ts';
import { formatJson, type JsonObject } from './json-format.ts';
import { OnnxGraphBuilder } from './onnx-graph-builder.ts';
import { TensorDataType, encodeOnnxModel } from './onnx-proto.ts';
import { SeededRandom } from './random.ts';
import { INITIALIZER_RANGE, LAYER_NORM_EPS, type WeightTensor } from './weights.ts';

export interface VitOptions {
  seed: number;
  /** Height and width of the (square) input. */
  imageSize: number;
  patchSize: number;
  hidden: number;
  heads: number;
  layers: number;
  intermediate: number;
  /** The classifier's labels (ignored by an embedding model). */
  labels: string[];
  /** `classifier` (default): ViTForImageClassification; `embedding`: the vision tower's states and [CLS] embedding. */
  head?: 'classifier' | 'embedding';
}

export const TINY_VIT: VitOptions = { seed: 36, imageSize: 32, patchSize: 8, hidden: 32, heads: 4, layers: 2, intermediate: 64, labels: ['cat', 'dog', 'bird'] };
/** The same shape as an image embedding model (vectors 32 wide). */
export const TINY_VIT_EMBEDDING: VitOptions = { ...TINY_VIT, seed: 37, head: 'embedding' };

const CHANNELS = 3;
const BATCH = 'batch_size';

function validate(options: VitOptions): void {
  const problems: string[] = [];
  if (options.imageSize % options.patchSize !== 0) problems.push(`imageSize ${options.imageSize} is not a multiple of patchSize ${options.patchSize}`);
  if (options.hidden % options.heads !== 0) problems.push(`hidden ${options.hidden} is not a multiple of heads ${options.heads}`);
  if (options.labels.length < 1 || new Set(options.labels).size !== options.labels.length) problems.push('labels must be one or more distinct names');
  if (problems.length) throw new ConfigError(`ViT generator: ${problems.join('; ')}`);
}

/** Weights named and shaped as ViTForImageClassification's state dict (Linear weights [out, in]). */
export function generateVitWeights(options: VitOptions): Map<string, WeightTensor> {
  validate(options);
  const { hidden, intermediate, patchSize } = options;
  const patches = (options.imageSize / patchSize) ** 2;
  const tensors = new Map<string, WeightTensor>();
  const add = (name: string, dims: number[], std: number, offset = 0): void => {
    const random = new SeededRandom(options.seed, name);
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) data[i] = offset + random.nextNormal() * std;
    tensors.set(name, { dims, data });
  };
  // std 1/sqrt(fan_in) for projections keeps activations at unit scale, so logits depend on the whole image (as the
  // BERT generator does, weights.ts); biases and LayerNorm parameters get a little noise so every one is observable
  const linear = (prefix: string, out: number, inFeatures: number) => {
    add(`${prefix}.weight`, [out, inFeatures], 1 / Math.sqrt(inFeatures));
    add(`${prefix}.bias`, [out], INITIALIZER_RANGE);
  };
  const layerNorm = (prefix: string) => {
    add(`${prefix}.weight`, [hidden], INITIALIZER_RANGE, 1);
    add(`${prefix}.bias`, [hidden], INITIALIZER_RANGE);
  };
  add('vit.embeddings.cls_token', [1, 1, hidden], INITIALIZER_RANGE);
  add('vit.embeddings.position_embeddings', [1, patches + 1, hidden], INITIALIZER_RANGE);
  add('vit.embeddings.patch_embeddings.projection.weight', [hidden, CHANNELS, patchSize, patchSize], 1 / Math.sqrt(CHANNELS * patchSize * patchSize));
  add('vit.embeddings.patch_embeddings.projection.bias', [hidden], INITIALIZER_RANGE);
  for (let layer = 0; layer < options.layers; layer++) {
    const p = `vit.encoder.layer.${layer}`;
    layerNorm(`${p}.layernorm_before`);
    for (const name of ['query', 'key', 'value']) linear(`${p}.attention.attention.${name}`, hidden, hidden);
    linear(`${p}.attention.output.dense`, hidden, hidden);
    layerNorm(`${p}.layernorm_after`);
    linear(`${p}.intermediate.dense`, intermediate, hidden);
    linear(`${p}.output.dense`, hidden, intermediate);
  }
  layerNorm('vit.layernorm');
  linear('classifier', options.labels.length, hidden);
  return tensors;
}

export function buildVitOnnxModel(options: VitOptions, weights: Map<string, WeightTensor>): Uint8Array {
  validate(options);
  const { hidden, heads, patchSize, imageSize } = options;
  const headSize = hidden / heads;
  const g = new OnnxGraphBuilder();
  const tensor = (name: string) => {
    const found = weights.get(name);
    if (!found) throw new ConfigError(`ViT generator: no weight ${name}`);
    return found;
  };
  const weight = (name: string) => g.floatTensor(name, tensor(name).dims, tensor(name).data);
  const linear = (x: string, prefix: string): string => {
    const w = tensor(`${prefix}.weight`);
    const [out, inFeatures] = w.dims;
    const wT = g.floatTensor(`${prefix}.weight.T`, [inFeatures, out], transpose(w.data, out, inFeatures));
    return g.node('Add', [g.node('MatMul', [x, wT], prefix), weight(`${prefix}.bias`)], prefix);
  };
  const layerNorm = (x: string, prefix: string) =>
    g.node('LayerNormalization', [x, weight(`${prefix}.weight`), weight(`${prefix}.bias`)], prefix, { axis: -1, epsilon: { float: LAYER_NORM_EPS } });

  const pixels = g.input('pixel_values', TensorDataType.FLOAT, [BATCH, CHANNELS, imageSize, imageSize]);
  const one = g.floatScalar('const.one', 1);
  const half = g.floatScalar('const.half', 0.5);
  const sqrt2 = g.floatScalar('const.sqrt2', Math.SQRT2);
  const attentionScale = g.floatScalar('const.attention_scale', Math.sqrt(headSize));
  const splitHeadsShape = g.int64Tensor('const.split_heads_shape', [4], [0, 0, heads, headSize]);
  const mergeHeadsShape = g.int64Tensor('const.merge_heads_shape', [3], [0, 0, hidden]);

  // patch embedding: a convolution with stride = kernel = patch, flattened to [batch, patches, hidden]
  const e = 'vit.embeddings';
  const projected = g.node(
    'Conv',
    [pixels, weight(`${e}.patch_embeddings.projection.weight`), weight(`${e}.patch_embeddings.projection.bias`)],
    `${e}.patch_embeddings`,
    { kernel_shape: [patchSize, patchSize], strides: [patchSize, patchSize] },
  );
  const flat = g.node('Reshape', [projected, g.int64Tensor('const.flatten_shape', [3], [0, hidden, -1])], `${e}.patch_embeddings`);
  const patchTokens = g.node('Transpose', [flat], `${e}.patch_embeddings`, { perm: [0, 2, 1] });
  // the [CLS] token, expanded to the batch, in front; then the position embeddings
  const batch = g.node('Slice', [g.node('Shape', [pixels], e), g.int64Tensor('const.zero_1d', [1], [0]), g.int64Tensor('const.one_1d', [1], [1])], e);
  const clsShape = g.node('Concat', [batch, g.int64Tensor('const.cls_tail', [2], [1, hidden])], e, { axis: 0 });
  const cls = g.node('Expand', [weight(`${e}.cls_token`), clsShape], e);
  const tokens = g.node('Concat', [cls, patchTokens], e, { axis: 1 });
  let hiddenStates = g.node('Add', [tokens, weight(`${e}.position_embeddings`)], e);

  const splitHeads = (x: string, prefix: string, perm: number[]) => g.node('Transpose', [g.node('Reshape', [x, splitHeadsShape], prefix)], prefix, { perm });
  for (let layer = 0; layer < options.layers; layer++) {
    const p = `vit.encoder.layer.${layer}`;
    const a = `${p}.attention.attention`;
    // pre-norm blocks: x + attention(LN(x)), then x + MLP(LN(x))
    const normed = layerNorm(hiddenStates, `${p}.layernorm_before`);
    const query = splitHeads(linear(normed, `${a}.query`), `${a}.query`, [0, 2, 1, 3]);
    const keyT = splitHeads(linear(normed, `${a}.key`), `${a}.key`, [0, 2, 3, 1]);
    const value = splitHeads(linear(normed, `${a}.value`), `${a}.value`, [0, 2, 1, 3]);
    const scores = g.node('Div', [g.node('MatMul', [query, keyT], a), attentionScale], a);
    const context = g.node('MatMul', [g.node('Softmax', [scores], a, { axis: -1 }), value], a);
    const merged = g.node('Reshape', [g.node('Transpose', [context], a, { perm: [0, 2, 1, 3] }), mergeHeadsShape], a);
    hiddenStates = g.node('Add', [linear(merged, `${p}.attention.output.dense`), hiddenStates], `${p}.attention.output`);

    const up = linear(layerNorm(hiddenStates, `${p}.layernorm_after`), `${p}.intermediate.dense`);
    const gelu = `${p}.intermediate.gelu`;
    const erf = g.node('Erf', [g.node('Div', [up, sqrt2], gelu)], gelu);
    const activated = g.node('Mul', [g.node('Mul', [up, g.node('Add', [erf, one], gelu)], gelu), half], gelu);
    hiddenStates = g.node('Add', [linear(activated, `${p}.output.dense`), hiddenStates], `${p}.output`);
  }
  const final = layerNorm(hiddenStates, 'vit.layernorm');
  const clsOut = g.node('Gather', [final, g.int64Tensor('const.cls_index', [], [0])], 'classifier', { axis: 1 });
  if (options.head === 'embedding') {
    const tokens = (imageSize / patchSize) ** 2 + 1;
    g.node('Identity', [final], 'output', {}, 'last_hidden_state');
    g.node('Identity', [clsOut], 'output', {}, 'image_embeds');
    g.output('last_hidden_state', TensorDataType.FLOAT, [BATCH, tokens, hidden]);
    g.output('image_embeds', TensorDataType.FLOAT, [BATCH, hidden]);
  } else {
    g.node('Identity', [linear(clsOut, 'classifier')], 'output', {}, 'logits');
    g.output('logits', TensorDataType.FLOAT, [BATCH, options.labels.length]);
  }

  return encodeOnnxModel({
    ir_version: IR_VERSION,
    opset_import: [{ domain: '', version: OPSET_VERSION }],
    producer_name: PRODUCER_NAME,
    producer_version: '1',
    doc_string: `Random-weight ViT (${options.head === 'embedding' ? 'image_embedding' : 'image_classification'}) for tests; seed ${options.seed}`,
    graph: g.build('vit'),
  });
}

/** config.json as transformers writes it for a ViTForImageClassification of this shape. */
export function vitConfigJson(options: VitOptions): string {
  const id2label: JsonObject = {};
  const label2id: JsonObject = {};
  options.labels.forEach((label, id) => {
    id2label[String(id)] = label;
    label2id[label] = id;
  });
  const embedding = options.head === 'embedding';
  const config: JsonObject = {
    architectures: [embedding ? 'ViTModel' : 'ViTForImageClassification'],
    attention_probs_dropout_prob: 0,
    dtype: 'float32',
    encoder_stride: options.patchSize,
    hidden_act: 'gelu',
    hidden_dropout_prob: 0,
    hidden_size: options.hidden,
    ...(embedding ? {} : { id2label }),
    image_size: options.imageSize,
    initializer_range: INITIALIZER_RANGE,
    intermediate_size: options.intermediate,
    ...(embedding ? {} : { label2id }),
    layer_norm_eps: LAYER_NORM_EPS,
    model_type: 'vit',
    num_attention_heads: options.heads,
    num_channels: CHANNELS,
    num_hidden_layers: options.layers,
    patch_size: options.patchSize,
    qkv_bias: true,
  };
  return formatJson(config, { sortKeys: true, asciiOnly: true }) + '\n';
}

/** preprocessor_config.json of ViTImageProcessor at this model's input size (bilinear, rescale, normalise by 0.5). */
export function vitPreprocessorConfigJson(options: VitOptions): string {
  const config: JsonObject = {
    do_normalize: true,
    do_rescale: true,
    do_resize: true,
    image_mean: [0.5, 0.5, 0.5],
    image_processor_type: 'ViTImageProcessor',
    image_std: [0.5, 0.5, 0.5],
    resample: 2,
    rescale_factor: 0.00392156862745098,
    size: { height: options.imageSize, width: options.imageSize },
  };
  return formatJson(config, { sortKeys: true }) + '\n';
}

export const VIT_MODEL_DIRECTORY_FILES = ['model.onnx', 'config.json', 'preprocessor_config.json'] as const;

/** Writes model.onnx, config.json and preprocessor_config.json into `dir`; returns the files written. */
export async function writeVitModelDirectory(dir: string, options: VitOptions = TINY_VIT): Promise<string[]> {
  const contents: Record<(typeof VIT_MODEL_DIRECTORY_FILES)[number], string | Uint8Array> = {
    'model.onnx': buildVitOnnxModel(options, generateVitWeights(options)),
    'config.json': vitConfigJson(options),
    'preprocessor_config.json': vitPreprocessorConfigJson(options),
  };
  await mkdir(dir, { recursive: true });
  for (const [file, content] of Object.entries(contents)) await writeFile(join(dir, file), content);
  return [...VIT_MODEL_DIRECTORY_FILES];
}
