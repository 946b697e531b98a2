/**
 * The MCP tool of an image classification model (at /mcp, and `mcp`): `run_encoder` takes the images as MCP image
 * content blocks, `{"type": "image", "data": <base64>, "mimeType": "image/png"}` (what a client holds when a user
 * attached a picture, or another tool returned one), with `top_k` or `normalize` and `metadata` as on /predict; its result is the
 * /predict response. A block that is not an image, or whose data does not decode, is an InputError naming it
 * (`images[i]`), which MCP answers as INVALID_REQUEST.
 */
import { InputError } from '../../encoder/errors.ts';
import type { ImagePipeline } from '../../encoder/image-pipeline.ts';
import { checkImageCount, imageBytesOf, imageRequestOptions, type ImageRequest } from '../../encoder/image-requests.ts';
import type { McpToolModel } from './mcp-server.ts';
import { IMAGE_METADATA_SCHEMA, IMAGE_OPTION_SCHEMAS, IMAGE_RESPONSE_SCHEMAS } from '../../encoder/image-schemas.ts';

const IMAGES_FIELD = 'images';

const INPUT_SCHEMA = {
  type: 'object',
  required: [IMAGES_FIELD],
  additionalProperties: false,
  properties: {
    [IMAGES_FIELD]: {
      type: 'array',
      description: 'The images to classify, as MCP image content blocks; one result per image, in order.',
      minItems: 1,
      items: {
        type: 'object',
        required: ['type', 'data'],
        properties: {
          type: { const: 'image' },
          data: { type: 'string', description: "The image's bytes in base64 (PNG, JPEG, WebP or GIF)." },
          mimeType: { type: 'string' },
        },
      },
    },
    metadata: IMAGE_METADATA_SCHEMA,
  },
} as const;

export function imageToolModel(pipeline: ImagePipeline): McpToolModel {
  const { modelType } = pipeline;
  const embedding = modelType === 'image_embedding';
  return {
    metadata: () => pipeline.metadata(),
    description: embedding
      ? 'Embeds each image (MCP image content blocks: type "image", base64 data, mimeType): one vector per image, in ' +
        "order, at unit length when normalize (default: the model's setting)."
      : 'Classifies each image (MCP image content blocks: type "image", base64 data, mimeType): its labels with ' +
        'softmax scores, best first, top_k of them when given. One result per image, in order.',
    inputSchema: { ...INPUT_SCHEMA, properties: { ...INPUT_SCHEMA.properties, ...IMAGE_OPTION_SCHEMAS[modelType] } },
    outputSchema: IMAGE_RESPONSE_SCHEMAS[modelType],
    run: (args) => pipeline.predictImages(imageToolRequest(args, pipeline.maxRequestInputs, modelType), IMAGES_FIELD),
  };
}

/** The tool's arguments → the pipeline's request; every problem an InputError naming the field. */
export function imageToolRequest(args: Record<string, unknown>, maxInputs: number, modelType: string): ImageRequest {
  const { [IMAGES_FIELD]: images, ...fields } = args;
  const options = imageRequestOptions(fields, modelType);
  if (!Array.isArray(images)) throw new InputError(`${IMAGES_FIELD} must be a list of image content blocks ({"type": "image", "data": <base64>, "mimeType"})`, { field: IMAGES_FIELD });
  checkImageCount(images.length, maxInputs, IMAGES_FIELD);
  const bytes = images.map((block: unknown, index) => {
    const { type, data, mimeType } = (block ?? {}) as Record<string, unknown>;
    if (type !== 'image' || typeof data !== 'string') {
      throw new InputError(`${IMAGES_FIELD}[${index}] must be an image content block: {"type": "image", "data": <base64>, "mimeType"}`, { field: IMAGES_FIELD });
    }
    if (mimeType !== undefined && (typeof mimeType !== 'string' || !mimeType.toLowerCase().startsWith('image/'))) {
      throw new InputError(`${IMAGES_FIELD}[${index}]: mimeType ${JSON.stringify(mimeType)} is not an image type`, { field: IMAGES_FIELD });
    }
    return imageBytesOf(data, index, IMAGES_FIELD);
  });
  return { images: bytes, ...options };
}
