import { describe, expect, it } from 'vitest';
import { compareEmbeddings, compareLogits, compareOutputs, compareScores, type OutputTensor } from '../../src/builder/quantize/accuracy.ts';
import { InternalError } from '../../src/encoder/errors.ts';

const tensor = (dims: number[], values: number[]): OutputTensor => ({ data: Float32Array.from(values), dims });

describe('compareEmbeddings', () => {
  it('gives the smallest and the mean cosine of pooled vectors [batch, hidden]', () => {
    const fp32 = tensor([3, 2], [1, 0, 0, 2, 3, 4]);
    const int8 = tensor([3, 2], [1, 1, 0, 5, 6, 8]); // 45°, same direction, same direction
    const result = compareEmbeddings(fp32, int8);
    expect(result.kind).toBe('embedding');
    expect(result.vectors).toBe(3);
    expect(result.minCosine).toBeCloseTo(Math.SQRT1_2, 6);
    expect(result.meanCosine).toBeCloseTo((Math.SQRT1_2 + 2) / 3, 6);
  });

  it('compares only the real tokens of [batch, sequence, hidden]: padding, however different, does not count', () => {
    // batch 2, sequence 3, hidden 2; row 0 has 3 tokens, row 1 has 1 token and 2 padding positions
    const fp32 = tensor([2, 3, 2], [1, 0, 0, 1, 1, 1, /* row 1 */ 2, 0, 5, 5, 5, 5]);
    const int8 = tensor([2, 3, 2], [1, 0, 0, 1, 1, 0, /* row 1 */ 2, 0, -5, -5, -5, -5]);
    const mask = BigInt64Array.from([1n, 1n, 1n, 1n, 0n, 0n]);
    const masked = compareEmbeddings(fp32, int8, mask);
    expect(masked.vectors).toBe(4);
    expect(masked.minCosine).toBeCloseTo(Math.SQRT1_2, 6); // [1, 1] against [1, 0]
    expect(masked.meanCosine).toBeCloseTo((3 + Math.SQRT1_2) / 4, 6);
    // without the mask the opposite padding vectors are counted
    const unmasked = compareEmbeddings(fp32, int8);
    expect(unmasked.vectors).toBe(6);
    expect(unmasked.minCosine).toBeCloseTo(-1, 6);
    // a number[] mask works the same as the tokenizer's BigInt64Array
    expect(compareEmbeddings(fp32, int8, [1, 1, 1, 1, 0, 0])).toEqual(masked);
  });

  it('counts two zero vectors as equal and a zero, NaN or infinite vector against a real one as the worst case', () => {
    expect(compareEmbeddings(tensor([1, 2], [0, 0]), tensor([1, 2], [0, 0])).minCosine).toBe(1);
    expect(compareEmbeddings(tensor([1, 2], [1, 0]), tensor([1, 2], [0, 0])).minCosine).toBe(-1);
    expect(compareEmbeddings(tensor([1, 2], [1, 0]), tensor([1, 2], [Number.NaN, 0])).minCosine).toBe(-1);
    expect(compareEmbeddings(tensor([1, 2], [1, 0]), tensor([1, 2], [Infinity, 0])).minCosine).toBe(-1);
  });

  it('says an empty batch compared nothing', () => {
    expect(compareEmbeddings(tensor([2, 2, 3], new Array(12).fill(1)), tensor([2, 2, 3], new Array(12).fill(1)), [0, 0, 0, 0])).toEqual({
      kind: 'embedding',
      vectors: 0,
      minCosine: 1,
      meanCosine: 1,
    });
  });
});

describe('compareLogits and compareScores', () => {
  it('gives the share of unchanged argmax labels and the largest softmax score difference', () => {
    // row 0: softmax [0.5, 0.5] against [0.25, 0.75]: label 0 (first of a tie) against 1, difference 0.25
    // row 1: the same logits shifted by a constant: same softmax, same label
    const fp32 = tensor([2, 2], [0, 0, 1, 3]);
    const int8 = tensor([2, 2], [0, Math.log(3), 11, 13]);
    const result = compareLogits(fp32, int8);
    expect(result).toMatchObject({ kind: 'classification', predictions: 2, labelAgreement: 0.5 });
    expect(result.maxScoreDifference).toBeCloseTo(0.25, 6);
  });

  it('compares only the real tokens of token classification logits [batch, sequence, labels]', () => {
    const fp32 = tensor([1, 3, 2], [2, 0, 0, 2, 9, 0]);
    const int8 = tensor([1, 3, 2], [2, 0, 0, 2, 0, 9]); // the padded third token flips
    expect(compareLogits(fp32, int8, [1, 1, 0])).toEqual({ kind: 'classification', predictions: 2, labelAgreement: 1, maxScoreDifference: 0 });
    expect(compareLogits(fp32, int8).labelAgreement).toBeCloseTo(2 / 3, 6);
  });

  it('takes probabilities as they are in compareScores', () => {
    const result = compareScores(tensor([1, 3], [0.2, 0.5, 0.3]), tensor([1, 3], [0.1, 0.4, 0.5]));
    expect(result.labelAgreement).toBe(0);
    expect(result.maxScoreDifference).toBeCloseTo(0.2, 6);
  });

  it('counts a row with NaN or an infinity as a changed label with the largest possible difference', () => {
    const result = compareLogits(tensor([2, 2], [1, 0, 0, 1]), tensor([2, 2], [1, 0, Number.NaN, 1]));
    expect(result).toEqual({ kind: 'classification', predictions: 2, labelAgreement: 0.5, maxScoreDifference: 1 });
  });
});

describe('compareOutputs', () => {
  it('compares by kind', () => {
    const a = tensor([1, 2], [1, 0]);
    const b = tensor([1, 2], [0, 1]);
    expect(compareOutputs('embedding', a, b)).toEqual({ kind: 'embedding', vectors: 1, minCosine: 0, meanCosine: 0 });
    expect(compareOutputs('classification', a, b)).toMatchObject({ kind: 'classification', predictions: 1, labelAgreement: 0 });
  });

  it('refuses outputs that cannot be compared, saying why', () => {
    expect(() => compareEmbeddings(tensor([1, 2], [1, 0]), tensor([2, 1], [1, 0]))).toThrow(InternalError);
    expect(() => compareEmbeddings(tensor([1, 2], [1, 0]), tensor([2, 1], [1, 0]))).toThrow('the fp32 and int8 outputs differ in shape: [1, 2] and [2, 1]');
    expect(() => compareEmbeddings(tensor([2], [1, 0]), tensor([2], [1, 0]))).toThrow('expected an output of rank 2 or 3, got [2]');
    expect(() => compareEmbeddings(tensor([2, 2], [1, 0, 1]), tensor([2, 2], [1, 0, 1]))).toThrow('an output holds 3 and 3 values, not the 4 its dims say');
    expect(() => compareLogits(tensor([1, 2, 2], [1, 0, 1, 0]), tensor([1, 2, 2], [1, 0, 1, 0]), [1, 1, 1])).toThrow('the attention mask has 3 values, not the 2 of [1, 2]');
  });
});
