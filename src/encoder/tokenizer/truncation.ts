/**
 * Truncation of one sequence or a pair, as HF's `truncate_encodings` (tokenizers/src/utils/truncation.rs), right
 * direction without stride, applied to the content tokens before the post-processor adds the special ones.
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

/** Which sequence of a pair loses tokens (HF's TruncationStrategy). */
export type TruncationStrategy = 'longest_first' | 'only_first' | 'only_second';

/** tokenizer.json's names of the strategies. */
export const FILE_STRATEGIES: Readonly<Record<string, TruncationStrategy>> = {
  LongestFirst: 'longest_first',
  OnlyFirst: 'only_first',
  OnlySecond: 'only_second',
};

/** Right truncation of one sequence to `max` tokens (stride 0). */
export function truncate(e: WorkEncoding, max: number): void {
  if (e.ids.length <= max) return;
  e.ids.length = max;
  e.tokens.length = max;
  e.offsets.length = max;
  e.typeIds.length = max;
  e.specialTokensMask.length = max;
  e.attentionMask.length = max;
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
 * tokens. A single sequence is cut on the right. A pair: longest_first keeps the shorter text whole when the longer
 * one can give up enough, else cuts both to max / 2, the odd token going to the longer one (the second on a tie);
 * only_first / only_second cut that text alone and fail, as HF does, when it is too short to lose enough.
 * `max` 0 empties both whatever the strategy (HF's first case).
 */
export function truncateEncodings(a: ContentEncoding, b: ContentEncoding | null, max: number, strategy: TruncationStrategy): void {
  if (max === 0) {
    truncate(a, 0);
    if (b) truncate(b, 0);
    return;
  }
  const total = a.ids.length + (b?.ids.length ?? 0);
  if (total <= max) return;
  const toRemove = total - max;
  if (strategy === 'longest_first') {
    if (b) {
      const [first, second] = longestFirstLengths(countOf(a), countOf(b), max);
      truncate(a, first);
      truncate(b, second);
    } else {
      truncate(a, max);
    }
    return;
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
  truncate(target, target.ids.length - toRemove);
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
