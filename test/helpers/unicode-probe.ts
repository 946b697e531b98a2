/**
 * Measures, code point by code point, the Unicode classes that the reference Rust implementation
 * (HF `tokenizers`, through its dev-only Node binding `tokenizers@0.23.2`) really uses. Its crates
 * carry their own, older Unicode tables (`unicode_categories`, `unicode-normalization-alignments`,
 * Oniguruma), which differ from the Unicode 17 of Node's ICU, so these classes cannot be taken from
 * JS regex properties alone.
 *
 * Used by `scripts/gen-unicode-tables.ts` (writes src/encoder/tokenizer/unicode-tables.ts) and by the test
 * that checks the committed tables against the oracle.
 */
import { createRequire } from 'node:module';

type OracleNormalizer = { normalizeString(s: string): string };
type OraclePreTokenizer = { preTokenizeString(s: string): [string, [number, number]][] };
interface OracleModule {
  bertNormalizer(o: object): OracleNormalizer;
  bertPreTokenizer(): OraclePreTokenizer;
  stripAccentsNormalizer(): OracleNormalizer;
  whitespaceSplitPreTokenizer(): OraclePreTokenizer;
  byteLevelPreTokenizer(addPrefixSpace: boolean, useRegex: boolean): OraclePreTokenizer;
  whitespacePreTokenizer(): OraclePreTokenizer;
  nfdNormalizer(): OracleNormalizer;
  nfkdNormalizer(): OracleNormalizer;
}

export function loadOracle(): OracleModule {
  const require = createRequire(import.meta.url);
  return require('tokenizers') as OracleModule;
}

export const MAX_CP = 0x110000;

function isSurrogate(cp: number): boolean {
  return cp >= 0xd800 && cp <= 0xdfff;
}

/** Sorted code points to `a-b,c` hex ranges. */
export function toRanges(cps: number[]): string {
  const out: string[] = [];
  let i = 0;
  while (i < cps.length) {
    let j = i;
    while (j + 1 < cps.length && (cps[j + 1] === cps[j] + 1 || (cps[j] === 0xd7ff && cps[j + 1] === 0xe000))) j++;
    out.push(i === j ? cps[i].toString(16) : `${cps[i].toString(16)}-${cps[j].toString(16)}`);
    i = j + 1;
  }
  return out.join(',');
}

export interface ProbedTables {
  whitespace: number[];
  bertRemoved: number[];
  bertPunct: number[];
  markNonspacing: number[];
  combiningMark: number[];
  onigLetter: number[];
  onigNumber: number[];
  onigSpace: number[];
  onigWord: number[];
  normUnknown: number[];
  /** [code point, rank] for every non-starter the Rust normalizer knows; ranks keep the order of combining classes. */
  cccRanks: [number, number][];
}

/** JS-side canonical combining class order, derived from String.prototype.normalize only. */
function jsNonStarters(): number[] {
  const out: number[] = [];
  for (let cp = 0x300; cp < MAX_CP; cp++) {
    if (isSurrogate(cp)) continue;
    const s = String.fromCodePoint(cp);
    if (s.normalize('NFD') !== s) continue;
    const a = 'x\u0316' + s; // U+0316 has ccc 220
    const b = 'x' + s + '\u0334'; // U+0334 has ccc 1
    if (a.normalize('NFD') !== a || b.normalize('NFD') !== b) out.push(cp);
  }
  return out;
}

function cccCompare(a: number, b: number): number {
  const sa = String.fromCodePoint(a);
  const sb = String.fromCodePoint(b);
  if (('x' + sa + sb).normalize('NFD') !== 'x' + sa + sb) return 1; // a sorts after b
  if (('x' + sb + sa).normalize('NFD') !== 'x' + sb + sa) return -1;
  return 0;
}

export function probeTables(): ProbedTables {
  const hf = loadOracle();
  const ws = hf.whitespaceSplitPreTokenizer();
  const bn = hf.bertNormalizer({ cleanText: true, handleChineseChars: false, stripAccents: false, lowercase: false });
  const bp = hf.bertPreTokenizer();
  const sa = hf.stripAccentsNormalizer();
  const bs = hf.bertNormalizer({ cleanText: false, handleChineseChars: false, stripAccents: true, lowercase: false });
  const bl = hf.byteLevelPreTokenizer(false, true);
  const wsp = hf.whitespacePreTokenizer();
  const nfd = hf.nfdNormalizer();
  const nfkd = hf.nfkdNormalizer();
  const t: ProbedTables = {
    whitespace: [],
    bertRemoved: [],
    bertPunct: [],
    markNonspacing: [],
    combiningMark: [],
    onigLetter: [],
    onigNumber: [],
    onigSpace: [],
    onigWord: [],
    normUnknown: [],
    cccRanks: [],
  };
  const unknown = new Set<number>();
  for (let cp = 0; cp < MAX_CP; cp++) {
    if (isSurrogate(cp)) continue;
    const s = String.fromCodePoint(cp);
    if (ws.preTokenizeString('a' + s + 'b').length === 2) t.whitespace.push(cp);
    if (bn.normalizeString('a' + s + 'b') === 'ab') t.bertRemoved.push(cp);
    if (bp.preTokenizeString('a' + s + 'b').length === 3) t.bertPunct.push(cp);
    if (bs.normalizeString('a' + s) === 'a') t.markNonspacing.push(cp);
    if (sa.normalizeString('a' + s) === 'a') t.combiningMark.push(cp);
    const isL = bl.preTokenizeString('a' + s + 'a').length === 1;
    const isN = bl.preTokenizeString('1' + s + '1').length === 1;
    if (isL) t.onigLetter.push(cp);
    if (isN) t.onigNumber.push(cp);
    if (!isL && !isN && bl.preTokenizeString('!' + s + '!').length !== 1) t.onigSpace.push(cp);
    if (wsp.preTokenizeString('a' + s + 'a').length === 1) t.onigWord.push(cp);
    if (nfd.normalizeString(s) !== s.normalize('NFD') || nfkd.normalizeString(s) !== s.normalize('NFKD')) unknown.add(cp);
  }
  const starters = jsNonStarters();
  for (const cp of starters) {
    const s = String.fromCodePoint(cp);
    for (const probe of ['x\u0316' + s, 'x' + s + '\u0334']) {
      if (nfd.normalizeString(probe) !== probe.normalize('NFD')) unknown.add(cp);
    }
  }
  t.normUnknown = [...unknown].sort((a, b) => a - b);
  const known = starters.filter((cp) => !unknown.has(cp)).sort(cccCompare);
  let rank = 0;
  for (let i = 0; i < known.length; i++) {
    if (i === 0 || cccCompare(known[i - 1], known[i]) !== 0) rank++;
    t.cccRanks.push([known[i], rank]);
  }
  t.cccRanks.sort((a, b) => a[0] - b[0]);
  return t;
}

/** `cp-cp:rank` runs. */
export function cccToString(ranks: [number, number][]): string {
  const out: string[] = [];
  let i = 0;
  while (i < ranks.length) {
    let j = i;
    while (j + 1 < ranks.length && ranks[j + 1][0] === ranks[j][0] + 1 && ranks[j + 1][1] === ranks[i][1]) j++;
    const a = ranks[i][0].toString(16);
    out.push(i === j ? `${a}:${ranks[i][1]}` : `${a}-${ranks[j][0].toString(16)}:${ranks[i][1]}`);
    i = j + 1;
  }
  return out.join(',');
}
