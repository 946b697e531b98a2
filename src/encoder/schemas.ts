import { MODEL_TYPES, POOLING_MODES, type ModelType, type Pooling } from './config.ts';

/**
 * JSON schemas of spec 2's request and response bodies, one per model type. They are the single source for
 * request validation here and, later, for the HTTP front end, the OpenAPI document and the MCP tool schema.
 */

const metadataSchema = {
  type: 'object',
  description: 'Free-form string pairs, echoed in the response.',
  additionalProperties: { type: 'string' },
} as const;

const inputsSchema = {
  type: 'array',
  description: 'The texts to run, one result per text, in order.',
  minItems: 1,
  items: { type: 'string', minLength: 1 },
} as const;

const tokenInfoSchema = {
  type: 'object',
  description: 'A token and its span in the input, in Unicode code points (end exclusive).',
  required: ['token', 'token_id', 'start', 'end'],
  additionalProperties: false,
  properties: {
    token: { type: 'string' },
    token_id: { type: 'integer', minimum: 0 },
    start: { type: 'integer', minimum: 0 },
    end: { type: 'integer', minimum: 0 },
  },
} as const;

const floats = { type: 'array', items: { type: 'number' } } as const;

const textSchema = { type: 'string', minLength: 1 } as const;

const classificationRequestSchema = {
  type: 'object',
  required: ['inputs'],
  additionalProperties: false,
  properties: { inputs: inputsSchema, metadata: metadataSchema },
} as const;

/** A text, or a pair [text, text_pair] tokenized together (a cross-encoder's query and document). */
export const TEXT_OR_PAIR_SCHEMA = {
  oneOf: [textSchema, { type: 'array', items: textSchema, minItems: 2, maxItems: 2 }],
} as const;

const sequenceClassificationRequestSchema = {
  type: 'object',
  required: ['inputs'],
  additionalProperties: false,
  properties: {
    inputs: {
      type: 'array',
      description: 'The texts to classify, one result per item, in order; an item [text, text_pair] is tokenized as a pair (cross-encoders).',
      minItems: 1,
      items: TEXT_OR_PAIR_SCHEMA,
    },
    metadata: metadataSchema,
  },
} as const;

export const REQUEST_SCHEMAS = {
  embedding: {
    type: 'object',
    required: ['inputs'],
    additionalProperties: false,
    properties: {
      inputs: inputsSchema,
      normalize: {
        type: 'boolean',
        description: 'true scales every token embedding to unit L2 length; default false (the vectors as the model gives them, as encoderfile answers).',
      },
      metadata: metadataSchema,
    },
  },
  sentence_embedding: {
    type: 'object',
    required: ['inputs'],
    additionalProperties: false,
    properties: {
      inputs: inputsSchema,
      normalize: {
        type: 'boolean',
        description: "true scales every vector to unit L2 length; default: the model's setting (GET /model, normalize).",
      },
      metadata: metadataSchema,
    },
  },
  sequence_classification: sequenceClassificationRequestSchema,
  token_classification: classificationRequestSchema,
} as const satisfies Record<ModelType, object>;

export const RESPONSE_SCHEMAS = {
  embedding: {
    type: 'object',
    required: ['results', 'model_id'],
    additionalProperties: false,
    properties: {
      results: {
        type: 'array',
        items: {
          type: 'object',
          required: ['embeddings'],
          additionalProperties: false,
          properties: {
            embeddings: {
              type: 'array',
              description: 'One entry per token of the input; special tokens are left out.',
              items: {
                type: 'object',
                required: ['embedding'],
                additionalProperties: false,
                properties: { embedding: floats, token_info: tokenInfoSchema },
              },
            },
          },
        },
      },
      model_id: { type: 'string' },
      metadata: metadataSchema,
    },
  },
  sentence_embedding: {
    type: 'object',
    required: ['results', 'model_id'],
    additionalProperties: false,
    properties: {
      results: {
        type: 'array',
        items: {
          type: 'object',
          required: ['embedding'],
          additionalProperties: false,
          properties: { embedding: { ...floats, description: 'One vector per input: the token vectors pooled.' } },
        },
      },
      model_id: { type: 'string' },
      metadata: metadataSchema,
    },
  },
  sequence_classification: {
    type: 'object',
    required: ['results', 'model_id'],
    additionalProperties: false,
    properties: {
      results: {
        type: 'array',
        items: {
          type: 'object',
          required: ['logits', 'scores', 'predicted_index'],
          additionalProperties: false,
          properties: {
            logits: floats,
            scores: floats,
            predicted_index: { type: 'integer', minimum: 0 },
            predicted_label: { type: 'string' },
          },
        },
      },
      model_id: { type: 'string' },
      metadata: metadataSchema,
    },
  },
  token_classification: {
    type: 'object',
    required: ['results', 'model_id'],
    additionalProperties: false,
    properties: {
      results: {
        type: 'array',
        items: {
          type: 'object',
          required: ['tokens'],
          additionalProperties: false,
          properties: {
            tokens: {
              type: 'array',
              items: {
                type: 'object',
                required: ['token_info', 'logits', 'scores', 'label', 'score'],
                additionalProperties: false,
                properties: {
                  token_info: tokenInfoSchema,
                  logits: floats,
                  scores: floats,
                  label: { type: 'string' },
                  score: { type: 'number' },
                },
              },
            },
          },
        },
      },
      model_id: { type: 'string' },
      metadata: metadataSchema,
    },
  },
} as const satisfies Record<ModelType, object>;

