import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/encoder/errors.ts';
import {
  BASE_VOCABULARY_SIZE,
  MODEL_DIRECTORY_FILES,
  OPSET_VERSION,
  PRESETS,
  SENTENCE_TRANSFORMERS_FILES,
  buildOnnxModel,
  buildVocabulary,
  generateWeights,
  modelDirectoryFiles,
  normalizeOptions,
  sentenceTransformersFiles,
  writeModelDirectory,
} from '../../scripts/model-generator/index.ts';
import type { GeneratorOptions, ModelType } from '../../scripts/model-generator/index.ts';
import { decodeOnnxModel } from '../../scripts/model-generator/onnx-proto.ts';
import { readSentenceTransformersLayout } from '../../src/encoder/sentence-transformers.ts';
import { bertReferenceForward } from '../helpers/bert-reference.ts';
import { generateTinyCrossEncoder, generateTinySentenceEmbeddingModel } from '../helpers/generated-models.ts';
import type { ReferenceInputs } from '../helpers/bert-reference.ts';

const REPO_ROOT = resolve(import.meta.dirname, '../..');
const NODE = join(REPO_ROOT, 'node_modules/.bin/node');
const CLI = join(REPO_ROOT, 'scripts/generate-model.ts');
const SHARED_TOKENIZER = resolve(REPO_ROOT, '../shared/models/tiny-bert-embedding/tokenizer.json');

const TINY = PRESETS.tiny;
/** One model of each type, plus a cross-encoder (a sequence classifier with one logit); written once, by name. */
const MODELS: Record<ModelType | 'cross_encoder', GeneratorOptions> = {
  embedding: { ...TINY },
  sentence_embedding: { ...TINY, modelType: 'sentence_embedding', pooling: 'cls' },
  sequence_classification: { ...TINY, modelType: 'sequence_classification', labels: ['negative', 'neutral', 'positive'] },
  token_classification: { ...TINY, modelType: 'token_classification', labels: ['O', 'B-PER', 'I-PER', 'B-LOC', 'I-LOC'] },
  cross_encoder: { ...TINY, modelType: 'sequence_classification', labels: ['LABEL_0'] },
};

let workDir: string;

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'generator-test-'));
  for (const [type, options] of Object.entries(MODELS)) await writeModelDirectory(join(workDir, type), options);
});

afterAll(async () => {
  await rm(workDir, { recursive: true, force: true });
});

/** Two sequences: a pair (token types 0 and 1) of length 9, and a single sequence of 5 padded to 9. */
const BATCH: ReferenceInputs = {
  inputIds: [
    [2, 141, 573, 873, 3, 1563, 1727, 454, 3],
    [2, 333, 5, 1200, 3, 0, 0, 0, 0],
  ],
  attentionMask: [
    [1, 1, 1, 1, 1, 1, 1, 1, 1],
    [1, 1, 1, 1, 1, 0, 0, 0, 0],
  ],
  tokenTypeIds: [
    [0, 0, 0, 0, 0, 1, 1, 1, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 0],
  ],
};

function int64Tensor(rows: number[][]): ort.Tensor {
  return new ort.Tensor('int64', BigInt64Array.from(rows.flat(), (v) => BigInt(v)), [rows.length, rows[0].length]);
}

interface ModelOutput {
  name: string;
  dims: readonly number[];
  data: Float32Array;
}

async function runModel(path: string, inputs: ReferenceInputs): Promise<ModelOutput> {
  const session = await ort.InferenceSession.create(path);
  try {
    const result = await session.run({
      input_ids: int64Tensor(inputs.inputIds),
      attention_mask: int64Tensor(inputs.attentionMask),
      token_type_ids: int64Tensor(inputs.tokenTypeIds),
    });
    const name = session.outputNames[0];
    return { name, dims: result[name].dims, data: result[name].data as Float32Array };
  } finally {
    await session.release();
  }
}

/** Largest absolute difference over the positions whose attention mask is 1 (all rows for sequence outputs). */
function maxDifference(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  dims: readonly number[],
  mask: number[][],
): number {
  let max = 0;
  const perRow = dims.slice(1).reduce((a, b) => a * b, 1);
  const perToken = dims.length === 3 ? dims[2] : perRow;
  for (let i = 0; i < actual.length; i++) {
    const row = Math.floor(i / perRow);
    const token = Math.floor((i % perRow) / perToken);
    if (dims.length === 3 && mask[row][token] !== 1) continue;
    max = Math.max(max, Math.abs(actual[i] - expected[i]));
  }
  return max;
}

