/**
 * ONNX ModelProto read and written with protobufjs, on the schema of onnx-schema.ts. Decoding refuses a file with a
 * field the schema does not declare (a newer ONNX, a private extension): protobufjs would drop it silently, and a
 * rewritten model that lost a field is a different model.
 */
import protobuf from 'protobufjs';
import { ConfigError } from '../../encoder/errors.ts';
import { onnxModelProto } from './onnx-schema.ts';

/** TensorProto.DataType values this program reads or writes. */
export const DataType = { FLOAT: 1, INT8: 3, INT64: 7 } as const;

/** AttributeProto.AttributeType values this program reads. */
export const AttributeType = { FLOAT: 1, INT: 2, GRAPH: 5, GRAPHS: 10 } as const;

export type Int64 = number | protobuf.Long;

export interface StringStringEntry {
  key?: string;
  value?: string;
}

export interface Tensor {
  name?: string;
  dims?: Int64[];
  data_type?: number;
  raw_data?: Uint8Array;
  float_data?: number[];
  external_data?: StringStringEntry[];
  data_location?: number;
  [field: string]: unknown;
}

export interface Attribute {
  name?: string;
  type?: number;
  f?: number;
  i?: Int64;
  g?: Graph;
  graphs?: Graph[];
  [field: string]: unknown;
}

export interface Node {
  input: string[];
  output: string[];
  name?: string;
  op_type?: string;
  domain?: string;
  attribute: Attribute[];
  [field: string]: unknown;
}

export interface ValueInfo {
  name?: string;
  [field: string]: unknown;
}

export interface Graph {
  node: Node[];
  initializer: Tensor[];
  input: ValueInfo[];
  output: ValueInfo[];
  value_info?: ValueInfo[];
  [field: string]: unknown;
}

export interface Model {
  opset_import: { domain?: string; version?: Int64 }[];
  graph?: Graph;
  [field: string]: unknown;
}

/**
 * The model of an .onnx file's bytes, as plain objects (repeated fields always present as arrays). A field the schema
 * does not declare is a ConfigError, unless `readOnly`: a reader that rewrites nothing loses nothing by skipping it.
 */
export function decodeModel(bytes: Uint8Array, options: { readOnly?: boolean } = {}): Model {
  const type = onnxModelProto();
  let message: protobuf.Message;
  try {
    message = type.decode(bytes);
  } catch (error) {
    throw new ConfigError(`the model weights are not an ONNX model file: ${(error as Error).message}`, { cause: error });
  }
  const unknown = options.readOnly ? null : firstUnknownField(bytes, type);
  if (unknown !== null) {
    throw new ConfigError(`the ONNX model has a field this builder does not know (${unknown}); rewriting it would drop that field`);
  }
  return type.toObject(message, { arrays: true }) as Model;
}

export function encodeModel(model: Model): Uint8Array {
  const type = onnxModelProto();
  return type.encode(type.fromObject(model)).finish();
}

/** An int64 field as a number (protobufjs gives Long objects for int64). */
export function toNumber(value: Int64 | undefined): number {
  if (value === undefined) return 0;
  return typeof value === 'number' ? value : protobuf.util.LongBits.from(value).toNumber();
}

/** A tensor's float32 values, from raw_data (little-endian) or float_data. */
export function floatsOf(tensor: Tensor): Float32Array {
  if (tensor.raw_data && tensor.raw_data.byteLength > 0) {
    // copied: raw_data may sit at an offset that is not a multiple of 4 in the decoded buffer
    return new Float32Array(new Uint8Array(tensor.raw_data).buffer);
  }
  return Float32Array.from(tensor.float_data ?? []);
}

/** The graphs held in a node's attributes (the branches of If, the body of Loop and Scan). */
export function subgraphsOf(node: Node): Graph[] {
  return node.attribute.flatMap((attribute) => [...(attribute.g ? [attribute.g] : []), ...(attribute.graphs ?? [])]);
}

/** Where the first field unknown to `type` sits (e.g. `ModelProto.graph.node field 11`), or null. */
function firstUnknownField(bytes: Uint8Array, type: protobuf.Type): string | null {
  const reader = protobuf.Reader.create(bytes);
  return unknownFieldIn(reader, bytes.byteLength, type, type.name);
}

function unknownFieldIn(reader: protobuf.Reader, end: number, type: protobuf.Type, where: string): string | null {
  while (reader.pos < end) {
    const tag = reader.uint32();
    const id = tag >>> 3;
    const wireType = tag & 7;
    const field = type.fieldsById[id];
    if (field === undefined) return `${where} field ${id}`;
    const fieldType = field.resolve().resolvedType;
    if (fieldType instanceof protobuf.Type && wireType === 2) {
      const length = reader.uint32();
      const stop = reader.pos + length;
      const found = unknownFieldIn(reader, stop, fieldType, `${where}.${field.name}`);
      if (found !== null) return found;
      reader.pos = stop;
    } else {
      reader.skipType(wireType);
    }
  }
  return null;
}
