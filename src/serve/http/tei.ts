import type { FastifyInstance, FastifyRequest, RouteHandlerMethod } from 'fastify';
import { POOLED_MODEL_TYPES } from '../../encoder/config.ts';
import type { Predictor } from '../../encoder/predictor.ts';
import type { ModelMetadata, SequenceClassificationResult, TokenSpan } from '../../encoder/schemas.ts';
import type { ServedModelNames } from '../model-names.ts';
import type { ServerInfo } from '../server-info.ts';
import { classScoresOf, labelledScores } from './class-scores.ts';
import { HttpError, JSON_TYPE } from './errors.ts';
import { fieldApiBodyParser, orNull } from './field-api-body.ts';
import { sendJson } from './json-reply.ts';
import { HF_INFERENCE_OPTIONS } from './predict-body.ts';
import { rankedByScore } from './rerank.ts';

/**
 * text-embeddings-inference's own routes (design decision 11: a thin front end over the one pipeline): POST /embed,
 * /embed_all, /tokenize, /decode and GET /info, and its bodies on POST /rerank and /predict (paths other APIs share,
 * registered in routes.ts, as is its default route POST /), with TEI's bodies, answers and error statuses. Their errors
 * leave as TEI's `{"error": "...", "error_type": "Validation"}` (errors.ts, TEI_PATHS): a body TEI cannot read is a
 * 422 Validation, an empty batch a 400 Empty, a route the model type does not serve a 424 Backend, as TEI answers.
 */

/** TEI's error types (its ErrorType enum, serialised by name) and the status TEI gives each. */
export const TEI_ERROR_STATUS = { Unhealthy: 503, Backend: 424, Overloaded: 429, Validation: 422, Tokenizer: 422, Empty: 400 } as const;
export type TeiErrorType = keyof typeof TEI_ERROR_STATUS;

function teiRefusal(type: TeiErrorType, message: string): HttpError {
  return new HttpError(TEI_ERROR_STATUS[type], message, { code: type });
}

const text = { type: 'string' } as const;
const texts = { type: 'array', items: text } as const;
const tokenIds = { type: 'array', items: { type: 'integer', minimum: 0 } } as const;
const truncate = orNull({ type: 'boolean', description: "Accepted; inputs longer than the model are always truncated at their end (false does not make them an error)." });
const truncationDirection = orNull({ type: 'string', enum: ['Right', 'right'], description: 'Right (TEI\'s default) only: inputs are truncated at their end.' });
const promptName = orNull({ type: 'string', enum: [] as string[], description: 'null only: this server has no prompts.' });

export const TEI_EMBED_REQUEST_SCHEMA = {
  type: 'object',
  required: ['inputs'],
  additionalProperties: false,
  properties: {
    inputs: { description: 'A text or a list of texts (or token ids, or lists of them).', anyOf: [text, texts, tokenIds, { type: 'array', items: tokenIds }] },
    normalize: orNull({ type: 'boolean', description: 'Scale each vector to unit length; default true.' }),
    truncate,
    truncation_direction: truncationDirection,
    prompt_name: promptName,
    dimensions: orNull({ type: 'integer', minimum: 1, description: 'Keep the first n components (then normalise when normalize).' }),
    options: HF_INFERENCE_OPTIONS,
  },
} as const;

export const TEI_EMBED_ALL_REQUEST_SCHEMA = {
  type: 'object',
  required: ['inputs'],
  additionalProperties: false,
  properties: {
    inputs: { description: 'A text or a list of texts.', anyOf: [text, texts] },
    truncate,
    truncation_direction: truncationDirection,
    prompt_name: promptName,
    options: HF_INFERENCE_OPTIONS,
  },
} as const;

export const TEI_RERANK_REQUEST_SCHEMA = {
  type: 'object',
  required: ['query', 'texts'],
  additionalProperties: false,
  properties: {
    query: text,
    texts,
    truncate,
    truncation_direction: truncationDirection,
    raw_scores: orNull({ type: 'boolean', description: "true: the model's logit (of the rerank label); default false: its probability (sigmoid, or softmax of the rerank label)." }),
    return_text: orNull({ type: 'boolean', description: 'Include each text in its result; default false.' }),
  },
} as const;

