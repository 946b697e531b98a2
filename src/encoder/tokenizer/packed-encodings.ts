/**
 * Encodings as a few typed arrays, to cross from a tokenizer thread to the main thread as transferred buffers: a
 * structured clone of thousands of small number arrays costs the receiving thread about as much as tokenizing them
 * did, and the receiving thread is the event loop the tokenizer thread is there to spare.
 */
import type { Encoding } from './encoder-tokenizer.ts';

export interface PackedEncodings {
  /** Tokens of each encoding, in order. */
  lengths: Int32Array;
  ids: Int32Array;
  /** start, end per token. */
  offsets: Int32Array;
  typeIds: Uint8Array;
  specialTokensMask: Uint8Array;
  attentionMask: Uint8Array;
  /** Token strings, joined; only when the caller needs them (results with one entry per token). */
  tokens: string[] | null;
}

export function packEncodings(encodings: readonly Encoding[], withTokens: boolean): PackedEncodings {
  let total = 0;
  for (const e of encodings) total += e.ids.length;
  const packed: PackedEncodings = {
    lengths: new Int32Array(encodings.length),
    ids: new Int32Array(total),
    offsets: new Int32Array(2 * total),
    typeIds: new Uint8Array(total),
    specialTokensMask: new Uint8Array(total),
    attentionMask: new Uint8Array(total),
    tokens: withTokens ? [] : null,
  };
  let at = 0;
  encodings.forEach((e, index) => {
    const n = e.ids.length;
    packed.lengths[index] = n;
    for (let i = 0; i < n; i++, at++) {
      packed.ids[at] = e.ids[i];
      packed.offsets[2 * at] = e.offsets[i][0];
      packed.offsets[2 * at + 1] = e.offsets[i][1];
      packed.typeIds[at] = e.typeIds[i];
      packed.specialTokensMask[at] = e.specialTokensMask[i];
      packed.attentionMask[at] = e.attentionMask[i];
    }
    if (packed.tokens) for (const token of e.tokens) packed.tokens.push(token);
  });
  return packed;
}

/** The buffers of `packed`, to transfer rather than copy. */
export function transferablesOf(packed: PackedEncodings): ArrayBuffer[] {
  return [packed.lengths, packed.ids, packed.offsets, packed.typeIds, packed.specialTokensMask, packed.attentionMask].map(
    (array) => array.buffer as ArrayBuffer,
  );
}

/** Where each encoding of `packed` starts in its token arrays. */
export function startsOf(packed: PackedEncodings): Int32Array {
  const starts = new Int32Array(packed.lengths.length);
  for (let index = 1; index < starts.length; index++) starts[index] = starts[index - 1] + packed.lengths[index - 1];
  return starts;
}

/** Encoding `index` of `packed`, which starts at token `start`; token strings are empty when none were packed. */
export function unpackEncoding(packed: PackedEncodings, index: number, start: number): Encoding {
  const n = packed.lengths[index];
  const offsets = new Array<[number, number]>(n);
  for (let i = 0; i < n; i++) offsets[i] = [packed.offsets[2 * (start + i)], packed.offsets[2 * (start + i) + 1]];
  return {
    ids: Array.from(packed.ids.subarray(start, start + n)),
    tokens: packed.tokens ? packed.tokens.slice(start, start + n) : new Array<string>(n).fill(''),
    offsets,
    typeIds: Array.from(packed.typeIds.subarray(start, start + n)),
    specialTokensMask: Array.from(packed.specialTokensMask.subarray(start, start + n)),
    attentionMask: Array.from(packed.attentionMask.subarray(start, start + n)),
  };
}
