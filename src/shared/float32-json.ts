/**
 * JSON text for float32 model outputs. A Float32Array element read in JS is a double, and JSON.stringify prints the
 * shortest decimal of that double (`0.09576371713123737`); encoderfile (Rust serde + ryu) prints the shortest
 * decimal that reads back as the same float32 (`0.09576372`). This module prints the latter: the fewest significant
 * digits whose decimal, read by `Math.fround(Number(text))`, is the float32 again; among equally short ones the
 * closest to the value (ties to an even last digit, as ryu). The layout is ECMAScript's Number::toString
 * (`0.001`, `1e-7`, `1.5e+30`), so `JSON.stringify(Number(text)) === text`, with one exception: when the shortest
 * decimal of an integer float32 is the power of ten just above it (99999997952 → 1e11), Number::toString would
 * print 12 characters where String(value) prints 11, so it is written `1e+11`. -0 prints as `0`, as JSON.stringify
 * does. No text is longer than String(value).
 *
 * How the digits are found (the fastest of those measured in bench/float32-json.bench.ts, Ryu in doubles included):
 * the float32 v owns the interval v ± ulp/2 (ulp: its binary spacing). In units of 10^k0, k0 = floor(log10(ulp)),
 * that half-width `room` is in [0.5, 5), so the integer nearest to t = v·10^-k0 always lies inside and the answer
 * has exponent k0 or more: the nearest multiple of 10, 100, … is tried while it stays inside. t is one rounded
 * multiply away from exact (error < 2^-24 since t < 2^28), so each comparison against `room` is decided when it
 * clears a 2^-22 margin; the rare values on a margin, exact ties between two candidates, and powers of two (whose
 * interval is lopsided) take `shortestSlow`, which checks candidates exactly with correctly rounded arithmetic.
 */

const MANTISSA_MASK = 0x7fffff;
/** Decision margin in units of 10^k: above the error of t (2^-24) and of the tabled room (< 2^-50). */
const MARGIN = 2 ** -22;

/** Per biased float32 exponent: k0 = floor(log10(ulp)), 10^-k0 (rounded), half an ulp in units of 10^k0. */
const EXPONENT_K0 = new Int32Array(256);
const EXPONENT_SCALE = new Float64Array(256);
const EXPONENT_ROOM = new Float64Array(256);
for (let biased = 0; biased < 256; biased++) {
  const ulpExponent = Math.max(biased, 1) - 150;
  // log10(2^e) is never within 1e-3 of an integer for these e except e = 0, so Math.log10 floors correctly.
  const k0 = Math.floor(ulpExponent * Math.log10(2));
  EXPONENT_K0[biased] = k0;
  EXPONENT_SCALE[biased] = Number(`1e${-k0}`);
  EXPONENT_ROOM[biased] = 2 ** (ulpExponent - 1) * Number(`1e${-k0}`);
}

/** 10^i for i = 0..22: exact doubles, so d·10^i and d/10^i are correctly rounded (one IEEE rounding). */
const EXACT_POWERS_OF_TEN: number[] = [];
for (let i = 0; i <= 22; i++) EXACT_POWERS_OF_TEN.push(Number(`1e${i}`));
/** 10^-k for k = -64..64, rounded: only used to estimate which candidates to check. */
const SCALE_OFFSET = 64;
const SCALES = new Float64Array(2 * SCALE_OFFSET + 1);
for (let k = -SCALE_OFFSET; k <= SCALE_OFFSET; k++) SCALES[k + SCALE_OFFSET] = Number(`1e${-k}`);

const bitsScratch = new Float32Array(1);
const bitsScratchView = new Uint32Array(bitsScratch.buffer);

/** Decimal exponent of the digits the last `shortestDigits` call returned (value = digits·10^exponent). */
let shortestExponent = 0;

/**
 * The shortest round-tripping digits of a positive finite float32 `v` whose IEEE bits (sign clear) are `bits`;
 * the exponent is left in `shortestExponent`. The digits never end in 0.
 */