const sequence = { type: 'array', items: text, minItems: 1, maxItems: 2 } as const;

export const TEI_PREDICT_REQUEST_SCHEMA = {
  type: 'object',
  required: ['inputs'],
  additionalProperties: false,
  properties: {
    inputs: {
      description: 'A text, or a batch of [text] and [text, text_pair] items (a pair is tokenized together).',
      anyOf: [text, { type: 'array', items: sequence }],
    },
    truncate,
    truncation_direction: truncationDirection,
    raw_scores: orNull({ type: 'boolean', description: "true: each label's logit; default false: its softmax probability." }),
    options: HF_INFERENCE_OPTIONS,
  },
} as const;

export const TEI_TOKENIZE_REQUEST_SCHEMA = {
  type: 'object',
  required: ['inputs'],
  additionalProperties: false,
  properties: {
    inputs: { description: 'A text or a list of texts.', anyOf: [text, texts] },
    add_special_tokens: orNull({ type: 'boolean', description: 'Include the special tokens ([CLS], [SEP], ...); default true.' }),
    prompt_name: promptName,
  },
} as const;

export const TEI_DECODE_REQUEST_SCHEMA = {
  type: 'object',
  required: ['ids'],
  additionalProperties: false,
  properties: {
    ids: { description: 'Token ids, or a list of lists of them.', anyOf: [tokenIds, { type: 'array', items: tokenIds }] },
    skip_special_tokens: orNull({ type: 'boolean', description: 'Leave special tokens out of the text; default true.' }),
  },
} as const;

const common = {
  truncation_direction: (value: unknown) => `\`truncation_direction\` ${JSON.stringify(value)} is not supported: inputs are truncated at their end ('Right')`,
  prompt_name: (value: unknown) => `\`prompt_name\` is set to ${JSON.stringify(value)} but this server has no prompts`,
};

/** A field parser whose refusals are TEI's 422 Validation, not the field APIs' 400. */
function teiParser<T>(schema: object, messages: Parameters<typeof fieldApiBodyParser>[1] = {}): (body: unknown) => T {
  const parse = fieldApiBodyParser<T>(schema, { ...common, ...messages });
  return (body) => {
    try {
      return parse(body);
    } catch (error) {
      if (error instanceof HttpError && error.statusCode === 400) throw teiRefusal('Validation', error.message);
      throw error;
    }
  };
}

type Input = string | number[];
const parseEmbed = teiParser<{ inputs: Input | Input[]; normalize?: boolean; dimensions?: number }>(TEI_EMBED_REQUEST_SCHEMA);
const parseEmbedAll = teiParser<{ inputs: string | string[] }>(TEI_EMBED_ALL_REQUEST_SCHEMA);
const parseRerank = teiParser<{ query: string; texts: string[]; return_text?: boolean; raw_scores?: boolean }>(TEI_RERANK_REQUEST_SCHEMA);
const parsePredict = teiParser<{ inputs: string | string[][]; raw_scores?: boolean }>(TEI_PREDICT_REQUEST_SCHEMA);
const parseTokenize = teiParser<{ inputs: string | string[]; add_special_tokens?: boolean }>(TEI_TOKENIZE_REQUEST_SCHEMA);
const parseDecode = teiParser<{ ids: number[] | number[][]; skip_special_tokens?: boolean }>(TEI_DECODE_REQUEST_SCHEMA);

/** TEI's checks of a batch: not empty (400 Empty), not more than max_client_batch_size (422 Validation). */
function checkBatch(count: number, field: string, predictor: Predictor): void {
  if (count === 0) throw teiRefusal('Empty', `\`${field}\` cannot be empty`);
  const limit = predictor.servingLimits().maxRequestInputs;
  if (count > limit) throw teiRefusal('Validation', `batch size ${count} > maximum allowed batch size ${limit}`);
}

