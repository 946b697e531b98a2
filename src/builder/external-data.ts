import { MODEL_DATA_FILE } from '../encoder/model-package.ts';
import { decodeModel, encodeModel, type Tensor } from './quantize/onnx-format.ts';

/** Initializers smaller than this stay in the graph: not worth a mapping of their own. */
const MIN_EXTERNAL_BYTES = 1024;
/** Each moved initializer starts at a multiple of this in the data file: a page, as memory mapping wants. */
const ALIGNMENT = 4096;
/** TensorProto.DataLocation.EXTERNAL */
const EXTERNAL = 1;

/**
 * Splits the large initializers of a model's main graph out into one data file, in ONNX's external-data form (each
 * moved tensor names MODEL_DATA_FILE, its offset and its length). onnxruntime maps such a file into memory and
 * runs on the mapped pages, where bytes inside the graph are copied out of the protobuf into fresh memory: a session
 * of the MiniLM-shaped model took 352 → 81–108 ms, with 67k → 11k page faults and 330 → 157 MiB resident
 * (docs/benchmarks.md, session 10), and the executable no longer reads and hashes those bytes at every start.
 * Null when the model has nothing to move, or a field this program's ONNX schema does not know (then the graph stays
 * whole: rewriting it would drop that field).
 */
export function splitExternalData(weights: Uint8Array): { graph: Uint8Array; data: Uint8Array } | null {
  let model;
  try {
    model = decodeModel(weights);
  } catch {
    return null;
  }
  const moved: { tensor: Tensor; bytes: Uint8Array }[] = [];
  for (const tensor of model.graph?.initializer ?? []) {
    if (tensor.raw_data && tensor.raw_data.byteLength >= MIN_EXTERNAL_BYTES) moved.push({ tensor, bytes: tensor.raw_data });
  }
  if (moved.length === 0) return null;
  let size = 0;
  const offsets = moved.map(({ bytes }) => {
    const offset = Math.ceil(size / ALIGNMENT) * ALIGNMENT;
    size = offset + bytes.byteLength;
    return offset;
  });
  const data = new Uint8Array(size);
  moved.forEach(({ tensor, bytes }, i) => {
    data.set(bytes, offsets[i]);
    delete tensor.raw_data;
    tensor.data_location = EXTERNAL;
    tensor.external_data = [
      { key: 'location', value: MODEL_DATA_FILE },
      { key: 'offset', value: String(offsets[i]) },
      { key: 'length', value: String(bytes.byteLength) },
    ];
  });
  return { graph: encodeModel(model), data };
}
