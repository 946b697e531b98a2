/**
 * readGraphLimits: the position table and fixed sequence dimensions of ONNX graphs — the generated models (the
 * generator slices its table to the sequence length), the shared HF exports (a Gather of positions from the
 * position_ids buffer), the same with every telling name removed, external data, and small graphs of the other forms
 * (Range, RoBERTa's CumSum, a fused EmbedLayerNormalization) and of what is not a position table.
 */
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import protobuf from 'protobufjs';
import { afterAll, describe, expect, it } from 'vitest';
import { splitExternalData } from '../../src/builder/external-data.ts';
import { readGraphLimits } from '../../src/builder/graph-limits.ts';
import { decodeModel, encodeModel, type Model, type Node, type Tensor } from '../../src/builder/quantize/onnx-format.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { hasShared, sharedModel, warnIfSharedMissing } from '../helpers/shared-fixtures.ts';

warnIfSharedMissing('position tables of the shared exports');

const SHARED = {
  'tiny-bert-embedding': 'embeddings.position_embeddings.weight',
  'tiny-bert-sentence-embedding': 'embeddings.position_embeddings.weight',
  'tiny-bert-sequence-classification': 'bert.embeddings.position_embeddings.weight',
  'tiny-bert-token-classification': 'bert.embeddings.position_embeddings.weight',
  'tinybert-golden': 'embeddings.position_embeddings.weight',
} as const;

/** The model with every value and initializer whose name matches `pattern` renamed `anonymous_<n>`. */
function withoutNames(bytes: Uint8Array, pattern: RegExp): Uint8Array {
  const model = decodeModel(bytes);
  const renamed = new Map<string, string>();
  const rename = (name: string) => {
    if (!pattern.test(name)) return name;
    if (!renamed.has(name)) renamed.set(name, `anonymous_${renamed.size}`);
    return renamed.get(name)!;
  };
  const graph = model.graph!;
  for (const tensor of graph.initializer) tensor.name = rename(tensor.name!);
  for (const node of graph.node) {
    node.input = node.input.map(rename);
    node.output = node.output.map(rename);
    node.name = node.name ? rename(node.name) : node.name;
  }
  expect(renamed.size).toBeGreaterThan(0);
  return encodeModel(model);
}

describe('readGraphLimits on generated models', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('finds the table the generator slices to the sequence length, for each model type and size', async () => {
    for (const [modelType, maxPositions] of [['embedding', 64], ['sequence_classification', 128], ['token_classification', 33], ['sentence_embedding', 200]] as const) {
      const dir = await generateTinyModel({ modelType, maxPositions });
      dirs.push(dir);
      const weights = readFileSync(path.join(dir, 'model.onnx'));
      expect(readGraphLimits(weights), modelType).toEqual({ positionTable: { name: 'embeddings.position_embeddings.weight', rows: maxPositions }, fixedSequence: null });
      // without its name the slice to the sequence length still tells it
      expect(readGraphLimits(withoutNames(weights, /position/))?.positionTable, modelType).toEqual({ name: 'anonymous_0', rows: maxPositions });
    }
  });

  it('reads the dims of a table kept as external data (the graph a built executable carries)', async () => {
    const dir = await generateTinyModel({ maxPositions: 96 });
    dirs.push(dir);
    const split = splitExternalData(readFileSync(path.join(dir, 'model.onnx')))!;
    const table = decodeModel(split.graph).graph!.initializer.find((tensor) => tensor.name === 'embeddings.position_embeddings.weight')!;
    expect(table.data_location).toBe(1);
    expect(readGraphLimits(split.graph)?.positionTable).toEqual({ name: 'embeddings.position_embeddings.weight', rows: 96 });
  });
});

describe.skipIf(!hasShared)('readGraphLimits on the shared HF exports', () => {
  it('finds each position table by the Gather that looks positions up in it', () => {
    for (const [name, table] of Object.entries(SHARED)) {
      const limits = readGraphLimits(readFileSync(path.join(sharedModel(name), 'model.onnx')));
      expect(limits, name).toEqual({ positionTable: { name: table, rows: name === 'tinybert-golden' ? 100 : 512 }, fixedSequence: null });
    }
  });

  it('without any name saying "position", from the 0, 1, 2, … buffer its indices are cut from', () => {
    for (const name of ['tinybert-golden', 'tiny-bert-embedding']) {
      const bytes = withoutNames(readFileSync(path.join(sharedModel(name), 'model.onnx')), /position/);
      expect(readGraphLimits(bytes)?.positionTable?.rows, name).toBe(name === 'tinybert-golden' ? 100 : 512);
    }
  });
});

