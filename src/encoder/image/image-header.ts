/**
 * What an image's first bytes say before any pixel is decoded: its format, its dimensions and its EXIF orientation.
 * The dimensions are checked against the pixel limit from here, so a small file that declares a huge picture (a
 * "decompression bomb") is refused before a decoder allocates for it.
 */
import { exifOrientation, type Orientation } from './exif.ts';

export type ImageFormat = 'png' | 'jpeg' | 'webp' | 'gif';

export interface ImageHeader {
  format: ImageFormat;
  width: number;
  height: number;
  /** EXIF orientation (1 = as stored), applied after decoding as PIL's ImageOps.exif_transpose does. */
  orientation: Orientation;
  /**
   * A PNG of 16-bit grey samples: PIL opens it as 32-bit integers and clips them to 0–255 when converting to RGB,
   * where every other 16-bit PNG keeps the high byte of each sample.
   */
  sixteenBitGrey?: boolean;
}

/** Why a header cannot be read; the caller turns it into an InputError naming the input. */
export class ImageHeaderError extends Error {}

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

function startsWith(bytes: Uint8Array, prefix: readonly number[], at = 0): boolean {
  return bytes.length >= at + prefix.length && prefix.every((byte, i) => bytes[at + i] === byte);
}

function ascii(bytes: Uint8Array, at: number, length: number): string {
  return String.fromCharCode(...bytes.subarray(at, at + length));
}

export function sniffFormat(bytes: Uint8Array): ImageFormat | null {
  if (startsWith(bytes, PNG_SIGNATURE)) return 'png';
  if (startsWith(bytes, [0xff, 0xd8, 0xff])) return 'jpeg';
  if (bytes.length >= 12 && ascii(bytes, 0, 4) === 'RIFF' && ascii(bytes, 8, 4) === 'WEBP') return 'webp';
  if (bytes.length >= 6 && (ascii(bytes, 0, 6) === 'GIF87a' || ascii(bytes, 0, 6) === 'GIF89a')) return 'gif';
  return null;
}

export function readImageHeader(bytes: Uint8Array): ImageHeader {
  const format = sniffFormat(bytes);
  if (format === null) throw new ImageHeaderError('not a PNG, JPEG, WebP or GIF image');
  const header = { png: pngHeader, jpeg: jpegHeader, webp: webpHeader, gif: gifHeader }[format](bytes);
  if (header.width === 0 || header.height === 0) throw new ImageHeaderError(`the ${format.toUpperCase()} header declares a ${header.width}×${header.height} image`);
  return header;
}

const view = (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);

function truncated(format: string): ImageHeaderError {
  return new ImageHeaderError(`the ${format} header is truncated`);
}

