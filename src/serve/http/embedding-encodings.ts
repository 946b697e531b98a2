/**
 * Ways the field's APIs carry a vector besides JSON numbers: OpenAI's and Cohere's `base64` (the float32 values,
 * little-endian), and Cohere's packed sign bits `ubinary` and `binary` (defined as sentence-transformers'
 * `quantize_embeddings` and Cohere's documentation define them: one bit per component, set when the component is
 * positive, most significant bit first, the last byte padded with zero bits; `binary` is the same byte minus 128,
 * as a signed value).
 */

/**
 * The float32 bytes of a vector, little-endian, in base64. Every target this program builds for is little-endian,
 * so the array's own bytes are those.
 */
export function float32Base64(vector: Float32Array): string {
  return Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64');
}

/** One bit per component (1: positive), most significant bit first: ceil(n / 8) bytes, 0–255. */
export function ubinaryOf(vector: Float32Array): number[] {
  const bytes = new Array<number>(Math.ceil(vector.length / 8)).fill(0);
  for (let i = 0; i < vector.length; i++) if (vector[i] > 0) bytes[i >> 3] |= 0x80 >> (i & 7);
  return bytes;
}

/** ubinaryOf minus 128: the same bits as signed bytes, -128–127. */
export function binaryOf(vector: Float32Array): number[] {
  return ubinaryOf(vector).map((byte) => byte - 128);
}
