/**
 * Truncation of one sequence or a pair, as HF's `truncate_encodings` (tokenizers/src/utils/truncation.rs) and
 * `Encoding::truncate` (tokenizer/encoding.rs): right or left, with the overflowing windows a stride makes, applied to
 * the content tokens before the post-processor adds the special ones.
 */
import { InputError } from '../errors.ts';
import type { WorkEncoding } from './post-processors.ts';

/**
 * Content tokens before truncation. `countsMore`: tokenizing stopped inside a long word whose other tokens HF would
 * have counted (encoder-tokenizer.ts), so the sequence is longer than `ids` says: longest_first compares it as longer
 * than any counted sequence.
 */
export interface ContentEncoding extends WorkEncoding {
  countsMore?: boolean;
}

/** Which end of a text loses tokens (HF's TruncationDirection): right keeps the start, left keeps the end. */
export type TruncationDirection = 'right' | 'left';

/** tokenizer.json's names of the directions. */
export const FILE_DIRECTIONS: Readonly<Record<string, TruncationDirection>> = { Right: 'right', Left: 'left' };

/** Which sequence of a pair loses tokens (HF's TruncationStrategy). */
export type TruncationStrategy = 'longest_first' | 'only_first' | 'only_second';

/** tokenizer.json's names of the strategies. */
export const FILE_STRATEGIES: Readonly<Record<string, TruncationStrategy>> = {
  LongestFirst: 'longest_first',
  OnlyFirst: 'only_first',
  OnlySecond: 'only_second',
};

/** Truncation of one sequence to `max` tokens, keeping its start (right) or its end (left); no windows. */
export function truncate(e: WorkEncoding, max: number, direction: TruncationDirection = 'right'): void {
  if (e.ids.length <= max) return;
  const [start, stop] = direction === 'right' ? [0, max] : [e.ids.length - max, e.ids.length];
  e.ids = e.ids.slice(start, stop);
  e.tokens = e.tokens.slice(start, stop);
  e.offsets = e.offsets.slice(start, stop);
  e.typeIds = e.typeIds.slice(start, stop);
  e.specialTokensMask = e.specialTokensMask.slice(start, stop);
  e.attentionMask = e.attentionMask.slice(start, stop);
}

/**
 * The [start, stop) token ranges of HF's `Encoding::truncate(max, stride, direction)` on `length` tokens: windows of
 * `max` tokens, each overlapping the one before by `stride`, from the start (right) or from the end (left); the first is
 * the truncated sequence, the others its overflowing windows. `max` 0 gives no window (the whole sequence overflows).
 * InputError when stride is not below `max`, where HF panics.
 */
export function windowRanges(length: number, max: number, stride: number, direction: TruncationDirection): [number, number][] {
  if (max >= length) return [[0, length]];
  if (max === 0) return [];
  if (stride >= max) {
    throw new InputError(`truncation stride ${stride} must be below the ${max} tokens a window holds besides the special tokens`);
  }
  const step = max - stride;
  const ranges: [number, number][] = [];
  if (direction === 'right') {
    for (let start = 0; ; start += step) {
      const stop = Math.min(start + max, length);
      ranges.push([start, stop]);
      if (stop === length) break;
    }
  } else {
    for (let stop = length; ; stop -= step) {
      const start = Math.max(stop - max, 0);
      ranges.push([start, stop]);
      if (start === 0) break;
    }
  }
  return ranges;
}

/** The tokens [start, stop) of `e`, as a new encoding. */
export function sliceEncoding(e: WorkEncoding, start: number, stop: number): WorkEncoding {
  return {
    ids: e.ids.slice(start, stop),
    tokens: e.tokens.slice(start, stop),
    // copied: the post-processor trims offsets in place, and windows share the tokens of their stride
    offsets: e.offsets.slice(start, stop).map(([a, b]) => [a, b]),
    typeIds: e.typeIds.slice(start, stop),
    specialTokensMask: e.specialTokensMask.slice(start, stop),
    attentionMask: e.attentionMask.slice(start, stop),
  };
}

/** Truncates `e` in place to the first window of `windowRanges` and returns the overflowing ones (HF's order). */
function truncateWithWindows(e: WorkEncoding, max: number, stride: number, direction: TruncationDirection): WorkEncoding[] {
  const ranges = windowRanges(e.ids.length, max, stride, direction);
  if (ranges.length === 0) {
    const whole = sliceEncoding(e, 0, e.ids.length);
    truncate(e, 0);
    return [whole];
  }
  const overflowing = ranges.slice(1).map(([start, stop]) => sliceEncoding(e, start, stop));
  const [start, stop] = ranges[0];
  Object.assign(e, sliceEncoding(e, start, stop));
  return overflowing;
}