function shortestDigits(v: number, bits: number): number {
  const biased = bits >>> 23;
  const t = v * EXPONENT_SCALE[biased];
  const room = EXPONENT_ROOM[biased];
  const nearest = Math.floor(t + 0.5);
  const nearestDistance = Math.abs(nearest - t);
  const tens = Math.floor(t * 0.1 + 0.5);
  const tensDistance = Math.abs(tens * 10 - t);
  if (
    (bits & MANTISSA_MASK) === 0 ||
    nearestDistance > 0.5 - MARGIN ||
    nearestDistance > room - MARGIN ||
    Math.abs(tensDistance - room) <= MARGIN
  ) {
    return shortestSlow(v, bits);
  }
  if (tensDistance > room) {
    shortestExponent = EXPONENT_K0[biased];
    return nearest;
  }
  // A multiple of 10 fits; try 100, 1000, … (each about a tenth as likely as the one before).
  let digits = tens;
  let level = 1;
  for (;;) {
    // A rounded 10^-j only picks the candidate (a wrong pick is far outside); the distance is exact.
    const multiple = Math.floor(t * SCALES[SCALE_OFFSET + level + 1] + 0.5);
    const distance = Math.abs(multiple * EXACT_POWERS_OF_TEN[level + 1] - t);
    if (distance > room + MARGIN) break;
    if (distance >= room - MARGIN) return shortestSlow(v, bits);
    digits = multiple;
    level++;
  }
  shortestExponent = EXPONENT_K0[biased] + level;
  return digits;
}

/** d·10^k rounded once to a double: exactly what Number(`${d}e${k}`) returns. */
function decimalToDouble(digits: number, k: number): number {
  if (k >= 0) {
    if (k <= 22) return digits * EXACT_POWERS_OF_TEN[k];
  } else if (k >= -22) {
    return digits / EXACT_POWERS_OF_TEN[-k];
  }
  return Number(`${digits}e${k}`);
}

function readsBackAs(v: number, digits: number, k: number): boolean {
  return digits > 0 && Math.fround(decimalToDouble(digits, k)) === v;
}

/**
 * The exact search, for what `shortestDigits` cannot decide: at exponent k only floor(v/10^k) and the next integer
 * can read back as v (any other is farther on the same side); k rises while one does. Membership is decided by
 * margin when clear, else by rounding the candidate exactly.
 */
function shortestSlow(v: number, bits: number): number {
  const biased = bits >>> 23;
  const upperRoom = 2 ** (Math.max(biased, 1) - 151);
  // Below a power of two the spacing halves, so the interval's lower half does too.
  const lowerRoom = (bits & MANTISSA_MASK) === 0 && biased > 1 ? upperRoom / 2 : upperRoom;
  let k = EXPONENT_K0[biased] + 1;
  let found = false;
  let below = 0;
  let belowFits = false;
  let aboveFits = false;
  let fraction = 0;
  for (;;) {
    const scale = SCALES[k + SCALE_OFFSET];
    const t = v * scale;
    const floor = Math.floor(t);
    const f = t - floor;
    const margin = t * 2 ** -48 + 2 ** -60;
    const lower = lowerRoom * scale;
    const upper = upperRoom * scale;
    const lowFits = f < lower - margin ? true : f > lower + margin ? false : readsBackAs(v, floor, k);
    const highFits = 1 - f < upper - margin ? true : 1 - f > upper + margin ? false : readsBackAs(v, floor + 1, k);
    if (lowFits || highFits) {
      found = true;
      below = floor;
      belowFits = lowFits;
      aboveFits = highFits;
      fraction = f;
      k++;
    } else if (found) {
      k--;
      break;
    } else {
      k--;
    }
  }
  shortestExponent = k;
  if (!(belowFits && aboveFits)) return belowFits ? below : below + 1;
  const margin = (below + 1) * 2 ** -46;
  if (fraction < 0.5 - margin) return below;
  if (fraction > 0.5 + margin) return below + 1;
  return closerOfTwo(bits, below, k);
}