describe('generated ONNX model', () => {
  it.each(Object.entries(MODELS))('%s model matches the reference forward pass', async (type, options) => {
    const output = await runModel(join(workDir, type, 'model.onnx'), BATCH);
    // a sentence_embedding model's ONNX graph is an embedding model's; its layout files say how to pool
    const tokenVectors = options.modelType === 'embedding' || options.modelType === 'sentence_embedding';
    const model = { heads: options.heads, modelType: options.modelType === 'sentence_embedding' ? 'embedding' : options.modelType };
    const reference = bertReferenceForward(generateWeights(options), model, BATCH);
    const width = tokenVectors ? options.hidden : options.labels!.length;
    const expectedDims = options.modelType === 'sequence_classification' ? [2, width] : [2, 9, width];
    expect(output.name).toBe(tokenVectors ? 'last_hidden_state' : 'logits');
    expect(output.dims).toEqual(expectedDims);
    expect(reference.dims).toEqual(expectedDims);
    expect(maxDifference(output.data, reference.data, output.dims, BATCH.attentionMask)).toBeLessThan(1e-4);
    // The outputs carry signal: the two sequences give clearly different results.
    const rowSize = output.data.length / 2;
    const first = output.data.subarray(0, options.modelType === 'sequence_classification' ? rowSize : width);
    const second = output.data.subarray(rowSize, rowSize + first.length);
    expect(Math.max(...first.map((v, i) => Math.abs(v - second[i])))).toBeGreaterThan(0.05);
  });

  it('gives padded sequences the same outputs as unpadded ones', async () => {
    const path = join(workDir, 'token_classification', 'model.onnx');
    const batched = await runModel(path, BATCH);
    const alone = await runModel(path, {
      inputIds: [BATCH.inputIds[1].slice(0, 5)],
      attentionMask: [BATCH.attentionMask[1].slice(0, 5)],
      tokenTypeIds: [BATCH.tokenTypeIds[1].slice(0, 5)],
    });
    const labels = MODELS.token_classification.labels!.length;
    const rowStart = 9 * labels;
    const paddedPart = batched.data.subarray(rowStart, rowStart + 5 * labels);
    expect(maxDifference(paddedPart, alone.data, [1, 5, labels], [[1, 1, 1, 1, 1]])).toBeLessThan(1e-5);
  });

  it('declares HF-style inputs and outputs with symbolic dims and opset 17 standard ops', async () => {
    const model = decodeOnnxModel(await readFile(join(workDir, 'sequence_classification', 'model.onnx')));
    expect(model.ir_version).toBe(8);
    expect(model.opset_import).toEqual([{ domain: '', version: OPSET_VERSION }]);
    expect(OPSET_VERSION).toBe(17);
    const dimsOf = (info: (typeof model.graph.input)[number]) =>
      info.type.tensor_type.shape.dim.map((d) => ('dim_param' in d ? d.dim_param : d.dim_value));
    expect(model.graph.input.map((i) => [i.name, i.type.tensor_type.elem_type, dimsOf(i)])).toEqual([
      ['input_ids', 7, ['batch_size', 'sequence_length']],
      ['attention_mask', 7, ['batch_size', 'sequence_length']],
      ['token_type_ids', 7, ['batch_size', 'sequence_length']],
    ]);
    const outputs = model.graph.output.map((o) => [o.name, o.type.tensor_type.elem_type, dimsOf(o)]);
    expect(outputs).toEqual([['logits', 1, ['batch_size', 3]]]);
    const crossEncoder = decodeOnnxModel(await readFile(join(workDir, 'cross_encoder', 'model.onnx')));
    expect(crossEncoder.graph.output.map((o) => [o.name, dimsOf(o)])).toEqual([['logits', ['batch_size', 1]]]);
    const sentence = decodeOnnxModel(await readFile(join(workDir, 'sentence_embedding', 'model.onnx')));
    expect(sentence.graph.output.map((o) => [o.name, dimsOf(o)])).toEqual([['last_hidden_state', ['batch_size', 'sequence_length', 32]]]);
    const ops = new Set(model.graph.node.map((n) => n.op_type));
    const expectedOps = ['Gather', 'Add', 'LayerNormalization', 'MatMul', 'Reshape', 'Transpose', 'Softmax'];
    expectedOps.push('Erf', 'Tanh', 'Slice', 'Shape', 'Cast', 'Sub', 'Mul');
    for (const op of expectedOps) expect(ops).toContain(op);
    expect(model.graph.node.every((n) => !('domain' in n) || (n as { domain?: string }).domain === '')).toBe(true);
    // Every HF weight is stored in the graph (Linear weights transposed for MatMul).
    const initializers = new Set(model.graph.initializer.map((t) => t.name));
    expect(initializers).toContain('embeddings.word_embeddings.weight');
    expect(initializers).toContain('encoder.layer.1.output.dense.weight.T');
    expect(initializers).toContain('pooler.dense.bias');
    expect(initializers).toContain('classifier.weight.T');
  });

  it('rejects weights that do not fit the options', () => {
    const weights = generateWeights(TINY);
    expect(() => buildOnnxModel({ ...TINY, hidden: 64 }, weights)).toThrow(
      /embeddings.word_embeddings.weight.*expected \[1728, 64\]/,
    );
    expect(() => buildOnnxModel(MODELS.sequence_classification, weights)).toThrow(/weight 'pooler.dense.weight' is missing/);
  });
});

