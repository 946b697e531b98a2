/**
 * Every way an image input can be wrong gives an InputError that names the input — empty, over the byte limit, not
 * an image, truncated, corrupt, a header declaring a zero or huge size — and none crashes, hangs or poisons the
 * decoders for the inputs after it. Sample images are made by sharp (a devDependency; the product decodes with
 * the WebAssembly codecs).
 */
import { describe, expect, it, vi } from 'vitest';
import sharp from 'sharp';
import { InputError, type EncoderError } from '../../../src/encoder/errors.ts';
import { installedWasmCodecs } from '../../../src/encoder/image/installed-codecs.ts';
import { decodeImage, DEFAULT_IMAGE_LIMITS, MAX_JPEG_SCANS, type DecodeImageOptions } from '../../../src/encoder/image/decode-image.ts';
import { decodeGifFirstFrame } from '../../../src/encoder/image/gif-decoder.ts';

const WIDTH = 61;
const HEIGHT = 23;

function rgb(width: number, height: number): Buffer {
  const pixels = Buffer.alloc(width * height * 3);
  for (let i = 0; i < pixels.length; i++) pixels[i] = (i * 37 + (i % 7) * 11) & 255;
  return pixels;
}

const source = () => sharp(rgb(WIDTH, HEIGHT), { raw: { width: WIDTH, height: HEIGHT, channels: 3 } });
const SAMPLES = {
  png: await source().png().toBuffer(),
  jpeg: await source().jpeg({ quality: 90 }).toBuffer(),
  progressiveJpeg: await source().jpeg({ quality: 90, progressive: true }).toBuffer(),
  webp: await source().webp({ quality: 80 }).toBuffer(),
  losslessWebp: await source().webp({ lossless: true }).toBuffer(),
  gif: await source().gif().toBuffer(),
};

async function refusal(bytes: Uint8Array, options: Partial<DecodeImageOptions> = {}): Promise<InputError> {
  const error = await decodeImage(bytes, { index: 4, wasm: installedWasmCodecs, ...options }).then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(InputError);
  return error as InputError;
}

/** A copy of `bytes` with big-endian (or little-endian) 16/32-bit values written at `at`. */
function patched(bytes: Uint8Array, writes: [at: number, bits: 16 | 32, value: number, little?: boolean][]): Uint8Array {
  const copy = new Uint8Array(bytes);
  const view = new DataView(copy.buffer);
  for (const [at, bits, value, little] of writes) (bits === 16 ? view.setUint16 : view.setUint32).call(view, at, value, little);
  return copy;
}

/** The start of an extended WebP: the VP8X chunk with `flags` and the canvas size (24-bit fields of size − 1). */
function vp8x(flags: number, width: number, height: number): Uint8Array {
  const bytes = new Uint8Array(40);
  bytes.set(new TextEncoder().encode('RIFF\0\0\0\0WEBPVP8X'));
  bytes.set([10, 0, 0, 0, flags, 0, 0, 0], 16);
  for (const [at, value] of [[24, width - 1], [27, height - 1]]) bytes.set([value & 255, (value >> 8) & 255, value >> 16], at);
  return bytes;
}

function jpegStartOfFrame(bytes: Uint8Array): number {
  for (let at = 2; at < bytes.length; ) {
    const marker = bytes[at + 1];
    if (marker >= 0xc0 && marker <= 0xc2) return at + 4;
    at += 2 + ((bytes[at + 2] << 8) | bytes[at + 3]);
  }
  throw new Error('no SOF');
}

