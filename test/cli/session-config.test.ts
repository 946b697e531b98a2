/**
 * The configuration's `session:` block (onnxruntime session options, as serve's flags take them): validated at load
 * (exit 2 naming the key, for the reasons the flags give), used by `serve --config` (the banner's onnxruntime line), a
 * flag winning over it, and packed into a built model's manifest, whose serve and infer read it back.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetSection } from '../../runtime/asset-section.ts';
import { buildModel } from '../../src/builder/build-model.ts';
import { sessionSettingsOf } from '../../src/cli/serve-session.ts';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { manifestModelOf, readPackagedModel } from '../../src/encoder/packaged-model.ts';
import { writeFakeBaseRuntime } from '../helpers/fake-base-runtime.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { serveRefusal } from '../helpers/run-cli.ts';
import { serveFromSource } from '../helpers/served-model.ts';

const work = mkdtempSync(path.join(os.tmpdir(), 'session-config-'));
let modelDir: string;

beforeAll(async () => {
  modelDir = await generateTinyModel({ modelType: 'embedding' });
}, 60_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

const encoderYaml = (session: string) => `encoder:\n  name: session-model\n  path: ${modelDir}\n  model_type: embedding\n${session}`;
const encoderfileYaml = (session: string) => `encoderfile:\n  name: session-model\n  path: ${modelDir}\n  model_type: embedding\n${session}`;
const parse = (yaml: string) => parseBuildConfig(yaml, { baseDir: work, cwd: work, env: { HOME: work } });

function writeConfig(name: string, yaml: string): string {
  const file = path.join(work, name);
  writeFileSync(file, yaml);
  return file;
}

describe('the session: choices', () => {
  it('gives way to each flag given, and only to that one', () => {
    const configured = { intraOpThreads: 2, interOpThreads: 3, graphOptimizationLevel: 'basic', executionProvider: 'cpu' } as const;
    expect(sessionSettingsOf({}, configured)).toEqual({
      threads: 2,
      sessionOptions: { graphOptimizationLevel: 'basic', executionProviders: ['cpu'], interOpNumThreads: 3, executionMode: 'parallel' },
    });
    expect(sessionSettingsOf({ threads: 1, interOpThreads: 1, graphOptimizationLevel: 'all' }, configured)).toEqual({
      threads: 1,
      sessionOptions: { graphOptimizationLevel: 'all', executionProviders: ['cpu'], interOpNumThreads: 1, executionMode: 'sequential' },
    });
    expect(sessionSettingsOf({ intraOpThreads: 4 }, configured).threads).toBe(4);
  });
});

describe('serve --config with a session: block', () => {
  const block = '  session:\n    intra_op_threads: 1\n    inter_op_threads: 2\n    graph_optimization_level: basic\n    execution_provider: cpu\n';

  it('creates the session with its values, and a flag given wins over it', async () => {
    const config = writeConfig('serve-session.yaml', encoderYaml(block));
    const fromConfig = await serveFromSource(config, { cacheDir: path.join(work, 'cache'), args: ['--workers', '1', '--disable-grpc'] });
    try {
      expect(fromConfig.stderr()).toContain('onnxruntime: execution provider cpu, graph optimization basic, intra-op threads 1 per worker, inter-op threads 2 (parallel)');
    } finally {
      await fromConfig.stop();
    }
    const overridden = await serveFromSource(config, {
      cacheDir: path.join(work, 'cache'),
      args: ['--workers', '1', '--disable-grpc', '--graph-optimization-level', '3', '--inter-op-threads', '1'],
    });
    try {
      expect(overridden.stderr()).toContain('onnxruntime: execution provider cpu, graph optimization all, intra-op threads 1 per worker, inter-op threads 1 (sequential)');
    } finally {
      await overridden.stop();
    }
  }, 120_000);

  it('exits 2 naming the key of a bad value', async () => {
    const config = writeConfig('bad-session.yaml', encoderYaml('  session:\n    execution_provider: tensorrt\n'));
    expect(await serveRefusal(config, [])).toMatch(/"encoder\.session\.execution_provider": "tensorrt" is not available/);
  });
});

describe('a built model', () => {
  it("carries the configuration's session options in its manifest, read back as its package's", async () => {
    const cwd = path.join(work, 'build');
    mkdirSync(cwd, { recursive: true });
    const base = writeFakeBaseRuntime(path.join(work, 'runtime'));
    const configFile = writeConfig(
      'build-session.yml',
      encoderfileYaml(`  output_path: ${path.join(cwd, 'built')}\n  base_binary_path: ${base}\n  target: x86_64-unknown-linux-gnu\n  session:\n    inter_op_threads: 2\n    graph_optimization_level: 1\n`),
    );
    const built = await buildModel({ configFile, runtimeVersion: '0.1.0', cwd }, { step: () => {}, progress: () => {} });
    const section = (await AssetSection.open(built.outputPath))!;
    try {
      expect(section.manifest.model.session).toEqual({ inter_op_threads: 2, graph_optimization_level: 'basic' });
      expect((await readPackagedModel(section)).session).toEqual({ interOpThreads: 2, graphOptimizationLevel: 'basic' });
    } finally {
      await section.close();
    }
  }, 120_000);

  it('has no session in its manifest when the configuration sets none', () => {
    expect(manifestModelOf(parse(encoderYaml(''))).session).toBeUndefined();
  });
});