describe('determinism', () => {
  it('writes identical bytes for the same seed and different bytes for another seed', async () => {
    const first = buildOnnxModel(TINY, generateWeights(TINY));
    const again = buildOnnxModel(TINY, generateWeights(TINY));
    const otherSeed = buildOnnxModel({ ...TINY, seed: 7 }, generateWeights({ ...TINY, seed: 7 }));
    expect(Buffer.compare(first, again)).toBe(0);
    expect(Buffer.compare(first, otherSeed)).not.toBe(0);
    expect(Buffer.compare(first, await readFile(join(workDir, 'embedding', 'model.onnx')))).toBe(0);
  });

  it('gives every tensor its own stream, so other shapes leave it unchanged', () => {
    const base = generateWeights(TINY).tensors;
    const moreLayers = generateWeights({ ...TINY, layers: 3, vocabSize: TINY.vocabSize + 64 }).tensors;
    const query = 'encoder.layer.1.attention.self.query.weight';
    expect(moreLayers.get(query)!.data).toEqual(base.get(query)!.data);
    expect(moreLayers.has('encoder.layer.2.output.LayerNorm.bias')).toBe(true);
    // Seeds above 2^32 are not folded onto small ones.
    const biases = [0, 1, 2 ** 32, 2 ** 32 + 1].map(
      (seed) => generateWeights({ ...TINY, seed }).tensors.get('embeddings.LayerNorm.bias')!.data,
    );
    expect(new Set(biases.map((data) => data.join(','))).size).toBe(4);
  });
});

describe('weights', () => {
  it('are named and shaped like a HF BertModel state dict, at a well-conditioned scale', () => {
    const { tensors } = generateWeights(MODELS.sequence_classification);
    const dims = (name: string) => tensors.get(name)?.dims;
    expect(dims('embeddings.word_embeddings.weight')).toEqual([TINY.vocabSize, 32]);
    expect(dims('embeddings.position_embeddings.weight')).toEqual([128, 32]);
    expect(dims('embeddings.token_type_embeddings.weight')).toEqual([2, 32]);
    expect(dims('encoder.layer.0.attention.self.query.weight')).toEqual([32, 32]);
    expect(dims('encoder.layer.1.intermediate.dense.weight')).toEqual([64, 32]);
    expect(dims('encoder.layer.1.output.dense.weight')).toEqual([32, 64]);
    expect(dims('pooler.dense.weight')).toEqual([32, 32]);
    expect(dims('classifier.weight')).toEqual([3, 32]);
    expect(dims('classifier.bias')).toEqual([3]);
    expect(tensors.size).toBe(5 + 2 * 16 + 4);
    // [PAD]'s embedding is zero, as HF initialises padding_idx.
    expect(tensors.get('embeddings.word_embeddings.weight')!.data.subarray(0, 32).every((v) => v === 0)).toBe(true);
    const std = (data: Float32Array, center = 0) => Math.sqrt(data.reduce((s, v) => s + (v - center) ** 2, 0) / data.length);
    expect(std(tensors.get('embeddings.word_embeddings.weight')!.data)).toBeCloseTo(0.02, 2);
    expect(std(tensors.get('encoder.layer.0.intermediate.dense.weight')!.data)).toBeCloseTo(1 / Math.sqrt(32), 1);
    expect(std(tensors.get('encoder.layer.0.output.LayerNorm.weight')!.data, 1)).toBeLessThan(0.05);
  });

  it('has the all-MiniLM-L6-v2 shape for the minilm preset (not run)', () => {
    const { tensors } = generateWeights(PRESETS.minilm);
    expect(tensors.get('embeddings.word_embeddings.weight')!.dims).toEqual([30522, 384]);
    expect(tensors.get('embeddings.position_embeddings.weight')!.dims).toEqual([512, 384]);
    expect(tensors.get('encoder.layer.5.intermediate.dense.weight')!.dims).toEqual([1536, 384]);
    expect(tensors.has('encoder.layer.6.attention.self.query.weight')).toBe(false);
    const parameters = [...tensors.values()].reduce((n, t) => n + t.data.length, 0);
    expect(parameters).toBe(22_565_376); // all-MiniLM-L6-v2's BertModel without the pooler
  });
});

