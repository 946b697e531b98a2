import { readFileSync } from 'node:fs';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { decodeModel, encodeModel, type Model } from '../../src/builder/quantize/onnx-format.ts';
import { ConfigError } from '../../src/encoder/errors.ts';
import { sessionOptionsFor } from '../../src/encoder/onnx-model.ts';
import { EncoderTokenizer } from '../../src/encoder/tokenizer/index.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { hasShared, sharedModel, warnIfSharedMissing } from '../helpers/shared-fixtures.ts';

warnIfSharedMissing('ONNX decode/encode round trip of the shared exports');

const SHARED_MODELS = ['tiny-bert-embedding', 'tiny-bert-sentence-embedding', 'tiny-bert-sequence-classification', 'tiny-bert-token-classification', 'tinybert-golden'];

async function outputsOf(model: Uint8Array, tokenizerDir: string, text: string): Promise<Record<string, Float32Array>> {
  const tokenizer = EncoderTokenizer.fromJson(readFileSync(path.join(tokenizerDir, 'tokenizer.json'), 'utf8'));
  const batch = tokenizer.pad([tokenizer.encode(text)]);
  const dims = [batch.batchSize, batch.sequenceLength];
  const session = await ort.InferenceSession.create(model, sessionOptionsFor());
  try {
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', batch.inputIds, dims),
      attention_mask: new ort.Tensor('int64', batch.attentionMask, dims),
    };
    if (session.inputNames.includes('token_type_ids')) feeds.token_type_ids = new ort.Tensor('int64', batch.tokenTypeIds, dims);
    const outputs = await session.run(feeds);
    return Object.fromEntries(session.outputNames.map((name) => [name, outputs[name].data as Float32Array]));
  } finally {
    await session.release();
  }
}

