import { parsePredictRequest } from '../../encoder/requests.ts';
import type { JsonOf } from '../../shared/float32-json.ts';
import type {
  EmbeddingResponse,
  ModelMetadata,
  PredictRequest,
  PredictResponse,
  SequenceClassificationResult,
  TokenClassification,
  TextOrPair,
  TokenInfo,
} from '../../encoder/schemas.ts';

/** An OpenAPI Example Object. */
export interface Example<T> {
  summary: string;
  value: T;
}

export interface PredictExamples {
  /** Request examples and, under the same names, the responses they get. */
  requests: Record<string, Example<PredictRequest>>;
  responses: Record<string, Example<JsonOf<PredictResponse>>>;
  /** 422 bodies, each the message the request validator gives for a bad request. */
  inputErrors: Record<string, Example<string>>;
  /** The error thrown for the first of them, for the MCP example of the same failure. */
  inputError: Error;
}

/**
 * Examples of /predict for one model: requests, responses shaped like the model's (its type, id and labels, with
 * short illustrative vectors; token ids are bert-base-uncased's), and the real messages of invalid requests.
 */
export function predictExamples(metadata: ModelMetadata): PredictExamples {
  const embedding = metadata.model_type === 'embedding';
  const normalize = embedding ? { normalize: true } : {};
  const requests: Record<string, Example<PredictRequest>> = {
    two_texts: { summary: 'Two texts, one result each, in order', value: { inputs: ['hello world', 'good morning'], ...normalize } },
    with_metadata: {
      summary: 'Metadata is echoed in the response',
      value: { inputs: ['hello world'], ...normalize, metadata: { request_id: '42' } },
    },
  };
  if (metadata.model_type === 'sequence_classification') {
    requests.text_pair = { summary: 'A [text, text_pair] item is tokenized as a pair (cross-encoders)', value: { inputs: [['hello world', 'good morning']] } };
  }
  if (metadata.model_type === 'sentence_embedding') {
    requests.raw_vectors = { summary: 'normalize: false gives the pooled vectors as they are', value: { inputs: ['hello world'], normalize: false } };
  }
  const responses = Object.fromEntries(
    Object.entries(requests).map(([name, request]) => [name, { summary: request.summary, value: responseTo(request.value, metadata) }]),
  );

  const valid = { inputs: ['hello world'], ...normalize };
  const invalid: Record<string, Example<unknown>> = {
    missing_inputs: { summary: 'inputs is required', value: { ...normalize } },
    empty_inputs: { summary: 'inputs must not be empty', value: { ...valid, inputs: [] } },
    empty_string: { summary: 'every input must be a non-empty string', value: { ...valid, inputs: ['hello', ''] } },
    not_a_string: { summary: 'every input must be a string', value: { ...valid, inputs: ['hello', 42] } },
    wrong_type: { summary: 'inputs must be a list of strings', value: { ...valid, inputs: 'hello world' } },
    unknown_field: { summary: 'unknown fields are refused, so a typo never falls back to a default', value: { ...valid, top_k: 3 } },
    not_an_object: { summary: 'the body must be a JSON object', value: ['hello world'] },
    ...(metadata.model_type === 'embedding' || metadata.model_type === 'sentence_embedding'
      ? { normalize_not_boolean: { summary: 'normalize is true or false', value: { ...valid, normalize: 'yes' } } }
      : {}),
    ...(metadata.model_type === 'sequence_classification'
      ? {
          one_text_pair: { summary: 'a pair is exactly two texts', value: { inputs: [['what is the capital of france']] } },
          empty_pair_text: { summary: 'both texts of a pair are non-empty', value: { inputs: [['what is the capital of france', '']] } },
        }
      : {}),
  };
  const errors = Object.entries(invalid).map(([name, example]) => [name, example.summary, inputErrorOf(metadata, example.value)] as const);
  const inputErrors = Object.fromEntries(errors.map(([name, summary, error]) => [name, { summary, value: error.message }]));
  return { requests, responses, inputErrors, inputError: errors[0][2] };
}

