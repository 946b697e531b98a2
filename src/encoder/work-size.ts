import { unitsOfText } from './large-texts.ts';

/** Work this long (UTF-16 units, or bytes of a body) leaves megabytes of dead strings and takes a turn of its own. */
export const LARGE_WORK_UNITS = 2 ** 20;

/**
 * The UTF-16 units of some texts: what a request costs to copy or tokenize, before it is tokenized. A stand-in
 * counts as the text it holds (large-texts.ts).
 */
export function unitsOf(texts: readonly (string | null | undefined)[]): number {
  let units = 0;
  for (const text of texts) units += text === null || text === undefined ? 0 : unitsOfText(text);
  return units;
}
