import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { sourceInferenceWorker } from '../../src/cli/installed-files.ts';
import { parseBuildConfig, type ModelType } from '../../src/encoder/config.ts';
import { ConfigError, InputError, InternalError } from '../../src/encoder/errors.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { PipelineOptions } from '../../src/encoder/pipeline-options.ts';
import {
  RESPONSE_SCHEMAS,
  type EmbeddingResponse,
  type SentenceEmbeddingResponse,
  type SequenceClassificationResponse,
  type TokenClassificationResponse,
} from '../../src/encoder/schemas.ts';
import { formatFloat32, stringifyJson } from '../../src/shared/float32-json.ts';
import { generateTinyModel, generateTinyModelsOfEachType } from '../helpers/generated-models.ts';

const ajv = new Ajv();
const pipelines: PredictPipeline[] = [];
const texts = ['the cat sat on the mat', 'hi', 'a much longer sentence that has quite a few more words in it than the others', 'ok then'];

async function pipelineFor(dir: string, modelType: ModelType, extra = '', options: PipelineOptions = {}): Promise<PredictPipeline> {
  const config = parseBuildConfig(`encoder:\n  name: test-${modelType}\n  path: ${dir}\n  model_type: ${modelType}\n${extra}`, { baseDir: dir });
  const pipeline = await PredictPipeline.load(readModelPackage(config), options);
  pipelines.push(pipeline);
  return pipeline;
}

/**
 * A pipeline of its own whose tokenizer takes 1 ms per input (busy), with 40 inputs: 40 ms of tokenizing, ten times
 * the slice the event loop may be held; and what the request answers when tokenizing is fast.
 */
async function slowlyTokenizingPipeline() {
  const pipeline = await pipelineFor(sequenceDir, 'sequence_classification');
  const inputs = Array.from({ length: 40 }, (_, i) => `input number ${i} of a large request`);
  const expected = await pipeline.predict({ inputs });
  const encode = pipeline.tokenizer.encode.bind(pipeline.tokenizer);
  let tokenized = 0;
  vi.spyOn(pipeline.tokenizer, 'encode').mockImplementation((text, ...rest) => {
    for (const started = performance.now(); performance.now() - started < 1; );
    tokenized++;
    return encode(text, ...rest);
  });
  return { pipeline, inputs, expected, tokenized: () => tokenized };
}

let embeddingDir: string;
let sequenceDir: string;
let tokenDir: string;

beforeAll(async () => {
  ({ embedding: embeddingDir, sequence: sequenceDir, token: tokenDir } = await generateTinyModelsOfEachType());
});

afterAll(async () => {
  await Promise.all(pipelines.map((p) => p.close()));
});

