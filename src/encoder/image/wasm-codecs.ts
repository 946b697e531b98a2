/**
 * The WebAssembly decoders of PNG, JPEG and WebP (@jsquash: the Rust png crate, MozJPEG's libjpeg-turbo decoder,
 * libwebp), compiled once per thread. The same three .wasm files serve every target (docs/decisions.md, "Image
 * decoding"): a codec fault is a WebAssembly trap, which is an error here and never a crash of the process.
 */
import jpegDecode, { init as initJpeg } from '@jsquash/jpeg/decode.js';
import { decode as pngDecode, init as initPng } from '@jsquash/png/decode.js';
import webpDecode, { init as initWebp } from '@jsquash/webp/decode.js';

export type WasmCodec = 'jpeg' | 'png' | 'webp';

/** Each codec's .wasm file in its npm package; the executable carries the same files as assets. */
export const WASM_CODEC_FILES: Record<WasmCodec, string> = {
  jpeg: '@jsquash/jpeg/codec/dec/mozjpeg_dec.wasm',
  png: '@jsquash/png/codec/pkg/squoosh_png_bg.wasm',
  webp: '@jsquash/webp/codec/dec/webp_dec.wasm',
};

/**
 * Where the .wasm bytes come from: node_modules when running from source (installed-codecs.ts), the SEA assets in the
 * single executable.
 */
export type WasmSource = (codec: WasmCodec) => Promise<Uint8Array> | Uint8Array;

/** Decoded RGBA, as each codec gives it: 8-bit, or 16-bit from `png16`. */
export interface RgbaPixels {
  width: number;
  height: number;
  data: Uint8Array | Uint8ClampedArray | Uint16Array;
}

/** One decoder per codec, and `png16`, which keeps 16-bit samples. */
export type WasmDecoders = Record<WasmCodec | 'png16', (bytes: Uint8Array) => Promise<RgbaPixels>>;

let loading: Promise<WasmDecoders> | null = null;

/**
 * What libjpeg and libwebp printed during the current decode (warnings such as "Corrupt JPEG data: bad Huffman code",
 * or the fatal error before a failure): kept off stderr, where every bad upload would land, and put into the error.
 */
let codecMessages: string[] = [];
/** Decodes one at a time (a thread runs one WebAssembly call at a time anyway), so that messages stay with theirs. */
let previous: Promise<unknown> = Promise.resolve();

function decodeQuietly(decode: () => Promise<RgbaPixels | null | undefined>): Promise<RgbaPixels> {
  const run = async () => {
    codecMessages = [];
    try {
      const result = await decode();
      if (!result) throw new Error('the decoder gave no image');
      return result;
    } catch (error) {
      const printed = codecMessages.join('; ');
      throw new Error(printed || (error instanceof Error ? error.message : String(error)), { cause: error });
    }
  };
  const result = previous.then(run, run);
  previous = result.catch(() => undefined);
  return result;
}

/** The decoders, compiled at the first call of this thread (~10 ms) from `source`; later calls share them. */
export function wasmDecoders(source: WasmSource): Promise<WasmDecoders> {
  loading ??= (async () => {
    const [jpeg, png, webp] = await Promise.all((['jpeg', 'png', 'webp'] as const).map(async (codec) => source(codec)));
    // emscripten's modules take the bytes as `wasmBinary` (else they would fetch the file); wasm-bindgen's as they are
    const collect = (text: string) => void codecMessages.push(text);
    const binary = (bytes: Uint8Array) => ({ wasmBinary: bytes, print: collect, printErr: collect }) as Parameters<typeof initJpeg>[0];
    await Promise.all([initJpeg(binary(jpeg)), initPng(png), initWebp(binary(webp))]);
    return {
      jpeg: (bytes) => decodeQuietly(() => jpegDecode(bytes as unknown as ArrayBuffer)),
      png: (bytes) => decodeQuietly(() => pngDecode(bytes as unknown as ArrayBuffer)),
      png16: (bytes) => decodeQuietly(() => pngDecode(bytes as unknown as ArrayBuffer, { bitDepth: 16 })),
      webp: (bytes) => decodeQuietly(() => webpDecode(bytes as unknown as ArrayBuffer)),
    };
  })();
  loading.catch(() => (loading = null));
  return loading;
}