/** Exact comparison of v with the midpoint (below + 1/2)·10^k; an exact tie goes to the even digits. */
function closerOfTwo(bits: number, below: number, k: number): number {
  const biased = bits >>> 23;
  const mantissa = BigInt(biased === 0 ? bits & MANTISSA_MASK : (bits & MANTISSA_MASK) | (MANTISSA_MASK + 1));
  const twiceExponent = Math.max(biased, 1) - 149; // v·2 = mantissa·2^twiceExponent
  let twiceValue = mantissa;
  let twiceMidpoint = BigInt(2 * below + 1);
  if (twiceExponent >= 0) twiceValue <<= BigInt(twiceExponent);
  else twiceMidpoint <<= BigInt(-twiceExponent);
  if (k >= 0) twiceMidpoint *= 10n ** BigInt(k);
  else twiceValue *= 10n ** BigInt(-k);
  if (twiceValue < twiceMidpoint) return below;
  if (twiceValue > twiceMidpoint) return below + 1;
  return below % 2 === 0 ? below : below + 1;
}

/** Longest text of one float32 (a sign and 21 integer digits); "-0.00000" takes at most 8 digits after it. */
const MAX_FLOAT32_TEXT = 22;
/**
 * Texts are written right to left, and the fixed-width digit writes below may scribble up to this many bytes left
 * of a text's start: that space is later overwritten by the texts before it, or lies before the output's start.
 */
const SCRIBBLE = 16;

/** "0000".."9999" as little-endian uint32 ASCII, so four digits take one table load and one store. */
const DIGIT_QUADS = new Uint32Array(10000);
// Digit by digit, with no array per entry: this runs once at start-up, in the interpreter (3–8 ms before, ~1 now).
for (let a = 0, i = 0; a < 10; a++) {
  for (let b = 0; b < 10; b++) {
    for (let c = 0; c < 10; c++) {
      for (let d = 0; d < 10; d++) DIGIT_QUADS[i++] = 0x30303030 + a + (b << 8) + (c << 16) + (d << 24);
    }
  }
}
/** 10^i for i = 0..9 as int32, for splitting a 9-digit integer at a decimal position. */
const INT_POWERS_OF_TEN = new Int32Array(10);
for (let i = 0; i < 10; i++) INT_POWERS_OF_TEN[i] = 10 ** i;

/**
 * The output bytes and a DataView of them (for 2- and 4-byte stores at any offset); both are rewritten only
 * when the scratch grows.
 */
interface Output {
  bytes: Buffer;
  view: DataView;
}

/**
 * Writes `digits` (int32 below 10^9) as 9 zero-padded decimal digits to bytes[end-9, end). Straight-line code: a
 * loop whose trip count varies with the value costs more in mispredicted branches than the digits themselves.
 */
function writeNineDigits(out: Output, end: number, digits: number): void {
  const high = (digits / 10000) | 0;
  const first = (high / 10000) | 0;
  out.view.setUint32(end - 4, DIGIT_QUADS[digits - high * 10000], true);
  out.view.setUint32(end - 8, DIGIT_QUADS[high - first * 10000], true);
  out.bytes[end - 9] = 0x30 + first;
}

function digitCount(digits: number): number {
  if (digits < 10000) return digits < 100 ? (digits < 10 ? 1 : 2) : digits < 1000 ? 3 : 4;
  return digits < 1000000 ? (digits < 100000 ? 5 : 6) : digits < 10000000 ? 7 : digits < 100000000 ? 8 : 9;
}

/**
 * Writes the JSON texts of values[from..to), separated by commas, right to left so that the last ends at
 * out[end - 1]; returns where the first starts. NaN or ±Infinity throws. The common layout, 0.000ddd, is written
 * here; the others in `writeOtherLayout`. Values are read here, not passed: a double (or a uint32 above 2^30)
 * handed to a call that is not inlined is boxed on the heap, per value.
 */
