/**
 * The request of an image model, as `POST /predict` takes it in JSON: `inputs`, each image's bytes in base64 or as a
 * data URL (`data:image/png;base64,…`), with `metadata`, and `top_k` (image_classification) or `normalize`
 * (image_embedding) (docs/image-models.md). The multipart form, gRPC, MCP and `infer` hand bytes directly
 * (ImagePipeline.predictImages). Every problem is an InputError that names the field, and the input by its index.
 */
import { InputError } from './errors.ts';

export interface ImageRequest {
  images: Uint8Array[];
  /** image_classification: labels per image, best first; absent: every label. */
  topK?: number;
  /** image_embedding: unit-length vectors; absent: the model's setting. */
  normalize?: boolean;
  metadata?: Record<string, string>;
}

/** The options a request may carry besides its images, by model type. */
export const IMAGE_REQUEST_OPTIONS: Readonly<Record<string, readonly string[]>> = { image_classification: ['top_k', 'metadata'], image_embedding: ['normalize', 'metadata'] };

/** `top_k`, `normalize` and `metadata` of a body, checked; a key the model type does not take is an InputError. */
export function imageRequestOptions(fields: Record<string, unknown>, modelType: string): Pick<ImageRequest, 'topK' | 'normalize' | 'metadata'> {
  const allowed = IMAGE_REQUEST_OPTIONS[modelType] ?? ['metadata'];
  const extra = Object.keys(fields).find((key) => !allowed.includes(key));
  if (extra !== undefined) throw new InputError(`unknown field "${extra}"${['top_k', 'normalize'].includes(extra) ? ` (not taken by ${modelType} models)` : ''}`, { field: extra });
  const { top_k: topK, normalize, metadata } = fields;
  if (normalize !== undefined && normalize !== null && typeof normalize !== 'boolean') throw new InputError(`normalize must be true or false, got ${JSON.stringify(normalize)}`, { field: 'normalize' });
  return { ...checkTopK(topK), ...(typeof normalize === 'boolean' ? { normalize } : {}), ...checkMetadata(metadata) };
}

const DATA_URL = /^data:([^,;]*)((?:;[^,;]*)*?);base64,/i;
/** Standard or URL-safe base64, padded or not, whitespace (line breaks of MIME encoders) allowed. */
const BASE64 = /^[A-Za-z0-9+/\-_\s]*={0,2}\s*$/;

/** One base64 string or data URL → bytes. */
export function imageBytesOf(text: string, index: number, field = 'inputs'): Uint8Array {
  let payload = text;
  const url = DATA_URL.exec(text);
  if (url) {
    const mediaType = url[1].toLowerCase();
    if (mediaType !== '' && !mediaType.startsWith('image/')) throw new InputError(`${field}[${index}]: a data URL of ${mediaType}, not of an image`, { field });
    payload = text.slice(url[0].length);
  } else if (text.startsWith('data:')) {
    throw new InputError(`${field}[${index}]: a data URL must be base64 (data:image/…;base64,…)`, { field });
  }
  if (!BASE64.test(payload)) throw new InputError(`${field}[${index}]: not base64 (an image's bytes in base64, or a data URL)`, { field });
  return new Uint8Array(Buffer.from(payload, 'base64'));
}

/** The JSON body → the request; `maxInputs` bounds the images of one request. */
export function parseImageBody(body: unknown, maxInputs: number, modelType: string): ImageRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new InputError('request body must be a JSON object');
  const { inputs, ...fields } = body as Record<string, unknown>;
  const options = imageRequestOptions(fields, modelType);
  if (inputs === undefined) throw new InputError('missing required field "inputs"', { field: 'inputs' });
  if (!Array.isArray(inputs)) throw new InputError('inputs must be a list of images (base64 strings or data URLs)', { field: 'inputs' });
  if (inputs.length === 0) throw new InputError('inputs must not be empty', { field: 'inputs' });
  checkImageCount(inputs.length, maxInputs, 'inputs');
  const images = inputs.map((input, index) => {
    if (typeof input !== 'string') throw new InputError(`inputs[${index}] must be a string (base64 or a data URL)`, { field: 'inputs' });
    return imageBytesOf(input, index);
  });
  return { images, ...options };
}

/** At least one image, at most `maxInputs`. */
export function checkImageCount(count: number, maxInputs: number, field: string): void {
  if (count === 0) throw new InputError(`${field} must not be empty`, { field });
  if (count > maxInputs) throw new InputError(`the request holds ${count} inputs, more than the limit of ${maxInputs} inputs per request; send fewer inputs per request`, { field });
}

export function checkTopK(topK: unknown): { topK?: number } {
  if (topK === undefined || topK === null) return {};
  if (typeof topK !== 'number' || !Number.isInteger(topK) || topK < 1) throw new InputError(`top_k must be an integer of at least 1, got ${JSON.stringify(topK)}`, { field: 'top_k' });
  return { topK };
}

export function checkMetadata(metadata: unknown): { metadata?: Record<string, string> } {
  if (metadata === undefined) return {};
  const valid = metadata !== null && typeof metadata === 'object' && !Array.isArray(metadata) && Object.values(metadata).every((value) => typeof value === 'string');
  if (!valid) throw new InputError('metadata must be an object of strings', { field: 'metadata' });
  return { metadata: metadata as Record<string, string> };
}
