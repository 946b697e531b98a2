/**
 * An image model in onnxruntime: its graph checked against what the server feeds and reads (`pixel_values` float32
 * [batch, 3, height, width] in; out, for image_classification `logits` float32 [batch, labels], one label per
 * config.json id2label entry, for image_embedding a pooled output [batch, dim] or, with a pooling, `last_hidden_state`
 * [batch, tokens, hidden]), and runs of a `pixel_values` batch. The text models' session is onnx-model.ts; the
 * session options are the same (sessionOptionsFor).
 */
import { ConfigError } from './errors.ts';
import type { PixelValues } from './image/preprocess.ts';
import { createSession, describeShape, describeValues, SessionModel, type OnnxModelOptions, type ValueInfo } from './onnx-model.ts';
import { Tensor } from './tensor.ts';
import type { Pooling } from './config.ts';
import { poolRow } from './pooling.ts';

export const PIXEL_VALUES_INPUT = 'pixel_values';
export const LOGITS_OUTPUT = 'logits';
/** An image_embedding model's pooled outputs, in order of preference (CLIP's projection, then a ViT pooler). */
export const POOLED_IMAGE_OUTPUTS = ['image_embeds', 'pooler_output'];
export const TOKEN_STATES_OUTPUT = 'last_hidden_state';

/** What the graph must show: a classifier's labels, or an embedding model's pooling; the preprocessed size (null: it varies). */
export interface ImageModelExpectation {
  size: { height: number; width: number } | null;
  /** image_classification: its label count. */
  labels?: number;
  /** image_embedding: null, the graph's pooled output; a mode, `last_hidden_state` pooled here. */
  embedding?: { pooling: Pooling | null };
}

export interface ImageModelSignature {
  input: ValueInfo;
  output: ValueInfo;
}

/**
 * Checks the graph's inputs and outputs for an image_classification model of `labels` labels at the preprocessor's
 * `size` (null: it varies, a shortest-edge resize without a crop); a ConfigError names what does not fit.
 */
export function validateImageSignature(inputs: readonly ValueInfo[], outputs: readonly ValueInfo[], expected: ImageModelExpectation): ImageModelSignature {
  const { size } = expected;
  const input = inputs.find((value) => value.name === PIXEL_VALUES_INPUT);
  if (!input) throw new ConfigError(`an image_classification model needs input "${PIXEL_VALUES_INPUT}" float32 [batch, 3, height, width]; inputs: ${describeValues(inputs)}`);
  const others = inputs.filter((value) => value !== input);
  if (others.length > 0) throw new ConfigError(`model input "${others[0].name}" is not supported; an image_classification model is fed "${PIXEL_VALUES_INPUT}" only`);
  if (input.type !== 'float32' || input.shape.length !== 4) {
    throw new ConfigError(`model input "${PIXEL_VALUES_INPUT}" is ${input.type} ${describeShape(input.shape)}; it must be float32 [batch, 3, height, width]`);
  }
  const [, channels, height, width] = input.shape;
  if (typeof channels === 'number' && channels !== 3) throw new ConfigError(`model input "${PIXEL_VALUES_INPUT}" has ${channels} channels; images are fed as RGB, 3 channels`);
  if (size !== null) {
    for (const [name, fixed, wanted] of [['height', height, size.height], ['width', width, size.width]] as const) {
      if (typeof fixed === 'number' && fixed !== wanted) {
        throw new ConfigError(`model input "${PIXEL_VALUES_INPUT}" has ${name} ${fixed}, but preprocessor_config.json makes images of ${name} ${wanted}`);
      }
    }
  }
  if (expected.embedding) return { input, output: embeddingOutput(outputs, expected.embedding.pooling) };
  const labels = expected.labels ?? 0;
  const output = outputs.find((value) => value.name === LOGITS_OUTPUT);
  if (!output) throw new ConfigError(`an image_classification model needs output "${LOGITS_OUTPUT}" float32 [batch, labels]; outputs: ${describeValues(outputs)}`);
  if (output.type !== 'float32' || output.shape.length !== 2) {
    throw new ConfigError(`model output "${LOGITS_OUTPUT}" is ${output.type} ${describeShape(output.shape)} (rank ${output.shape.length}); an image_classification model needs float32 of rank 2 [batch, labels]`);
  }
  const width2 = output.shape[1];
  if (typeof width2 === 'number' && width2 !== labels) {
    throw new ConfigError(`model output "${LOGITS_OUTPUT}" has ${width2} labels, config.json id2label ${labels}`);
  }
  return { input, output };
}

/** The output an image_embedding model is read from: a pooled one, or (with a pooling) the token states. */
function embeddingOutput(outputs: readonly ValueInfo[], pooling: Pooling | null): ValueInfo {
  const float = (value: ValueInfo | undefined, rank: number) => value !== undefined && value.type === 'float32' && value.shape.length === rank;
  if (pooling !== null) {
    const states = outputs.find((value) => value.name === TOKEN_STATES_OUTPUT);
    if (float(states, 3)) return states!;
    throw new ConfigError(`pooling ${pooling} pools "${TOKEN_STATES_OUTPUT}" float32 [batch, tokens, hidden], which the model does not give; outputs: ${describeValues(outputs)}`);
  }
  const pooled = POOLED_IMAGE_OUTPUTS.map((name) => outputs.find((value) => value.name === name)).find((value) => float(value, 2));
  if (pooled) return pooled;
  throw new ConfigError(
    `an image_embedding model needs a pooled output (${POOLED_IMAGE_OUTPUTS.join(' or ')}, float32 [batch, dim]), or a pooling ` +
      `(cls, mean, max, last) of "${TOKEN_STATES_OUTPUT}"; outputs: ${describeValues(outputs)}`,
  );
}

/**
 * An image_embedding model's vectors [batch, dim] from its output: a pooled output as it is, token states pooled over
 * every token (an image has no padding; cls takes the first).
 */
export function imageVectors(output: Tensor, pooling: Pooling | null): Tensor {
  if (output.rank === 2) return output;
  const [batch, tokens, width] = output.dims;
  const data = new Float32Array(batch * width);
  for (let row = 0; row < batch; row++) data.set(poolRow(output, row, tokens, pooling ?? 'cls'), row * width);
  return new Tensor(data, [batch, width]);
}

/** One onnxruntime session of an image model: `pixel_values` in. */
export class ImageOnnxModel extends SessionModel<ImageModelSignature> {
  static async load(weights: Uint8Array, expected: ImageModelExpectation, options: OnnxModelOptions = {}): Promise<ImageOnnxModel> {
    return new ImageOnnxModel(await createSession(weights, options, (inputs, outputs) => validateImageSignature(inputs, outputs, expected)));
  }

  /** The signature's output (logits, a pooled output or token states) of a `pixel_values` batch. */
  async run(pixels: PixelValues): Promise<Tensor> {
    return this.runFeeds({ [PIXEL_VALUES_INPUT]: new this.Tensor('float32', pixels.data, pixels.dims) });
  }
}
