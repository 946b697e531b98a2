/**
 * What a transform may return for each model type. The result must keep the batch (and, for
 * token-level models, the sequence) layout that the result shaping relies on.
 */
import { MODEL_TYPES, type ModelType } from '../config-names.ts';

export type TransformModelType = ModelType;
export const TRANSFORM_MODEL_TYPES: readonly TransformModelType[] = MODEL_TYPES;

/** Rank of the model output a transform receives: [batch, labels] or [batch, seq, hidden|labels]. */
export function outputRankOf(modelType: TransformModelType): number {
  return modelType === 'sequence_classification' ? 2 : 3;
}

function list(dims: readonly number[]): string {
  return `[${dims.join(', ')}]`;
}

/** Why `returned` is not an acceptable result for an input of `input` dims, or undefined when it is. */
export function outputShapeProblem(
  modelType: TransformModelType,
  input: readonly number[],
  returned: readonly number[],
): string | undefined {
  switch (modelType) {
    case 'sequence_classification':
    case 'token_classification': {
      const same = returned.length === input.length && returned.every((d, i) => d === input[i]);
      if (same) return undefined;
      const names = modelType === 'sequence_classification' ? '[batch, labels]' : '[batch, seq, labels]';
      return `a ${modelType} transform must return ${names} = ${list(input)}, got ${list(returned)}`;
    }
    case 'sentence_embedding': {
      // Either pooled by the script ([batch, hidden]) or still per token, to be pooled after it.
      const pooled = returned.length === 2 && returned[0] === input[0] && returned[1] > 0;
      const tokens = returned.length === 3 && returned[0] === input[0] && returned[1] === input[1] && returned[2] > 0;
      if (pooled || tokens) return undefined;
      return (
        `a sentence_embedding transform must return [batch, hidden] = [${input[0]}, hidden > 0] (pooled) or ` +
        `[batch, seq, hidden] = [${input[0]}, ${input[1]}, hidden > 0] (pooled after it), got ${list(returned)}`
      );
    }
    case 'embedding': {
      const ok = returned.length === 3 && returned[0] === input[0] && returned[1] === input[1] && returned[2] > 0;
      if (ok) return undefined;
      return (
        `an embedding transform must return [batch, seq, hidden] = [${input[0]}, ${input[1]}, hidden > 0]` +
        ` (hidden may be truncated), got ${list(returned)}`
      );
    }
  }
}