// Small graphs: only the structure matters, so tables are zeros and the graphs are never run.
const int64s = (name: string, values: number[], dims = [values.length]): Tensor => ({
  name,
  dims,
  data_type: 7,
  raw_data: new Uint8Array(BigInt64Array.from(values, BigInt).buffer),
});
const floats = (name: string, dims: number[]): Tensor => ({ name, dims, data_type: 1, raw_data: new Uint8Array(dims[0] * dims[1] * 4) });
const node = (op_type: string, input: string[], output: string, extra: Partial<Node> = {}): Node => ({ op_type, input, output: [output], attribute: [], ...extra });
const idsInput = (sequence: number | string = 'sequence', name = 'input_ids') => ({
  name,
  type: { tensor_type: { elem_type: 7, shape: { dim: [{ dim_param: 'batch' }, typeof sequence === 'number' ? { dim_value: sequence } : { dim_param: sequence }] } } },
});

function graphOf(nodes: Node[], initializer: Tensor[], input = [idsInput()]): Uint8Array {
  const model: Model = {
    ir_version: 8,
    opset_import: [{ domain: '', version: 17 }],
    graph: { node: nodes, initializer, input, output: [{ name: nodes.at(-1)!.output[0] }] },
  };
  return encodeModel(model);
}

/** Positions 0..seq-1 from a Range over the sequence length, then looked up in `table`. */
const rangeLookup = (table: string, through: Node[] = [], out = 'positions_out') => [
  node('Shape', ['input_ids'], 'shape'),
  node('Gather', ['shape', 'one'], 'seq_len'),
  node('Range', ['zero', 'seq_len', 'one'], 'range'),
  ...through,
  node('Gather', [table, through.at(-1)?.output[0] ?? 'range'], out),
];
const scalars = [int64s('zero', [0], []), int64s('one', [1], [])];