function writeTexts(out: Output, end: number, values: Float32Array, bitsView: Uint32Array, from: number, to: number): number {
  const bytes = out.bytes;
  const view = out.view;
  let pos = end;
  for (let i = to - 1; i >= from; i--) {
    const v = values[i];
    const bits = bitsView[i];
    // NaN and ±Infinity are the float32s whose exponent bits are all ones.
    if ((bits & 0x7f800000) === 0x7f800000) throw notFiniteError(v);
    if (i < to - 1) bytes[--pos] = 0x2c;
    if (v === 0) {
      bytes[--pos] = 0x30;
      continue;
    }
    const digits = shortestDigits(v < 0 ? -v : v, bits & 0x7fffffff) | 0;
    const k = shortestExponent;
    if (k < 0 && k > -14 && digits < EXACT_POWERS_OF_TEN[-k] && (k > -7 || digits >= EXACT_POWERS_OF_TEN[-k - 6])) {
      // 0.000ddd (ECMAScript: -6 < n <= 0): the -k fraction digits, zero-padded, then "0.". -k <= 13: at
      // n = -5 (1e-6 <= v < 1e-5) the ulp exceeds 1e-13, so 8 digits always do (checked for every such float32).
      writeNineDigits(out, pos, digits);
      view.setUint32(pos - 13, 0x30303030);
      pos += k - 2;
      view.setUint16(pos, 0x302e); // "0."
    } else {
      const powerAbove = digits === 1 && k > 0 && k <= 21 && (v < 0 ? -v : v) < EXACT_POWERS_OF_TEN[k];
      pos = writeOtherLayout(out, pos, digits, k, powerAbove);
    }
    if (v < 0) bytes[--pos] = 0x2d;
  }
  return pos;
}

/**
 * The layouts other than 0.000ddd, for digits·10^k, ending at out[end - 1]; returns the start. `powerAbove`: the
 * decimal is 10^k just above an integer value, written d e+k so as not to outgrow String(value).
 */
function writeOtherLayout(out: Output, end: number, digits: number, k: number, powerAbove: boolean): number {
  const bytes = out.bytes;
  if (k < 0 && k > -9 && digits >= INT_POWERS_OF_TEN[-k]) {
    // ddd.ddd: split at the point (one exact integer division).
    const integer = (digits / INT_POWERS_OF_TEN[-k]) | 0;
    writeNineDigits(out, end, digits - integer * INT_POWERS_OF_TEN[-k]);
    const point = end + k - 1;
    bytes[point] = 0x2e;
    writeNineDigits(out, point, integer);
    return point - digitCount(integer);
  }
  const count = digitCount(digits);
  if (k >= 0 && count + k <= 21 && !powerAbove) {
    // ddd000: integers up to 21 digits are written out in full.
    for (let p = end - k; p < end; p++) bytes[p] = 0x30;
    writeNineDigits(out, end - k, digits);
    return end - k - count;
  }
  // d.ddde±x
  const exponent = count + k - 1;
  const magnitude = exponent < 0 ? -exponent : exponent;
  let p = end;
  if (magnitude >= 10) {
    bytes[--p] = 0x30 + (magnitude % 10);
    bytes[--p] = 0x30 + Math.floor(magnitude / 10);
  } else {
    bytes[--p] = 0x30 + magnitude;
  }
  bytes[--p] = exponent < 0 ? 0x2d : 0x2b;
  bytes[--p] = 0x65;
  if (count > 1) {
    const first = (digits / INT_POWERS_OF_TEN[count - 1]) | 0;
    writeNineDigits(out, p, digits - first * INT_POWERS_OF_TEN[count - 1]);
    p -= count - 1;
    bytes[--p] = 0x2e;
    bytes[--p] = 0x30 + first;
  } else {
    bytes[--p] = 0x30 + digits;
  }
  return p;
}