describe('ONNX ModelProto decode and encode', () => {
  it.skipIf(!hasShared)('gives back the exact bytes of every shared export, which onnxruntime runs to the same outputs', async () => {
    for (const name of SHARED_MODELS) {
      const bytes = readFileSync(path.join(sharedModel(name), 'model.onnx'));
      const again = encodeModel(decodeModel(bytes));
      expect(Buffer.from(again).equals(bytes), name).toBe(true);
    }
    const dir = sharedModel('tiny-bert-token-classification');
    const bytes = readFileSync(path.join(dir, 'model.onnx'));
    const [a, b] = [await outputsOf(bytes, dir, 'some text'), await outputsOf(encodeModel(decodeModel(bytes)), dir, 'some text')];
    expect(b).toEqual(a);
  });

  it('gives back a generated model bit for bit, with the same outputs', async () => {
    const dir = await generateTinyModel({ modelType: 'sequence_classification', labels: ['a', 'b', 'c'] });
    const bytes = readFileSync(path.join(dir, 'model.onnx'));
    const again = encodeModel(decodeModel(bytes));
    expect(Buffer.from(again).equals(bytes)).toBe(true);
    const [a, b] = [await outputsOf(bytes, dir, 'some text'), await outputsOf(again, dir, 'some text')];
    expect(b).toEqual(a);
  });

  it('keeps the fields real exports rarely use: functions, training info, sparse and external tensors, metadata, sharding', () => {
    const tensorType = { tensor_type: { elem_type: 1, shape: { dim: [{ dim_param: 'n' }, { dim_value: 2 }] } } };
    const model: Model = {
      ir_version: 10,
      opset_import: [{ domain: '', version: 21 }, { domain: 'local', version: 1 }],
      producer_name: 'test',
      metadata_props: [{ key: 'k', value: 'v' }],
      configuration: [{ name: 'mesh', num_devices: 2, device: ['cpu:0', 'cpu:1'] }],
      functions: [{ name: 'Twice', domain: 'local', input: ['x'], output: ['y'], node: [{ op_type: 'Add', input: ['x', 'x'], output: ['y'], attribute: [] }], opset_import: [{ domain: '', version: 21 }] }],
      training_info: [{ initialization_binding: [{ key: 'w', value: 'w0' }], algorithm: { name: 'step', node: [], initializer: [], input: [], output: [] } }],
      graph: {
        name: 'g',
        node: [
          {
            op_type: 'Twice',
            domain: 'local',
            input: ['x'],
            output: ['y'],
            attribute: [],
            metadata_props: [{ key: 'origin', value: 'layer0' }],
            device_configurations: [{ configuration_id: 'mesh', pipeline_stage: 1, sharding_spec: [{ tensor_name: 'x', device: [0, 1], sharded_dim: [{ axis: 0, simple_sharding: [{ dim_param: 'n', num_shards: 2 }] }] }] }],
          },
        ],
        initializer: [{ name: 'big', dims: [4], data_type: 1, data_location: 1, external_data: [{ key: 'location', value: 'weights.bin' }, { key: 'offset', value: '0' }] }],
        sparse_initializer: [{ values: { name: 's', dims: [1], data_type: 1, float_data: [2.5] }, indices: { dims: [1], data_type: 7, int64_data: [3] }, dims: [4] }],
        input: [{ name: 'x', type: tensorType }],
        output: [{ name: 'y', type: tensorType }],
        value_info: [{ name: 'opaque', type: { opaque_type: { domain: 'd', name: 'thing' } } }],
        quantization_annotation: [{ tensor_name: 'y', quant_parameter_tensor_names: [{ key: 'SCALE_TENSOR', value: 'y_scale' }] }],
        metadata_props: [{ key: 'graph', value: 'meta' }],
      },
    };
    const bytes = encodeModel(model);
    const decoded = decodeModel(bytes);
    // every field survived, so that encoding again gives the same bytes
    expect(Buffer.from(encodeModel(decoded)).equals(Buffer.from(bytes))).toBe(true);
    expect(JSON.stringify(decoded.configuration)).toContain('cpu:1');
    expect(JSON.stringify(decoded.functions)).toContain('Twice');
    expect(JSON.stringify(decoded.training_info)).toContain('w0');
    const graph = decoded.graph!;
    expect(JSON.stringify(graph.node[0].device_configurations)).toContain('"num_shards"');
    expect(JSON.stringify(graph.node[0].metadata_props)).toContain('layer0');
    expect(graph.initializer[0]).toMatchObject({ data_location: 1, external_data: [{ key: 'location', value: 'weights.bin' }, { key: 'offset', value: '0' }] });
    expect(JSON.stringify(graph.sparse_initializer)).toContain('2.5');
    expect(JSON.stringify(graph.value_info)).toContain('"opaque_type"');
    expect(JSON.stringify(graph.quantization_annotation)).toContain('y_scale');
  });

  it('refuses a file with a field the schema does not declare, naming where it is, rather than dropping it', () => {
    const node = protobuf.Writer.create().uint32((4 << 3) | 2).string('Relu').uint32((99 << 3) | 0).uint32(1).finish();
    const graph = protobuf.Writer.create().uint32((1 << 3) | 2).bytes(node).finish();
    const nested = protobuf.Writer.create().uint32((7 << 3) | 2).bytes(graph).finish();
    expect(() => decodeModel(nested)).toThrow(ConfigError);
    expect(() => decodeModel(nested)).toThrow('the ONNX model has a field this builder does not know (ModelProto.graph.node field 99)');
    const topLevel = protobuf.Writer.create().uint32((1 << 3) | 0).uint32(8).uint32((30 << 3) | 2).string('future').finish();
    expect(() => decodeModel(topLevel)).toThrow('(ModelProto field 30)');
    // the same bytes without the unknown field are fine
    expect(decodeModel(protobuf.Writer.create().uint32((7 << 3) | 2).bytes(protobuf.Writer.create().uint32((1 << 3) | 2).bytes(protobuf.Writer.create().uint32((4 << 3) | 2).string('Relu').finish()).finish()).finish()).graph!.node[0].op_type).toBe('Relu');
  });

  it('says that bytes which are not protobuf are not an ONNX model', () => {
    expect(() => decodeModel(new TextEncoder().encode('this is a text file, not a model'))).toThrow(ConfigError);
    expect(() => decodeModel(new TextEncoder().encode('this is a text file, not a model'))).toThrow('the model weights are not an ONNX model file');
  });
});
