import { describe, expect, it } from 'vitest';
import { formatFloat32, jsonPieces, stringifyJson, toShortestNumbers, writeFloat32Array } from '../../src/shared/float32-json.ts';

/** Seeded xorshift32 returning uint32s, so every run checks the same values. */
function randomBits(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function fromBits(bits: number): number {
  u32[0] = bits;
  return f32[0];
}
function bitsOf(value: number): number {
  f32[0] = value;
  return u32[0];
}

const MIN_SUBNORMAL = fromBits(1);
const MAX_SUBNORMAL = fromBits(0x007fffff);
const MIN_NORMAL = fromBits(0x00800000);
const MAX_FLOAT32 = fromBits(0x7f7fffff);

/** Edge values and their float32 neighbours: zeros, subnormal and normal limits, powers of ten and of two. */
function edgeValues(): number[] {
  const centres = [0, MIN_SUBNORMAL, MAX_SUBNORMAL, MIN_NORMAL, MAX_FLOAT32, 1, 0.1, 1 / 3, 2 ** 24, 16777217, 1e21, 1e-7];
  for (let e = -45; e <= 38; e++) centres.push(Math.fround(Number(`1e${e}`)));
  for (let e = -149; e <= 127; e++) centres.push(2 ** e);
  const values: number[] = [];
  for (const centre of centres) {
    const bits = bitsOf(Math.fround(centre));
    for (let delta = -2; delta <= 2; delta++) {
      const neighbour = bits + delta;
      if (neighbour < 0 || neighbour > 0x7f7fffff) continue;
      values.push(fromBits(neighbour), -fromBits(neighbour));
    }
  }
  return values;
}

/**
 * 1,000,000 float32 values: random finite bit patterns (a tenth of them subnormal), uniform [-1, 1), embedding-sized
 * values, magnitudes log-uniform over 1e-7..1e22 (every fixed-notation layout, the longest included), edges.
 */
function millionValues(): Float32Array {
  const next = randomBits(20240611);
  const values = new Float32Array(1_000_000);
  const edges = edgeValues();
  values.set(edges);
  for (let i = edges.length; i < values.length; i++) {
    const kind = i % 5;
    if (kind < 2) {
      let bits: number;
      do bits = kind === 0 && i % 10 === 0 ? next() & 0x807fffff : next();
      while ((bits & 0x7f800000) === 0x7f800000);
      values[i] = fromBits(bits);
    } else if (kind < 4) {
      values[i] = (next() / 2 ** 32) * 2 - 1;
    } else if (i % 10 === 4) {
      values[i] = ((next() / 2 ** 32) * 2 - 1) * 0.1;
    } else {
      values[i] = (next() % 2 ? 1 : -1) * 10 ** ((next() / 2 ** 32) * 29 - 7);
    }
  }
  return values;
}

const JSON_NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;

/** Exact rational comparison of |v - a·10^k| with |v - b·10^k| for a float32 v: negative when a is closer. */
function compareDistances(v: number, a: number, b: number, k: number): number {
  const bits = bitsOf(Math.abs(v));
  const biased = bits >>> 23;
  const mantissa = BigInt(biased === 0 ? bits & 0x7fffff : (bits & 0x7fffff) | 0x800000);
  const e = Math.max(biased, 1) - 150; // |v| = mantissa·2^e
  const twos = BigInt(Math.max(0, -e));
  const tens = BigInt(Math.max(0, -k));
  const scaledValue = mantissa * 2n ** (BigInt(e) + twos) * 10n ** tens;
  const scaled = (d: number) => BigInt(d) * 10n ** (BigInt(k) + tens) * 2n ** twos;
  const distance = (d: number) => {
    const difference = scaledValue - scaled(d);
    return difference < 0n ? -difference : difference;
  };
  const da = distance(a);
  const db = distance(b);
  return da < db ? -1 : da > db ? 1 : 0;
}

/**
 * Brute-force reference: for p = 1, 2, … digits, toExponential(p - 1) gives the nearest p-digit decimal and the
 * other p-digit neighbour of v is one unit away; the first p at which either reads back wins, the closer of the
 * two if both do (exactly, ties to the even one). Laid out by String() of the decimal's double, or in exponent
 * form where that would be longer than String(value).
 */
function referenceText(value: number): string {
  if (value === 0) return '0';
  const v = Math.abs(value);
  const readsBack = (digits: number, k: number) => digits > 0 && Math.fround(Number(`${digits}e${k}`)) === v;
  for (let p = 1; p <= 9; p++) {
    const [mantissa, exponent] = v.toExponential(p - 1).split('e');
    const nearest = Number(mantissa.replace('.', ''));
    const k = Number(exponent) - (p - 1);
    let other = Number(`${nearest}e${k}`) > v ? nearest - 1 : nearest + 1;
    let otherK = k;
    if (other < 10 ** (p - 1)) {
      other = 10 ** p - 1; // below 10…0 the next p-digit decimal down is 99…9 one decade lower
      otherK = k - 1;
    }
    const nearestFits = readsBack(nearest, k);
    const otherFits = readsBack(other, otherK);
    if (!nearestFits && !otherFits) continue;
    let digits = nearestFits ? nearest : other;
    let digitsK = nearestFits ? k : otherK;
    if (nearestFits && otherFits && otherK === k) {
      const order = compareDistances(v, nearest, other, k);
      if (order > 0 || (order === 0 && other % 2 === 0)) digits = other;
    } else if (nearestFits && otherFits && compareDistances(v, nearest * 10, other, otherK) > 0) {
      digits = other;
      digitsK = otherK;
    }
    const decimal = Number(`${digits}e${digitsK}`);
    const text = String(decimal).length > String(v).length ? decimal.toExponential() : String(decimal);
    return value < 0 ? `-${text}` : text;
  }
  throw new Error(`no reference text for ${value}`);
}

describe('formatFloat32', () => {
  it('prints the documented texts for known values', () => {
    const cases: [number, string][] = [
      [0, '0'],
      [-0, '0'],
      [Math.fround(0.09576371713123737), '0.09576372'], // the example
      [Math.fround(0.1), '0.1'],
      [Math.fround(-0.1), '-0.1'],
      [Math.fround(1 / 3), '0.33333334'],
      [1, '1'],
      [-2.5, '-2.5'],
      [16777216, '16777216'],
      [2937351.25, '2937351.2'], // exactly between …51.2 and …51.3: ties go to the even digit, as ryu
      [MIN_SUBNORMAL, '1e-45'],
      [MAX_SUBNORMAL, '1.1754942e-38'],
      [MIN_NORMAL, '1.1754944e-38'],
      [MAX_FLOAT32, '3.4028235e+38'],
      [Math.fround(1e-7), '1e-7'],
      [Math.fround(1.5e-6), '0.0000015'],
      [Math.fround(1e20), '100000000000000000000'],
      [Math.fround(1e21), '1e+21'],
      [Math.fround(123.456), '123.456'],
      [2 ** -10, '0.0009765625'],
      [2 ** 100, '1.2676506e+30'],
      [99999997952, '1e+11'], // 1e11 is its shortest decimal; "100000000000" would outgrow String(value)
      [100000006144, '100000010000'],
    ];
    for (const [value, text] of cases) expect([value, formatFloat32(value)]).toEqual([value, text]);
  });

  it('round-trips 1,000,000 seeded float32 values with texts no longer than String(value), as arrays too', () => {
    const values = millionValues();
    const failures: string[] = [];
    const texts = new Array<string>(values.length);
    for (let i = 0; i < values.length; i++) {
      const value = values[i];
      const text = formatFloat32(value);
      texts[i] = text;
      if (Math.fround(Number(text)) !== value || text.length > String(value).length || !JSON_NUMBER.test(text)) {
        failures.push(`${value} → ${text}`);
      }
    }
    expect(failures.slice(0, 10)).toEqual([]);
    // The array writer (its own layout code, right to left) produces the same texts.
    let arrayMismatches = 0;
    for (let start = 0; start < values.length; start += 1000) {
      if (writeFloat32Array(values, start, start + 1000) !== `[${texts.slice(start, start + 1000).join(',')}]`) arrayMismatches++;
    }
    expect(arrayMismatches).toBe(0);
    // The sample really spans the range: subnormals, exponent notation both ways, fixed notation.
    expect(texts.some((t) => t.endsWith('e-45'))).toBe(true);
    expect(texts.some((t) => t.includes('e+3'))).toBe(true);
    expect(texts.some((t) => /^0\.00000\d{8}$/.test(t))).toBe(true); // the longest fixed text
    expect(texts.some((t) => /^\d{5}\.\d{3}$/.test(t))).toBe(true);
    expect(texts.some((t) => /^\d{8}0000$/.test(t))).toBe(true);
  });

  it('is the shortest text, and the closest of the shortest, by a brute-force reference', () => {
    const values = millionValues();
    const sample = [...edgeValues()];
    for (let i = 0; i < values.length; i += 7) sample.push(values[i]); // ~143,000 values
    const mismatches: string[] = [];
    for (const value of sample) {
      const expected = referenceText(value);
      const actual = formatFloat32(value);
      if (actual !== expected) mismatches.push(`${value}: ${actual} (reference ${expected})`);
    }
    expect(mismatches.slice(0, 10)).toEqual([]);
  });

  it('refuses what has no float32 JSON number', () => {
    expect(() => formatFloat32(NaN)).toThrow(RangeError);
    expect(() => formatFloat32(Infinity)).toThrow(/Infinity has no JSON number form/);
    expect(() => formatFloat32(-Infinity)).toThrow(RangeError);
    expect(() => formatFloat32(0.1)).toThrow(/0\.1 is not a float32 value/);
  });
});

describe('writeFloat32Array', () => {
  it('writes ranges and views at an offset, and [] when empty', () => {
    const values = Float32Array.from([0.5, -0, 1e-10, 3.4e38, -7]);
    expect(writeFloat32Array(values)).toBe('[0.5,0,1e-10,3.4e+38,-7]');
    expect(writeFloat32Array(values, 1, 3)).toBe('[0,1e-10]');
    expect(writeFloat32Array(values, 2, 2)).toBe('[]');
    expect(writeFloat32Array(values.subarray(3))).toBe('[3.4e+38,-7]');
    expect(writeFloat32Array(new Float32Array(0))).toBe('[]');
    expect(() => writeFloat32Array(values, 3, 9)).toThrow(RangeError);
  });

  it('writes arrays longer than its reused buffer', () => {
    const next = randomBits(7);
    const values = Float32Array.from({ length: 200_000 }, () => (next() / 2 ** 32) * 2 - 1);
    const parsed = JSON.parse(writeFloat32Array(values)) as number[];
    expect(parsed).toHaveLength(values.length);
    expect(parsed.every((number, i) => Math.fround(number) === values[i])).toBe(true);
  });

  it('throws on NaN and infinities inside', () => {
    expect(() => writeFloat32Array(Float32Array.from([1, NaN]))).toThrow(/NaN has no JSON number form/);
    expect(() => writeFloat32Array(Float32Array.from([-Infinity, 1]))).toThrow(RangeError);
  });
});

describe('toShortestNumbers', () => {
  it('gives numbers that JSON.stringify prints as the shortest float32 texts', () => {
    const values = millionValues().subarray(0, 100_000);
    const numbers = toShortestNumbers(values);
    const texts = Array.from(values, (value) => formatFloat32(value));
    // Equal texts, except for the powers of ten written 1e+… where JSON.stringify writes the integer out.
    const differing = texts.filter((text, i) => JSON.stringify(numbers[i]) !== text);
    expect(differing.every((text) => /^-?1e\+\d+$/.test(text))).toBe(true);
    expect(numbers.every((number, i) => Number(texts[i]) === number)).toBe(true);
    expect(JSON.stringify(toShortestNumbers(Float32Array.from([99999997952])))).toBe('[100000000000]');
    expect(JSON.stringify(toShortestNumbers(Float32Array.from([-0, 0.1, 1e-45])))).toBe('[0,0.1,1e-45]');
    expect(() => toShortestNumbers(Float32Array.from([NaN]))).toThrow(RangeError);
  });
});

/** Strings that exercise every escaping rule of JSON.stringify. */
const AWKWARD_STRINGS = [
  '',
  'plain',
  'quote " and backslash \\',
  'controls \u0000\u0001\b\f\n\r\t\u001f\u007f',
  'line separators \u2028\u2029',
  'lone surrogates \ud800 \udfff \udc00\ud800',
  'pair 😀 and é, ß, 日本',
  '</script><!--',
];

/** Seeded JSON-like trees of objects, arrays, strings, numbers, booleans, null and omitted kinds. */
function randomTree(next: () => number, depth: number): unknown {
  const leaves: unknown[] = [
    ...AWKWARD_STRINGS,
    0,
    -0,
    1.5,
    -123456789,
    1e21,
    1e-7,
    5e-324,
    NaN,
    Infinity,
    true,
    false,
    null,
    undefined,
    () => 1,
    Symbol('s'),
  ];
  const pick = next() % 10;
  if (depth <= 0 || pick < 5) return leaves[next() % leaves.length];
  const size = next() % 5;
  if (pick < 7) return Array.from({ length: size }, () => randomTree(next, depth - 1));
  const object: Record<string, unknown> = {};
  for (let i = 0; i < size; i++) object[AWKWARD_STRINGS[next() % AWKWARD_STRINGS.length] + (next() % 3)] = randomTree(next, depth - 1);
  return object;
}

/** The tree with every Float32Array swapped for toShortestNumbers of it. */
function withShortestNumbers(value: unknown): unknown {
  if (value instanceof Float32Array) return toShortestNumbers(value);
  if (Array.isArray(value)) return value.map(withShortestNumbers);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, member]) => [key, withShortestNumbers(member)]));
  }
  return value;
}

