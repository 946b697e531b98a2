/**
 * serve's onnxruntime session options (encoderfile's --graph-optimization-level and --execution-provider, and
 * --intra-op-threads / --inter-op-threads): what the flags become, that they reach the session the inference worker
 * creates (read back from the worker, and seen in the threads onnxruntime starts), and the values refused (exit 2).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionSettingsOf } from '../../src/cli/serve-session.ts';
import { sourceInferenceWorker } from '../../src/cli/installed-files.ts';
import { OnnxModel } from '../../src/encoder/onnx-model.ts';
import { InferenceWorkers } from '../../src/encoder/inference-workers.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { serveRefusal } from '../helpers/run-cli.ts';
import { serveFromSource } from '../helpers/served-model.ts';

const work = mkdtempSync(path.join(os.tmpdir(), 'serve-session-'));
let modelDir: string;
let config: string;

beforeAll(async () => {
  modelDir = await generateTinyModel({ modelType: 'embedding' });
  config = path.join(work, 'session.yaml');
  writeFileSync(config, `encoder:\n  name: session-model\n  path: ${modelDir}\n  model_type: embedding\n`);
}, 60_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

const threadCount = () => readdirSync('/proc/self/task').length;

describe('session options', () => {
  it('become onnxruntime session options only where given', () => {
    expect(sessionSettingsOf({})).toEqual({ threads: undefined, sessionOptions: {} });
    expect(sessionSettingsOf({ graphOptimizationLevel: 'basic', executionProvider: 'cpu', interOpThreads: 3, intraOpThreads: 2 })).toEqual({
      threads: 2,
      sessionOptions: { graphOptimizationLevel: 'basic', executionProviders: ['cpu'], interOpNumThreads: 3, executionMode: 'parallel' },
    });
    expect(sessionSettingsOf({ interOpThreads: 1, threads: 4 })).toEqual({ threads: 4, sessionOptions: { interOpNumThreads: 1, executionMode: 'sequential' } });
    expect(sessionSettingsOf({ threads: 2, intraOpThreads: 2 }).threads).toBe(2);
  });

  it('reach the session the inference worker creates', async () => {
    const weights = new Uint8Array(readFileSync(path.join(modelDir, 'model.onnx')));
    const { threads, sessionOptions } = sessionSettingsOf({ graphOptimizationLevel: 'extended', executionProvider: 'cpu', interOpThreads: 2, intraOpThreads: 1 });
    const workers = await InferenceWorkers.load(weights, 'embedding', { workers: 1, worker: sourceInferenceWorker(), threads, sessionOptions });
    try {
      expect(workers.settings).toEqual({ executionProviders: ['cpu'], graphOptimizationLevel: 'extended', intraOpThreads: 1, interOpThreads: 2, executionMode: 'parallel' });
    } finally {
      await workers.close();
    }
  }, 60_000);

  it('change what onnxruntime starts: intra-op and inter-op threads are threads of the process', async () => {
    const weights = new Uint8Array(readFileSync(path.join(modelDir, 'model.onnx')));
    const threadsOf = async (options: Parameters<typeof sessionSettingsOf>[0]) => {
      const { threads, sessionOptions } = sessionSettingsOf(options);
      const before = threadCount();
      const model = await OnnxModel.load(weights, 'embedding', { threads, sessionOptions });
      const added = threadCount() - before;
      await model.close();
      return added;
    };
    await threadsOf({ intraOpThreads: 1 }); // onnxruntime's own environment threads, once per process
    const base = await threadsOf({ intraOpThreads: 1, interOpThreads: 1 });
    // intra-op: n threads, the calling one among them; inter-op (parallel): a pool of n more (at least: a lazily
    // started libuv thread would only add to the count)
    expect(await threadsOf({ intraOpThreads: 3, interOpThreads: 1 })).toBeGreaterThanOrEqual(base + 2);
    expect(await threadsOf({ intraOpThreads: 1, interOpThreads: 3 })).toBeGreaterThanOrEqual(base + 2);
  }, 60_000);

  it('are shown by serve as the worker created the session, and the model answers', async () => {
    const served = await serveFromSource(config, {
      cacheDir: path.join(work, 'cache'),
      args: ['--workers', '1', '--graph-optimization-level', '1', '--execution-provider', 'cpu', '--intra-op-threads', '1', '--inter-op-threads', '2', '--disable-grpc'],
    });
    try {
      expect(served.stderr()).toContain('onnxruntime: execution provider cpu, graph optimization basic, intra-op threads 1 per worker, inter-op threads 2 (parallel)\n');
      expect(served.stderr()).not.toContain('solo session'); // one worker, whose session has the threads asked for
      const response = await fetch(`${served.httpUrl}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ inputs: ['hello'], normalize: true }) });
      expect(response.status).toBe(200);
    } finally {
      await served.stop();
    }
  }, 120_000);
});

describe('session options refused (exit 2)', () => {
  const refusal = (args: string[]) => serveRefusal(config, args);

  it('an execution provider this executable does not carry, or one that does not exist', async () => {
    expect(await refusal(['--execution-provider', 'cuda'])).toMatch(/--execution-provider.*"cuda" is not available: this executable carries onnxruntime's CPU execution provider only/);
    expect(await refusal(['--execution-provider', 'coreml'])).toMatch(/"coreml" is not available/);
    expect(await refusal(['--execution-provider', 'quantum'])).toMatch(/"quantum" is not an execution provider; available: cpu/);
  });

  it("encoderfile's GPU tuning flags, which cannot apply here; its CPU ones are taken", async () => {
    expect(await refusal(['--device-id', '0'])).toMatch(/--device-id tunes the cuda and tensorrt execution providers, which this executable does not carry/);
    expect(await refusal(['--compute-units', 'all'])).toMatch(/--compute-units tunes the coreml execution providers/);
    // taken (no usage error): the run goes on to the TLS check, whose refusal is the one reported
    const taken = await refusal(['--disable-cpu-fallback', '--with-arena-allocator', '--cert-file', path.join(work, 'absent.pem'), '--key-file', path.join(work, 'absent.key')]);
    expect(taken).toMatch(/TLS: cannot read the (certificate|private key)/);
  });

  it('a graph optimization level that does not exist', async () => {
    expect(await refusal(['--graph-optimization-level', '4'])).toMatch(/"4" is not a graph optimization level; use disable, 1, 2 or 3/);
  });

  it('thread counts below one, and --threads and --intra-op-threads that disagree', async () => {
    expect(await refusal(['--inter-op-threads', '0'])).toMatch(/--inter-op-threads.*"0" is not a positive integer/);
    expect(await refusal(['--intra-op-threads', 'two'])).toMatch(/"two" is not a positive integer/);
    expect(await refusal(['--threads', '2', '--intra-op-threads', '3'])).toMatch(/--threads 2 and --intra-op-threads 3 disagree/);
  });
});