/** Reused output bytes; texts are ASCII, so they decode as latin1 with one copy. Not kept above 1 MiB. */
const KEPT_SCRATCH_BYTES = 1 << 20;
let scratch = outputOf(Buffer.allocUnsafeSlow(1 << 14));

function outputOf(bytes: Buffer): Output {
  return { bytes, view: new DataView(bytes.buffer, bytes.byteOffset, bytes.length) };
}

function scratchOf(length: number): Output {
  if (length <= scratch.bytes.length) return scratch;
  const output = outputOf(Buffer.allocUnsafeSlow(length));
  if (length <= KEPT_SCRATCH_BYTES) scratch = output;
  return output;
}

function notFiniteError(value: number): RangeError {
  return new RangeError(`float32 JSON: ${value} has no JSON number form (only finite numbers do)`);
}

/**
 * The shortest decimal text that reads back (`Math.fround(Number(text))`) as `value`, a float32 held in a double;
 * ECMAScript layout; -0 → "0". Throws a RangeError for NaN, ±Infinity and numbers that are not float32.
 */
export function formatFloat32(value: number): string {
  if (Math.fround(value) !== value) {
    throw Number.isFinite(value) ? new RangeError(`float32 JSON: ${value} is not a float32 value`) : notFiniteError(value);
  }
  if (value === Infinity || value === -Infinity) throw notFiniteError(value);
  if (value === 0) return '0';
  bitsScratch[0] = value;
  const magnitude = Math.abs(value);
  const digits = shortestDigits(magnitude, bitsScratchView[0] & 0x7fffffff);
  const k = shortestExponent;
  const powerAbove = digits === 1 && k > 0 && k <= 21 && magnitude < EXACT_POWERS_OF_TEN[k];
  const text = layOut(String(digits), k, powerAbove);
  return value < 0 ? `-${text}` : text;
}

/** "0.", "0.0", … "0.00000": the fixed-notation prefixes of values below 1. */
const FRACTION_PREFIXES = Array.from({ length: 6 }, (_, zeros) => `0.${'0'.repeat(zeros)}`);

/**
 * ECMAScript Number::toString's layout of digits·10^k, with string operations: for one value, building a string
 * from the digits' own string is cheaper than writing bytes and decoding them (writeTexts does that for arrays).
 */
function layOut(digits: string, k: number, powerAbove: boolean): string {
  const n = digits.length + k; // where the decimal point goes, counted from the first digit
  if (k >= 0 && n <= 21 && !powerAbove) return digits + '0'.repeat(k);
  if (k < 0 && n > 0) return `${digits.slice(0, n)}.${digits.slice(n)}`;
  if (n > -6 && n <= 0) return FRACTION_PREFIXES[-n] + digits;
  const exponent = n - 1;
  const sign = exponent < 0 ? '-' : '+';
  const mantissa = digits.length === 1 ? digits : `${digits[0]}.${digits.slice(1)}`;
  return `${mantissa}e${sign}${Math.abs(exponent)}`;
}

/**
 * `values[start..end)` as a JSON array of shortest float32 texts, `[a,b,…]`, written as bytes (no number[] and no
 * JSON.stringify). Throws a RangeError if an element is NaN or ±Infinity.
 */
export function writeFloat32Array(values: Float32Array, start = 0, end = values.length): string {
  if (start < 0 || end > values.length || start > end) {
    throw new RangeError(`float32 JSON: range [${start}, ${end}) is outside an array of ${values.length}`);
  }
  if (start === end) return '[]';
  const length = SCRIBBLE + (end - start) * (MAX_FLOAT32_TEXT + 1) + 2;
  const out = scratchOf(length);
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  // Right to left, so each text's scribble lands where the texts before it are still to be written.
  out.bytes[length - 1] = 0x5d;
  const pos = writeTexts(out, length - 1, values, bits, start, end) - 1;
  out.bytes[pos] = 0x5b;
  return out.bytes.toString('latin1', pos, length);
}