describe('stringifyJson', () => {
  it('equals JSON.stringify on 2,000 seeded trees without Float32Array', () => {
    const next = randomBits(99);
    for (let i = 0; i < 2000; i++) {
      const tree = randomTree(next, 4);
      const expected = JSON.stringify(tree);
      if (expected === undefined) expect(() => stringifyJson(tree)).toThrow(TypeError);
      else expect(stringifyJson(tree)).toBe(expected);
    }
  });

  it('escapes every UTF-16 code unit as JSON.stringify does, in values and in keys', () => {
    const units = Array.from({ length: 0x10000 }, (_, unit) => String.fromCharCode(unit));
    for (let start = 0; start < units.length; start += 4096) {
      const text = units.slice(start, start + 4096).join('');
      expect(stringifyJson(text)).toBe(JSON.stringify(text));
      const keyed = Object.fromEntries(units.slice(start, start + 256).map((unit, i) => [unit, i]));
      expect(stringifyJson(keyed)).toBe(JSON.stringify(keyed));
    }
  });

  it("follows JSON.stringify's rules for toJSON, boxed primitives, typed arrays, holes and odd keys", () => {
    const keysSeen: string[] = [];
    const recorder = { toJSON: (key: string) => (keysSeen.push(key), { recorded: key }) };
    class Point {
      readonly x: number;
      readonly y: number;
      constructor(x: number, y: number) {
        this.x = x;
        this.y = y;
      }
      get sum(): number {
        return this.x + this.y;
      }
    }
    const hidden = Object.defineProperty({ shown: 1 }, 'hidden', { value: 2, enumerable: false });
    const sparse = [1];
    sparse[2] = 3; // a hole at 1
    const tree = {
      date: new Date(Date.UTC(2024, 0, 2, 3, 4, 5)),
      list: [recorder, undefined, () => 0, Symbol('x')],
      named: recorder,
      omitted: { toJSON: () => undefined },
      boxed: [Object(1.5), Object('s'), Object(false)],
      int32: Int32Array.from([1, 2]),
      float64: Float64Array.from([0.1]),
      map: new Map([[1, 2]]),
      sparse,
      point: new Point(1, 2),
      hidden,
      [Symbol('key')]: 1,
      '2': 'integer keys first',
      '1': 'in ascending order',
    };
    expect(stringifyJson(tree)).toBe(JSON.stringify(tree));
    expect(keysSeen).toEqual(['0', 'named', '0', 'named']);
  });

  it('writes every nested Float32Array as shortest float32 texts', () => {
    const embedding = Float32Array.from([0.09576371713123737, -0.5, 1e-8, 0]);
    const backing = Float32Array.from([9, 0.1, 0.2, 9]);
    const tree = {
      results: [
        { embedding, token_info: { token: 'naïve "quoted"', token_id: 7, start: 0, end: 5 } },
        { embeddings: [{ embedding: backing.subarray(1, 3) }, { embedding: new Float32Array(0) }] },
      ],
      scores: [[embedding]],
      model_id: 'm',
      metadata: undefined,
    };
    const text = stringifyJson(tree);
    expect(text).toBe(JSON.stringify(withShortestNumbers(tree)));
    expect(text).toContain('"embedding":[0.09576372,-0.5,1e-8,0]');
    expect(text).toContain('"embedding":[0.1,0.2]');
    const parsed = JSON.parse(text) as { scores: number[][][] };
    expect(parsed.scores[0][0].map((n) => Math.fround(n))).toEqual(Array.from(embedding));
  });

  it('throws where JSON.stringify throws or has no text', () => {
    const cycle: Record<string, unknown> = { a: [1] };
    (cycle.a as unknown[]).push(cycle);
    expect(() => stringifyJson(cycle)).toThrow(/circular/);
    expect(() => stringifyJson({ big: 1n })).toThrow(TypeError);
    expect(() => stringifyJson(undefined)).toThrow(TypeError);
    expect(() => stringifyJson(() => 1)).toThrow(TypeError);
    expect(() => stringifyJson({ v: Float32Array.from([NaN]) })).toThrow(RangeError);
    // Shared but not circular references are fine, as in JSON.stringify.
    const shared = { x: 1 };
    expect(stringifyJson([shared, shared])).toBe('[{"x":1},{"x":1}]');
  });
});

