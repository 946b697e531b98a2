/**
 * The EXIF orientation tag (0x0112) from a TIFF-structured EXIF block, and its application to RGB pixels as PIL's
 * ImageOps.exif_transpose does (which is what HuggingFace's load_image calls before a processor sees the image).
 */

/** 1 = as stored; 2–8 the flips and rotations of the EXIF specification. */
export type Orientation = 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8;

const ORIENTATION_TAG = 0x0112;

/** The orientation in the first IFD, or 1 when the block has none or cannot be read (EXIF is advisory). */
export function exifOrientation(tiff: Uint8Array): Orientation {
  if (tiff.length < 8) return 1;
  const order = String.fromCharCode(tiff[0], tiff[1]);
  if (order !== 'II' && order !== 'MM') return 1;
  const little = order === 'II';
  const data = new DataView(tiff.buffer, tiff.byteOffset, tiff.byteLength);
  if (data.getUint16(2, little) !== 42) return 1;
  const ifd = data.getUint32(4, little);
  if (ifd + 2 > tiff.length) return 1;
  const entries = data.getUint16(ifd, little);
  for (let i = 0; i < entries; i++) {
    const entry = ifd + 2 + i * 12;
    if (entry + 12 > tiff.length) return 1;
    if (data.getUint16(entry, little) !== ORIENTATION_TAG) continue;
    // type SHORT (3): the value sits in the entry's first two value bytes
    const value = data.getUint16(entry + 2, little) === 3 ? data.getUint16(entry + 8, little) : 0;
    return value >= 1 && value <= 8 ? (value as Orientation) : 1;
  }
  return 1;
}

export interface RgbImage {
  width: number;
  height: number;
  /** Row-major RGB, 3 bytes a pixel. */
  pixels: Uint8Array;
}

/**
 * The image as it should be seen: PIL's transpose for each orientation (2 FLIP_LEFT_RIGHT, 3 ROTATE_180,
 * 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270, 7 TRANSVERSE, 8 ROTATE_90). Each maps an output pixel (x, y) to the
 * stored pixel it shows.
 */
export function applyOrientation(image: RgbImage, orientation: Orientation): RgbImage {
  if (orientation === 1) return image;
  const { width: w, height: h } = image;
  const swaps = orientation >= 5;
  const width = swaps ? h : w;
  const height = swaps ? w : h;
  const source: (x: number, y: number) => number = {
    2: (x: number, y: number) => y * w + (w - 1 - x),
    3: (x: number, y: number) => (h - 1 - y) * w + (w - 1 - x),
    4: (x: number, y: number) => (h - 1 - y) * w + x,
    5: (x: number, y: number) => x * w + y,
    6: (x: number, y: number) => (h - 1 - x) * w + y,
    7: (x: number, y: number) => (h - 1 - x) * w + (w - 1 - y),
    8: (x: number, y: number) => x * w + (w - 1 - y),
  }[orientation];
  const pixels = new Uint8Array(width * height * 3);
  for (let y = 0, out = 0; y < height; y++) {
    for (let x = 0; x < width; x++, out += 3) {
      const from = source(x, y) * 3;
      pixels[out] = image.pixels[from];
      pixels[out + 1] = image.pixels[from + 1];
      pixels[out + 2] = image.pixels[from + 2];
    }
  }
  return { width, height, pixels };
}
