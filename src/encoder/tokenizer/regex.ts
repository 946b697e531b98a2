/**
 * Oniguruma patterns (Split pre-tokenizer, Replace normalizer) as JS regular expressions.
 *
 * The translation is the one of @huggingface/tokenizers (its Split pre-tokenizer compiles the
 * pattern); \p{L} and \p{N} are then pinned to the classes the Rust reference's Oniguruma really
 * has (unicode-tables.ts), because Node knows newer Unicode. Regex semantics differ between the two
 * engines in corners, so only patterns whose offsets were verified against the reference
 * (test/encoder/tokenizer-oracle.test.ts) are accepted; anything else is a ConfigError at load.
 */
import { library } from './library.ts';
import { ConfigError } from '../errors.ts';
import { ONIG_LETTER, ONIG_NUMBER } from './unicode-tables.ts';

/** Patterns verified against the reference, as they appear in tokenizer.json files. */
export const VERIFIED_PATTERNS: readonly string[] = [
  // GPT-2 / RoBERTa byte-level split
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
  // cl100k / Llama 3
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  // Qwen 2
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  // runs of spaces (XLM-R style Replace)
  ' {2,}',
  '\\s+',
  '\\p{N}{1,3}',
];

function classBody(ranges: string): string {
  return ranges
    .split(',')
    .map((part) => {
      const [a, b] = part.split('-');
      return b === undefined ? `\\u{${a}}` : `\\u{${a}}-\\u{${b}}`;
    })
    .join('');
}

let letter: string | null = null;
let number: string | null = null;

/** Compiles a verified Oniguruma pattern to a global unicode RegExp; ConfigError otherwise. */
export function compileOnigRegex(pattern: string, where: string): RegExp {
  if (!VERIFIED_PATTERNS.includes(pattern)) {
    throw new ConfigError(`tokenizer: unsupported regex in ${where}: ${JSON.stringify(pattern)} (offsets cannot be guaranteed)`);
  }
  return compileOnigRegexUnchecked(pattern);
}

/** The translation without the allowlist check (for tests that verify new patterns). */
export function compileOnigRegexUnchecked(pattern: string): RegExp {
  let re: RegExp | null;
  try {
    re = new library.SplitPreTokenizer({ type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false }).pattern;
  } catch (cause) {
    throw new ConfigError(`tokenizer: cannot compile regex ${JSON.stringify(pattern)}`, { cause });
  }
  if (!re) throw new ConfigError(`tokenizer: cannot compile regex ${JSON.stringify(pattern)}`);
  letter ??= classBody(ONIG_LETTER);
  number ??= classBody(ONIG_NUMBER);
  // \p{L} / \p{N} become the reference's explicit sets, bracketed when outside a class
  const source = re.source;
  let src = '';
  let depth = 0;
  for (let i = 0; i < source.length; i++) {
    const ch = source[i];
    if (ch === '\\') {
      const esc = source.slice(i, i + 5);
      if (esc === '\\p{L}' || esc === '\\p{N}') {
        const body = esc === '\\p{L}' ? letter : number;
        src += depth > 0 ? body : `[${body}]`;
        i += 4;
        continue;
      }
      src += source.slice(i, i + 2);
      i++;
      continue;
    }
    if (ch === '[') depth++;
    else if (ch === ']' && depth > 0) depth--;
    src += ch;
  }
  try {
    return new RegExp(src, 'gu');
  } catch (cause) {
    throw new ConfigError(`tokenizer: cannot compile regex ${JSON.stringify(pattern)}`, { cause });
  }
}
