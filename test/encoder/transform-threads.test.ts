/**
 * The transform behaves the same wherever it runs: on the calling thread (a pipeline without workers: `infer`, the
 * build's checks) or in an inference worker beside onnxruntime (`serve`). The part of transform.test.ts that depends
 * on the thread, run through a whole pipeline in both: the two script forms and the mask they get, a Lua state kept
 * between batches and replaced after a failure, a time limit a script cannot catch, os.exit refused, and print and
 * io.write reaching stderr, never stdout. (LuaTransform itself is the same code in both: transform.test.ts.)
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sourceInferenceWorker } from '../../src/cli/installed-files.ts';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { InternalError } from '../../src/encoder/errors.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { PipelineOptions } from '../../src/encoder/pipeline-options.ts';
import type { SequenceClassificationResponse } from '../../src/encoder/schemas.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';

let dir: string;

beforeAll(async () => {
  dir = await generateTinyModel({ modelType: 'sequence_classification', labels: ['no', 'yes'] });
});

/** The build configuration of the test model with `script` as its transform (and `extra` lines). */
function configText(script: string | null, extra = ''): string {
  const transform = script === null ? '' : `  transform: |\n${script.replace(/^/gm, '    ')}\n`;
  return `encoder:\n  name: lua\n  path: ${dir}\n  model_type: sequence_classification\n${transform}${extra}`;
}

const PLACES = [
  { where: 'on the calling thread', mode: {} },
  // one worker, so that consecutive batches meet the same Lua state (each worker holds its own)
  { where: 'in an inference worker', mode: { workers: 1, inferenceWorker: sourceInferenceWorker() } },
] satisfies { where: string; mode: PipelineOptions }[];

describe.each(PLACES)('a transform run $where', ({ mode }) => {
  const open: PredictPipeline[] = [];
  async function pipeline(script: string | null, options: PipelineOptions = {}, extra = ''): Promise<PredictPipeline> {
    const loaded = await PredictPipeline.load(readModelPackage(parseBuildConfig(configText(script, extra), { baseDir: dir })), { ...mode, ...options });
    open.push(loaded);
    return loaded;
  }
  afterEach(async () => {
    await Promise.all(open.splice(0).map((loaded) => loaded.close()));
  });
  const logits = async (served: PredictPipeline, inputs: string[]) => ((await served.predict({ inputs })) as SequenceClassificationResponse).results.map((result) => result.logits);
  const failure = (served: PredictPipeline, inputs: string[]) => served.predict({ inputs }).then(() => new Error('expected a failure'), (error: Error) => error);

  it('calls Postprocess(arr, mask), or runs an inline chunk with the globals output and mask, with the batch attention mask', async () => {
    const inputs = ['one', 'and a longer second input'];
    const untransformed = await pipeline(null);
    const plain = await logits(untransformed, inputs);
    // mask:sum() is the number of attended tokens of the whole batch: the same for every row (the load-time check of a
    // sequence_classification transform passes no mask)
    const tokens = inputs.reduce((sum, input) => sum + untransformed.tokenizer.encode(input).ids.length, 0);
    for (const script of ['function Postprocess(arr, mask)\n  return arr + (mask and mask:sum() or 0)\nend', 'return output + (mask and mask:sum() or 0)']) {
      const shifted = await logits(await pipeline(script), inputs);
      shifted.forEach((row, i) => row.forEach((logit, k) => expect(logit).toBeCloseTo(plain[i][k] + tokens, 4)));
    }
  });

  it('keeps its Lua state between batches, and starts a new one after a call that failed', async () => {
    const script = 'function Postprocess(arr)\n  calls = (calls or 0) + 1\n  if arr:shape()[1] == 3 then error("three rows") end\n  return arr * 0 + calls\nend';
    const served = await pipeline(script); // the load-time check ran it on another state
    const calls = async () => (await logits(served, ['a']))[0][0];
    expect([await calls(), await calls(), await calls()]).toEqual([1, 2, 3]);
    const error = await failure(served, ['a', 'b', 'c']);
    expect(error).toBeInstanceOf(InternalError);
    expect(error.message).toBe('transform line 3: three rows');
    expect([await calls(), await calls()]).toEqual([1, 2]);
  });

  it('stops a script that catches the error of its time limit, replaces its state, and serves the next batch', async () => {
    const script =
      'function Postprocess(arr)\n  calls = (calls or 0) + 1\n  if arr:shape()[1] == 1 then\n    while true do pcall(function() while true do end end) end\n  end\n  return arr * 0 + calls\nend';
    const served = await pipeline(script, { transformTimeoutMs: 300 });
    expect((await logits(served, ['a', 'b']))[0][0]).toBe(1);
    const error = await failure(served, ['a']);
    expect(error).toBeInstanceOf(InternalError);
    expect(error.message).toBe('transform: the transform ran longer than its limit of 300 ms and caught the error that stopped it');
    // a new state: its count starts over
    expect((await logits(served, ['a', 'b']))[0][0]).toBe(1);
  });

  it('refuses os.exit (which would end the thread or the process), and keeps serving', async () => {
    const served = await pipeline('function Postprocess(arr)\n  if arr:shape()[1] == 1 then os.exit(1) end\n  return arr\nend', {}, '  lua_libs: [os]\n');
    const error = await failure(served, ['a']);
    expect(error).toBeInstanceOf(InternalError);
    expect(error.message).toBe('transform line 2: os.exit is not available in a transform');
    expect(await logits(served, ['a', 'b'])).toHaveLength(2);
  });

  it('print, io.write and io.stdout write to stderr, so that JSON on stdout stays clean', () => {
    // In a process of its own: the Lua runtime's stdout is bound when its wasm module starts, and what a worker thread
    // writes reaches the process's own streams.
    const work = mkdtempSync(path.join(tmpdir(), 'transform-threads-'));
    const src = (file: string) => JSON.stringify(path.join(import.meta.dirname, '../../src', file));
    const script = 'function Postprocess(arr)\n  print("from print")\n  io.write("from io.write\\n")\n  io.stdout:write("from io.stdout\\n")\n  io.stdout:flush()\n  return arr\nend';
    writeFileSync(
      path.join(work, 'run.ts'),
      `import { sourceInferenceWorker } from ${src('cli/installed-files.ts')};
import { parseBuildConfig } from ${src('encoder/config.ts')};
import { readModelPackage } from ${src('encoder/model-package.ts')};
import { PredictPipeline } from ${src('encoder/predict-pipeline.ts')};
const config = parseBuildConfig(${JSON.stringify(configText(script, '  lua_libs: [io]\n'))}, { baseDir: ${JSON.stringify(dir)} });
const workers = ${mode.workers ?? 0};
const pipeline = await PredictPipeline.load(readModelPackage(config), workers ? { workers, inferenceWorker: sourceInferenceWorker() } : {});
const answer = await pipeline.predict({ inputs: ['hello'] });
await pipeline.close();
process.stdout.write(JSON.stringify(answer.results.length));
`,
    );
    const child = spawnSync(process.execPath, [path.join(work, 'run.ts')], { encoding: 'utf8', timeout: 60_000 });
    rmSync(work, { recursive: true, force: true });
    expect({ status: child.status, stdout: child.stdout }, child.stderr).toEqual({ status: 0, stdout: '1' });
    // the load-time check on the calling thread prints once, the served batch once more (in the worker, with workers)
    expect(child.stderr.split('from print\n')).toHaveLength(3);
    expect(child.stderr).toContain('from io.write\nfrom io.stdout\n');
  });
});