/**
 * Numbers whose JSON.stringify text is the shortest float32 text (Number(formatFloat32(v))), for values handed to
 * a library that stringifies them itself. (For the powers of ten written `1e+11` above, JSON.stringify prints the
 * same number as `100000000000`.)
 */
export function toShortestNumbers(values: Float32Array): number[] {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const numbers = new Array<number>(values.length);
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if ((bits[i] & 0x7f800000) === 0x7f800000) throw notFiniteError(value);
    if (value === 0) {
      numbers[i] = 0;
      continue;
    }
    const digits = shortestDigits(Math.abs(value), bits[i] & 0x7fffffff);
    const magnitude = decimalToDouble(digits, shortestExponent);
    numbers[i] = value < 0 ? -magnitude : magnitude;
  }
  return numbers;
}

const CIRCULAR = 'stringifyJson: the value is a circular structure, which JSON cannot express';

/**
 * JSON.stringify(value) (no replacer, no indent), except that every Float32Array in the tree is written as a JSON
 * array of shortest float32 texts (JSON.stringify would write it as an object of index keys with double digits).
 * Strings, keys and other leaves go through JSON.stringify, so escaping is identical. Throws a TypeError where
 * JSON.stringify throws (cycles, BigInt) and where it would return undefined (an undefined, function or symbol
 * at the top).
 */
export function stringifyJson(value: unknown): string {
  const text = serialize(value, '', []);
  if (text === undefined) throw new TypeError(`stringifyJson: a top-level ${typeof value} has no JSON text`);
  return text;
}

/**
 * stringifyJson's text in pieces, for a response too large to write in one turn of the event loop: each piece ends at
 * the first element or member boundary after `pieceChars` characters, and the value is walked only as far as the
 * piece being taken. The walk steps through arrays and plain objects down to PIECE_WALK_DEPTH levels (the members of
 * `results[i].embeddings`, one token each, in a per-token response); deeper values, and any one leaf such as a
 * Float32Array, are written whole by serialize. Throws as stringifyJson does, when the walk reaches the cause.
 */
export function* jsonPieces(value: unknown, pieceChars: number): Generator<string, void, void> {
  const out: PieceWriter = { text: '', pieceChars, ancestors: [] };
  if (isPlainContainer(value)) {
    for (const _ of writeContainer(value, out, PIECE_WALK_DEPTH)) {
      yield out.text;
      out.text = '';
    }
  } else {
    out.text = stringifyJson(value);
  }
  if (out.text !== '') yield out.text;
}

/**
 * How deep jsonPieces steps through containers itself. A step costs a generator, which made serialising a per-token
 * response ~25% slower when every container had one.
 */
const PIECE_WALK_DEPTH = 4;

/** Where jsonPieces writes: the text not handed out yet, and the containers it is inside (for cycles). */
interface PieceWriter {
  text: string;
  /** The walk pauses (yields) at the first boundary once `text` is this long. */
  readonly pieceChars: number;
  readonly ancestors: object[];
}

/** An array or an object that JSON writes member by member as it is (no toJSON, not a boxed primitive or a Float32Array). */
function isPlainContainer(value: unknown): value is object {
  return (
    typeof value === 'object' &&
    value !== null &&
    !(value instanceof Float32Array) &&
    typeof (value as { toJSON?: unknown }).toJSON !== 'function' &&
    !isBoxedPrimitive(value)
  );
}

