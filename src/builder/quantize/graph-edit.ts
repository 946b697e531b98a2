/**
 * An ONNX graph being rewritten in place: which values are constants, who reads a value, fresh names, and the
 * clean-up at the end (what rewritten nodes stopped reading, when nothing else reads it). Only the top-level graph
 * is rewritten; the graphs inside If, Loop and Scan nodes are read to know which outer values they use.
 */
import { DataType, floatsOf, subgraphsOf, toNumber, type Graph, type Node, type Tensor } from './onnx-format.ts';

/** A constant the graph holds: an initializer, or a Constant node's value, possibly behind Identity nodes. */
export interface ConstantValue {
  tensor: Tensor;
  dims: number[];
  /** The initializer's name, or null for a Constant node's value. */
  initializer: string | null;
  /** The Identity and Constant nodes between the reader and the value. */
  producers: Node[];
  /** What identifies the value itself, whichever name reads it. */
  source: string;
}

export class GraphEdit {
  readonly graph: Graph;
  readonly #initializers = new Map<string, Tensor>();
  readonly #graphInputs: Set<string>;
  readonly #producers = new Map<string, Node>();
  /** Every value name in the graph, so that new values get names of their own. */
  readonly #names = new Set<string>();
  /** Names that subgraphs read from this graph: such a value must keep its name. */
  readonly #readBySubgraphs = new Set<string>();
  /** Initializers and Identity/Constant nodes that a rewritten node stopped reading. */
  readonly #releasedInitializers = new Set<string>();
  readonly #releasedNodes = new Set<Node>();

  constructor(graph: Graph) {
    this.graph = graph;
    this.#graphInputs = new Set(graph.input.map((input) => input.name ?? ''));
    for (const tensor of graph.initializer) if (tensor.name) this.#initializers.set(tensor.name, tensor);
    for (const name of [...this.#graphInputs, ...this.#initializers.keys()]) this.#names.add(name);
    for (const node of graph.node) {
      for (const name of [...node.input, ...node.output]) this.#names.add(name);
      for (const output of node.output) this.#producers.set(output, node);
      for (const subgraph of subgraphsOf(node)) collectNamesRead(subgraph, this.#readBySubgraphs);
    }
  }

  /** The constant that `name` holds, or why it is not one. A graph input's initializer is only a default: not constant. */
  constant(name: string | undefined, what: string): ConstantValue | string {
    const producers: Node[] = [];
    for (let current = name; current; ) {
      if (this.#graphInputs.has(current)) return `its ${what} is a graph input, which a caller may set`;
      const tensor = this.#initializers.get(current);
      if (tensor) return { tensor, dims: dimsOf(tensor), initializer: current, producers, source: current };
      const producer = this.#producers.get(current);
      if (producer === undefined || !isStandard(producer)) break;
      if (producer.op_type === 'Identity') {
        producers.push(producer);
        current = producer.input[0];
        continue;
      }
      const value = producer.op_type === 'Constant' ? producer.attribute.find((a) => a.name === 'value' && a.t !== undefined) : undefined;
      if (value) return { tensor: value.t as Tensor, dims: dimsOf(value.t as Tensor), initializer: null, producers: [...producers, producer], source: current };
      break;
    }
    return `its ${what} is not a constant`;
  }

  /**
   * A constant's float32 values, or why they cannot be used: not float32, stored outside the file (external data),
   * fewer values than the dims say, or NaN/infinite values.
   */
  floats(value: ConstantValue, what: string): Float32Array | string {
    const { tensor, dims } = value;
    if (tensor.data_type !== DataType.FLOAT) return `its ${what} is not float32 (data type ${tensor.data_type})`;
    if ((tensor.external_data ?? []).length > 0 || tensor.data_location === 1) return `its ${what} is stored outside the model file`;
    const values = floatsOf(tensor);
    const count = dims.reduce((product, dim) => product * dim, 1);
    if (values.length !== count) return `its ${what} holds ${values.length} values, not the ${count} its dims say`;
    if (!values.every(Number.isFinite)) return `its ${what} holds NaN or infinite values`;
    return values;
  }

  /** Marks a constant's initializer and the nodes that led to it as no longer read by the node being rewritten. */
  release(value: ConstantValue): void {
    if (value.initializer !== null) this.#releasedInitializers.add(value.initializer);
    for (const node of value.producers) this.#releasedNodes.add(node);
  }

  /** The nodes of this graph that read `name`. */
  readersOf(name: string): Node[] {
    return this.graph.node.filter((node) => node.input.includes(name));
  }

  /** Whether something outside this graph's nodes reads `name`: the graph's outputs, or a subgraph. */
  isReadOutside(name: string): boolean {
    return this.#readBySubgraphs.has(name) || this.graph.output.some((output) => output.name === name);
  }

  uniqueName(base: string): string {
    let name = base;
    for (let n = 1; this.#names.has(name); n++) name = `${base}_${n}`;
    this.#names.add(name);
    return name;
  }

  addInitializer(tensor: Tensor): void {
    this.graph.initializer.push(tensor);
    this.#initializers.set(tensor.name!, tensor);
  }

  /** Removes `node`, and the shape information of values that no longer exist. */
  removeNode(node: Node, vanished: readonly string[]): void {
    this.graph.node.splice(this.graph.node.indexOf(node), 1);
    this.graph.value_info = (this.graph.value_info ?? []).filter((info) => !vanished.includes(info.name ?? ''));
  }

  /** Drops what rewritten nodes stopped reading and nothing else reads: Identity and Constant nodes, then initializers. */
  dropReleased(): void {
    for (let removed = true; removed; ) {
      const read = this.#namesRead();
      const dead = this.graph.node.filter((node) => this.#releasedNodes.has(node) && node.output.every((output) => !read.has(output)));
      for (const node of dead) this.removeNode(node, node.output);
      removed = dead.length > 0;
    }
    const read = this.#namesRead();
    this.graph.initializer = this.graph.initializer.filter((tensor) => !this.#releasedInitializers.has(tensor.name ?? '') || read.has(tensor.name ?? ''));
  }

  #namesRead(): Set<string> {
    const read = new Set<string>([...this.#readBySubgraphs, ...this.#graphInputs]);
    for (const node of this.graph.node) for (const input of node.input) read.add(input);
    for (const output of this.graph.output) read.add(output.name ?? '');
    return read;
  }
}

/** A node of the default ONNX domain. */
export function isStandard(node: Node): boolean {
  return !node.domain || node.domain === 'ai.onnx';
}

function dimsOf(tensor: Tensor): number[] {
  return (tensor.dims ?? []).map(toNumber);
}

/** Every value name a graph (and the graphs inside it) reads; names it makes itself included, which is harmless here. */
function collectNamesRead(graph: Graph, into: Set<string>): void {
  for (const node of graph.node) {
    for (const input of node.input) into.add(input);
    for (const subgraph of subgraphsOf(node)) collectNamesRead(subgraph, into);
  }
  for (const output of graph.output) into.add(output.name ?? '');
}
