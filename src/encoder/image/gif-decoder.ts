/**
 * The first frame of a GIF as RGB, as PIL shows it after `convert("RGB")`: the logical screen (enlarged to hold the
 * frame where it reaches beyond) filled with the frame's transparent index (else index 0), the frame's indices drawn
 * at its position, and every index looked up in the frame's palette (local, else global). No codec library decodes GIF among the WebAssembly ones chosen
 * (docs/decisions.md, "Image decoding"), and LZW with its block framing is this small.
 */
import type { RgbImage } from './exif.ts';

export class GifDecodeError extends Error {}

const MAX_CODES = 4096;

export function decodeGifFirstFrame(bytes: Uint8Array): RgbImage {
  const reader = new ByteReader(bytes);
  reader.skip(6);
  const screenWidth = reader.u16();
  const screenHeight = reader.u16();
  const flags = reader.u8();
  reader.skip(2); // background colour index, aspect ratio: PIL's first frame uses neither
  let palette = flags & 0x80 ? reader.bytes(3 << ((flags & 7) + 1)) : null;
  let transparent: number | null = null;
  for (;;) {
    const block = reader.u8();
    if (block === 0x3b) throw new GifDecodeError('the GIF has no image');
    if (block === 0x21) {
      const label = reader.u8();
      const first = reader.subBlocks();
      // graphic control extension: packed flags, delay (2), transparent index
      if (label === 0xf9 && first.length >= 4 && first[0] & 1) transparent = first[3];
      continue;
    }
    if (block !== 0x2c) throw new GifDecodeError(`the GIF is corrupt (block 0x${block.toString(16)})`);
    const left = reader.u16();
    const top = reader.u16();
    const frameWidth = reader.u16();
    const frameHeight = reader.u16();
    const frameFlags = reader.u8();
    if (frameFlags & 0x80) palette = reader.bytes(3 << ((frameFlags & 7) + 1));
    const minCodeSize = reader.u8();
    const width = Math.max(screenWidth, left + frameWidth);
    const height = Math.max(screenHeight, top + frameHeight);
    const indices = decodeLzw(reader.subBlocks(), minCodeSize, frameWidth * frameHeight);
    const screen = new Uint8Array(width * height).fill(transparent ?? 0);
    const rows = frameFlags & 0x40 ? interlacedRows(frameHeight) : Array.from({ length: frameHeight }, (_, row) => row);
    rows.forEach((row, i) => screen.set(indices.subarray(i * frameWidth, (i + 1) * frameWidth), (top + row) * width + left));
    const pixels = new Uint8Array(width * height * 3);
    for (let i = 0; i < screen.length; i++) {
      const entry = screen[i] * 3;
      // no palette: PIL reads the indices as grey levels; an index past the palette's end is black
      if (palette === null) pixels.fill(screen[i], i * 3, i * 3 + 3);
      else if (entry + 2 < palette.length) pixels.set(palette.subarray(entry, entry + 3), i * 3);
    }
    return { width, height, pixels };
  }
}

/** The rows in stored order of an interlaced frame: every 8th from 0, every 8th from 4, every 4th from 2, odd rows. */
function interlacedRows(height: number): number[] {
  const rows: number[] = [];
  for (const [start, step] of [[0, 8], [4, 8], [2, 4], [1, 2]]) for (let row = start; row < height; row += step) rows.push(row);
  return rows;
}

function decodeLzw(data: Uint8Array, minCodeSize: number, pixelCount: number): Uint8Array {
  if (minCodeSize < 2 || minCodeSize > 8) throw new GifDecodeError(`the GIF is corrupt (LZW code size ${minCodeSize})`);
  const clear = 1 << minCodeSize;
  const end = clear + 1;
  // each code is a prefix code plus one last byte; `firstByte` saves walking the chain for the KwKwK case
  const prefix = new Int16Array(MAX_CODES);
  const suffix = new Uint8Array(MAX_CODES);
  const firstByte = new Uint8Array(MAX_CODES);
  const lengths = new Uint16Array(MAX_CODES);
  for (let code = 0; code < clear; code++) {
    suffix[code] = firstByte[code] = code;
    lengths[code] = 1;
  }
  const output = new Uint8Array(pixelCount);
  let written = 0;
  let codeSize = minCodeSize + 1;
  let next = end + 1;
  let previous = -1;
  let bits = 0;
  let bitCount = 0;
  let at = 0;
  while (written < pixelCount) {
    while (bitCount < codeSize) {
      if (at >= data.length) throw new GifDecodeError('the GIF is truncated');
      bits |= data[at++] << bitCount;
      bitCount += 8;
    }
    const code = bits & ((1 << codeSize) - 1);
    bits >>>= codeSize;
    bitCount -= codeSize;
    if (code === clear) {
      codeSize = minCodeSize + 1;
      next = end + 1;
      previous = -1;
      continue;
    }
    if (code === end) break;
    if (previous === -1) {
      if (code >= clear) throw new GifDecodeError('the GIF is corrupt (LZW)');
      output[written++] = code;
      previous = code;
      continue;
    }
    if (code > next || (code === next && next >= MAX_CODES)) throw new GifDecodeError('the GIF is corrupt (LZW)');
    if (next < MAX_CODES) {
      prefix[next] = previous;
      firstByte[next] = firstByte[previous];
      suffix[next] = code === next ? firstByte[previous] : firstByte[code];
      lengths[next] = lengths[previous] + 1;
      next++;
      if (next === 1 << codeSize && codeSize < 12) codeSize++;
    }
    // write the code's bytes back to front; a frame's last code may hold more than the frame has left
    const length = lengths[code];
    let position = written + length - 1;
    for (let walk = code; walk >= 0; walk = walk < clear ? -1 : prefix[walk], position--) {
      if (position < pixelCount) output[position] = suffix[walk];
    }
    written += length;
    previous = code;
  }
  if (written < pixelCount) throw new GifDecodeError('the GIF is truncated');
  return output;
}

class ByteReader {
  private at = 0;
  private readonly data: Uint8Array;
  constructor(data: Uint8Array) {
    this.data = data;
  }
  private need(count: number): void {
    if (this.at + count > this.data.length) throw new GifDecodeError('the GIF is truncated');
  }
  skip(count: number): void {
    this.need(count);
    this.at += count;
  }
  u8(): number {
    this.need(1);
    return this.data[this.at++];
  }
  u16(): number {
    this.need(2);
    const value = this.data[this.at] | (this.data[this.at + 1] << 8);
    this.at += 2;
    return value;
  }
  bytes(count: number): Uint8Array {
    this.need(count);
    this.at += count;
    return this.data.subarray(this.at - count, this.at);
  }
  /** A chain of sub-blocks (length byte, bytes) up to the empty one, joined. */
  subBlocks(): Uint8Array {
    const parts: Uint8Array[] = [];
    for (let size = this.u8(); size > 0; size = this.u8()) parts.push(this.bytes(size));
    return Buffer.concat(parts);
  }
}