/** A text or a list of texts (ids: a list of ids or a list of lists), as the list TEI makes of it. */
function listOf<T>(inputs: T | T[], single: (value: T | T[]) => boolean): T[] {
  return single(inputs) ? [inputs as T] : (inputs as T[]);
}
const isText = (value: unknown) => typeof value === 'string';
const isIds = (value: unknown) => Array.isArray(value) && value.length > 0 && typeof value[0] === 'number';

/** What TEI takes for a re-ranker (its /info says `reranker`): a sequence classifier with one label. */
export function isTeiReranker(metadata: ModelMetadata): boolean {
  return metadata.model_type === 'sequence_classification' && Object.keys(metadata.id2label ?? {}).length === 1;
}

/** TEI's /info: the model and the limits requests are held to, in TEI's fields. */
export function teiInfo(predictor: Predictor, names: ServedModelNames, serverInfo: ServerInfo): Record<string, unknown> {
  const metadata = predictor.metadata();
  const limits = predictor.servingLimits();
  const id2label = metadata.id2label ?? {};
  const labels = { id2label, label2id: Object.fromEntries(Object.entries(id2label).map(([index, label]) => [label, Number(index)])) };
  const modelType = metadata.pooling !== undefined ? { embedding: { pooling: metadata.pooling } } : isTeiReranker(metadata) ? { reranker: labels } : { classifier: labels };
  return {
    model_id: predictor.modelId,
    model_sha: null,
    model_dtype: metadata.quantization ?? 'float32',
    served_model_name: names.served,
    model_type: modelType,
    max_concurrent_requests: null,
    max_input_length: limits.maxInputLength,
    max_batch_tokens: limits.maxBatchTokens,
    max_batch_requests: limits.maxBatchSequences,
    max_client_batch_size: limits.maxRequestInputs,
    auto_truncate: true,
    tokenization_workers: limits.tokenizerThreads,
    version: serverInfo.version,
    sha: null,
    docker_label: null,
  };
}

/** TEI's token: UTF-8 byte offsets into the text (ours are code points), the text's own piece; none for a special token. */
function teiToken(span: TokenSpan, byteOffsets: (codePoint: number) => number, codePoints: string[]) {
  if (span.special || span.start === null || span.end === null) return { id: span.id, text: span.token, special: true, start: null, stop: null };
  return { id: span.id, text: codePoints.slice(span.start, span.end).join(''), special: false, start: byteOffsets(span.start), stop: byteOffsets(span.end) };
}

/** code point index -> UTF-8 byte offset, for one text. */
function byteOffsetsOf(codePoints: string[]): (codePoint: number) => number {
  const offsets = new Uint32Array(codePoints.length + 1);
  for (let i = 0; i < codePoints.length; i++) {
    const c = codePoints[i].codePointAt(0)!;
    offsets[i + 1] = offsets[i] + (c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4);
  }
  return (codePoint) => offsets[Math.min(codePoint, codePoints.length)];
}

/**
 * Whether a POST /predict body is TEI's rather than spec 2's: only a body spec 2 refuses is read as TEI's, so every
 * spec 2 request keeps its meaning. That is a sequence classification model's body whose `inputs` is one text (TEI's
 * documented `{"inputs": "I like you."}`) or a batch with a one-text item (`[["I like you."], ["I hate pineapples"]]`).
 * A list of texts stays spec 2's (TEI would take two texts as one pair); a batch of pairs only, `[[a, b], ...]`, is
 * spec 2's pairs extension (docs/decisions.md).
 */
export function isTeiPredictBody(body: unknown, predictor: Predictor): boolean {
  if (predictor.modelType !== 'sequence_classification' || body === null || typeof body !== 'object' || Array.isArray(body)) return false;
  const inputs = (body as { inputs?: unknown }).inputs;
  return typeof inputs === 'string' || (Array.isArray(inputs) && inputs.some((item) => Array.isArray(item) && item.length === 1));
}

/**
 * TEI's /predict answer: for one text, its labels' scores best first; for a batch, one such list per item. Scores are
 * softmax probabilities, or with raw_scores the logits. The texts join the same batches as spec 2's /predict.
 */