function inputErrorOf(metadata: ModelMetadata, body: unknown): Error {
  try {
    parsePredictRequest(metadata.model_type, body);
  } catch (error) {
    return error as Error;
  }
  throw new Error(`example of an invalid request is valid: ${JSON.stringify(body)}`);
}

/** bert-base-uncased's pieces of the example texts. */
const TOKENS: Record<string, TokenInfo[]> = {
  'hello world': [
    { token: 'hello', token_id: 7592, start: 0, end: 5 },
    { token: 'world', token_id: 2088, start: 6, end: 11 },
  ],
  'good morning': [
    { token: 'good', token_id: 2204, start: 0, end: 4 },
    { token: 'morning', token_id: 2851, start: 5, end: 12 },
  ],
};

function responseTo(request: PredictRequest, metadata: ModelMetadata): JsonOf<PredictResponse> {
  const tokensOf = (text: TextOrPair) => TOKENS[text as string];
  let results: JsonOf<PredictResponse>['results'];
  switch (metadata.model_type) {
    case 'embedding': {
      const normalize = 'normalize' in request && request.normalize === true;
      results = request.inputs.map(
        (text, i): JsonOf<EmbeddingResponse>['results'][number] => ({
          embeddings: tokensOf(text).map((token_info, t) => ({ embedding: vector(i, t, normalize), token_info })),
        }),
      );
      break;
    }
    case 'sentence_embedding': {
      const normalize = 'normalize' in request && request.normalize !== undefined ? request.normalize : (metadata.normalize ?? true);
      results = request.inputs.map((_, i) => ({ embedding: vector(i, 0, normalize) }));
      break;
    }
    case 'sequence_classification':
      results = request.inputs.map((_, i) => sequenceResult(i, metadata.id2label ?? {}));
      break;
    case 'token_classification':
      results = request.inputs.map((text, i) => ({
        tokens: tokensOf(text).map((token_info, t) => tokenResult(token_info, i * 2 + t, metadata.id2label ?? {})),
      }));
      break;
  }
  const response = { results, model_id: metadata.model_id } as JsonOf<PredictResponse>;
  if (request.metadata) response.metadata = request.metadata;
  return response;
}

/** A short illustrative vector (real ones have the model's hidden size). */
function vector(input: number, token: number, normalize: boolean): number[] {
  const raw = [0.5 + input, -1.25 + token, 0.75, -0.5 * (input + token)];
  const scale = normalize ? 1 / Math.hypot(...raw) : 1;
  return raw.map((value) => round(value * scale));
}

function classes(id2label: Record<string, string>): number {
  return Math.max(2, Object.keys(id2label).length);
}

function logitsOf(seed: number, count: number): number[] {
  return Array.from({ length: count }, (_, k) => round(Math.sin(seed * 1.7 + k * 2.3) * 3));
}

function softmaxOf(logits: number[]): number[] {
  const max = Math.max(...logits);
  const exps = logits.map((value) => Math.exp(value - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((value) => round(value / sum));
}

function argmaxOf(values: number[]): number {
  return values.reduce((best, value, i) => (value > values[best] ? i : best), 0);
}

function sequenceResult(seed: number, id2label: Record<string, string>): JsonOf<SequenceClassificationResult> {
  const logits = logitsOf(seed, classes(id2label));
  const scores = softmaxOf(logits);
  const predicted = argmaxOf(scores);
  const result: JsonOf<SequenceClassificationResult> = { logits, scores, predicted_index: predicted };
  // predicted_label only when the model has labels (spec 2), as the pipeline does
  if (Object.keys(id2label).length > 0) result.predicted_label = id2label[predicted] ?? `LABEL_${predicted}`;
  return result;
}

function tokenResult(token_info: TokenInfo, seed: number, id2label: Record<string, string>): JsonOf<TokenClassification> {
  const logits = logitsOf(seed, classes(id2label));
  const scores = softmaxOf(logits);
  const predicted = argmaxOf(scores);
  return { token_info, logits, scores, label: id2label[predicted] ?? `LABEL_${predicted}`, score: scores[predicted] };
}

function round(value: number): number {
  return Math.round(value * 1e4) / 1e4;
}