/** serializeArray and serializeObject, pausing at member boundaries; members `depth` levels down are written whole. */
function* writeContainer(container: object, out: PieceWriter, depth: number): Generator<void, void, void> {
  if (out.ancestors.includes(container)) throw new TypeError(CIRCULAR);
  out.ancestors.push(container);
  const array = Array.isArray(container);
  out.text += array ? '[' : '{';
  let first = true;
  for (const key of array ? container.keys() : Object.keys(container)) {
    const member = (container as Record<string | number, unknown>)[key];
    const walked = depth > 1 && isPlainContainer(member);
    const text = walked ? '' : (serialize(member, key, out.ancestors) ?? (array ? 'null' : undefined));
    if (text === undefined) continue; // an object's member JSON omits
    if (!first) out.text += ',';
    if (!array) out.text += `${quoteKey(key as string)}:`;
    first = false;
    if (walked) yield* writeContainer(member, out, depth - 1);
    else out.text += text;
    if (out.text.length >= out.pieceChars) yield;
  }
  out.ancestors.pop();
  out.text += array ? ']' : '}';
}

/**
 * SerializeJSONProperty of ECMA-262 for one value; undefined where JSON omits it. `key` is an array index as a
 * number (made a string only for a toJSON call, which is rare).
 */
function serialize(value: unknown, key: string | number, ancestors: object[]): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      // JSON's number text is Number::toString for finite numbers, "null" otherwise.
      return Number.isFinite(value) ? String(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      if (value === null) return 'null';
      if (value instanceof Float32Array) return writeFloat32Array(value);
      if (Array.isArray(value)) return serializeArray(value, ancestors);
      if (typeof (value as { toJSON?: unknown }).toJSON === 'function') {
        return serialize((value as { toJSON(key: string): unknown }).toJSON(String(key)), key, ancestors);
      }
      // Number, String, Boolean and BigInt objects: JSON.stringify unwraps them (and throws for a BigInt).
      if (isBoxedPrimitive(value)) return JSON.stringify(value);
      return serializeObject(value, ancestors);
    case 'bigint': {
      const toJSON = (BigInt.prototype as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === 'function') return serialize(toJSON.call(value, String(key)), key, ancestors);
      return JSON.stringify(value); // throws JSON.stringify's own TypeError
    }
    default:
      return undefined; // undefined, functions, symbols
  }
}

function isBoxedPrimitive(value: object): boolean {
  return value instanceof Number || value instanceof String || value instanceof Boolean || value instanceof BigInt;
}

function serializeArray(values: unknown[], ancestors: object[]): string {
  if (ancestors.includes(values)) throw new TypeError(CIRCULAR);
  ancestors.push(values);
  let text = '[';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) text += ',';
    text += serialize(values[i], i, ancestors) ?? 'null';
  }
  ancestors.pop();
  return text + ']';
}

function serializeObject(object: object, ancestors: object[]): string {
  if (ancestors.includes(object)) throw new TypeError(CIRCULAR);
  ancestors.push(object);
  let text = '{';
  let first = true;
  for (const key of Object.keys(object)) {
    const member = serialize((object as Record<string, unknown>)[key], key, ancestors);
    if (member === undefined) continue;
    text += first ? quoteKey(key) : `,${quoteKey(key)}`;
    text += ':';
    text += member;
    first = false;
  }
  ancestors.pop();
  return text + '}';
}

/** Quoted keys, cached: response shapes repeat a handful of keys thousands of times. Bounded against odd inputs. */
const quotedKeys = new Map<string, string>();
const MAX_QUOTED_KEYS = 512;

function quoteKey(key: string): string {
  let quoted = quotedKeys.get(key);
  if (quoted === undefined) {
    quoted = JSON.stringify(key);
    if (quotedKeys.size < MAX_QUOTED_KEYS) quotedKeys.set(key, quoted);
  }
  return quoted;
}

/** The JSON shape of a value that holds Float32Arrays, as stringifyJson writes it and JSON.parse reads it back. */
export type JsonOf<T> = T extends Float32Array
  ? number[]
  : T extends (infer Item)[]
    ? JsonOf<Item>[]
    : T extends object
      ? { [Key in keyof T]: JsonOf<T[Key]> }
      : T;