describe('jsonPieces', () => {
  it("joined, equals stringifyJson's text on 2,000 seeded trees, with Float32Arrays, for pieces of 1 to 64 characters", () => {
    const next = randomBits(1234);
    for (let i = 0; i < 2000; i++) {
      const tree = { tree: randomTree(next, 4), vectors: [Float32Array.from([0.1, -2.5e-7, 3]), new Float32Array(0)] };
      const pieceChars = 1 + (next() % 64);
      expect([...jsonPieces(tree, pieceChars)].join('')).toBe(stringifyJson(tree));
    }
  });

  it('ends each piece at the first boundary after the piece size, never inside a leaf', () => {
    const vector = Float32Array.from({ length: 100 }, (_, i) => i / 7);
    const response = { results: Array.from({ length: 50 }, (_, index) => ({ index, embedding: vector })) };
    const pieces = [...jsonPieces(response, 1000)];
    const longestMember = `{"index":49,"embedding":${writeFloat32Array(vector)}}`.length + 1;
    expect(pieces.length).toBeGreaterThan(5);
    for (const piece of pieces.slice(0, -1)) {
      expect(piece.length).toBeGreaterThanOrEqual(1000);
      expect(piece.length).toBeLessThan(1000 + longestMember);
    }
    expect(pieces.join('')).toBe(stringifyJson(response));
    // a whole response shorter than a piece is one piece
    expect([...jsonPieces({ small: [1, 2] }, 1000)]).toEqual(['{"small":[1,2]}']);
  });

  it('walks the value only as far as the piece taken, and throws where stringifyJson throws when it gets there', () => {
    let read = 0;
    const items = Array.from({ length: 100 }, (_, i) => ({
      get value() {
        read++;
        return 'x'.repeat(50) + i;
      },
    }));
    const pieces = jsonPieces(items, 200);
    pieces.next();
    expect(read).toBeLessThan(10);
    expect([...pieces].length).toBeGreaterThan(10);
    expect(read).toBe(100);

    const late = [...Array.from({ length: 20 }, () => 'y'.repeat(20)), { big: 1n }];
    const failing = jsonPieces(late, 100);
    expect(failing.next().done).toBe(false);
    expect(() => [...failing]).toThrow(TypeError);
    expect(() => [...jsonPieces(undefined, 100)]).toThrow(TypeError);
    const cycle: unknown[] = ['a'];
    cycle.push(cycle);
    expect(() => [...jsonPieces(cycle, 1)]).toThrow(/circular/);
  });
});
