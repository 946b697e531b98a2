/**
 * The request of an image classification model, as `POST /predict` takes it in JSON: `inputs`, each image's bytes in
 * base64 or as a data URL (`data:image/png;base64,…`), with `top_k` and `metadata` (docs/image-models.md). The
 * multipart form and `infer` hand bytes directly (ImagePipeline.classify). Every problem is an InputError that names
 * the field, and the input by its index.
 */
import { InputError } from './errors.ts';

export interface ImageClassificationRequest {
  images: Uint8Array[];
  /** Labels per image, best first; absent: every label. */
  topK?: number;
  metadata?: Record<string, string>;
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
export function parseImageClassificationBody(body: unknown, maxInputs: number): ImageClassificationRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new InputError('request body must be a JSON object');
  const { inputs, top_k: topK, metadata, ...rest } = body as Record<string, unknown>;
  const extra = Object.keys(rest)[0];
  if (extra !== undefined) throw new InputError(`unknown field "${extra}"`, { field: extra });
  if (inputs === undefined) throw new InputError('missing required field "inputs"', { field: 'inputs' });
  if (!Array.isArray(inputs)) throw new InputError('inputs must be a list of images (base64 strings or data URLs)', { field: 'inputs' });
  if (inputs.length === 0) throw new InputError('inputs must not be empty', { field: 'inputs' });
  checkImageCount(inputs.length, maxInputs, 'inputs');
  const images = inputs.map((input, index) => {
    if (typeof input !== 'string') throw new InputError(`inputs[${index}] must be a string (base64 or a data URL)`, { field: 'inputs' });
    return imageBytesOf(input, index);
  });
  return { images, ...checkTopK(topK), ...checkMetadata(metadata) };
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
