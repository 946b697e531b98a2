/**
 * Image bytes → RGB pixels as HuggingFace's load_image sees them (PIL: open, ImageOps.exif_transpose,
 * convert("RGB")): alpha dropped, grey and palette images expanded, the EXIF orientation applied. Every way an input
 * can be wrong — empty, too large, not an image, a header declaring too many pixels, corrupt or truncated data — is an
 * InputError naming the input, raised before the decoder allocates for a picture that the limits refuse.
 */
import { InputError, InternalError } from '../errors.ts';
import { applyOrientation, type RgbImage } from './exif.ts';
import { decodeGifFirstFrame } from './gif-decoder.ts';
import { ImageHeaderError, jpegScans, readImageHeader, type ImageHeader } from './image-header.ts';
import { wasmDecoders, type RgbaPixels, type WasmDecoders, type WasmSource } from './wasm-codecs.ts';

export interface ImageLimits {
  /** Width × height that a header may declare (PIL warns from 89 M pixels; a 24 MP camera photo is 6000×4000). */
  maxPixels: number;
  /** Bytes of one encoded image. */
  maxBytes: number;
}

export const DEFAULT_IMAGE_LIMITS: ImageLimits = { maxPixels: 40_000_000, maxBytes: 32 * 2 ** 20 };

/**
 * Scans of one progressive JPEG. Each scan is a pass over the whole picture, so a small file of thousands of tiny
 * scans takes minutes to decode (libjpeg-turbo's tools guard with -maxscans for this reason); encoders write ~10.
 */
export const MAX_JPEG_SCANS = 500;

export interface DecodeImageOptions {
  /** The input's position in its request, named by every error. */
  index: number;
  /** The request field the input came from (`inputs`, `input`, a multipart part name …). */
  field?: string;
  limits?: ImageLimits;
  /** Where the WebAssembly codecs come from (installed-codecs.ts from source, SEA assets in the executable). */
  wasm: WasmSource;
}

export async function decodeImage(bytes: Uint8Array, options: DecodeImageOptions): Promise<RgbImage> {
  const field = options.field ?? 'inputs';
  const limits = options.limits ?? DEFAULT_IMAGE_LIMITS;
  const refuse = (reason: string) => new InputError(`${field}[${options.index}]: ${reason}`, { field });
  if (bytes.length === 0) throw refuse('the image is empty (0 bytes)');
  if (bytes.length > limits.maxBytes) throw refuse(`the image is ${bytes.length} bytes, more than the limit of ${limits.maxBytes}`);
  // what the header readers find wrong is the input's fault
  const readOrRefuse = <T>(read: () => T): T => {
    try {
      return read();
    } catch (error) {
      if (error instanceof ImageHeaderError) throw refuse(error.message);
      throw error;
    }
  };
  const header = readOrRefuse(() => readImageHeader(bytes));
  const { format, width, height } = header;
  if (width * height > limits.maxPixels) {
    throw refuse(`the ${format.toUpperCase()} image is ${width}×${height} (${width * height} pixels), more than the limit of ${limits.maxPixels} pixels`);
  }
  if (format === 'jpeg') {
    // the segments after the frame header, which readImageHeader did not read, may be malformed too
    const { scans, ended } = readOrRefuse(() => jpegScans(bytes));
    if (scans > MAX_JPEG_SCANS) throw refuse(`the JPEG data has ${scans} scans, more than the limit of ${MAX_JPEG_SCANS}`);
    if (!ended) throw refuse('the JPEG data is corrupt or truncated (no end-of-image marker)');
  }
  // a codec that cannot be loaded is this program's fault, not the input's
  const decoders = await wasmDecoders(options.wasm).catch((error: unknown) => {
    throw new InternalError(`the image codecs could not be loaded: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  });
  const decoded = await decodePixels(bytes, header, decoders).catch((error: unknown) => {
    throw refuse(`the ${format.toUpperCase()} data is corrupt or truncated (${error instanceof Error ? error.message : String(error)})`);
  });
  if (decoded.width !== width || decoded.height !== height) {
    throw refuse(`the ${format.toUpperCase()} data is corrupt (its header says ${width}×${height}, its data ${decoded.width}×${decoded.height})`);
  }
  return applyOrientation(decoded, header.orientation);
}

async function decodePixels(bytes: Uint8Array, header: ImageHeader, decoders: WasmDecoders): Promise<RgbImage> {
  if (header.format === 'gif') return decodeGifFirstFrame(bytes);
  return toRgb(await decoders[header.sixteenBitGrey ? 'png16' : header.format](bytes));
}

/** Alpha dropped (PIL's convert("RGB") does not composite); 16-bit samples clipped to 255 as PIL clips its "I" mode. */
function toRgb(rgba: RgbaPixels): RgbImage {
  const count = rgba.width * rgba.height;
  if (rgba.data.length !== count * 4) throw new Error(`the decoder gave ${rgba.data.length} bytes for ${rgba.width}×${rgba.height} RGBA`);
  const pixels = new Uint8Array(count * 3);
  for (let i = 0, j = 0; i < count; i++, j += 4) {
    pixels[i * 3] = Math.min(255, rgba.data[j]);
    pixels[i * 3 + 1] = Math.min(255, rgba.data[j + 1]);
    pixels[i * 3 + 2] = Math.min(255, rgba.data[j + 2]);
  }
  return { width: rgba.width, height: rgba.height, pixels };
}