describe('readGraphLimits on small graphs', () => {
  it('takes a table looked up with a Range of positions, whatever it is called', () => {
    const bytes = graphOf(rangeLookup('w0'), [...scalars, floats('w0', [40, 4])]);
    expect(readGraphLimits(bytes)).toEqual({ positionTable: { name: 'w0', rows: 40 }, fixedSequence: null });
  });

  it("takes RoBERTa's positions, numbered by a CumSum of the non-padding tokens", () => {
    const nodes = [
      node('Equal', ['input_ids', 'one'], 'is_pad'),
      node('Not', ['is_pad'], 'mask_bool'),
      node('Cast', ['mask_bool'], 'mask', { attribute: [{ name: 'to', type: 2, i: 7 }] }),
      node('CumSum', ['mask', 'one'], 'cumsum'),
      node('Mul', ['cumsum', 'mask'], 'numbered'),
      node('Add', ['numbered', 'one'], 'position_ids_out'),
      node('Gather', ['w_pos', 'position_ids_out'], 'out'),
    ];
    expect(readGraphLimits(graphOf(nodes, [...scalars, floats('w_pos', [514, 4])]))?.positionTable).toEqual({ name: 'w_pos', rows: 514 });
  });

  it('takes the position input of a fused EmbedLayerNormalization', () => {
    const fused = node('EmbedLayerNormalization', ['input_ids', '', 'word', 'table_7', '', 'gamma', 'beta'], 'out', { domain: 'com.microsoft' });
    const bytes = graphOf([fused], [floats('word', [1000, 4]), floats('table_7', [256, 4]), floats('gamma', [1, 4]), floats('beta', [1, 4])]);
    expect(readGraphLimits(bytes)?.positionTable).toEqual({ name: 'table_7', rows: 256 });
  });

  it('takes no word table, no relative-position table or bias, no bucketed (Log) lookup', () => {
    const word = graphOf([node('Gather', ['word', 'input_ids'], 'out')], [floats('word', [1000, 4])]);
    expect(readGraphLimits(word)).toEqual({ positionTable: null, fixedSequence: null });
    const relative = graphOf(rangeLookup('encoder.rel_embeddings.weight'), [...scalars, floats('encoder.rel_embeddings.weight', [512, 4])]);
    expect(readGraphLimits(relative)?.positionTable).toBeNull();
    const bias = graphOf(rangeLookup('relative_attention_bias'), [...scalars, floats('relative_attention_bias', [32, 4])]);
    expect(readGraphLimits(bias)?.positionTable).toBeNull();
    const bucketed = graphOf(rangeLookup('w0', [node('Cast', ['range'], 'as_float', { attribute: [{ name: 'to', type: 2, i: 1 }] }), node('Log', ['as_float'], 'log'), node('Cast', ['log'], 'bucket', { attribute: [{ name: 'to', type: 2, i: 7 }] })]), [...scalars, floats('w0', [32, 4])]);
    expect(readGraphLimits(bucketed)?.positionTable).toBeNull();
    // a [1, n] buffer is not a table of n rows, a Slice of columns is no lookup of rows
    const buffer = graphOf(rangeLookup('position_ids_buffer'), [...scalars, floats('position_ids_buffer', [1, 512])]);
    expect(readGraphLimits(buffer)?.positionTable).toBeNull();
    const columns = graphOf([node('Shape', ['input_ids'], 'shape'), node('Slice', ['position_table', 'zero1', 'shape', 'axis1'], 'out')], [int64s('zero1', [0]), int64s('axis1', [1]), floats('position_table', [64, 4])]);
    expect(readGraphLimits(columns)?.positionTable).toBeNull();
  });

  it('prefers a table named for positions, and takes none when two equally likely tables disagree', () => {
    const two = [...rangeLookup('w0', [], 'a'), node('Gather', ['w1', 'range'], 'b'), node('Add', ['a', 'b'], 'out')];
    expect(readGraphLimits(graphOf(two, [...scalars, floats('w0', [40, 4]), floats('w1', [80, 4])]))?.positionTable).toBeNull();
    expect(readGraphLimits(graphOf(two, [...scalars, floats('w0', [40, 4]), floats('w1', [40, 4])]))?.positionTable).toEqual({ name: 'w0', rows: 40 });
    // LayoutLM: 2-D position tables looked up by box coordinates, and the 1-D one by positions
    const layout = [...rangeLookup('embeddings.position_embeddings.weight', [], 'a'), node('Gather', ['embeddings.x_position_embeddings.weight', 'input_ids'], 'b'), node('Add', ['a', 'b'], 'out')];
    const tables = [...scalars, floats('embeddings.position_embeddings.weight', [512, 4]), floats('embeddings.x_position_embeddings.weight', [1024, 4])];
    expect(readGraphLimits(graphOf(layout, tables))?.positionTable).toEqual({ name: 'embeddings.position_embeddings.weight', rows: 512 });
  });

  it('reads the smallest fixed sequence dimension of the inputs the server feeds', () => {
    const nodes = [node('Add', ['input_ids', 'attention_mask'], 'out')];
    const fixed = graphOf(nodes, [], [idsInput(64), idsInput(32, 'attention_mask'), idsInput(8, 'unrelated')]);
    expect(readGraphLimits(fixed)?.fixedSequence).toEqual({ input: 'attention_mask', length: 32 });
    expect(readGraphLimits(graphOf(nodes, [], [idsInput(), idsInput('sequence', 'attention_mask')]))?.fixedSequence).toBeNull();
  });

  it('gives null for bytes that are not an ONNX model, and reads past fields its schema does not know', () => {
    expect(readGraphLimits(new TextEncoder().encode('not a model at all'))).toBeNull();
    const bytes = graphOf(rangeLookup('w0'), [...scalars, floats('w0', [40, 4])]);
    const unknownField = protobuf.Writer.create().uint32((30 << 3) | 2).string('from a newer ONNX').finish();
    const extended = Buffer.concat([bytes, unknownField]);
    expect(() => decodeModel(extended)).toThrow('a field this builder does not know');
    expect(readGraphLimits(extended)?.positionTable).toEqual({ name: 'w0', rows: 40 });
  });
});
