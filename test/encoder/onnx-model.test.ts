import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/encoder/errors.ts';
import { OnnxModel, optimizeGraph, sessionOptionsFor, validateSignature, type ValueInfo } from '../../src/encoder/onnx-model.ts';
import { decodeModel } from '../../src/builder/quantize/onnx-format.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { hasShared, sharedModel, warnIfSharedMissing } from '../helpers/shared-fixtures.ts';

const ids: ValueInfo = { name: 'input_ids', type: 'int64', shape: ['batch', 'sequence'] };
const mask: ValueInfo = { name: 'attention_mask', type: 'int64', shape: ['batch', 'sequence'] };
const types: ValueInfo = { name: 'token_type_ids', type: 'int64', shape: ['batch', 'sequence'] };
const hidden: ValueInfo = { name: 'last_hidden_state', type: 'float32', shape: ['batch', 'sequence', 16] };
const logits2: ValueInfo = { name: 'logits', type: 'float32', shape: ['batch', 2] };
const logits3: ValueInfo = { name: 'logits', type: 'float32', shape: ['batch', 'sequence', 5] };

function failure(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('ONNX signature validation', () => {
  it('binds inputs by name, in any order, with token_type_ids optional', () => {
    expect(validateSignature('embedding', [mask, ids, types], [hidden])).toEqual({ hasTokenTypeIds: true, output: hidden, note: null });
    expect(validateSignature('embedding', [ids, mask], [hidden]).hasTokenTypeIds).toBe(false);
  });

  it('picks the output of each model type', () => {
    expect(validateSignature('sequence_classification', [ids, mask], [logits2]).output).toBe(logits2);
    expect(validateSignature('token_classification', [ids, mask], [logits3]).output).toBe(logits3);
    const pooled: ValueInfo = { name: 'pooler_output', type: 'float32', shape: ['batch', 16] };
    expect(validateSignature('embedding', [ids, mask], [pooled, hidden]).output).toBe(hidden);
  });

  it('falls back to the first float output of rank 3 for embeddings and says which', () => {
    const out0: ValueInfo = { name: 'output_0', type: 'float32', shape: ['batch', 'sequence', 50] };
    const out1: ValueInfo = { name: 'output_1', type: 'float32', shape: ['batch', 50] };
    const signature = validateSignature('embedding', [ids, mask, types], [out1, out0]);
    expect(signature.output).toBe(out0);
    expect(signature.note).toBe('model has no output "last_hidden_state"; using "output_0" [batch, sequence, 50] as token embeddings');
  });

  it('names a missing, unknown or mistyped input', () => {
    expect(failure(() => validateSignature('embedding', [ids], [hidden]))).toBe(
      'model has no input "attention_mask"; inputs: input_ids int64 [batch, sequence]',
    );
    expect(failure(() => validateSignature('embedding', [ids, mask, { name: 'position_ids', type: 'int64', shape: [] }], [hidden]))).toBe(
      'model input "position_ids" is not supported; inputs are bound by name: input_ids, attention_mask, token_type_ids',
    );
    expect(failure(() => validateSignature('embedding', [{ ...ids, type: 'int32' }, mask], [hidden]))).toBe(
      'model input "input_ids" has type int32; it must be int64',
    );
  });

  it('names the output and its shape when it does not fit the model type', () => {
    expect(failure(() => validateSignature('sequence_classification', [ids, mask], [logits3]))).toBe(
      'model output "logits" is float32 [batch, sequence, 5] (rank 3); a sequence_classification model needs float32 of rank 2 [batch, labels]',
    );
    expect(failure(() => validateSignature('token_classification', [ids, mask], [logits2]))).toBe(
      'model output "logits" is float32 [batch, 2] (rank 2); a token_classification model needs float32 of rank 3 [batch, sequence, labels]',
    );
    expect(failure(() => validateSignature('embedding', [ids, mask], [{ ...hidden, shape: ['batch', 16] }]))).toContain(
      'model output "last_hidden_state" is float32 [batch, 16] (rank 2)',
    );
    expect(failure(() => validateSignature('sequence_classification', [ids, mask], [hidden]))).toBe(
      'a sequence_classification model needs output "logits" of rank 2 [batch, labels]; outputs: last_hidden_state float32 [batch, sequence, 16]',
    );
    expect(failure(() => validateSignature('embedding', [ids, mask], [logits2]))).toBe(
      'a embedding model needs output "last_hidden_state" of rank 3 [batch, sequence, hidden] (or another float output of rank 3); outputs: logits float32 [batch, 2]',
    );
  });

  it('says when the weights are not an ONNX model', async () => {
    await expect(OnnxModel.load(new TextEncoder().encode('not a model'), 'embedding')).rejects.toThrow(
      /^model weights are not a loadable ONNX model: /,
    );
  });
});

describe('session options', () => {
  it('spin between the steps of a run, and after it unless spinAfterRun is false (the solo session)', async () => {
    expect(sessionOptionsFor().extra).toEqual({ session: { intra_op: { allow_spinning: '1' } } });
    expect(sessionOptionsFor({ threads: 2, spinAfterRun: false })).toMatchObject({
      intraOpNumThreads: 2,
      extra: { session: { intra_op: { allow_spinning: '1' }, force_spinning_stop: '1' } },
    });
    // onnxruntime takes the entry: a session with it runs
    const dir = await generateTinyModel({ modelType: 'embedding' });
    const model = await OnnxModel.load(readFileSync(path.join(dir, 'model.onnx')), 'embedding', { threads: 2, spinAfterRun: false });
    await model.close();
  });
});

describe('the graph the builder packs (optimizeGraph)', () => {
  it('has the fusions done, and the original signature and outputs', async () => {
    const weights = readFileSync(path.join(await generateTinyModel(), 'model.onnx'));
    const optimized = await optimizeGraph(weights);
    const nodes = (bytes: Uint8Array) => decodeModel(bytes).graph!.node.map((node) => `${node.domain ?? ''}:${node.op_type}`);
    expect(nodes(optimized).length).toBeLessThan(nodes(weights).length);
    expect(nodes(weights)).toContain(':Erf'); // GELU as exported
    expect(nodes(optimized)).toContain('com.microsoft:BiasGelu'); // fused by onnxruntime
    const [original, packed] = await Promise.all([OnnxModel.load(weights, 'embedding'), OnnxModel.load(optimized, 'embedding')]);
    try {
      expect(packed.signature).toEqual(original.signature);
      const ids = [101n, 200n, 300n, 102n];
      const batch = {
        batchSize: 1,
        sequenceLength: ids.length,
        inputIds: BigInt64Array.from(ids),
        attentionMask: BigInt64Array.from(ids, () => 1n),
        tokenTypeIds: new BigInt64Array(ids.length),
      };
      // every session runs all optimisations, so the original runs the same fused graph
      expect(Array.from((await packed.run(batch)).data)).toEqual(Array.from((await original.run(batch)).data));
    } finally {
      await Promise.all([original.close(), packed.close()]);
    }
  });

  it('is a ConfigError naming what onnxruntime said when the weights are not a model', async () => {
    await expect(optimizeGraph(new TextEncoder().encode('not a model'))).rejects.toThrow(/^onnxruntime could not optimize the model's graph: /);
  });
});

warnIfSharedMissing('ONNX validation of real exports');
describe.skipIf(!hasShared)('ONNX validation of real exports', () => {
  const load = (name: string, type: Parameters<typeof OnnxModel.load>[1]) =>
    OnnxModel.load(readFileSync(path.join(sharedModel(name), 'model.onnx')), type);

  it('accepts each tiny-bert export for its own type', async () => {
    for (const [name, type, output] of [
      ['tiny-bert-embedding', 'embedding', 'last_hidden_state'],
      ['tiny-bert-sequence-classification', 'sequence_classification', 'logits'],
      ['tiny-bert-token-classification', 'token_classification', 'logits'],
    ] as const) {
      const model = await load(name, type);
      expect(model.signature.output.name).toBe(output);
      expect(model.signature.hasTokenTypeIds).toBe(true);
      await model.close();
    }
  });

  it('rejects an export used as the wrong type, naming the output', async () => {
    await expect(load('tiny-bert-token-classification', 'sequence_classification')).rejects.toThrow(
      'model output "logits" is float32 [batch_size, sequence_length, 2] (rank 3); a sequence_classification model needs float32 of rank 2 [batch, labels]',
    );
    await expect(load('tiny-bert-embedding', 'token_classification')).rejects.toThrow(
      'a token_classification model needs output "logits" of rank 3',
    );
  });

  it('uses output_0 of the tinybert-golden export and says so', async () => {
    const model = await load('tinybert-golden', 'embedding');
    expect(model.signature.note).toContain('using "output_0" [batch, sequence, 50]');
    await model.close();
  });
});

describe.runIf(process.platform === 'linux')('onnxruntime telemetry', () => {
  // onnxruntime 1.30 reads /proc/self/cmdline for its telemetry (which overflowed the stack from ~28 KiB of command
  // line on: SIGSEGV), stores events under ~/.cache/Microsoft and uploads them. It is switched off.
  /** Runs `code` (an ES module, with these imports resolved) in a fresh Node with HOME in a temporary folder. */
  function runWithFreshHome(code: string, args: string[]): { status: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; created: boolean } {
    const home = mkdtempSync(path.join(os.tmpdir(), 'ort-telemetry-'));
    const script = path.join(home, 'load.ts');
    const source = (file: string) => JSON.stringify(path.join(import.meta.dirname, '../..', file));
    writeFileSync(
      script,
      `import { readFileSync } from 'node:fs';
import { OnnxModel } from ${source('src/encoder/onnx-model.ts')};
import { InferenceWorkers } from ${source('src/encoder/inference-workers.ts')};
import { sourceInferenceWorker } from ${source('src/cli/installed-files.ts')};
${code}`,
    );
    const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, XDG_CACHE_HOME: path.join(home, '.cache') };
    delete env.ORT_DISABLE_TELEMETRY;
    const run = spawnSync(process.execPath, [script, ...args], { encoding: 'utf8', timeout: 60_000, env });
    const created = existsSync(path.join(home, '.cache', 'Microsoft'));
    rmSync(home, { recursive: true, force: true });
    return { status: run.status, signal: run.signal, stdout: run.stdout, stderr: run.stderr, created };
  }

  it('is off: no telemetry folder, and a long command line (infer "<a long document>") loads', async () => {
    const modelDir = await generateTinyModel({ modelType: 'embedding' });
    const run = runWithFreshHome(
      `await OnnxModel.load(readFileSync(${JSON.stringify(path.join(modelDir, 'model.onnx'))}), 'embedding');
process.stdout.write('loaded');`,
      ['word '.repeat(8000)],
    );
    rmSync(modelDir, { recursive: true, force: true });
    expect({ status: run.status, signal: run.signal, stdout: run.stdout }, run.stderr).toEqual({ status: 0, signal: null, stdout: 'loaded' });
    expect(run.created).toBe(false);
  });

  it('is off when only worker threads load onnxruntime (serve): a worker cannot change the process environment', async () => {
    const modelDir = await generateTinyModel({ modelType: 'embedding' });
    const run = runWithFreshHome(
      `const pool = await InferenceWorkers.load(readFileSync(${JSON.stringify(path.join(modelDir, 'model.onnx'))}), 'embedding', { workers: 1, worker: sourceInferenceWorker() });
await pool.close();
process.stdout.write('loaded');`,
      [],
    );
    rmSync(modelDir, { recursive: true, force: true });
    expect({ status: run.status, signal: run.signal, stdout: run.stdout }, run.stderr).toEqual({ status: 0, signal: null, stdout: 'loaded' });
    expect(run.created).toBe(false);
  });
});