/** IHDR first; an eXIf chunk (before IDAT, as the PNG spec requires) carries the orientation. */
function pngHeader(bytes: Uint8Array): ImageHeader {
  if (bytes.length < 33 || ascii(bytes, 12, 4) !== 'IHDR') throw truncated('PNG');
  const data = view(bytes);
  let orientation: Orientation = 1;
  for (let at = 33; at + 8 <= bytes.length; ) {
    const length = data.getUint32(at);
    const type = ascii(bytes, at + 4, 4);
    if (type === 'IDAT' || type === 'IEND') break;
    if (type === 'eXIf' && at + 8 + length <= bytes.length) orientation = exifOrientation(bytes.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  const sixteenBitGrey = bytes[24] === 16 && bytes[25] === 0;
  return { format: 'png', width: data.getUint32(16), height: data.getUint32(20), orientation, ...(sixteenBitGrey ? { sixteenBitGrey } : {}) };
}

interface JpegSegment {
  marker: number;
  /** Where the segment's data starts (after marker and length). */
  data: number;
  /** The data's length. */
  length: number;
}

/** The marker segments up to and including the first start of scan (0xDA), whose entropy-coded data follows. */
function* jpegSegments(bytes: Uint8Array): Generator<JpegSegment> {
  const data = view(bytes);
  let at = 2;
  while (at + 4 <= bytes.length) {
    if (bytes[at] !== 0xff) throw new ImageHeaderError('the JPEG data is corrupt (no marker where one must be)');
    const marker = bytes[at + 1];
    if (marker === 0xff) {
      at++; // fill byte
      continue;
    }
    if (marker === 0xd9) return;
    const length = data.getUint16(at + 2);
    if (length < 2) throw new ImageHeaderError('the JPEG data is corrupt (a segment of length < 2)');
    yield { marker, data: at + 4, length: length - 2 };
    if (marker === 0xda) return;
    at += 2 + length;
  }
}

/** Markers up to the first start of frame (SOFn holds the dimensions); an APP1 "Exif" segment on the way. */
function jpegHeader(bytes: Uint8Array): ImageHeader {
  const data = view(bytes);
  let orientation: Orientation = 1;
  for (const { marker, data: at, length } of jpegSegments(bytes)) {
    const isStartOfFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isStartOfFrame) {
      if (at + 6 > bytes.length) throw truncated('JPEG');
      // libjpeg converts no CMYK or YCCK to RGB (PIL does, with Adobe's inversion): refused plainly rather than as corrupt
      if (bytes[at + 5] === 4) throw new ImageHeaderError('a CMYK JPEG (4 colour components), which is not supported: convert it to RGB');
      return { format: 'jpeg', width: data.getUint16(at + 3), height: data.getUint16(at + 1), orientation };
    }
    if (marker === 0xe1 && orientation === 1 && at + 6 <= bytes.length && ascii(bytes, at, 6) === 'Exif\0\0') {
      orientation = exifOrientation(bytes.subarray(at + 6, Math.min(bytes.length, at + length)));
    }
  }
  throw new ImageHeaderError('the JPEG data has no frame header (truncated or corrupt)');
}

/**
 * The JPEG's scans after the frame header: how many (a progressive JPEG has one per refinement) and whether the data
 * ends with its end-of-image marker. Entropy-coded data escapes every 0xFF, so FF DA and FF D9 after the first start
 * of scan are markers (one inside an EXIF thumbnail comes before it). libjpeg fills a cut scan with grey and only
 * warns; PIL refuses such a file ("image file is truncated").
 */
export function jpegScans(bytes: Uint8Array): { scans: number; ended: boolean } {
  let scan = -1;
  for (const segment of jpegSegments(bytes)) if (segment.marker === 0xda) scan = segment.data + segment.length;
  if (scan < 0) return { scans: 0, ended: false };
  let scans = 1;
  for (let at = scan; at + 1 < bytes.length; at++) {
    if (bytes[at] !== 0xff) continue;
    if (bytes[at + 1] === 0xd9) return { scans, ended: true };
    if (bytes[at + 1] === 0xda) scans++;
  }
  return { scans, ended: false };
}

/** Lossy (VP8), lossless (VP8L) or extended (VP8X, whose EXIF chunk carries the orientation). */
function webpHeader(bytes: Uint8Array): ImageHeader {
  if (bytes.length < 30) throw truncated('WebP');
  const data = view(bytes);
  const chunk = ascii(bytes, 12, 4);
  const payload = 20;
  if (chunk === 'VP8 ') {
    if (!startsWith(bytes, [0x9d, 0x01, 0x2a], payload + 3)) throw new ImageHeaderError('the WebP (VP8) frame header is corrupt');
    return { format: 'webp', width: data.getUint16(payload + 6, true) & 0x3fff, height: data.getUint16(payload + 8, true) & 0x3fff, orientation: 1 };
  }
  if (chunk === 'VP8L') {
    if (bytes[payload] !== 0x2f) throw new ImageHeaderError('the WebP (VP8L) header is corrupt');
    const bits = data.getUint32(payload + 1, true);
    return { format: 'webp', width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1, orientation: 1 };
  }
  if (chunk === 'VP8X') {
    // libwebp's still-image decoder reads no animation (PIL composites the first frame): refused plainly
    if (bytes[payload] & 0x02) throw new ImageHeaderError('an animated WebP, which is not supported: send a still image or its first frame');
    const width = (bytes[payload + 4] | (bytes[payload + 5] << 8) | (bytes[payload + 6] << 16)) + 1;
    const height = (bytes[payload + 7] | (bytes[payload + 8] << 8) | (bytes[payload + 9] << 16)) + 1;
    let orientation: Orientation = 1;
    for (let at = payload + data.getUint32(16, true); at + 8 <= bytes.length; ) {
      const length = data.getUint32(at + 4, true);
      if (ascii(bytes, at, 4) === 'EXIF') {
        const exif = bytes.subarray(at + 8, Math.min(bytes.length, at + 8 + length));
        // some writers keep JPEG's "Exif\0\0" prefix
        orientation = exifOrientation(startsWith(exif, [0x45, 0x78, 0x69, 0x66, 0, 0]) ? exif.subarray(6) : exif);
        break;
      }
      at += 8 + length + (length & 1);
    }
    return { format: 'webp', width, height, orientation };
  }
  throw new ImageHeaderError(`the WebP file starts with an unknown chunk "${chunk}"`);
}

/**
 * PIL's size of a GIF: the logical screen, enlarged to hold the first frame where that frame reaches beyond it (as
 * Pillow's GifImagePlugin does), so that the pixel limit applies to what the decoder allocates.
 */
function gifHeader(bytes: Uint8Array): ImageHeader {
  if (bytes.length < 13) throw truncated('GIF');
  const data = view(bytes);
  let width = data.getUint16(6, true);
  let height = data.getUint16(8, true);
  let at = 13 + (bytes[10] & 0x80 ? 3 << ((bytes[10] & 7) + 1) : 0);
  while (at + 10 <= bytes.length) {
    if (bytes[at] === 0x2c) {
      width = Math.max(width, data.getUint16(at + 1, true) + data.getUint16(at + 5, true));
      height = Math.max(height, data.getUint16(at + 3, true) + data.getUint16(at + 7, true));
      break;
    }
    if (bytes[at] !== 0x21) break; // the decoder says what is wrong
    at += 2;
    while (at < bytes.length && bytes[at] !== 0) at += bytes[at] + 1;
    at++;
  }
  return { format: 'gif', width, height, orientation: 1 };
}
