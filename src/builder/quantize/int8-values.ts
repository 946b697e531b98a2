/**
 * Symmetric int8 quantization of float32 matrices: one scale per column (a matrix product's weights: one per output
 * feature) or per row (an embedding table: one per token). scale = max |w| / levels, q = round(w / scale) with halves
 * rounded away from zero so that q(-w) = -q(w); a group of zeros gets scale 1 and stays 0.
 *
 * A matrix product's weights use 63 levels (7 bits), as onnxruntime's own quantizer does with reduce_range: on x86-64
 * CPUs without VNNI (AVX2 only, e.g. AMD Zen 3), onnxruntime multiplies uint8 activations by int8 weights with
 * vpmaddubsw, which adds two products into an int16 and saturates there; 2 × 255 × 127 overflows it, 2 × 255 × 63 does
 * not. With 127 levels the int8 model's outputs were off by 20–30% on such a CPU while exact on VNNI ones. An embedding
 * table is only looked up and cast, never multiplied as int8: it keeps 127 levels.
 */

/** Levels of a matrix product's weights (7 bits; see above). */
export const WEIGHT_LEVELS = 63;
/** Levels of an embedding table's rows. */
export const TABLE_LEVELS = 127;

export interface Matrix {
  /** The name the graph read it by, which the int8 copy's name starts with. */
  name: string;
  rows: number;
  columns: number;
  /** Row-major [rows, columns]. */
  values: Float32Array;
}

export interface Int8Matrix {
  /** Row-major, as the source. */
  quantized: Int8Array;
  scales: Float32Array;
}

/** One scale per column: scales has `columns` values. */
export function quantizeColumns(matrix: Matrix, levels = WEIGHT_LEVELS): Int8Matrix {
  const { rows, columns, values } = matrix;
  const largest = new Float32Array(columns);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < columns; c++) largest[c] = Math.max(largest[c], Math.abs(values[r * columns + c]));
  }
  const scales = largest.map((value) => scaleFor(value, levels));
  const quantized = new Int8Array(values.length);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < columns; c++) quantized[r * columns + c] = toInt8(values[r * columns + c] / scales[c], levels);
  }
  return { quantized, scales };
}

/** One scale per row: scales has `rows` values. */
export function quantizeRows(matrix: Matrix, levels = TABLE_LEVELS): Int8Matrix {
  const { rows, columns, values } = matrix;
  const scales = new Float32Array(rows);
  const quantized = new Int8Array(values.length);
  for (let r = 0; r < rows; r++) {
    let largest = 0;
    for (let c = 0; c < columns; c++) largest = Math.max(largest, Math.abs(values[r * columns + c]));
    scales[r] = scaleFor(largest, levels);
    for (let c = 0; c < columns; c++) quantized[r * columns + c] = toInt8(values[r * columns + c] / scales[r], levels);
  }
  return { quantized, scales };
}

export function transposed(matrix: Matrix): Matrix {
  const { rows, columns, values } = matrix;
  const out = new Float32Array(values.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < columns; c++) out[c * rows + r] = values[r * columns + c];
  return { name: matrix.name, rows: columns, columns: rows, values: out };
}

function scaleFor(largest: number, levels: number): number {
  return largest === 0 ? 1 : largest / levels;
}

/** `scaled` is w / scale, within ±levels up to float rounding of the scale. */
function toInt8(scaled: number, levels: number): number {
  return Math.sign(scaled) * Math.min(levels, Math.round(Math.abs(scaled)));
}
