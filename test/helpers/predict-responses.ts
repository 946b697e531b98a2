import type { PredictResponse, ServingLimits } from '../../src/encoder/schemas.ts';
import type { JsonOf } from '../../src/shared/float32-json.ts';

const FLOAT_FIELDS = new Set(['embedding', 'logits', 'scores']);

/** A predictor's response from its JSON form: the float fields (embedding, logits, scores) as Float32Arrays. */
export function predictResponseOf(json: JsonOf<PredictResponse>): PredictResponse {
  return withFloat32Arrays(json, '') as PredictResponse;
}

function withFloat32Arrays(value: unknown, key: string): unknown {
  if (Array.isArray(value)) return FLOAT_FIELDS.has(key) ? Float32Array.from(value as number[]) : value.map((item) => withFloat32Arrays(item, ''));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([name, member]) => [name, withFloat32Arrays(member, name)]));
  }
  return value;
}

/** What a stub predictor says of its limits (GET /info, the TEI routes): a 512-token model served with the defaults. */
export function stubServingLimits(): ServingLimits {
  return { maxInputLength: 512, maxRequestInputs: 2048, maxBatchTokens: 4096, maxBatchSequences: null, tokenizerThreads: 0 };
}