/** How a sequence (or pair) is cut: HF's TruncationParams less max_length, which the caller gives in tokens of content. */
export interface TruncationPlan {
  strategy: TruncationStrategy;
  direction: TruncationDirection;
  stride: number;
}

/**
 * How many tokens HF tokenizes of sequence `index` (0 first, 1 second) under a truncation to `maxLength`: its
 * tokenizer stops at the first pre-token that reaches `maxLength` tokens (`tokenize_with_limit`, an early exit),
 * except for the first sequence under only_second. The lengths truncate_encodings then compares are those cut
 * ones, which decides where longest_first puts the odd token when both texts are long.
 */
export function tokenizeLimit(maxLength: number, strategy: TruncationStrategy, index: 0 | 1): number {
  return strategy === 'only_second' && index === 0 ? Infinity : maxLength;
}

/**
 * Truncates the content of `a` (and `b`) in place to `max` tokens in all, `max` being max_length less the special
 * tokens, and returns the overflowing windows of a single sequence (HF's `overflowing`; a pair's are not made). A single
 * sequence is cut at `direction`'s end. A pair: longest_first keeps the shorter text whole when the longer one can give
 * up enough, else cuts both to max / 2, the odd token going to the longer one (the second on a tie); only_first /
 * only_second cut that text alone and fail, as HF does, when it is too short to lose enough. `max` 0 empties both
 * whatever the strategy (HF's first case).
 */
export function truncateEncodings(a: ContentEncoding, b: ContentEncoding | null, max: number, plan: TruncationPlan): WorkEncoding[] {
  const { strategy, direction, stride } = plan;
  if (max === 0) {
    if (b) {
      truncate(a, 0);
      truncate(b, 0);
      return [];
    }
    return truncateWithWindows(a, 0, stride, direction);
  }
  const total = a.ids.length + (b?.ids.length ?? 0);
  if (total <= max) return [];
  const toRemove = total - max;
  if (strategy === 'longest_first') {
    if (b) {
      const [first, second] = longestFirstLengths(countOf(a), countOf(b), max);
      checkStride(a, first, stride);
      checkStride(b, second, stride);
      truncate(a, first, direction);
      truncate(b, second, direction);
      return [];
    }
    return truncateWithWindows(a, max, stride, direction);
  }
  const target = strategy === 'only_first' ? a : b;
  if (!target) {
    throw new InputError(
      `truncation only_second needs a second text, and this text is longer than the ${max} tokens it may have besides the special tokens`,
    );
  }
  if (target.ids.length <= toRemove) {
    const which = strategy === 'only_first' ? 'first' : 'second';
    throw new InputError(
      `the text pair does not fit in ${max} tokens besides the special tokens by truncating only the ${which} text (${strategy}): it is too short to lose enough`,
    );
  }
  if (!b) return truncateWithWindows(target, target.ids.length - toRemove, stride, direction);
  checkStride(target, target.ids.length - toRemove, stride);
  truncate(target, target.ids.length - toRemove, direction);
  return [];
}

/** HF panics when a sequence that is cut to `keep` tokens has a stride that is not below it; this says why instead. */
function checkStride(e: WorkEncoding, keep: number, stride: number): void {
  if (e.ids.length > keep && keep > 0) windowRanges(e.ids.length, keep, stride, 'right');
}

function countOf(e: ContentEncoding): number {
  return e.countsMore ? Infinity : e.ids.length;
}

/** truncation.rs's LongestFirst arithmetic on the two lengths, line for line: the lengths to keep. */
export function longestFirstLengths(lengthA: number, lengthB: number, max: number): [number, number] {
  let n1 = lengthA;
  let n2 = lengthB;
  const swap = n1 > n2;
  if (swap) [n1, n2] = [n2, n1];
  // n1 is the shorter: it stays whole when the longer one can make room, else both get half
  n2 = n1 > max ? n1 : Math.max(n1, max - n1);
  if (n1 + n2 > max) {
    n1 = Math.floor(max / 2);
    n2 = n1 + (max % 2);
  }
  return swap ? [n2, n1] : [n1, n2];
}