describe('options', () => {
  it.each<[string, Partial<GeneratorOptions>, RegExp]>([
    ['hidden not divisible by heads', { hidden: 30 }, /hidden size 30 is not divisible by the number of heads 4/],
    ['vocabulary smaller than the base set', { vocabSize: 100 }, /vocabulary size 100 is smaller than the base vocabulary/],
    ['labels on an embedding model', { labels: ['a', 'b'] }, /labels are only for classification models/],
    ['one label on a token classifier', { modelType: 'token_classification', labels: ['only'] }, /a token classification model needs at least 2 labels, got 1/],
    ['no label on a sequence classifier', { modelType: 'sequence_classification', labels: [] }, /a sequence classification model needs at least 1 label, got 0/],
    ['pooling on an embedding model', { pooling: 'cls' }, /pooling describes a sentence-transformers layout, which only sentence_embedding models have; got model type embedding/],
    ['normalize on a sequence classifier', { modelType: 'sequence_classification', normalize: false }, /normalize describes a sentence-transformers layout.*got model type sequence_classification/],
    ['pooling and normalize on a token classifier', { modelType: 'token_classification', pooling: 'mean', normalize: true }, /pooling and normalize describe a sentence-transformers layout/],
    ['an unknown pooling', { modelType: 'sentence_embedding', pooling: 'sum' as never }, /unknown pooling 'sum'; expected one of mean, cls, max, last/],
    ['a non-boolean normalize', { modelType: 'sentence_embedding', normalize: 'yes' as never }, /normalize must be true or false, got yes/],
    ['labels on a sentence_embedding model', { modelType: 'sentence_embedding', labels: ['LABEL_0'] }, /labels are only for classification models/],
    ['duplicate labels', { modelType: 'token_classification', labels: ['O', 'O'] }, /duplicate label 'O'/],
    ['fractional layers', { layers: 1.5 }, /layers must be a positive integer, got 1.5/],
    ['zero heads', { heads: 0 }, /heads must be a positive integer/],
    ['negative seed', { seed: -1 }, /seed must be a non-negative integer/],
    ['unknown model type', { modelType: 'regression' as ModelType }, /unknown model type 'regression'/],
  ])('rejects %s', (_name, override, message) => {
    const options = { ...TINY, ...override };
    expect(() => normalizeOptions(options)).toThrow(ConfigError);
    expect(() => generateWeights(options)).toThrow(message);
  });

  it('gives classification models default labels, and lets a sequence classifier have just one', () => {
    expect(normalizeOptions({ ...TINY, modelType: 'sequence_classification' }).labels).toEqual(['LABEL_0', 'LABEL_1']);
    expect(normalizeOptions(MODELS.cross_encoder).labels).toEqual(['LABEL_0']);
    expect(normalizeOptions({ ...TINY, modelType: 'token_classification' }).labels?.slice(0, 3)).toEqual(['O', 'B-PER', 'I-PER']);
    expect(normalizeOptions(TINY).labels).toBeUndefined();
  });

  it('rejects a bad directory request before writing anything', async () => {
    const dir = join(workDir, 'never-written');
    await expect(writeModelDirectory(dir, { ...TINY, heads: 5 })).rejects.toThrow(/not divisible/);
    expect(existsSync(dir)).toBe(false);
  });
});