export async function teiPredict(body: unknown, predictor: Predictor): Promise<unknown> {
  const request = parsePredict(body);
  const single = typeof request.inputs === 'string';
  const items = single ? [request.inputs as string] : (request.inputs as string[][]).map((item) => (item.length === 1 ? item[0] : item));
  if (!single) checkBatch(items.length, 'inputs', predictor);
  const response = await predictor.predict({ inputs: items });
  const id2label = predictor.metadata().id2label;
  const answers = (response.results as SequenceClassificationResult[]).map((result) => labelledScores(classScoresOf(result, request.raw_scores === true), id2label));
  return single ? answers[0] : answers;
}

/** TEI's /rerank answer (the path is shared with Infinity's body, routes.ts): the texts best first. */
export async function teiRerank(body: unknown, predictor: Predictor): Promise<unknown> {
  const request = parseRerank(body);
  checkBatch(request.texts.length, 'texts', predictor);
  if (predictor.modelType !== 'sequence_classification') throw teiRefusal('Backend', 'model is not a re-ranker model');
  const { scores } = await predictor.rerank({ query: request.query, documents: request.texts, raw: request.raw_scores });
  return rankedByScore(scores).map(({ index, score }) => (request.return_text === true ? { index, text: request.texts[index], score } : { index, score }));
}

/** TEI's POST /embed: one pooled vector per input. */
export function teiEmbedRoute(predictor: Predictor): RouteHandlerMethod {
  const pooled = POOLED_MODEL_TYPES.includes(predictor.modelType);
  return async (request, reply) => {
    const body = parseEmbed(request.body);
    if (!pooled) throw teiRefusal('Backend', 'Model is not an embedding model');
    const inputs = listOf<Input>(body.inputs, (value) => isText(value) || isIds(value));
    checkBatch(inputs.length, 'inputs', predictor);
    const result = await predictor.embed({ inputs, dimensions: body.dimensions, normalize: body.normalize ?? true });
    return sendJson(reply, result.vectors);
  };
}

export function registerTeiRoutes(app: FastifyInstance, predictor: Predictor, names: ServedModelNames, serverInfo: ServerInfo): void {
  app.get('/info', (_request, reply) => reply.type(JSON_TYPE).send(JSON.stringify(teiInfo(predictor, names, serverInfo))));

  app.post('/embed', teiEmbedRoute(predictor));

  app.post('/embed_all', async (request: FastifyRequest, reply) => {
    const body = parseEmbedAll(request.body);
    if (predictor.modelType !== 'embedding') {
      throw teiRefusal('Backend', `Model is not an embedding model with one vector per token (this server serves a ${predictor.modelType} model)`);
    }
    const inputs = listOf(body.inputs, isText);
    checkBatch(inputs.length, 'inputs', predictor);
    const response = await predictor.predict({ inputs, normalize: false });
    const results = response.results as { embeddings: { embedding: Float32Array | number[] }[] }[];
    return sendJson(reply, results.map((result) => result.embeddings.map((token) => token.embedding)));
  });

  app.post('/tokenize', async (request: FastifyRequest, reply) => {
    const body = parseTokenize(request.body);
    const inputs = listOf(body.inputs, isText);
    checkBatch(inputs.length, 'inputs', predictor);
    const tokenized = await predictor.tokenize({ inputs, addSpecialTokens: body.add_special_tokens ?? true });
    const answer = tokenized.map((spans, index) => {
      const codePoints = [...inputs[index]];
      const byteOffsets = byteOffsetsOf(codePoints);
      return spans.map((span) => teiToken(span, byteOffsets, codePoints));
    });
    return reply.type(JSON_TYPE).send(JSON.stringify(answer));
  });

  app.post('/decode', async (request: FastifyRequest, reply) => {
    const body = parseDecode(request.body);
    // a list of ids (TEI: `[]` too, one empty text) or a list of lists
    const single = body.ids.length === 0 || typeof body.ids[0] === 'number';
    const ids = single ? [body.ids as number[]] : (body.ids as number[][]);
    if (!single) checkBatch(ids.length, 'ids', predictor);
    const texts = await predictor.decode({ ids, skipSpecialTokens: body.skip_special_tokens ?? true });
    return reply.type(JSON_TYPE).send(JSON.stringify(texts));
  });
}
