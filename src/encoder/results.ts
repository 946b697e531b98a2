import type {
  EmbeddingResponse,
  SequenceClassificationResult,
  TokenClassification,
  TokenInfo,
} from './schemas.ts';
import type { Tensor } from './tensor.ts';
import type { Encoding } from './tokenizer/index.ts';

/**
 * Turn one row of a batch's output into spec 2's result shapes. Special tokens (and padding, which the
 * encoding does not hold) are left out, so each entry is a token of the input text.
 */

type EmbeddingResult = EmbeddingResponse['results'][number];

/** `hidden` is [batch, sequence, hidden], already normalised when the request asked for it. */
export function embeddingResult(hidden: Tensor, row: number, encoding: Encoding): EmbeddingResult {
  const [, sequence, width] = hidden.dims;
  const embeddings: EmbeddingResult['embeddings'] = [];
  forEachInputToken(encoding, sequence, (position, tokenInfo) => {
    const start = (row * sequence + position) * width;
    embeddings.push({ embedding: Array.from(hidden.data.subarray(start, start + width)), token_info: tokenInfo });
  });
  return { embeddings };
}

/** `logits` and `scores` are [batch, labels]. */
export function sequenceClassificationResult(
  logits: Tensor,
  scores: Tensor,
  row: number,
  labels: ReadonlyMap<number, string> | null,
): SequenceClassificationResult {
  const width = logits.dims[1];
  const rowScores = scores.data.subarray(row * width, (row + 1) * width);
  const predictedIndex = indexOfMax(rowScores);
  const result: SequenceClassificationResult = {
    logits: Array.from(logits.data.subarray(row * width, (row + 1) * width)),
    scores: Array.from(rowScores),
    predicted_index: predictedIndex,
  };
  if (labels) result.predicted_label = labelOf(labels, predictedIndex);
  return result;
}

/** `logits` and `scores` are [batch, sequence, labels]. */
export function tokenClassificationResult(
  logits: Tensor,
  scores: Tensor,
  row: number,
  encoding: Encoding,
  labels: ReadonlyMap<number, string>,
): { tokens: TokenClassification[] } {
  const [, sequence, width] = logits.dims;
  const tokens: TokenClassification[] = [];
  forEachInputToken(encoding, sequence, (position, tokenInfo) => {
    const start = (row * sequence + position) * width;
    const rowScores = scores.data.subarray(start, start + width);
    const best = indexOfMax(rowScores);
    tokens.push({
      token_info: tokenInfo,
      logits: Array.from(logits.data.subarray(start, start + width)),
      scores: Array.from(rowScores),
      label: labelOf(labels, best),
      score: rowScores[best],
    });
  });
  return { tokens };
}

/** The configured label, or the `LABEL_<i>` name HF uses for an index without one. */
export function labelOf(labels: ReadonlyMap<number, string>, index: number): string {
  return labels.get(index) ?? `LABEL_${index}`;
}

function forEachInputToken(encoding: Encoding, sequence: number, visit: (position: number, info: TokenInfo) => void): void {
  const count = Math.min(encoding.ids.length, sequence);
  for (let position = 0; position < count; position++) {
    if (encoding.specialTokensMask[position] === 1) continue;
    const [start, end] = encoding.offsets[position];
    visit(position, { token: encoding.tokens[position], token_id: encoding.ids[position], start, end });
  }
}

function indexOfMax(values: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}
