/**
 * A small builder for ONNX graphs: named initializers, nodes with attributes, and graph inputs and
 * outputs with symbolic dimensions. Node outputs get unique names derived from a readable prefix.
 */
import { endianness } from 'node:os';
import { InternalError } from '../../src/encoder/errors.ts';
import { AttributeType, TensorDataType } from './onnx-proto.ts';
import type {
  OnnxAttribute,
  OnnxDimension,
  OnnxGraph,
  OnnxNode,
  OnnxTensor,
  OnnxValueInfo,
  TensorDataTypeValue,
} from './onnx-proto.ts';

/** Attribute values by kind: integers, lists of integers, or floats (wrapped, as JS cannot tell 1 from 1.0). */
export type AttributeValue = number | number[] | { float: number };

/** A dimension of a graph input or output: a size, or the name of a symbolic dimension. */
export type Dimension = number | string;

// raw_data must be little-endian; typed arrays use the machine's byte order.
if (endianness() !== 'LE') throw new InternalError('the model generator needs a little-endian machine');

function bytesOf(array: Float32Array | BigInt64Array): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

export class OnnxGraphBuilder {
  readonly #nodes: OnnxNode[] = [];
  readonly #initializers: OnnxTensor[] = [];
  readonly #inputs: OnnxValueInfo[] = [];
  readonly #outputs: OnnxValueInfo[] = [];
  readonly #names = new Set<string>();
  #nodeCount = 0;

  /** Declares a graph input. */
  input(name: string, elemType: TensorDataTypeValue, dims: Dimension[]): string {
    this.#claim(name);
    this.#inputs.push(valueInfo(name, elemType, dims));
    return name;
  }

  /** Declares a graph output; `name` must be produced by a node. */
  output(name: string, elemType: TensorDataTypeValue, dims: Dimension[]): void {
    if (!this.#names.has(name)) throw new InternalError(`graph output '${name}' is not produced by any node`);
    this.#outputs.push(valueInfo(name, elemType, dims));
  }

  floatTensor(name: string, dims: readonly number[], values: Float32Array | number[]): string {
    const data = values instanceof Float32Array ? values : Float32Array.from(values);
    return this.#initializer(name, TensorDataType.FLOAT, dims, bytesOf(data), data.length);
  }

  int64Tensor(name: string, dims: readonly number[], values: number[]): string {
    const data = BigInt64Array.from(values, (v) => BigInt(v));
    return this.#initializer(name, TensorDataType.INT64, dims, bytesOf(data), data.length);
  }

  /** A float scalar constant (dims []), broadcast by element-wise ops. */
  floatScalar(name: string, value: number): string {
    return this.floatTensor(name, [], [value]);
  }

  /**
   * Adds a node with one output and returns the output name: `outputName` if given (used for the
   * graph outputs), otherwise a unique name made from `prefix`.
   */
  node(
    opType: string,
    inputs: string[],
    prefix: string,
    attributes: Record<string, AttributeValue> = {},
    outputName?: string,
  ): string {
    for (const input of inputs) {
      if (!this.#names.has(input)) throw new InternalError(`${opType} node '${prefix}' reads unknown value '${input}'`);
    }
    const index = this.#nodeCount++;
    const output = outputName ?? `${prefix}/${opType}_${index}`;
    this.#claim(output);
    this.#nodes.push({
      name: `${prefix}/${opType}_${index}`,
      op_type: opType,
      input: inputs,
      output: [output],
      attribute: Object.entries(attributes).map(([name, value]) => attribute(name, value)),
    });
    return output;
  }

  build(name: string): OnnxGraph {
    return {
      name,
      node: this.#nodes,
      initializer: this.#initializers,
      input: this.#inputs,
      output: this.#outputs,
    };
  }

  #initializer(
    name: string,
    dataType: TensorDataTypeValue,
    dims: readonly number[],
    rawData: Uint8Array,
    count: number,
  ): string {
    const expected = dims.reduce((a, b) => a * b, 1);
    if (count !== expected) {
      throw new InternalError(`initializer '${name}' has ${count} values for dims [${dims.join(', ')}]`);
    }
    this.#claim(name);
    this.#initializers.push({ name, dims: [...dims], data_type: dataType, raw_data: rawData });
    return name;
  }

  #claim(name: string): void {
    if (this.#names.has(name)) throw new InternalError(`value name '${name}' is used twice in the graph`);
    this.#names.add(name);
  }
}

function valueInfo(name: string, elemType: TensorDataTypeValue, dims: Dimension[]): OnnxValueInfo {
  const dim: OnnxDimension[] = dims.map((d) => (typeof d === 'string' ? { dim_param: d } : { dim_value: d }));
  return { name, type: { tensor_type: { elem_type: elemType, shape: { dim } } } };
}

function attribute(name: string, value: AttributeValue): OnnxAttribute {
  if (typeof value === 'number') return { name, type: AttributeType.INT, i: value };
  if (Array.isArray(value)) return { name, type: AttributeType.INTS, ints: value };
  return { name, type: AttributeType.FLOAT, f: value.float };
}
