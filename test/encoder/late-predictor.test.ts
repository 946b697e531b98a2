/** LatePredictor: the stand-in `serve` builds its front ends around while the model loads. */
import { describe, expect, it } from 'vitest';
import { InternalError } from '../../src/encoder/errors.ts';
import { LatePredictor } from '../../src/encoder/late-predictor.ts';
import type { BatchRun, BatchRunListener } from '../../src/encoder/batch-scheduler.ts';
import type { BatchingPredictor } from '../../src/encoder/predictor.ts';
import { stubServingLimits } from '../helpers/predict-responses.ts';

type StubPipeline = BatchingPredictor & { listeners: Set<BatchRunListener> };

function pipeline(modelId: string, modelType: BatchingPredictor['modelType']): StubPipeline {
  const listeners = new Set<BatchRunListener>();
  return {
    listeners,
    batchingStats: () => ({ requests: 7, runs: 3, failedRuns: 0, isolatedRuns: 0, sequences: 9, tokens: 90, paddedTokens: 99, largestBatchTokens: 40, oversizeRuns: 0, queuedSequences: 2, runsInFlight: 1 }),
    observeBatches: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    modelId,
    modelType,
    metadata: () => ({ model_id: modelId, model_type: modelType, id2label: { '0': 'no', '1': 'yes' } }),
    predict: (body) => Promise.resolve({ results: [], model_id: `${modelId}:${JSON.stringify(body)}` }),
    embed: () => Promise.reject(new InternalError('not pooled')),
    rerank: (request) => Promise.resolve({ model_id: modelId, scores: request.documents.map((_, index) => index), promptTokens: 1 }),
    tokenize: () => Promise.reject(new Error('unused')),
    decode: () => Promise.reject(new Error('unused')),
    servingLimits: stubServingLimits,
  };
}

describe('LatePredictor', () => {
  it("tells the package's model id and type before it is bound", () => {
    const late = new LatePredictor('cross', 'sequence_classification');
    expect([late.modelId, late.modelType]).toEqual(['cross', 'sequence_classification']);
  });

  it('refuses every other call with an InternalError until bound', async () => {
    const late = new LatePredictor('cross', 'sequence_classification');
    expect(() => late.metadata()).toThrow(new InternalError('the model cross has not loaded yet'));
    await expect(late.predict({ inputs: ['a'] })).rejects.toThrow(InternalError);
    await expect(late.embed({ inputs: ['a'] })).rejects.toThrow('has not loaded yet');
    await expect(late.rerank({ query: 'q', documents: ['d'] })).rejects.toThrow('has not loaded yet');
  });

  it('passes every call to the pipeline once bound, failures included', async () => {
    const late = new LatePredictor('cross', 'sequence_classification');
    late.bind(pipeline('cross', 'sequence_classification'));
    expect(late.metadata().id2label).toEqual({ '0': 'no', '1': 'yes' });
    expect((await late.predict({ inputs: ['a'] })).model_id).toBe('cross:{"inputs":["a"]}');
    expect((await late.rerank({ query: 'q', documents: ['d', 'e'] })).scores).toEqual([0, 1]);
    await expect(late.embed({ inputs: ['a'] })).rejects.toThrow('not pooled');
  });

  it('hands observers of runs added before it is bound to the pipeline, and stops them before and after', () => {
    const late = new LatePredictor('cross', 'sequence_classification');
    const seen: [string, BatchRun][] = [];
    const stopEarly = late.observeBatches((run) => seen.push(['early', run]));
    late.observeBatches((run) => seen.push(['kept', run]));
    const stopBeforeBind = late.observeBatches((run) => seen.push(['dropped', run]));
    stopBeforeBind();
    expect(() => late.batchingStats()).toThrow('has not loaded yet');

    const bound = pipeline('cross', 'sequence_classification');
    late.bind(bound);
    const stopLate = late.observeBatches((run) => seen.push(['late', run]));
    expect(bound.listeners.size).toBe(3);
    expect(late.batchingStats().sequences).toBe(9);
    const run: BatchRun = { rows: 2, tokens: 10, paddedTokens: 12, queueWaitsMs: [1, 0], durationMs: 5, failed: false };
    for (const listener of bound.listeners) listener(run);
    expect(seen.map(([name]) => name)).toEqual(['early', 'kept', 'late']);
    expect(seen[0][1]).toBe(run);

    stopEarly();
    stopLate();
    expect(bound.listeners.size).toBe(1);
  });

  it('refuses a pipeline of another model', () => {
    const late = new LatePredictor('cross', 'sequence_classification');
    expect(() => late.bind(pipeline('other', 'sequence_classification'))).toThrow(InternalError);
    expect(() => late.bind(pipeline('cross', 'embedding'))).toThrow('expected cross (sequence_classification)');
  });
});