describe('sentence-transformers layout', () => {
  /** The Python json.dump(indent=2) text of a value: JSON.stringify's layout, without a final newline. */
  const pythonJson = (value: unknown) => JSON.stringify(value, null, 2);
  const MODULES = [
    { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
    { idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' },
  ];
  const NORMALIZE = { idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' };
  const FLAG_OF = { mean: 'pooling_mode_mean_tokens', cls: 'pooling_mode_cls_token', max: 'pooling_mode_max_tokens', last: 'pooling_mode_lasttoken' };

  it('writes what sentence-transformers 3 saves for all-MiniLM-L6-v2 (mean pooling, then Normalize), byte for byte', () => {
    const files = sentenceTransformersFiles({ ...PRESETS.minilm, modelType: 'sentence_embedding' });
    expect(Object.keys(files)).toEqual([...SENTENCE_TRANSFORMERS_FILES]);
    expect(files['modules.json']).toBe(`[
  {
    "idx": 0,
    "name": "0",
    "path": "",
    "type": "sentence_transformers.models.Transformer"
  },
  {
    "idx": 1,
    "name": "1",
    "path": "1_Pooling",
    "type": "sentence_transformers.models.Pooling"
  },
  {
    "idx": 2,
    "name": "2",
    "path": "2_Normalize",
    "type": "sentence_transformers.models.Normalize"
  }
]`);
    expect(files['1_Pooling/config.json']).toBe(`{
  "word_embedding_dimension": 384,
  "pooling_mode_cls_token": false,
  "pooling_mode_mean_tokens": true,
  "pooling_mode_max_tokens": false,
  "pooling_mode_mean_sqrt_len_tokens": false,
  "pooling_mode_weightedmean_tokens": false,
  "pooling_mode_lasttoken": false,
  "include_prompt": true
}`);
    expect(files['sentence_bert_config.json']).toBe('{\n  "max_seq_length": 512,\n  "do_lower_case": false\n}');
    expect(JSON.parse(files['config_sentence_transformers.json'])).toEqual({
      __version__: { sentence_transformers: '3.0.1', transformers: '4.41.2', pytorch: '2.3.0' },
      prompts: {},
      default_prompt_name: null,
      similarity_fn_name: 'cosine',
    });
  });

  it.each(
    (['mean', 'cls', 'max', 'last'] as const).flatMap((pooling) => [true, false].map((normalize) => [pooling, normalize] as const)),
  )('writes pooling %s, normalize %s exactly, and the server reads the same back', async (pooling, normalize) => {
    const dir = join(workDir, `layout-${pooling}-${normalize}`);
    const options: GeneratorOptions = { ...TINY, modelType: 'sentence_embedding', pooling, normalize, maxPositions: 64 };
    const written = await writeModelDirectory(dir, options);
    expect(written).toEqual([...MODEL_DIRECTORY_FILES, ...SENTENCE_TRANSFORMERS_FILES]);
    expect(modelDirectoryFiles(options)).toEqual(written);
    const text = async (file: string) => readFile(join(dir, file), 'utf8');

    expect(await text('modules.json')).toBe(pythonJson(normalize ? [...MODULES, NORMALIZE] : MODULES));
    const flags = Object.fromEntries(
      ['pooling_mode_cls_token', 'pooling_mode_mean_tokens', 'pooling_mode_max_tokens', 'pooling_mode_mean_sqrt_len_tokens',
        'pooling_mode_weightedmean_tokens', 'pooling_mode_lasttoken'].map((flag) => [flag, flag === FLAG_OF[pooling]]),
    );
    const poolingConfig = { word_embedding_dimension: TINY.hidden, ...flags, include_prompt: true };
    expect(await text('1_Pooling/config.json')).toBe(pythonJson(poolingConfig));
    expect(Object.values(flags).filter((value) => value)).toHaveLength(1);
    expect(await text('sentence_bert_config.json')).toBe(pythonJson({ max_seq_length: 64, do_lower_case: false }));
    for (const file of SENTENCE_TRANSFORMERS_FILES) expect(() => JSON.parse(sentenceTransformersFiles(options)[file])).not.toThrow();
    expect(readSentenceTransformersLayout(dir)).toEqual({ pooling, normalize });

    // sentence-transformers leaves the stateless Normalize module an empty folder; nothing else is written.
    const entries = (await readdir(dir, { recursive: true })).sort();
    const folders = normalize ? ['1_Pooling', '2_Normalize'] : ['1_Pooling'];
    expect(entries).toEqual([...written, ...folders].sort());
  });

  it('defaults to mean pooling with a Normalize module, as all-MiniLM-L6-v2 (also through the test helpers)', async () => {
    const dir = await generateTinySentenceEmbeddingModel();
    const crossEncoder = await generateTinyCrossEncoder();
    try {
      expect(readSentenceTransformersLayout(dir)).toEqual({ pooling: 'mean', normalize: true });
      expect(existsSync(join(dir, '2_Normalize'))).toBe(true);
      expect((await runModel(join(dir, 'model.onnx'), BATCH)).dims).toEqual([2, 9, TINY.hidden]);
      expect((await runModel(join(crossEncoder, 'model.onnx'), BATCH)).dims).toEqual([2, 1]);
    } finally {
      await Promise.all([dir, crossEncoder].map((path) => rm(path, { recursive: true, force: true })));
    }
  });

  it('has the ONNX graph of an embedding model of the same shape and seed', async () => {
    const graphOf = async (type: ModelType) => decodeOnnxModel(await readFile(join(workDir, type, 'model.onnx'))).graph;
    expect(await graphOf('sentence_embedding')).toEqual(await graphOf('embedding'));
  });

  it('is written only for sentence_embedding models', async () => {
    for (const type of ['embedding', 'sequence_classification', 'token_classification'] as const) {
      expect(modelDirectoryFiles(MODELS[type])).toEqual([...MODEL_DIRECTORY_FILES]);
      expect(existsSync(join(workDir, type, 'modules.json'))).toBe(false);
    }
    expect(() => modelDirectoryFiles({ ...TINY, pooling: 'max' })).toThrow(ConfigError);
  });
});

describe('model directory files', () => {
  const readJson = async (type: ModelType, file: string) =>
    JSON.parse(await readFile(join(workDir, type, file), 'utf8')) as Record<string, unknown>;

  it('writes exactly the model files', async () => {
    expect((await readdir(join(workDir, 'embedding'))).sort()).toEqual([...MODEL_DIRECTORY_FILES].sort());
  });

  it('writes an HF config.json', async () => {
    const config = await readJson('token_classification', 'config.json');
    expect(config).toMatchObject({
      architectures: ['BertForTokenClassification'],
      model_type: 'bert',
      hidden_size: 32,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      intermediate_size: 64,
      vocab_size: TINY.vocabSize,
      max_position_embeddings: 128,
      type_vocab_size: 2,
      layer_norm_eps: 1e-12,
      hidden_act: 'gelu',
      pad_token_id: 0,
      id2label: { 0: 'O', 1: 'B-PER', 2: 'I-PER', 3: 'B-LOC', 4: 'I-LOC' },
      label2id: { O: 0, 'B-PER': 1, 'I-PER': 2, 'B-LOC': 3, 'I-LOC': 4 },
    });
    expect((await readJson('sequence_classification', 'config.json')).architectures).toEqual(['BertForSequenceClassification']);
    // A cross-encoder's config: one label, named as transformers names it (num_labels follows from id2label).
    expect(await readJson('cross_encoder' as ModelType, 'config.json')).toMatchObject({
      architectures: ['BertForSequenceClassification'],
      id2label: { 0: 'LABEL_0' },
      label2id: { LABEL_0: 0 },
    });
    expect((await readJson('sentence_embedding', 'config.json')).architectures).toEqual(['BertModel']);
    const embedding = await readJson('embedding', 'config.json');
    expect(embedding.architectures).toEqual(['BertModel']);
    expect(embedding).not.toHaveProperty('id2label');
    expect(embedding).not.toHaveProperty('label2id');
    // transformers' layout: sorted keys, 2-space indent, final newline.
    const text = await readFile(join(workDir, 'embedding', 'config.json'), 'utf8');
    const sorted = Object.fromEntries(Object.entries(embedding).sort(([a], [b]) => (a < b ? -1 : 1)));
    expect(text).toBe(JSON.stringify(sorted, null, 2) + '\n');
  });

  it('writes tokenizer_config.json and special_tokens_map.json that agree with the vocabulary', async () => {
    const config = await readJson('embedding', 'tokenizer_config.json');
    expect(config).toMatchObject({
      model_max_length: 128,
      do_lower_case: true,
      tokenizer_class: 'BertTokenizer',
      cls_token: '[CLS]',
      sep_token: '[SEP]',
      pad_token: '[PAD]',
      unk_token: '[UNK]',
      mask_token: '[MASK]',
    });
    const vocab = (await readFile(join(workDir, 'embedding', 'vocab.txt'), 'utf8')).split('\n');
    const decoder = config.added_tokens_decoder as Record<string, { content: string; special: boolean }>;
    expect(Object.keys(decoder)).toHaveLength(5);
    for (const [id, token] of Object.entries(decoder)) {
      expect(vocab[Number(id)]).toBe(token.content);
      expect(token.special).toBe(true);
    }
    expect(await readJson('embedding', 'special_tokens_map.json')).toEqual({
      cls_token: '[CLS]',
      mask_token: '[MASK]',
      pad_token: '[PAD]',
      sep_token: '[SEP]',
      unk_token: '[UNK]',
    });
  });

  it('writes a vocabulary of the requested size: specials, characters, words, pieces, then [unusedN]', async () => {
    const text = await readFile(join(workDir, 'embedding', 'vocab.txt'), 'utf8');
    expect(text.endsWith('\n')).toBe(true);
    const vocab = text.slice(0, -1).split('\n');
    expect(vocab).toHaveLength(TINY.vocabSize);
    expect(new Set(vocab).size).toBe(vocab.length);
    expect(vocab.slice(0, 5)).toEqual(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']);
    for (const token of ['a', 'z', '0', '9', '.', '!', '##a', '##9', '##.', 'the', 'house', '##ing', '##ed', '##s']) {
      expect(vocab).toContain(token);
    }
    expect(vocab[BASE_VOCABULARY_SIZE]).toBe('[unused0]');
    expect(vocab.at(-1)).toBe(`[unused${TINY.vocabSize - BASE_VOCABULARY_SIZE - 1}]`);
    expect(BASE_VOCABULARY_SIZE).toBeGreaterThan(1000);
    expect(buildVocabulary(BASE_VOCABULARY_SIZE)).toEqual(vocab.slice(0, BASE_VOCABULARY_SIZE));
    expect(() => buildVocabulary(BASE_VOCABULARY_SIZE - 1)).toThrow(/smaller than the base vocabulary/);
  });

  it('writes a tokenizer.json that the HF tokenizers library loads and that tokenizes English sensibly', async () => {
    const { Tokenizer } = await import('tokenizers');
    const tokenizer = Tokenizer.fromFile(join(workDir, 'embedding', 'tokenizer.json'));
    expect(tokenizer.getVocabSize(true)).toBe(TINY.vocabSize);

    const sentence = await tokenizer.encode('The quick brown fox jumps over the lazy dog.');
    expect(sentence.getTokens()).toEqual(
      ['[CLS]', 'the', 'quick', 'brown', 'fox', 'jumps', 'over', 'the', 'lazy', 'dog', '.', '[SEP]'],
    );
    const vocab = (await readFile(join(workDir, 'embedding', 'vocab.txt'), 'utf8')).split('\n');
    expect(sentence.getIds()).toEqual(sentence.getTokens().map((token) => vocab.indexOf(token)));

    // Unknown words are spelled with ## pieces, accents are stripped, and nothing becomes [UNK].
    const rare = await tokenizer.encode('Tokenization of a naïve café, 2024!');
    expect(rare.getTokens()).not.toContain('[UNK]');
    expect(rare.getTokens().some((token) => token.startsWith('##'))).toBe(true);
    expect(await tokenizer.decode(rare.getIds(), true)).toBe('tokenization of a naive cafe, 2024!');
    expect((await tokenizer.encode('漢')).getTokens()).toEqual(['[CLS]', '[UNK]', '[SEP]']);

    const pair = await tokenizer.encode('first part', 'second');
    expect(pair.getTokens()).toEqual(['[CLS]', 'first', 'part', '[SEP]', 'second', '[SEP]']);
    expect(pair.getTypeIds()).toEqual([0, 0, 0, 0, 1, 1]);
  });

  it.skipIf(!existsSync(SHARED_TOKENIZER))('lays tokenizer.json out exactly as the HF export of bert-base-uncased', async () => {
    // Same text apart from the special-token ids and the vocabulary itself.
    const strip = (text: string) => text.slice(0, text.indexOf('"vocab"')).replace(/"id": \d+|\n\s+\d+\n/g, '<id>');
    const ours = await readFile(join(workDir, 'embedding', 'tokenizer.json'), 'utf8');
    expect(strip(ours)).toBe(strip(await readFile(SHARED_TOKENIZER, 'utf8')));
    expect(ours.endsWith('\n    }\n  }\n}')).toBe(true);
  });
});

describe('generate-model CLI', () => {
  const runCli = (...args: string[]) => spawnSync(NODE, [CLI, ...args], { cwd: REPO_ROOT, encoding: 'utf8' });

  it('writes a model directory and says what it wrote', async () => {
    const out = join(workDir, 'cli-model');
    const result = runCli(
      ...['--preset', 'tiny', '--type', 'token_classification', '--labels', 'O,B-PER,I-PER'],
      ...['--layers', '1', '--seed', '3', '--out', out],
    );
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('token_classification model (layers 1, hidden 32, heads 4');
    for (const file of MODEL_DIRECTORY_FILES) expect(result.stdout).toContain(file);
    const labels = ['O', 'B-PER', 'I-PER'];
    const options: GeneratorOptions = { ...TINY, modelType: 'token_classification', labels, layers: 1, seed: 3 };
    expect(Buffer.compare(await readFile(join(out, 'model.onnx')), buildOnnxModel(options, generateWeights(options)))).toBe(0);
    const config = JSON.parse(await readFile(join(out, 'config.json'), 'utf8')) as { id2label: Record<string, string> };
    expect(config.id2label).toEqual({ 0: 'O', 1: 'B-PER', 2: 'I-PER' });
  });

  it('accepts a label count', async () => {
    const out = join(workDir, 'cli-count');
    const result = runCli('--preset', 'tiny', '--type', 'sequence_classification', '--labels', '3', '--out', out);
    expect(result.status).toBe(0);
    const config = JSON.parse(await readFile(join(out, 'config.json'), 'utf8')) as { id2label: Record<string, string> };
    expect(config.id2label).toEqual({ 0: 'LABEL_0', 1: 'LABEL_1', 2: 'LABEL_2' });
  });

  it('writes a sentence_embedding model with its layout and lists every file it wrote', async () => {
    const out = join(workDir, 'cli-sentence');
    const result = runCli('--preset', 'tiny', '--type', 'sentence_embedding', '--pooling', 'last', '--no-normalize', '--out', out);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('sentence_embedding model (layers 2, hidden 32');
    expect(result.stdout).toContain('pooling last, seed 42');
    const listed = result.stdout.split('\n').slice(1).filter(Boolean).map((line) => line.trim().split(/\s+/)[0]);
    expect(listed).toEqual([...MODEL_DIRECTORY_FILES, ...SENTENCE_TRANSFORMERS_FILES]);
    expect(readSentenceTransformersLayout(out)).toEqual({ pooling: 'last', normalize: false });
    expect(existsSync(join(out, '2_Normalize'))).toBe(false);
  });

  it('normalizes a sentence_embedding model with mean pooling unless told otherwise', async () => {
    const out = join(workDir, 'cli-sentence-defaults');
    const result = runCli('--preset', 'tiny', '--type', 'sentence_embedding', '--out', out);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('pooling mean, normalized, seed 42');
    expect(readSentenceTransformersLayout(out)).toEqual({ pooling: 'mean', normalize: true });
  });

  it.each([
    ['--cross-encoder', ['--cross-encoder']],
    ['--labels 1', ['--type', 'sequence_classification', '--labels', '1']],
  ])('writes a one-logit cross-encoder for %s', async (_name, args) => {
    const out = join(workDir, `cli-cross-encoder-${args.length}`);
    const result = runCli('--preset', 'tiny', ...args, '--out', out);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('sequence_classification model (layers 2');
    expect(result.stdout).toContain('labels LABEL_0, seed 42');
    const expected = buildOnnxModel(MODELS.cross_encoder, generateWeights(MODELS.cross_encoder));
    expect(Buffer.compare(await readFile(join(out, 'model.onnx')), expected)).toBe(0);
    const config = JSON.parse(await readFile(join(out, 'config.json'), 'utf8')) as { id2label: Record<string, string> };
    expect(config.id2label).toEqual({ 0: 'LABEL_0' });
    expect((await runModel(join(out, 'model.onnx'), BATCH)).dims).toEqual([2, 1]);
  });

  it.each<[string, string[], RegExp]>([
    ['pooling on an embedding model', ['--preset', 'tiny', '--pooling', 'cls'], /error: pooling describes a sentence-transformers layout, which only sentence_embedding models have; got model type embedding/],
    ['--no-normalize on a cross-encoder', ['--preset', 'tiny', '--cross-encoder', '--no-normalize'], /error: normalize describes a sentence-transformers layout.*got model type sequence_classification/],
    ['an unknown pooling', ['--preset', 'tiny', '--type', 'sentence_embedding', '--pooling', 'sum'], /argument 'sum' is invalid\. Allowed choices are mean, cls, max, last/],
    ['labels on a sentence_embedding model', ['--preset', 'tiny', '--type', 'sentence_embedding', '--labels', '1'], /labels are only for classification models/],
    ['one label on a token classifier', ['--preset', 'tiny', '--type', 'token_classification', '--labels', '1'], /a token classification model needs at least 2 labels, got 1/],
    ['--cross-encoder with --type', ['--preset', 'tiny', '--cross-encoder', '--type', 'embedding'], /option '--cross-encoder' cannot be used with option '--type <model-type>'/],
    ['--cross-encoder with --labels', ['--preset', 'tiny', '--labels', '2', '--cross-encoder'], /option '--labels <labels>' cannot be used with option '--cross-encoder'|option '--cross-encoder' cannot be used with option '--labels <labels>'/],
    ['an unknown preset', ['--preset', 'huge'], /argument 'huge' is invalid\. Allowed choices are tiny, example, minilm/],
    [
      'an unknown type',
      ['--preset', 'tiny', '--type', 'regression'],
      /argument 'regression' is invalid\. Allowed choices are embedding, sentence_embedding, sequence_classification, token_classification/,
    ],
    ['hidden not divisible by heads', ['--preset', 'tiny', '--hidden', '30'], /hidden size 30 is not divisible by the number of heads 4/],
    ['labels on an embedding model', ['--preset', 'example', '--labels', 'a,b'], /labels are only for classification models/],
    ['a vocabulary below the base size', ['--preset', 'tiny', '--vocab', '50'], /vocabulary size 50 is smaller than the base vocabulary/],
    ['a non-numeric size', ['--preset', 'tiny', '--layers', 'two'], /'--layers <n>' argument 'two' is invalid\. Must be a positive integer/],
    ['a zero size', ['--preset', 'tiny', '--heads', '0'], /'--heads <n>' argument '0' is invalid\. Must be a positive integer/],
    ['an empty label', ['--preset', 'tiny', '--type', 'token_classification', '--labels', 'O,,B'], /Label names must not be empty/],
    ['an unknown option', ['--preset', 'tiny', '--colour'], /unknown option '--colour'/],
  ])('fails clearly on %s', (_name, args, message) => {
    const out = join(workDir, 'cli-error');
    const result = runCli(...args, '--out', out);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(message);
    expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace for a user error
    expect(existsSync(out)).toBe(false);
  });

  it('requires --out', () => {
    const result = runCli('--preset', 'tiny');
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/required option '--out <dir>' not specified/);
  });
});
