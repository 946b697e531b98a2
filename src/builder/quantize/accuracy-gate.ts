/**
 * The accuracy gate of `quantize: int8`: the fp32 and the int8 model run the same texts, and the build goes on only
 * when the int8 outputs stay close — for embeddings the cosine of every output vector (per token, or per input for
 * sentence embeddings), for classification the share of unchanged predicted labels (per input, or per token) and the
 * largest difference of a softmax score.
 */
import type { QuantizeGate } from '../../encoder/config.ts';
import { ConfigError } from '../../encoder/errors.ts';
import type { Predictor } from '../../encoder/predictor.ts';
import type { EmbeddingResponse, SentenceEmbeddingResponse, SequenceClassificationResponse, TokenClassificationResponse } from '../../encoder/schemas.ts';
import { compareEmbeddings, compareScores, type OutputComparison, type OutputTensor } from './accuracy.ts';

/** Varied English (short and long, questions, numbers, names, punctuation) when the configuration gives none. */
export const DEFAULT_CHECK_TEXTS: readonly string[] = [
  'The quick brown fox jumps over the lazy dog.',
  'What is the capital of France?',
  'Paris is the capital and most populous city of France, with an estimated population of over two million residents.',
  'I loved this movie, the acting was wonderful and the story kept me on the edge of my seat.',
  'Terrible service. We waited 45 minutes and the food arrived cold.',
  'Barack Obama was born in Honolulu, Hawaii, and served as the 44th president of the United States.',
  'The mitochondria is the powerhouse of the cell.',
  'How do I reset my password if I no longer have access to my email account?',
  'Stock markets fell sharply on Tuesday after the central bank raised interest rates by half a percentage point.',
  'She sells seashells by the seashore.',
  'The new update improves battery life, fixes several bugs and adds support for dark mode on all devices.',
  'Machine learning models can be compressed with quantization, pruning and knowledge distillation.',
  'Please send the report to Dr. Smith at the Berlin office before 5 p.m. on Friday.',
  'hello',
  'Water boils at 100 degrees Celsius at sea level, but at lower temperatures at high altitude.',
  'A long time ago in a galaxy far, far away, a small band of rebels fought against an empire that controlled the stars.',
];

export type GateResult = OutputComparison;

/** Runs both models on `texts` and compares their outputs. */
export async function compareModels(fp32: Predictor, int8: Predictor, texts: readonly string[]): Promise<GateResult> {
  const inputs = [...texts];
  const run = (predictor: Predictor) =>
    predictor.predict(predictor.modelType === 'embedding' || predictor.modelType === 'sentence_embedding' ? { inputs, normalize: false } : { inputs });
  const [a, b] = await Promise.all([run(fp32), run(int8)]);
  switch (fp32.modelType) {
    case 'embedding': {
      // the responses carry the input's tokens only, never padding
      const tokens = (response: unknown) => asOutput((response as EmbeddingResponse).results.flatMap((r) => r.embeddings.map((e) => e.embedding)));
      return compareEmbeddings(tokens(a), tokens(b));
    }
    case 'sentence_embedding': {
      const pooled = (response: unknown) => asOutput((response as SentenceEmbeddingResponse).results.map((r) => r.embedding));
      return compareEmbeddings(pooled(a), pooled(b));
    }
    case 'sequence_classification': {
      const scores = (response: unknown) => asOutput((response as SequenceClassificationResponse).results.map((r) => r.scores));
      return compareScores(scores(a), scores(b));
    }
    case 'token_classification': {
      const scores = (response: unknown) => asOutput((response as TokenClassificationResponse).results.flatMap((r) => r.tokens.map((t) => t.scores)));
      return compareScores(scores(a), scores(b));
    }
  }
}

/** Throws a ConfigError naming the floor that `result` is below, if one is. */
export function enforceGate(result: GateResult, gate: QuantizeGate): void {
  const advice = 'nothing was written; build with quantize: none, or lower the floor knowingly';
  if (result.kind === 'embedding' && result.minCosine < gate.minCosine) {
    throw new ConfigError(`int8 quantization fails the accuracy gate: the smallest cosine to fp32 is ${result.minCosine.toFixed(5)}, below quantize_min_cosine ${gate.minCosine}; ${advice}`);
  }
  if (result.kind === 'classification' && result.labelAgreement < gate.minLabelAgreement) {
    throw new ConfigError(
      `int8 quantization fails the accuracy gate: ${(result.labelAgreement * 100).toFixed(1)}% of the predicted labels are unchanged, below quantize_min_label_agreement ${gate.minLabelAgreement}; ${advice}`,
    );
  }
}

/** One line for the build's step output. */
export function describeGate(result: GateResult): string {
  if (result.kind === 'embedding') return `min cosine ${result.minCosine.toFixed(5)}, mean ${result.meanCosine.toFixed(5)} over ${result.vectors} vectors`;
  return `${(result.labelAgreement * 100).toFixed(1)}% of ${result.predictions} labels unchanged, largest score difference ${result.maxScoreDifference.toFixed(4)}`;
}

/** Equal-length vectors as one [count, width] output. */
function asOutput(vectors: Float32Array[]): OutputTensor {
  const width = vectors[0]?.length ?? 0;
  const data = new Float32Array(vectors.length * width);
  vectors.forEach((vector, row) => data.set(vector, row * width));
  return { data, dims: [vectors.length, width] };
}
