/** LatePredictor: the stand-in `serve` builds its front ends around while the model loads. */
import { describe, expect, it } from 'vitest';
import { InternalError } from '../../src/encoder/errors.ts';
import { LatePredictor } from '../../src/encoder/late-predictor.ts';
import type { Predictor } from '../../src/encoder/predict-pipeline.ts';

function pipeline(modelId: string, modelType: Predictor['modelType']): Predictor {
  return {
    modelId,
    modelType,
    metadata: () => ({ model_id: modelId, model_type: modelType, id2label: { '0': 'no', '1': 'yes' } }),
    predict: (body) => Promise.resolve({ results: [], model_id: `${modelId}:${JSON.stringify(body)}` }),
    embed: () => Promise.reject(new InternalError('not pooled')),
    rerank: (request) => Promise.resolve({ model_id: modelId, scores: request.documents.map((_, index) => index), promptTokens: 1 }),
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

  it('refuses a pipeline of another model', () => {
    const late = new LatePredictor('cross', 'sequence_classification');
    expect(() => late.bind(pipeline('other', 'sequence_classification'))).toThrow(InternalError);
    expect(() => late.bind(pipeline('cross', 'embedding'))).toThrow('expected cross (sequence_classification)');
  });
});
