/**
 * JSON schemas of the image models' bodies that more than one front end describes (the MCP tool, the OpenAPI
 * document): each model type's option beside the images, and its /predict response. Plain JSON schema that OpenAPI
 * 3.0 reads too (no `const`, no type lists).
 */
import type { ImageModelType } from './config.ts';

const metadata = { type: 'object', additionalProperties: { type: 'string' }, description: 'Free-form string pairs, echoed in the response.' } as const;

/** The option each model type takes beside its images. */
export const IMAGE_OPTION_SCHEMAS = {
  image_classification: { top_k: { type: 'integer', minimum: 1, description: 'Keep the best k labels of each image (default: all).' } },
  image_embedding: { normalize: { type: 'boolean', description: "Scale each vector to unit length (default: the model's setting)." } },
} as const satisfies Record<ImageModelType, object>;

export const IMAGE_METADATA_SCHEMA = metadata;

const response = (items: object, description: string) =>
  ({
    type: 'object',
    required: ['results', 'model_id'],
    properties: { results: { type: 'array', description, items }, model_id: { type: 'string' }, metadata },
  }) as const;

/** /predict's response of each image model type (image-pipeline.ts ImagePredictResponse). */
export const IMAGE_RESPONSE_SCHEMAS = {
  image_classification: response(
    {
      type: 'object',
      required: ['labels'],
      properties: {
        labels: {
          type: 'array',
          description: 'Labels with softmax scores, best first (top_k of them when asked).',
          items: { type: 'object', required: ['label', 'score'], properties: { label: { type: 'string' }, score: { type: 'number' } } },
        },
      },
    },
    'One result per image, in order.',
  ),
  image_embedding: response(
    { type: 'object', required: ['embedding'], properties: { embedding: { type: 'array', items: { type: 'number' } } } },
    'One vector per image, in order.',
  ),
} as const satisfies Record<ImageModelType, object>;
