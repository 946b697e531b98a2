/**
 * Large requests (issue 30): OpenAI's limits of 2,048 inputs and 300,000 tokens per request, a tokenizer thread for
 * the long ones, and runs in pieces of about one batch so that a request arriving meanwhile is not queued behind all
 * of a large one's rows, and the outputs held are those of a few batches.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sourceInferenceWorker } from '../../src/cli/installed-files.ts';
import { parseBuildConfig, type ModelType } from '../../src/encoder/config.ts';
import { ConfigError, InputError } from '../../src/encoder/errors.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { PipelineOptions } from '../../src/encoder/pipeline-options.ts';
import { TokenizerWorkers } from '../../src/encoder/tokenizer-workers.ts';
import { generateTinyCrossEncoder, generateTinyModel } from '../helpers/generated-models.ts';

let embeddingDir: string;
let crossEncoderDir: string;
const pipelines: PredictPipeline[] = [];

beforeAll(async () => {
  [embeddingDir, crossEncoderDir] = await Promise.all([generateTinyModel({ modelType: 'sentence_embedding' }), generateTinyCrossEncoder()]);
});

afterAll(async () => {
  await Promise.all(pipelines.map((pipeline) => pipeline.close()));
});

async function pipelineFor(dir: string, modelType: ModelType, options: PipelineOptions = {}): Promise<PredictPipeline> {
  const config = parseBuildConfig(`encoder:\n  name: test\n  path: ${dir}\n  model_type: ${modelType}\n`, { baseDir: dir });
  const pipeline = await PredictPipeline.load(readModelPackage(config), options);
  pipelines.push(pipeline);
  return pipeline;
}

const documents = (count: number, words = 40) =>
  Array.from({ length: count }, (_, i) => Array.from({ length: words }, (_, w) => `word${(i * 7 + w) % 50} text`).join(' '));

describe('limits per request', () => {
  it('refuses more inputs than maxRequestInputs, naming the limit, before tokenizing', async () => {
    const pipeline = await pipelineFor(embeddingDir, 'sentence_embedding', { maxRequestInputs: 3 });
    expect((await pipeline.embed({ inputs: ['a', 'b', 'c'] })).vectors).toHaveLength(3);
    const refused = pipeline.embed({ inputs: ['a', 'b', 'c', 'd'] });
    await expect(refused).rejects.toThrow(InputError);
    await expect(refused).rejects.toThrow(/4 inputs, more than the limit of 3 inputs per request/);
  });

  it('holds per-token results to maxTokenResults and pooled ones to maxRequestTokens', async () => {
    const embedding = await pipelineFor(embeddingDir, 'embedding', { maxRequestTokens: 1000, maxTokenResults: 20 });
    await expect(embedding.predict({ inputs: documents(1, 30), normalize: true })).rejects.toThrow(/more than the limit of 20 tokens per request/);
    // the same text pooled is within the request's 1,000 tokens
    expect((await embedding.embed({ inputs: documents(1, 30) })).vectors).toHaveLength(1);
    await expect(pipelineFor(embeddingDir, 'embedding', { maxTokenResults: 0 })).rejects.toThrow(ConfigError);
  });
});

describe('a request in pieces', () => {
  it('gives the same vectors as one input at a time, whatever the piece size', async () => {
    const pieces = await pipelineFor(embeddingDir, 'sentence_embedding', { maxBatchTokens: 64 });
    const texts = documents(40, 12);
    const whole = await pieces.embed({ inputs: texts });
    const one = await Promise.all(texts.map((text) => pieces.embed({ inputs: [text] })));
    expect(whole.vectors).toHaveLength(40);
    whole.vectors.forEach((vector, index) => expect(Array.from(vector)).toEqual(Array.from(one[index].vectors[0]).map((v) => expect.closeTo(v, 5))));
    expect(pieces.batchingStats().runs).toBeGreaterThan(5);
  });

  it('answers a short request that arrives during a large one before the large one ends', async () => {
    const pipeline = await pipelineFor(embeddingDir, 'sentence_embedding', { maxBatchTokens: 64 });
    const order: string[] = [];
    const large = pipeline.embed({ inputs: documents(300, 30) }).then(() => order.push('large'));
    // the large request has started its pieces when this one arrives
    await new Promise((resolve) => setTimeout(resolve, 20));
    const small = pipeline.embed({ inputs: ['a short query'] }).then(() => order.push('small'));
    await Promise.all([large, small]);
    expect(order).toEqual(['small', 'large']);
  });

  it('close lets an accepted request run all its pieces', async () => {
    const pipeline = await PredictPipeline.load(
      readModelPackage(parseBuildConfig(`encoder:\n  name: t\n  path: ${embeddingDir}\n  model_type: sentence_embedding\n`, { baseDir: embeddingDir })),
      { maxBatchTokens: 64, maxWaitMs: 10_000 },
    );
    const accepted = pipeline.embed({ inputs: documents(30, 20) });
    const closing = pipeline.close();
    expect((await accepted).vectors).toHaveLength(30);
    await closing;
    await expect(pipeline.embed({ inputs: ['too late'] })).rejects.toThrow(/shutting down/);
  });
});

describe('the tokenizer thread', () => {
  it('tokenizes long requests off the calling thread, with the results of tokenizing here', async () => {
    const threaded = await pipelineFor(crossEncoderDir, 'sequence_classification', { workers: 1, inferenceWorker: sourceInferenceWorker(), inlineTokenizeUnits: 100 });
    const here = await pipelineFor(crossEncoderDir, 'sequence_classification');
    const docs = documents(20, 40);
    const [a, b] = await Promise.all([threaded.rerank({ query: 'which text', documents: docs }), here.rerank({ query: 'which text', documents: docs })]);
    expect(a.promptTokens).toBe(b.promptTokens);
    a.scores.forEach((score, index) => expect(score).toBeCloseTo(b.scores[index], 5));
    const predicted = await threaded.predict({ inputs: [[docs[0], docs[1]], docs[2]] });
    const expected = await here.predict({ inputs: [[docs[0], docs[1]], docs[2]] });
    expect(predicted.results.map((r) => (r as { predicted_label?: string }).predicted_label)).toEqual(expected.results.map((r) => (r as { predicted_label?: string }).predicted_label));
  });

  it('gives a tokenizer error of the request as an input error and goes on; a closed pool refuses jobs', async () => {
    const config = parseBuildConfig(`encoder:\n  name: t\n  path: ${embeddingDir}\n  model_type: embedding\n`, { baseDir: embeddingDir });
    const pkg = readModelPackage(config);
    const threads = new TokenizerWorkers(sourceInferenceWorker(), { tokenizerJson: pkg.tokenizerJson, tokenizerConfig: pkg.tokenizerConfig });
    try {
      await threads.ready();
      const packed = await threads.encode({ texts: ['hello world', 'another text'], pairs: null, tokens: true });
      expect(Array.from(packed.lengths)).toHaveLength(2);
      expect(packed.tokens).toContain('hello');
      // the tokenizer's own error for a text that is not one crosses as the input error it is
      await expect(threads.encode({ texts: [42 as unknown as string], pairs: null, tokens: false })).rejects.toThrow(InputError);
      expect((await threads.encode({ texts: ['still here'], pairs: null, tokens: false })).lengths[0]).toBeGreaterThan(2);
    } finally {
      await threads.close();
    }
    await expect(threads.encode({ texts: ['closed'], pairs: null, tokens: false })).rejects.toThrow(/closed/);
  });

  it.runIf(process.platform === 'linux')('runs below the event loop: its thread has a nice value of 10, the loop keeps its own', async () => {
    const config = parseBuildConfig(`encoder:\n  name: t\n  path: ${embeddingDir}\n  model_type: embedding\n`, { baseDir: embeddingDir });
    const pkg = readModelPackage(config);
    const niceOf = (tid: string) => Number(readFileSync(`/proc/self/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ')[16]);
    const before = new Set(readdirSync('/proc/self/task'));
    const threads = new TokenizerWorkers(sourceInferenceWorker(), { tokenizerJson: pkg.tokenizerJson, tokenizerConfig: pkg.tokenizerConfig });
    try {
      await threads.ready();
      const added = readdirSync('/proc/self/task').filter((tid) => !before.has(tid));
      expect(added.map(niceOf)).toContain(10);
      expect(niceOf(String(process.pid))).toBe(0);
    } finally {
      await threads.close();
    }
  });

  it('refuses a tokenizer the thread cannot load with a ConfigError at start', async () => {
    const threads = new TokenizerWorkers(sourceInferenceWorker(), { tokenizerJson: '{"not": "a tokenizer"}', tokenizerConfig: null });
    await expect(threads.ready()).rejects.toThrow(ConfigError);
    await threads.close();
  });
});