describe('decodeImage', () => {
  it('decodes every sample format at its size', async () => {
    for (const [name, bytes] of Object.entries(SAMPLES)) {
      const image = await decodeImage(bytes, { index: 0, wasm: installedWasmCodecs });
      expect([name, image.width, image.height, image.pixels.length]).toEqual([name, WIDTH, HEIGHT, WIDTH * HEIGHT * 3]);
    }
  });

  it('refuses an empty input, naming it and its field', async () => {
    const error = await refusal(new Uint8Array(0), { field: 'input' });
    expect(error.message).toBe('Invalid input: input[4]: the image is empty (0 bytes)');
    expect(error.field).toBe('input');
  });

  it('refuses inputs that are not images', async () => {
    for (const text of ['hello world', '<html><body>', '%PDF-1.7\n', 'RIFF\0\0\0\0WAVEfmt ', 'GIF88a']) {
      const error = await refusal(new TextEncoder().encode(text));
      expect(error.reason).toBe('inputs[4]: not a PNG, JPEG, WebP or GIF image');
    }
  });

  it('refuses an input over the byte limit before reading it', async () => {
    const error = await refusal(SAMPLES.png, { limits: { ...DEFAULT_IMAGE_LIMITS, maxBytes: 100 } });
    expect(error.reason).toBe(`inputs[4]: the image is ${SAMPLES.png.length} bytes, more than the limit of 100`);
  });

  it('refuses headers that declare a huge image (decompression bombs) before decoding, quickly', async () => {
    const sof = jpegStartOfFrame(SAMPLES.jpeg);
    const bombs = {
      png: patched(SAMPLES.png, [
        [16, 32, 100_000],
        [20, 32, 100_000],
      ]),
      jpeg: patched(SAMPLES.jpeg, [
        [sof + 1, 16, 65_000],
        [sof + 3, 16, 65_000],
      ]),
      webp: vp8x(0, 16_384, 16_384),
      gif: patched(SAMPLES.gif, [
        [6, 16, 65_535, true],
        [8, 16, 65_535, true],
      ]),
    };
    const started = performance.now();
    for (const [format, bytes] of Object.entries(bombs)) {
      const error = await refusal(bytes);
      expect([format, error.reason]).toEqual([format, expect.stringMatching(new RegExp(`^inputs\\[4\\]: the ${format.toUpperCase()} image is \\d+×\\d+ \\(\\d+ pixels\\), more than the limit of 40000000 pixels$`))]);
    }
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('applies a smaller pixel limit to a real image', async () => {
    const error = await refusal(SAMPLES.webp, { limits: { ...DEFAULT_IMAGE_LIMITS, maxPixels: 1000 } });
    expect(error.reason).toBe(`inputs[4]: the WEBP image is ${WIDTH}×${HEIGHT} (${WIDTH * HEIGHT} pixels), more than the limit of 1000 pixels`);
  });

  it('refuses a header that declares a zero width or height', async () => {
    expect((await refusal(patched(SAMPLES.png, [[16, 32, 0]]))).reason).toBe(`inputs[4]: the PNG header declares a 0×${HEIGHT} image`);
    const sof = jpegStartOfFrame(SAMPLES.jpeg);
    expect((await refusal(patched(SAMPLES.jpeg, [[sof + 1, 16, 0]]))).reason).toBe(`inputs[4]: the JPEG header declares a ${WIDTH}×0 image`);
  });

  it('refuses truncated images of every format, cut anywhere', async () => {
    for (const [name, bytes] of Object.entries(SAMPLES)) {
      for (const fraction of [0.01, 0.1, 0.3, 0.6, 0.9]) {
        const cut = Math.max(1, Math.floor(bytes.length * fraction));
        const error = await refusal(bytes.subarray(0, cut));
        expect([name, cut, error.reason]).toEqual([name, cut, expect.stringMatching(/^inputs\[4\]: .*(truncated|corrupt|not a PNG)/)]);
      }
    }
  });

  it('refuses a JPEG cut inside its scan, which libjpeg alone would fill with grey', async () => {
    const cut = SAMPLES.jpeg.subarray(0, SAMPLES.jpeg.length - 40);
    expect((await refusal(cut)).reason).toBe('inputs[4]: the JPEG data is corrupt or truncated (no end-of-image marker)');
  });

  it("says what libjpeg found wrong, and decodes concurrent inputs each with its own outcome", async () => {
    const dht = SAMPLES.jpeg.indexOf(Buffer.from([0xff, 0xc4]));
    const bogus = new Uint8Array(SAMPLES.jpeg);
    bogus.fill(0xff, dht + 5, dht + 21); // every code-length count 255: more codes than a Huffman table can hold
    const results = await Promise.allSettled([SAMPLES.jpeg, bogus, SAMPLES.png, bogus].map((bytes, index) => decodeImage(bytes, { index, wasm: installedWasmCodecs })));
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected']);
    for (const index of [1, 3]) {
      expect(((results[index] as PromiseRejectedResult).reason as InputError).reason).toBe(`inputs[${index}]: the JPEG data is corrupt or truncated (Bogus Huffman table definition)`);
    }
  });

  it('refuses a JPEG of more scans than the limit (each scan is a pass over the picture), before decoding', async () => {
    const scan = [0xff, 0xda, 0, 8, 1, 1, 0, 0, 0x3f, 0, 0x12, 0x34]; // a start of scan and two bytes of its data
    const end = SAMPLES.progressiveJpeg.length - 2;
    const many = (count: number) => Buffer.concat([SAMPLES.progressiveJpeg.subarray(0, end), Buffer.from(Array.from({ length: count }, () => scan).flat()), SAMPLES.progressiveJpeg.subarray(end)]);
    const bytes = SAMPLES.progressiveJpeg;
    const progressiveScans = bytes.filter((byte, at) => byte === 0xff && bytes[at + 1] === 0xda).length; // FF DA: start of scan
    expect(progressiveScans).toBeGreaterThan(1);
    expect((await refusal(many(MAX_JPEG_SCANS + 1 - progressiveScans))).reason).toBe(`inputs[4]: the JPEG data has ${MAX_JPEG_SCANS + 1} scans, more than the limit of ${MAX_JPEG_SCANS}`);
  });

  it('refuses a CMYK JPEG plainly, before decoding', async () => {
    const cmyk = await source().toColourspace('cmyk').jpeg().toBuffer();
    expect((await refusal(cmyk)).reason).toBe('inputs[4]: a CMYK JPEG (4 colour components), which is not supported: convert it to RGB');
  });

  it('refuses an animated WebP plainly, before decoding', async () => {
    const animated = vp8x(0x02, WIDTH, HEIGHT); // an ANIM and ANMF chunks would follow
    expect((await refusal(animated)).reason).toBe('inputs[4]: an animated WebP, which is not supported: send a still image or its first frame');
  });

  it('fails with an InternalError, not a refusal of the input, when the codecs cannot be loaded', async () => {
    vi.resetModules(); // fresh module state: the codecs this file already loaded are not reused
    const fresh = await import('../../../src/encoder/image/decode-image.ts');
    const missing = () => Promise.reject(new Error('ENOENT: no such file, mozjpeg_dec.wasm'));
    const error = (await fresh.decodeImage(SAMPLES.jpeg, { index: 0, wasm: missing }).catch((caught: unknown) => caught)) as EncoderError;
    expect([error.kind, error.message]).toEqual(['internal', 'the image codecs could not be loaded: ENOENT: no such file, mozjpeg_dec.wasm']);
    // input faults are still found first, without the codecs
    await expect(fresh.decodeImage(new Uint8Array(0), { index: 0, wasm: missing })).rejects.toThrow('the image is empty');
  });

  it('refuses a JPEG whose frame header segment has a wrong length (its later segments are unreadable), as the input\'s fault', async () => {
    const sof = jpegStartOfFrame(SAMPLES.jpeg);
    const error = await refusal(patched(SAMPLES.jpeg, [[sof - 2, 16, 9]]));
    expect(error.reason).toBe('inputs[4]: the JPEG data is corrupt (no marker where one must be)');
  });

  it('refuses a PNG whose data does not match its header', async () => {
    const error = await refusal(patched(SAMPLES.png, [[16, 32, WIDTH + 1]]));
    expect(error.reason).toMatch(/^inputs\[4\]: the PNG data is corrupt/);
  });

  it('survives random damage: each damaged input decodes or is an InputError, and the decoders keep working', async () => {
    let state = 0x9e3779b9;
    const next = () => ((state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32);
    const outcomes = { decoded: 0, refused: 0 };
    for (const [name, bytes] of Object.entries(SAMPLES)) {
      for (let trial = 0; trial < 40; trial++) {
        const damaged = new Uint8Array(bytes);
        for (let flips = 1 + Math.floor(next() * 8); flips > 0; flips--) damaged[Math.floor(next() * damaged.length)] = Math.floor(next() * 256);
        const result = await decodeImage(damaged, { index: trial, wasm: installedWasmCodecs }).then(
          (image) => image,
          (error: unknown) => error,
        );
        if (result instanceof InputError) outcomes.refused++;
        else {
          expect([name, trial, result]).toEqual([name, trial, expect.objectContaining({ pixels: expect.any(Uint8Array) })]);
          outcomes.decoded++;
        }
      }
      // a trap in a codec must not leave it unusable for the next request
      expect((await decodeImage(bytes, { index: 0, wasm: installedWasmCodecs })).width).toBe(WIDTH);
    }
    expect(outcomes.refused).toBeGreaterThan(0);
  });

  it('reads the orientation from a JPEG EXIF block and shows the image turned', async () => {
    const turned = await sharp(rgb(WIDTH, HEIGHT), { raw: { width: WIDTH, height: HEIGHT, channels: 3 } })
      .jpeg({ quality: 90 })
      .withMetadata({ orientation: 6 })
      .toBuffer();
    const image = await decodeImage(turned, { index: 0, wasm: installedWasmCodecs });
    expect([image.width, image.height]).toEqual([HEIGHT, WIDTH]);
  });

  it('ignores an EXIF block it cannot read (orientation is advisory)', async () => {
    const app1 = new Uint8Array([0xff, 0xe1, 0, 12, ...new TextEncoder().encode('Exif\0\0'), 0x4d, 0x4d, 0, 0x2a]);
    const withBadExif = Buffer.concat([SAMPLES.jpeg.subarray(0, 2), app1, SAMPLES.jpeg.subarray(2)]);
    const image = await decodeImage(withBadExif, { index: 0, wasm: installedWasmCodecs });
    expect([image.width, image.height]).toEqual([WIDTH, HEIGHT]);
  });
});

describe('decodeGifFirstFrame', () => {
  // a 2×2 GIF: global palette [black, white], one frame, pixels 0 1 / 1 0 (LZW min code size 2)
  const gif = new Uint8Array([
    ...new TextEncoder().encode('GIF89a'), 2, 0, 2, 0, 0x80, 0, 0,
    0, 0, 0, 255, 255, 255,
    0x2c, 0, 0, 0, 0, 2, 0, 2, 0, 0,
    2, 3, 0x44, 0x02, 0x05, 0, 0x3b,
  ]);

  it('decodes a hand-made frame through the palette', () => {
    const image = decodeGifFirstFrame(gif);
    expect([image.width, image.height, [...image.pixels]]).toEqual([2, 2, [0, 0, 0, 255, 255, 255, 255, 255, 255, 0, 0, 0]]);
  });

  it('enlarges the screen to hold a frame that reaches beyond it, as PIL does', () => {
    const shifted = new Uint8Array(gif);
    shifted.set([1, 0, 1, 0], 20); // the frame at (1, 1): PIL opens this as 3×3
    const image = decodeGifFirstFrame(shifted);
    expect([image.width, image.height, [...image.pixels].filter((_, i) => i % 3 === 0)]).toEqual([3, 3, [0, 0, 0, 0, 0, 255, 0, 255, 0]]);
  });

  it('refuses, before decoding, a small screen whose first frame declares a huge size', async () => {
    const huge = new Uint8Array(gif);
    huge.set([0xff, 0xff, 0xff, 0xff], 24); // frame 65535 × 65535
    const error = await decodeImage(huge, { index: 1, wasm: installedWasmCodecs }).catch((caught: unknown) => caught);
    expect((error as InputError).reason).toBe('inputs[1]: the GIF image is 65535×65535 (4294836225 pixels), more than the limit of 40000000 pixels');
  });

  it('refuses a GIF with no image, or cut inside its data', () => {
    const noImage = new Uint8Array([...gif.subarray(0, 19), 0x3b]);
    expect(() => decodeGifFirstFrame(noImage)).toThrow('the GIF has no image');
    expect(() => decodeGifFirstFrame(gif.subarray(0, 30))).toThrow('the GIF is truncated');
  });
});
