/**
 * Deterministic random BERT weights, named and shaped exactly like a HuggingFace BertModel's
 * state dict (Linear weights are [out_features, in_features]).
 */
import { ConfigError } from '../../src/encoder/errors.ts';
import { normalizeOptions } from './options.ts';
import type { GeneratorOptions } from './options.ts';
import { SeededRandom } from './random.ts';

export interface WeightTensor {
  readonly dims: readonly number[];
  readonly data: Float32Array;
}

export interface BertWeights {
  /** HF parameter name (e.g. `encoder.layer.0.attention.self.query.weight`) to tensor, in state-dict order. */
  readonly tensors: ReadonlyMap<string, WeightTensor>;
}

/** BERT's token type vocabulary: segment A and segment B. */
export const TYPE_VOCAB_SIZE = 2;
export const LAYER_NORM_EPS = 1e-12;
/** BERT's initializer_range: the std of the normal initialisation of encoder weights. */
export const INITIALIZER_RANGE = 0.02;
/** Row of the word embeddings that HF zeroes (pad_token_id). */
const PAD_TOKEN_ID = 0;

type Init =
  | { kind: 'normal'; std: number }
  /** LayerNorm gamma: 1 plus a little noise, so a wrong scale/bias wiring is visible in outputs. */
  | { kind: 'around-one'; std: number };

export function generateWeights(options: GeneratorOptions): BertWeights {
  const opts = normalizeOptions(options);
  const tensors = new Map<string, WeightTensor>();
  const add = (name: string, dims: number[], init: Init): Float32Array => {
    const random = new SeededRandom(opts.seed, name); // one stream per tensor: shapes elsewhere do not shift it
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    const offset = init.kind === 'around-one' ? 1 : 0;
    for (let i = 0; i < data.length; i++) data[i] = offset + random.nextNormal() * init.std;
    tensors.set(name, { dims, data });
    return data;
  };
  // Embeddings use BERT's init (std 0.02); LayerNorm rescales their sum. Linear layers use
  // std 1/sqrt(fan_in) instead of 0.02: activations stay at unit scale (well-conditioned), and
  // outputs depend on the whole input. With 0.02 the residual stream dominates and a random
  // classifier gives nearly the same logits for every sentence.
  const embeddingInit: Init = { kind: 'normal', std: INITIALIZER_RANGE };
  // Biases and LayerNorm betas are zero in HF's init; small noise keeps every parameter observable.
  const biasInit: Init = { kind: 'normal', std: INITIALIZER_RANGE };
  const gammaInit: Init = { kind: 'around-one', std: INITIALIZER_RANGE };
  const linear = (prefix: string, outFeatures: number, inFeatures: number): void => {
    add(`${prefix}.weight`, [outFeatures, inFeatures], { kind: 'normal', std: 1 / Math.sqrt(inFeatures) });
    add(`${prefix}.bias`, [outFeatures], biasInit);
  };
  const layerNorm = (prefix: string): void => {
    add(`${prefix}.weight`, [opts.hidden], gammaInit);
    add(`${prefix}.bias`, [opts.hidden], biasInit);
  };

  const { hidden, intermediate } = opts;
  add('embeddings.word_embeddings.weight', [opts.vocabSize, hidden], embeddingInit).fill(
    0,
    PAD_TOKEN_ID * hidden,
    (PAD_TOKEN_ID + 1) * hidden,
  );
  add('embeddings.position_embeddings.weight', [opts.maxPositions, hidden], embeddingInit);
  add('embeddings.token_type_embeddings.weight', [TYPE_VOCAB_SIZE, hidden], embeddingInit);
  layerNorm('embeddings.LayerNorm');
  for (let layer = 0; layer < opts.layers; layer++) {
    const prefix = `encoder.layer.${layer}`;
    linear(`${prefix}.attention.self.query`, hidden, hidden);
    linear(`${prefix}.attention.self.key`, hidden, hidden);
    linear(`${prefix}.attention.self.value`, hidden, hidden);
    linear(`${prefix}.attention.output.dense`, hidden, hidden);
    layerNorm(`${prefix}.attention.output.LayerNorm`);
    linear(`${prefix}.intermediate.dense`, intermediate, hidden);
    linear(`${prefix}.output.dense`, hidden, intermediate);
    layerNorm(`${prefix}.output.LayerNorm`);
  }
  const labelCount = opts.labels?.length ?? 0;
  if (opts.modelType === 'sequence_classification') {
    linear('pooler.dense', hidden, hidden);
  }
  if (opts.modelType === 'sequence_classification' || opts.modelType === 'token_classification') {
    linear('classifier', labelCount, hidden);
  }
  return { tensors };
}

/** The tensor `name`, checked against the dims the caller expects. */
export function requireWeight(weights: BertWeights, name: string, dims: readonly number[]): WeightTensor {
  const tensor = weights.tensors.get(name);
  if (!tensor) throw new ConfigError(`weight '${name}' is missing`);
  if (tensor.dims.length !== dims.length || tensor.dims.some((d, i) => d !== dims[i])) {
    throw new ConfigError(`weight '${name}' has dims [${tensor.dims.join(', ')}], expected [${dims.join(', ')}]`);
  }
  if (tensor.data.length !== dims.reduce((a, b) => a * b, 1)) {
    throw new ConfigError(`weight '${name}' holds ${tensor.data.length} values, expected ${dims.join('x')}`);
  }
  return tensor;
}
