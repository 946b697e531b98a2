/**
 * node bench/float32-json.bench.ts — shortest float32 JSON (src/shared/float32-json.ts) against the alternatives.
 *
 * 1. Per value: the shortest-float32 algorithms considered (each checked against the chosen one first), beside
 *    String(double) and JSON.stringify(number[]), which print the double's 17 digits.
 * 2. Per response, bytes and time: the /predict sentence-embedding shape (32 results × 384 floats) and the per-token
 *    shape (8 results × 64 tokens × {embedding: 384 floats, token_info}), written before (number[] through
 *    JSON.stringify, with and without the Array.from that makes the number[]) and after (stringifyJson on
 *    Float32Array results; JSON.stringify on toShortestNumbers for libraries that stringify themselves).
 * Medians of many runs; the machine's other load moves them by ±10%.
 */
import { formatFloat32, stringifyJson, toShortestNumbers, writeFloat32Array } from '../src/shared/float32-json.ts';
import { median, printTable } from './measure.ts';

/** Seeded xorshift32, for reproducible values. */
function random(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
}

/** Values like a normalized 384-dimension embedding: roughly N(0, 1/√384). */
function embeddingValues(count: number, seed: number): Float32Array {
  const next = random(seed);
  const values = new Float32Array(count);
  for (let i = 0; i < count; i++) values[i] = (next() + next() + next() - 1.5) * 0.1;
  return values;
}

function uniformValues(count: number, seed: number): Float32Array {
  const next = random(seed);
  return Float32Array.from({ length: count }, () => next() * 2 - 1);
}

/** Random finite bit patterns: every binade from subnormals to 3.4e38 about equally. */
function bitPatternValues(count: number, seed: number): Float32Array {
  const next = random(seed);
  const bits = new Uint32Array(count);
  for (let i = 0; i < count; i++) {
    do bits[i] = Math.floor(next() * 2 ** 32);
    while ((bits[i] & 0x7f800000) === 0x7f800000);
  }
  return new Float32Array(bits.buffer);
}

/** Alternative 1: the shortest toPrecision(p), p = 6..9, that reads back; String(Number(s)) lays it out as JS. */
function viaToPrecision(value: number): string {
  for (let p = 6; p < 9; p++) {
    const candidate = Number(value.toPrecision(p));
    if (Math.fround(candidate) === value) return String(candidate);
  }
  return String(Number(value.toPrecision(9)));
}

/**
 * Alternative 2: exact candidate search. At decimal exponent k only floor(v/10^k) and the next integer can read back
 * as v; each is checked exactly (d·10^k rounded once to a double, then Math.fround), k rising while one does.
 * Correct for |k| <= 22 (exact powers of ten), which the values measured here stay within.
 */
const POWERS = Array.from({ length: 23 }, (_, i) => Number(`1e${i}`));
function exactDouble(digits: number, k: number): number {
  return k >= 0 ? digits * POWERS[k] : digits / POWERS[-k];
}
function viaCandidateSearch(value: number): string {
  const v = Math.abs(value);
  if (v === 0) return '0';
  let k = Math.floor(Math.log10(v)) - 9;
  let best = 0;
  let bestK = 0;
  for (;;) {
    const below = Math.floor(v / 10 ** k);
    const belowFits = below > 0 && Math.fround(exactDouble(below, k)) === v;
    const aboveFits = Math.fround(exactDouble(below + 1, k)) === v;
    if (!belowFits && !aboveFits) break;
    const midpoint = exactDouble(2 * below + 1, k) / 2;
    best = belowFits && (!aboveFits || v < midpoint || (v === midpoint && below % 2 === 0)) ? below : below + 1;
    bestK = k;
    k++;
  }
  const text = String(exactDouble(best, bestK));
  return value < 0 ? `-${text}` : text;
}

interface Row {
  name: string;
  nsPerValue: number;
}

function perValue(name: string, values: Float32Array, run: () => unknown, rounds = 41): Row {
  for (let i = 0; i < 5; i++) run();
  const samples: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const start = performance.now();
    run();
    samples.push(performance.now() - start);
  }
  return { name, nsPerValue: (median(samples) * 1e6) / values.length };
}

