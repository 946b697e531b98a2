import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { splitExternalData } from '../../src/builder/external-data.ts';
import { decodeModel, encodeModel, toNumber } from '../../src/builder/quantize/onnx-format.ts';
import { MODEL_DATA_FILE } from '../../src/encoder/model-package.ts';
import { OnnxModel } from '../../src/encoder/onnx-model.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'external-data-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const batch = (ids: bigint[]) => ({
  batchSize: 1,
  sequenceLength: ids.length,
  inputIds: BigInt64Array.from(ids),
  attentionMask: BigInt64Array.from(ids, () => 1n),
  tokenTypeIds: new BigInt64Array(ids.length),
});

describe('splitExternalData', () => {
  it('moves the large initializers into one page-aligned data file that onnxruntime runs to the same outputs', async () => {
    const weights = readFileSync(path.join(await generateTinyModel(), 'model.onnx'));
    const split = splitExternalData(weights)!;
    expect(split.graph.byteLength).toBeLessThan(weights.byteLength / 5);
    const initializers = decodeModel(split.graph).graph!.initializer;
    const external = initializers.filter((tensor) => tensor.data_location === 1);
    expect(external.length).toBeGreaterThan(0);
    for (const tensor of external) {
      const fields = Object.fromEntries(tensor.external_data!.map(({ key, value }) => [key, value]));
      expect(fields.location).toBe(MODEL_DATA_FILE);
      expect(Number(fields.offset) % 4096).toBe(0);
      expect(Number(fields.offset) + Number(fields.length)).toBeLessThanOrEqual(split.data.byteLength);
      expect(tensor.raw_data === undefined || tensor.raw_data.byteLength === 0).toBe(true);
    }
    // what stays inside is small (shapes, scalars)
    for (const tensor of initializers.filter((t) => t.data_location !== 1)) expect(tensor.raw_data?.byteLength ?? 0).toBeLessThan(1024);

    writeFileSync(path.join(dir, MODEL_DATA_FILE), split.data);
    const [whole, mapped] = await Promise.all([OnnxModel.load(weights, 'embedding'), OnnxModel.load(split.graph, 'embedding', { weightsDataDir: dir })]);
    try {
      // run() hands the batch's buffers over: one batch each
      expect(Array.from((await mapped.run(batch([101n, 200n, 300n, 102n]))).data)).toEqual(Array.from((await whole.run(batch([101n, 200n, 300n, 102n]))).data));
    } finally {
      await Promise.all([whole.close(), mapped.close()]);
    }
  });

  it('leaves a model without large initializers, or that it cannot read, whole', () => {
    expect(splitExternalData(new Uint8Array(0))).toBeNull(); // no graph at all
    expect(splitExternalData(new TextEncoder().encode('not a model'))).toBeNull();
    const small = encodeModel({ opset_import: [{ domain: '', version: 17 }], graph: { node: [], initializer: [{ name: 'k', dims: [1], data_type: 1, raw_data: new Uint8Array(4) }], input: [], output: [] } });
    expect(splitExternalData(small)).toBeNull();
    expect(toNumber(decodeModel(small).graph!.initializer[0].dims![0])).toBe(1);
  });

  it('is a ConfigError when the data file is not where the session looks', async () => {
    const split = splitExternalData(readFileSync(path.join(await generateTinyModel(), 'model.onnx')))!;
    await expect(OnnxModel.load(split.graph, 'embedding', { weightsDataDir: path.join(dir, 'nowhere') })).rejects.toThrow(/^model weights are not a loadable ONNX model: /);
  });
});
