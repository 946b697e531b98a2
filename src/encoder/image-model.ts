/**
 * An image classification model in onnxruntime: its graph checked against what the server feeds and reads
 * (`pixel_values` float32 [batch, 3, height, width] in, `logits` float32 [batch, labels] out, one label per
 * config.json id2label entry), and runs of a `pixel_values` batch. The text models' session is onnx-model.ts; the
 * session options are the same (sessionOptionsFor).
 */
import type * as ort from 'onnxruntime-node';
import { ConfigError, InternalError } from './errors.ts';
import type { PixelValues } from './image/preprocess.ts';
import { createSession, describeShape, describeValues, settingsOf, toValueInfo, type OnnxModelOptions, type SessionSettings, type ValueInfo } from './onnx-model.ts';
import { Tensor } from './tensor.ts';

export const PIXEL_VALUES_INPUT = 'pixel_values';
export const LOGITS_OUTPUT = 'logits';

export interface ImageModelSignature {
  input: ValueInfo;
  output: ValueInfo;
}

/**
 * Checks the graph's inputs and outputs for an image_classification model of `labels` labels at the preprocessor's
 * `size` (null: it varies, a shortest-edge resize without a crop); a ConfigError names what does not fit.
 */
export function validateImageSignature(
  inputs: readonly ValueInfo[],
  outputs: readonly ValueInfo[],
  labels: number,
  size: { height: number; width: number } | null,
): ImageModelSignature {
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

/** One onnxruntime session of an image classification model. */
export class ImageOnnxModel {
  readonly signature: ImageModelSignature;
  readonly settings: SessionSettings;
  readonly #session: ort.InferenceSession;
  readonly #ort: typeof ort;

  private constructor(runtime: typeof ort, session: ort.InferenceSession, signature: ImageModelSignature, settings: SessionSettings) {
    this.#ort = runtime;
    this.#session = session;
    this.signature = signature;
    this.settings = settings;
  }

  static async load(
    weights: Uint8Array,
    expected: { labels: number; size: { height: number; width: number } | null },
    options: OnnxModelOptions = {},
  ): Promise<ImageOnnxModel> {
    const { runtime, session, sessionOptions } = await createSession(weights, options);
    try {
      const signature = validateImageSignature(toValueInfo(session.inputMetadata), toValueInfo(session.outputMetadata), expected.labels, expected.size);
      return new ImageOnnxModel(runtime, session, signature, settingsOf(sessionOptions));
    } catch (error) {
      await session.release();
      throw error;
    }
  }

  /** Logits [batch, labels] of a `pixel_values` batch. */
  async run(pixels: PixelValues): Promise<Tensor> {
    let result: ort.InferenceSession.OnnxValueMapType;
    try {
      result = await this.#session.run({ [PIXEL_VALUES_INPUT]: new this.#ort.Tensor('float32', pixels.data, pixels.dims) }, [LOGITS_OUTPUT]);
    } catch (error) {
      throw new InternalError(`onnxruntime failed: ${(error as Error).message}`, { cause: error });
    }
    const output = result[LOGITS_OUTPUT];
    return new Tensor(output.data as Float32Array, output.dims.map(Number));
  }

  async close(): Promise<void> {
    await this.#session.release();
  }
}