function algorithms(): void {
  const sets: [string, Float32Array][] = [
    ['embedding-like', embeddingValues(32 * 384, 1)],
    ['uniform [-1, 1)', uniformValues(32 * 384, 2)],
    ['random bits', bitPatternValues(32 * 384, 3)],
  ];
  const rows: (string | number)[][] = [];
  for (const [setName, values] of sets) {
    const list = Array.from(values);
    let disagreements = 0;
    for (const value of values) {
      const chosen = formatFloat32(value);
      if (viaToPrecision(value) !== chosen) disagreements++;
      if (setName !== 'random bits' && viaCandidateSearch(value) !== chosen) throw new Error(`candidate search differs at ${value}`);
    }
    const results = [
      perValue('String(double) (17 digits, not float32)', values, () => values.forEach((v) => String(v))),
      perValue('JSON.stringify(number[]) (17 digits)', values, () => JSON.stringify(list)),
      perValue(`toPrecision(6..9) loop (${disagreements} texts differ: ties round up)`, values, () => values.forEach((v) => viaToPrecision(v))),
      ...(setName === 'random bits' ? [] : [perValue('exact candidate search', values, () => values.forEach((v) => viaCandidateSearch(v)))]),
      perValue('formatFloat32 (one string per value)', values, () => values.forEach((v) => formatFloat32(v))),
      perValue('writeFloat32Array (384 per call)', values, () => {
        for (let i = 0; i < values.length; i += 384) writeFloat32Array(values, i, i + 384);
      }),
    ];
    for (const row of results) rows.push([setName, row.name, row.nsPerValue.toFixed(1)]);
  }
  printTable('Per value (ns; 12,288 values per set)', ['values', 'method', 'ns/value'], rows);
  console.log('\nA Ryu f2s ported to doubles (64-bit multiplies in 24-bit limbs) measured 40-43 ns/value for the digits alone on');
  console.log('embedding-like values, against about 16 for the chosen fixed-scale method; the port is not kept here.');
}

/** The /predict sentence_embedding response, with `vector(i)` as each embedding. */
function sentenceResponse<T>(vector: (i: number) => T): object {
  return { results: Array.from({ length: 32 }, (_, i) => ({ embedding: vector(i) })), model_id: 'sentence-transformers/all-MiniLM-L6-v2' };
}

const WORDS = ['the', 'quick', 'brown', 'fox', 'jumps', 'over', 'lazy', 'dog', '##s', 'naïve', '"quoted"', '[SEP]'];

/** The /predict embedding (per-token) response: 8 inputs × 64 tokens. */
function tokenResponse<T>(vector: (i: number) => T): object {
  return {
    results: Array.from({ length: 8 }, (_, input) => ({
      embeddings: Array.from({ length: 64 }, (_, t) => ({
        embedding: vector(input * 64 + t),
        token_info: { token: WORDS[(input + t) % WORDS.length], token_id: 1000 + t * 37, start: t * 5, end: t * 5 + 4 },
      })),
    })),
    model_id: 'sentence-transformers/all-MiniLM-L6-v2',
  };
}

function perResponse(run: () => string, rounds = 101): { ms: number; bytes: number } {
  let text = '';
  for (let i = 0; i < 10; i++) text = run();
  const samples: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const start = performance.now();
    text = run();
    samples.push(performance.now() - start);
  }
  return { ms: median(samples), bytes: Buffer.byteLength(text) };
}

function responses(): void {
  const rows: (string | number)[][] = [];
  const shapes: [string, number, <T>(vector: (i: number) => T) => object][] = [
    ['sentence embedding 32 × 384', 32, sentenceResponse],
    ['per token 8 × 64 × 384', 512, tokenResponse],
  ];
  for (const [shape, vectors, build] of shapes) {
    const data = embeddingValues(vectors * 384, 7);
    const floats = Array.from({ length: vectors }, (_, i) => data.subarray(i * 384, (i + 1) * 384));
    const withFloat32 = build((i) => floats[i]);
    const withNumbers = build((i) => Array.from(floats[i]));
    const withShortNumbers = build((i) => toShortestNumbers(floats[i]));
    if (JSON.stringify(JSON.parse(stringifyJson(withFloat32))) !== JSON.stringify(withShortNumbers)) throw new Error('outputs differ');
    const measured: [string, { ms: number; bytes: number }][] = [
      ['before: JSON.stringify, number[] given', perResponse(() => JSON.stringify(withNumbers))],
      ['before: Array.from + JSON.stringify', perResponse(() => JSON.stringify(build((i) => Array.from(floats[i]))))],
      ['after: stringifyJson, Float32Array', perResponse(() => stringifyJson(withFloat32))],
      ['after: toShortestNumbers + JSON.stringify', perResponse(() => JSON.stringify(build((i) => toShortestNumbers(floats[i]))))],
    ];
    const base = measured[0][1].ms;
    for (const [method, result] of measured) {
      rows.push([shape, method, result.bytes, result.ms.toFixed(3), `${(result.ms / base).toFixed(2)}x`]);
    }
  }
  printTable('Per response', ['response', 'method', 'bytes', 'ms (median)', 'vs first row'], rows);
}

console.log(`node ${process.version}, ${process.platform}-${process.arch}`);
algorithms();
responses();
