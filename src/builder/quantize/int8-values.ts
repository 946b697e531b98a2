/**
 * Symmetric int8 quantization of float32 matrices: one scale per column (a matrix product's weights: one per output
 * feature) or per row (an embedding table: one per token). scale = max |w| / 127, q = round(w / scale) with halves
 * rounded away from zero so that q(-w) = -q(w); a group of zeros gets scale 1 and stays 0.
 */

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
export function quantizeColumns(matrix: Matrix): Int8Matrix {
  const { rows, columns, values } = matrix;
  const largest = new Float32Array(columns);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < columns; c++) largest[c] = Math.max(largest[c], Math.abs(values[r * columns + c]));
  }
  const scales = largest.map(scaleFor);
  const quantized = new Int8Array(values.length);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < columns; c++) quantized[r * columns + c] = toInt8(values[r * columns + c] / scales[c]);
  }
  return { quantized, scales };
}

/** One scale per row: scales has `rows` values. */
export function quantizeRows(matrix: Matrix): Int8Matrix {
  const { rows, columns, values } = matrix;
  const scales = new Float32Array(rows);
  const quantized = new Int8Array(values.length);
  for (let r = 0; r < rows; r++) {
    let largest = 0;
    for (let c = 0; c < columns; c++) largest = Math.max(largest, Math.abs(values[r * columns + c]));
    scales[r] = scaleFor(largest);
    for (let c = 0; c < columns; c++) quantized[r * columns + c] = toInt8(values[r * columns + c] / scales[r]);
  }
  return { quantized, scales };
}

export function transposed(matrix: Matrix): Matrix {
  const { rows, columns, values } = matrix;
  const out = new Float32Array(values.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < columns; c++) out[c * rows + r] = values[r * columns + c];
  return { name: matrix.name, rows: columns, columns: rows, values: out };
}

function scaleFor(largest: number): number {
  return largest === 0 ? 1 : largest / 127;
}

/** `scaled` is w / scale, within ±127 up to float rounding of the scale. */
function toInt8(scaled: number): number {
  return Math.sign(scaled) * Math.min(127, Math.round(Math.abs(scaled)));
}
