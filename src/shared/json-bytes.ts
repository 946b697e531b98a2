/** JSON.parse of UTF-8 bytes without copying them first; invalid UTF-8 becomes U+FFFD, as a stream decoder makes it. */
export function parseJsonBytes(bytes: Uint8Array): unknown {
  return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
}
