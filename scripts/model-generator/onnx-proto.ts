/**
 * Encodes ONNX ModelProto messages with protobufjs, on the ONNX schema the builder's quantizer uses (one schema for
 * writing and rewriting models). The TypeScript shapes below are the part of it the generator writes (snake_case).
 */
import { onnxModelProto } from '../../src/builder/quantize/onnx-schema.ts';
import { InternalError } from '../../src/encoder/errors.ts';

/** TensorProto.DataType values used by the generator. */
export const TensorDataType = { FLOAT: 1, INT64: 7 } as const;
export type TensorDataTypeValue = (typeof TensorDataType)[keyof typeof TensorDataType];

/** AttributeProto.AttributeType values used by the generator. */
export const AttributeType = { FLOAT: 1, INT: 2, INTS: 7 } as const;

export interface OnnxTensor {
  name: string;
  dims: number[];
  data_type: TensorDataTypeValue;
  raw_data: Uint8Array;
}

export interface OnnxAttribute {
  name: string;
  type: (typeof AttributeType)[keyof typeof AttributeType];
  f?: number;
  i?: number;
  ints?: number[];
}

export interface OnnxNode {
  name: string;
  op_type: string;
  input: string[];
  output: string[];
  attribute: OnnxAttribute[];
}

/** A dimension is either fixed (`dim_value`) or symbolic (`dim_param`, e.g. `batch_size`). */
export type OnnxDimension = { dim_value: number } | { dim_param: string };

export interface OnnxValueInfo {
  name: string;
  type: { tensor_type: { elem_type: TensorDataTypeValue; shape: { dim: OnnxDimension[] } } };
}

export interface OnnxGraph {
  name: string;
  node: OnnxNode[];
  initializer: OnnxTensor[];
  input: OnnxValueInfo[];
  output: OnnxValueInfo[];
}

export interface OnnxModel {
  ir_version: number;
  opset_import: { domain: string; version: number }[];
  producer_name: string;
  producer_version: string;
  doc_string?: string;
  graph: OnnxGraph;
  metadata_props?: { key: string; value: string }[];
}

/** Serialises a model to the bytes of a `.onnx` file. */
export function encodeOnnxModel(model: OnnxModel): Uint8Array {
  const type = onnxModelProto();
  const problem = type.verify(model);
  if (problem) throw new InternalError(`generated ONNX model does not fit onnx.proto: ${problem}`);
  return type.encode(model).finish();
}

/** Decodes `.onnx` bytes back into plain objects (int64 as numbers); used to inspect generated models. */
export function decodeOnnxModel(bytes: Uint8Array): OnnxModel {
  const type = onnxModelProto();
  return type.toObject(type.decode(bytes), { longs: Number, arrays: true }) as OnnxModel;
}