export const MODEL_METADATA_SCHEMA = {
  type: 'object',
  required: ['model_id', 'model_type'],
  additionalProperties: false,
  properties: {
    model_id: { type: 'string' },
    model_type: { type: 'string', enum: MODEL_TYPES },
    id2label: { type: 'object', additionalProperties: { type: 'string' } },
    pooling: { type: 'string', enum: POOLING_MODES, description: 'Embedding models: how token vectors are pooled into one vector per text.' },
    normalize: { type: 'boolean', description: 'Embedding models: whether pooled vectors are L2-normalised when a request does not say.' },
    quantization: { type: 'string', enum: ['int8'], description: 'Present when the weights were quantized at build (quantize: int8).' },
  },
} as const;

export interface TokenInfo {
  token: string;
  token_id: number;
  start: number;
  end: number;
}

export interface EmbeddingRequest {
  inputs: string[];
  /** Default false (spec 2 requires it; encoderfile's request has no such field and never normalises). */
  normalize?: boolean;
  metadata?: Record<string, string>;
}

export interface SentenceEmbeddingRequest {
  inputs: string[];
  normalize?: boolean;
  metadata?: Record<string, string>;
}

/** A text, or a [text, text_pair] pair tokenized together. */
export type TextOrPair = string | [string, string];

export interface ClassificationRequest {
  inputs: TextOrPair[];
  metadata?: Record<string, string>;
}

export type PredictRequest = EmbeddingRequest | SentenceEmbeddingRequest | ClassificationRequest;

/*
 * The response types as the predictor returns them: model outputs stay Float32Array (the float32 values the model
 * computed, no copy into number[]). Front ends write them with stringifyJson (src/shared/float32-json.ts), which
 * prints each as the shortest decimal that reads back as the same float32; JSON.stringify would write an object.
 */

export interface EmbeddingResponse {
  results: { embeddings: { embedding: Float32Array; token_info?: TokenInfo }[] }[];
  model_id: string;
  metadata?: Record<string, string>;
}

export interface SentenceEmbeddingResponse {
  results: { embedding: Float32Array }[];
  model_id: string;
  metadata?: Record<string, string>;
}

export interface SequenceClassificationResult {
  logits: Float32Array;
  scores: Float32Array;
  predicted_index: number;
  predicted_label?: string;
}

export interface SequenceClassificationResponse {
  results: SequenceClassificationResult[];
  model_id: string;
  metadata?: Record<string, string>;
}

export interface TokenClassification {
  token_info: TokenInfo;
  logits: Float32Array;
  scores: Float32Array;
  label: string;
  /** The top score, as the double whose shortest text is the float32's (formatFloat32). */
  score: number;
}

export interface TokenClassificationResponse {
  results: { tokens: TokenClassification[] }[];
  model_id: string;
  metadata?: Record<string, string>;
}

export type PredictResponse = EmbeddingResponse | SentenceEmbeddingResponse | SequenceClassificationResponse | TokenClassificationResponse;

export interface ModelMetadata {
  model_id: string;
  model_type: ModelType;
  id2label?: Record<string, string>;
  pooling?: Pooling;
  normalize?: boolean;
  quantization?: 'int8';
}

/** One pooled vector per input (`/v1/embeddings`): texts, or token ids taken as the model's input as they are. */
export interface EmbedRequest {
  inputs: (string | readonly number[])[];
  /** Keep the first n components, then scale to unit length (Matryoshka). */
  dimensions?: number;
  /**
   * Scale each vector to unit length (true) or leave it as pooled (false); default: what the model does (and always
   * with `dimensions`). A graph that normalises itself (some sentence_embedding exports) is not undone by false.
   */
  normalize?: boolean;
}

export interface EmbedResult {
  model_id: string;
  vectors: Float32Array[];
  /** Tokens run, special tokens included. */
  promptTokens: number;
}

/** Scores of documents against a query with a cross-encoder (`/v1/rerank`), in the order of the documents. */
export interface RerankRequest {
  query: string;
  documents: string[];
  /** The model's logit of the rerank label instead of its probability (Infinity's and TEI's raw_scores); default false. */
  raw?: boolean;
}

export interface RerankResult {
  model_id: string;
  scores: number[];
  promptTokens: number;
}

/** Texts to tokenize as the model's tokenizer does (TEI's `/tokenize`), not truncated. */
export interface TokenizeRequest {
  inputs: string[];
  /** With the special tokens the post-processor adds ([CLS], [SEP], ...); false: the text's own tokens only. */
  addSpecialTokens: boolean;
}

/** One token of a tokenized text; start and end are code-point offsets into the text (none for special tokens). */
export interface TokenSpan {
  id: number;
  token: string;
  special: boolean;
  start: number | null;
  end: number | null;
}

/** Token ids back to text (TEI's `/decode`). */
export interface DecodeRequest {
  ids: (readonly number[])[];
  /** Leave out special tokens ([CLS], [PAD], ...). */
  skipSpecialTokens: boolean;
}

/** The limits a request is held to and how runs are formed, as a server reports them (TEI's `/info`). */
export interface ServingLimits {
  /** The model's maximum length in tokens, special tokens included; longer inputs are truncated. */
  maxInputLength: number;
  /** Most inputs one request may hold. */
  maxRequestInputs: number;
  /** Largest padded size of one onnxruntime run, in tokens. */
  maxBatchTokens: number;
  /** Most sequences in one run; null: only maxBatchTokens bounds a run. */
  maxBatchSequences: number | null;
  /** Threads that tokenize large requests (0: on the event loop, in slices). */
  tokenizerThreads: number;
}
