import type { ModelType } from './config.ts';

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

const classificationRequestSchema = {
  type: 'object',
  required: ['inputs'],
  additionalProperties: false,
  properties: { inputs: inputsSchema, metadata: metadataSchema },
} as const;

export const REQUEST_SCHEMAS = {
  embedding: {
    type: 'object',
    required: ['inputs', 'normalize'],
    additionalProperties: false,
    properties: {
      inputs: inputsSchema,
      normalize: { type: 'boolean', description: 'true scales every token embedding to unit L2 length.' },
      metadata: metadataSchema,
    },
  },
  sequence_classification: classificationRequestSchema,
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
    model_type: { type: 'string', enum: ['embedding', 'sequence_classification', 'token_classification'] },
    id2label: { type: 'object', additionalProperties: { type: 'string' } },
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
  normalize: boolean;
  metadata?: Record<string, string>;
}

export interface ClassificationRequest {
  inputs: string[];
  metadata?: Record<string, string>;
}

export type PredictRequest = EmbeddingRequest | ClassificationRequest;

export interface EmbeddingResponse {
  results: { embeddings: { embedding: number[]; token_info?: TokenInfo }[] }[];
  model_id: string;
  metadata?: Record<string, string>;
}

export interface SequenceClassificationResult {
  logits: number[];
  scores: number[];
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
  logits: number[];
  scores: number[];
  label: string;
  score: number;
}

export interface TokenClassificationResponse {
  results: { tokens: TokenClassification[] }[];
  model_id: string;
  metadata?: Record<string, string>;
}

export type PredictResponse = EmbeddingResponse | SequenceClassificationResponse | TokenClassificationResponse;

export interface ModelMetadata {
  model_id: string;
  model_type: ModelType;
  id2label?: Record<string, string>;
}