describe('predict pipeline on generated models', () => {
  it('returns one embedding per input token, in input order, with metadata echoed', async () => {
    const pipeline = await pipelineFor(embeddingDir, 'embedding');
    const response = (await pipeline.predict({ inputs: texts, normalize: true, metadata: { request: '7' } })) as EmbeddingResponse;
    expect(ajv.validate(RESPONSE_SCHEMAS.embedding, JSON.parse(stringifyJson(response)))).toBe(true);
    expect(response.model_id).toBe('test-embedding');
    expect(response.metadata).toEqual({ request: '7' });
    expect(response.results).toHaveLength(texts.length);
    response.results.forEach((result, i) => {
      const tokens = result.embeddings.map((e) => e.token_info!);
      // token spans point back into the input text: each span is its (lower-cased) word piece, spans in order
      for (const token of tokens) expect(texts[i].slice(token.start, token.end).toLowerCase()).toBe(token.token.replace(/^##/, ''));
      expect(tokens.map((t) => t.start)).toEqual([...tokens.map((t) => t.start)].sort((a, b) => a - b));
      expect(tokens.at(-1)!.end).toBe(texts[i].length);
      for (const { embedding } of result.embeddings) {
        expect(embedding).toHaveLength(32);
        expect(embedding).toBeInstanceOf(Float32Array);
        expect(Math.hypot(...embedding)).toBeCloseTo(1, 5);
      }
    });
    expect(pipeline.metadata()).toEqual({ model_id: 'test-embedding', model_type: 'embedding', pooling: 'mean', normalize: true });
  });

  it('gives the same result for an input alone and inside a batch split into several runs', async () => {
    const small = await pipelineFor(embeddingDir, 'embedding', '', { maxBatchSequences: 2 });
    const batched = (await small.predict({ inputs: texts, normalize: false })) as EmbeddingResponse;
    for (const [i, text] of texts.entries()) {
      const alone = (await small.predict({ inputs: [text], normalize: false })) as EmbeddingResponse;
      const a = alone.results[0].embeddings.flatMap((e) => [...e.embedding]);
      const b = batched.results[i].embeddings.flatMap((e) => [...e.embedding]);
      expect(b).toHaveLength(a.length);
      expect(Math.max(...a.map((v, j) => Math.abs(v - b[j])))).toBeLessThan(1e-4);
    }
  });

  it('truncates an input longer than the model maximum instead of failing', async () => {
    const pipeline = await pipelineFor(embeddingDir, 'embedding');
    const long = Array.from({ length: 400 }, () => 'word').join(' ');
    const response = (await pipeline.predict({ inputs: [long], normalize: true })) as EmbeddingResponse;
    // 128 positions minus [CLS] and [SEP]
    expect(response.results[0].embeddings).toHaveLength(126);
  });

  it('classifies sequences with softmax scores and id2label labels', async () => {
    const pipeline = await pipelineFor(sequenceDir, 'sequence_classification');
    const response = (await pipeline.predict({ inputs: texts })) as SequenceClassificationResponse;
    expect(ajv.validate(RESPONSE_SCHEMAS.sequence_classification, JSON.parse(stringifyJson(response)))).toBe(true);
    expect(response.metadata).toBeUndefined();
    for (const result of response.results) {
      expect(result.logits).toHaveLength(3);
      expect(Math.abs(result.scores.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-6);
      const max = Math.max(...result.logits);
      const denominator = result.logits.reduce((sum, l) => sum + Math.exp(l - max), 0);
      result.scores.forEach((score, k) => expect(score).toBeCloseTo(Math.exp(result.logits[k] - max) / denominator, 6));
      expect(result.predicted_index).toBe(result.scores.indexOf(Math.max(...result.scores)));
      expect(result.predicted_label).toBe(['negative', 'positive', 'neutral'][result.predicted_index]);
    }
    expect(pipeline.metadata()).toEqual({
      model_id: 'test-sequence_classification',
      model_type: 'sequence_classification',
      id2label: { '0': 'negative', '1': 'positive', '2': 'neutral' },
    });
  });

  it('labels every token with IOB labels and the probability of the label', async () => {
    const pipeline = await pipelineFor(tokenDir, 'token_classification');
    const response = (await pipeline.predict({ inputs: ['the man lives in paris', 'hello'] })) as TokenClassificationResponse;
    expect(ajv.validate(RESPONSE_SCHEMAS.token_classification, JSON.parse(stringifyJson(response)))).toBe(true);
    expect(response.results[0].tokens.map((t) => t.token_info.token)).toEqual(['the', 'man', 'lives', 'in', 'paris']);
    for (const token of response.results.flatMap((r) => r.tokens)) {
      const best = token.scores.indexOf(Math.max(...token.scores));
      expect(token.label).toBe(['O', 'B-PER', 'I-PER'][best]);
      // the same float32, held as the double that prints its shortest decimal
      expect(Math.fround(token.score)).toBe(token.scores[best]);
      expect(String(token.score)).toBe(formatFloat32(token.scores[best]));
    }
  });

  it('falls back to LABEL_<i> for an index without a label, and omits predicted_label without any mapping', async () => {
    const dir = await generateTinyModel({ modelType: 'token_classification', labels: ['O', 'B-X', 'I-X'] });
    const configFile = path.join(dir, 'config.json');
    const config = JSON.parse(readFileSync(configFile, 'utf8'));
    config.id2label = { '0': 'O' };
    writeFileSync(configFile, JSON.stringify(config));
    const pipeline = await pipelineFor(dir, 'token_classification');
    const response = (await pipeline.predict({ inputs: ['some words here to label'] })) as TokenClassificationResponse;
    const labels = new Set(response.results[0].tokens.map((t) => t.label));
    for (const label of labels) expect(['O', 'LABEL_1', 'LABEL_2']).toContain(label);
    expect([...labels].some((l) => l.startsWith('LABEL_'))).toBe(true);

    const seqDir = await generateTinyModel({ modelType: 'sequence_classification' });
    const seqConfig = JSON.parse(readFileSync(path.join(seqDir, 'config.json'), 'utf8'));
    delete seqConfig.id2label;
    delete seqConfig.label2id;
    writeFileSync(path.join(seqDir, 'config.json'), JSON.stringify(seqConfig));
    const unlabeled = await pipelineFor(seqDir, 'sequence_classification');
    const result = ((await unlabeled.predict({ inputs: ['x'] })) as SequenceClassificationResponse).results[0];
    expect(result).not.toHaveProperty('predicted_label');
    expect(unlabeled.metadata().id2label).toEqual({});
  });
});

/**
 * The transform where it runs: on the calling thread without workers (`infer`, the build's checks), in each inference
 * worker beside onnxruntime with them (`serve`). Both must behave alike, failures included.
 */
describe.each([
  { runs: 'on the calling thread (workers: 0)', mode: {} },
  { runs: 'in two inference workers', mode: { workers: 2, inferenceWorker: sourceInferenceWorker() } },
] satisfies { runs: string; mode: PipelineOptions }[])('predict pipeline with a Lua transform, run $runs', ({ mode }) => {
  const open: PredictPipeline[] = [];
  // The file's pipelineFor in this mode. Each test's pipelines are closed after it: a pipeline with workers holds threads.
  const pipelineFor = async (dir: string, modelType: ModelType, extra = '', options: PipelineOptions = {}) => {
    const config = parseBuildConfig(`encoder:\n  name: test-${modelType}\n  path: ${dir}\n  model_type: ${modelType}\n${extra}`, { baseDir: dir });
    const pipeline = await PredictPipeline.load(readModelPackage(config), { ...mode, ...options });
    open.push(pipeline);
    return pipeline;
  };
  afterEach(async () => {
    await Promise.all(open.splice(0).map((pipeline) => pipeline.close()));
  });

  it('checks the transform at load on an output of the model shape', async () => {
    const wrongShape = pipelineFor(sequenceDir, 'sequence_classification', '  transform: |\n    function Postprocess(arr)\n      return arr:sum_axis(2)\n    end\n');
    await expect(wrongShape).rejects.toThrow(ConfigError);
    const failing = pipelineFor(embeddingDir, 'embedding', '  transform: |\n    function Postprocess(arr)\n      local x = nil\n      return x.y\n    end\n');
    await expect(failing).rejects.toThrow(/^transform line 3: /);
    // one that does not compile (with workers, each worker's own Lua state refuses it while loading)
    const syntax = pipelineFor(embeddingDir, 'embedding', '  transform: |\n    function Postprocess(arr)\n      return arr:\n    end\n');
    await expect(syntax).rejects.toThrow(ConfigError);
    await expect(syntax).rejects.toThrow(/^transform line 3: /);
  });

  it('applies the Lua transform to the model output before shaping', async () => {
    const plain = await pipelineFor(sequenceDir, 'sequence_classification');
    const doubled = await pipelineFor(sequenceDir, 'sequence_classification', '  transform: |\n    function Postprocess(arr)\n      return arr * 2\n    end\n');
    const a = ((await plain.predict({ inputs: texts })) as SequenceClassificationResponse).results;
    const b = ((await doubled.predict({ inputs: texts })) as SequenceClassificationResponse).results;
    a.forEach((result, i) => result.logits.forEach((logit, k) => expect(b[i].logits[k]).toBeCloseTo(logit * 2, 5)));
  });

  it('rejects bad requests with InputError and reports transform failures as InternalError', async () => {
    const pipeline = await pipelineFor(embeddingDir, 'embedding');
    await expect(pipeline.predict({ inputs: ['a'], normalize: 1 })).rejects.toThrow(new InputError('normalize must be a boolean, got number'));
    await expect(pipeline.predict({ inputs: [], normalize: true })).rejects.toThrow('Invalid input: inputs must not be empty');

    // The load-time check runs on a batch of 2, so this script passes it and fails on a batch of 1.
    const failing = await pipelineFor(
      sequenceDir,
      'sequence_classification',
      '  transform: |\n    function Postprocess(arr)\n      if arr:shape()[1] == 1 then error("boom") end\n      return arr\n    end\n',
    );
    await expect(failing.predict({ inputs: ['one', 'two'] })).resolves.toBeDefined();
    const error = await failing.predict({ inputs: ['one'] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InternalError);
    expect((error as Error).message).toContain('boom');
  });

  it('stops a transform that never returns, per batch, and keeps serving (10 s limit by default)', async () => {
    // The load-time check runs on a batch of 2, so this script passes it and loops on a batch of 1.
    const script = '  transform: |\n    function Postprocess(arr)\n      if arr:shape()[1] == 1 then while true do end end\n      return arr\n    end\n';
    const looping = await pipelineFor(sequenceDir, 'sequence_classification', script, { transformTimeoutMs: 200 });
    const error = await looping.predict({ inputs: ['one'] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InternalError);
    expect((error as Error).message).toBe('transform line 2: the transform ran longer than its limit of 200 ms');
    await expect(looping.predict({ inputs: ['one', 'two'] })).resolves.toMatchObject({ results: [{}, {}] });

    expect((await pipelineFor(sequenceDir, 'sequence_classification', script)).transformTimeoutMs).toBe(10_000);
    await expect(pipelineFor(sequenceDir, 'sequence_classification', script, { transformTimeoutMs: 0 })).rejects.toThrow(ConfigError);
  });

  it('fails a batch whose transform needs more Lua memory than transformMemoryLimitBytes, and keeps serving', async () => {
    const script = '  transform: |\n    function Postprocess(arr)\n      if arr:shape()[1] == 1 then local t = {} for i = 1, 1e7 do t[i] = i end end\n      return arr\n    end\n';
    const hungry = await pipelineFor(sequenceDir, 'sequence_classification', script, { transformMemoryLimitBytes: 4 * 2 ** 20 });
    const error = await hungry.predict({ inputs: ['one'] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InternalError);
    expect((error as Error).message).toBe('transform: the transform needed more Lua memory than its limit of 4 MiB');
    await expect(hungry.predict({ inputs: ['one', 'two'] })).resolves.toMatchObject({ results: [{}, {}] });
    await expect(pipelineFor(sequenceDir, 'sequence_classification', script, { transformMemoryLimitBytes: 10 })).rejects.toThrow(ConfigError);
  });

  it('fails a request whose output holds NaN or an infinite value (JSON would carry null) instead of answering it', async () => {
    // The load-time check runs on a batch of 2, so these scripts pass it.
    const poisoned = (modelType: ModelType, dir: string, value: string) =>
      pipelineFor(dir, modelType, `  transform: |\n    function Postprocess(arr)\n      if arr:shape()[1] == 1 then return arr * (${value}) end\n      return arr\n    end\n`);
    const cases = [
      [await poisoned('sequence_classification', sequenceDir, '0/0'), {}],
      [await poisoned('token_classification', tokenDir, '1/0'), {}],
      [await poisoned('embedding', embeddingDir, '-1/0'), { normalize: false }],
      [await poisoned('embedding', embeddingDir, '0/0'), { normalize: true }],
    ] as const;
    for (const [pipeline, extra] of cases) {
      const error = await pipeline.predict({ inputs: ['one'], ...extra }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InternalError);
      expect((error as Error).message).toMatch(/^the model output \(after the transform\) of input 0 holds (NaN|Infinity|-Infinity), which is not a number JSON can carry$/);
      await expect(pipeline.predict({ inputs: ['one', 'two'], ...extra })).resolves.toMatchObject({ results: [{}, {}] });
    }
  });

  it('a batch that fails because of one request fails that request only; the others merged with it are answered', async () => {
    const pipeline = await pipelineFor(
      embeddingDir,
      'embedding',
      '  transform: |\n    function Postprocess(arr)\n      if arr:shape()[2] > 20 then error("too long for this test") end\n      return arr\n    end\n',
      { schedulerTuning: { groupByLength: false } }, // arrival order: the three requests share one run
    );
    const words = (n: number) => Array.from({ length: n }, () => 'word').join(' ');
    const [short, failing, alsoShort] = await Promise.allSettled([
      pipeline.predict({ inputs: [words(16)], normalize: true }),
      pipeline.predict({ inputs: [words(22)], normalize: true }),
      pipeline.predict({ inputs: [words(17), words(15)], normalize: true }),
    ]);
    expect(short).toMatchObject({ status: 'fulfilled', value: { results: [{}] } });
    expect(alsoShort).toMatchObject({ status: 'fulfilled', value: { results: [{}, {}] } });
    expect(failing.status).toBe('rejected');
    expect((failing as PromiseRejectedResult).reason).toBeInstanceOf(InternalError);
    expect(((failing as PromiseRejectedResult).reason as Error).message).toContain('too long for this test');
    // the three were one run, then each alone
    expect(pipeline.batchingStats()).toMatchObject({ runs: 4, failedRuns: 2, isolatedRuns: 3 });
  });

  it('sentence_embedding: pools what the transform returns per token with the attention mask, or serves what it pooled', async () => {
    const inputs = ['a short one', 'and a much longer sentence, so that the first row is padded'];
    const vectors = async (extra: string) => {
      const pipeline = await pipelineFor(embeddingDir, 'sentence_embedding', extra);
      return ((await pipeline.predict({ inputs, normalize: false })) as SentenceEmbeddingResponse).results.map((result) => result.embedding);
    };
    const plain = await vectors('');
    // the mean over the attended tokens of doubled vectors: doubled vectors
    const doubled = await vectors('  transform: |\n    function Postprocess(arr)\n      return arr * 2\n    end\n');
    doubled.forEach((vector, row) => vector.forEach((value, k) => expect(value).toBeCloseTo(plain[row][k] * 2, 5)));
    // the script's own mean pooling with the mask it was given: what the model's mean pooling gives
    const pooledByScript = await vectors('  transform: |\n    function Postprocess(arr, mask)\n      return arr:mean_pool(mask)\n    end\n');
    pooledByScript.forEach((vector, row) => vector.forEach((value, k) => expect(value).toBeCloseTo(plain[row][k], 5)));
  });

  it("keeps the script's globals between batches, and a tensor it keeps in one stays intact", async () => {
    // one worker: each worker holds its own Lua state, so with several, globals are per worker (docs/transforms.md)
    const options = mode.workers === undefined ? {} : { workers: 1 };
    const script = '  transform: |\n    function Postprocess(arr)\n      if kept == nil then kept = arr * 1 return kept end\n      return arr * 0 + kept:sum()\n    end\n';
    const pipeline = await pipelineFor(sequenceDir, 'sequence_classification', script, options);
    const first = ((await pipeline.predict({ inputs: ['one'] })) as SequenceClassificationResponse).results[0].logits;
    const second = ((await pipeline.predict({ inputs: ['two', 'three'] })) as SequenceClassificationResponse).results;
    // the first batch's result, kept by the script, still holds its values (handed over, its buffer would be empty)
    const sum = Math.fround(first.reduce((a, b) => a + b, 0));
    for (const result of second) for (const logit of result.logits) expect(logit).toBeCloseTo(sum, 5);
    expect(sum).not.toBeCloseTo(0, 3);
  });
});

describe('predict pipeline: tokenizing and request limits', () => {
  it('gives the event loop turns while it tokenizes a large request, and answers it in input order all the same', async () => {
    const { pipeline, inputs, expected, tokenized } = await slowlyTokenizingPipeline();
    const turns: number[] = [];
    const predicted = pipeline.predict({ inputs });
    const tick = () => {
      turns.push(tokenized());
      if (tokenized() < inputs.length) setImmediate(tick);
    };
    setImmediate(tick);
    expect(await predicted).toEqual(expected);
    // other work ran while the request was half tokenized, not only before it began or after it ended
    expect(turns.some((count) => count > 0 && count < inputs.length), `inputs tokenized at each turn: ${turns.join(' ')}`).toBe(true);
  });

  it('a close while a request is being tokenized answers that request, then refuses new ones', async () => {
    const { pipeline, inputs, expected, tokenized } = await slowlyTokenizingPipeline();
    const predicted = pipeline.predict({ inputs });
    const closed = new Promise<number>((resolve) => {
      const closeWhenHalfway = () => {
        if (tokenized() === 0) return setImmediate(closeWhenHalfway);
        void pipeline.close();
        resolve(tokenized());
      };
      setImmediate(closeWhenHalfway);
    });
    expect(await closed).toBeLessThan(inputs.length);
    expect(await predicted).toEqual(expected);
    await expect(pipeline.predict({ inputs: ['too late'] })).rejects.toThrow(InternalError);
  });

  it('refuses a request of more tokens than maxRequestTokens, counting special tokens, and none by default', async () => {
    const limited = await pipelineFor(embeddingDir, 'embedding', '', { maxRequestTokens: 12 });
    const tokensOf = (inputs: string[]) => limited.tokenizer.encodeBatch(inputs).reduce((sum, e) => sum + e.ids.length, 0);
    const fits = ['one two', 'three four five'];
    expect(tokensOf(fits)).toBeLessThanOrEqual(12);
    await expect(limited.predict({ inputs: fits, normalize: true })).resolves.toMatchObject({ results: [{}, {}] });
    const over = [...fits, 'six seven eight nine'];
    const error = await limited.predict({ inputs: over, normalize: true }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputError);
    expect((error as Error).message).toBe(`Invalid input: the request holds ${tokensOf(over)} tokens, more than the limit of 12 tokens per request; send fewer or shorter inputs`);
    await expect(limited.predict({ inputs: Array.from({ length: 13 }, () => 'a'), normalize: true })).rejects.toThrow('holds 13 inputs, more than the limit of 12');
    // the refused request took nothing from the next one
    await expect(limited.predict({ inputs: fits, normalize: true })).resolves.toMatchObject({ results: [{}, {}] });

    expect((await pipelineFor(embeddingDir, 'embedding')).maxRequestTokens).toBe(Infinity);
    await expect(pipelineFor(embeddingDir, 'embedding', '', { maxRequestTokens: 0 })).rejects.toThrow(ConfigError);
  });
});
