import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetSection } from '../../runtime/asset-section.ts';
import type { Target } from '../../src/builder/targets.ts';
import { RUNTIME_VERSION } from '../../src/cli/program.ts';
import { baseRuntimePath, hasBaseRuntime, runExecutable, runExecutableAsync, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { startReleaseServer, type ReleaseServer } from '../helpers/release-server.ts';

/**
 * The whole download path with the real base runtimes: `npm run release:assets` output served from loopback, and
 * `encoder build --platform aarch64-unknown-linux-gnu` without --base-binary-path downloads, verifies and caches that
 * target's base runtime, and writes a model executable on it. (For its own target the builder is its own base and
 * downloads nothing: test/e2e/pooled-executables.test.ts.) Running aarch64 models is the qemu test's.
 */
const OTHER: Target = 'aarch64-unknown-linux-gnu';
warnIfNoBaseRuntime('release download');
warnIfNoBaseRuntime('release download', OTHER);
describe.skipIf(!hasBaseRuntime() || !hasBaseRuntime(OTHER))('encoder build with a base runtime from a release', () => {
  let work: string;
  let release: ReleaseServer;
  let releaseUrl: string;
  let requests: string[];

  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), 'e2e-release-'));
    release = await startReleaseServer(work, [OTHER]);
    ({ url: releaseUrl, requests } = release);
  }, 120_000);

  afterAll(async () => {
    await release?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('downloads once, verifies, caches, and builds a model on it', async () => {
    const dir = await generateTinyModel({ modelType: 'sequence_classification' });
    const cacheDir = path.join(work, 'build-cache');
    const config = path.join(work, 'cls.yaml');
    writeFileSync(config, `encoder:\n  name: cls\n  path: ${dir}\n  model_type: sequence_classification\n  cache_dir: ${cacheDir}\n`);
    const build = () =>
      runExecutableAsync(baseRuntimePath(), ['build', '-f', config, '--platform', OTHER, '-o', path.join(work, 'cls')], {
        cacheDir: path.join(work, 'native-cache'),
        env: { ENCODER_RELEASE_URL: releaseUrl },
      });

    const first = await build();
    expect(first.status, first.stderr).toBe(0);
    expect(first.stderr).toContain(`[1/6] detect platform and fetch the base runtime: ${OTHER}, download:`);
    expect(requests).toEqual([`/v${RUNTIME_VERSION}/SHA256SUMS`, `/v${RUNTIME_VERSION}/encoder-${RUNTIME_VERSION}-${OTHER}.gz`]);
    const cached = path.join(cacheDir, 'runtimes', RUNTIME_VERSION, OTHER, 'encoder');
    expect(statSync(cached).size).toBe(statSync(baseRuntimePath(OTHER)).size);

    const second = await build();
    expect(second.status, second.stderr).toBe(0);
    expect(second.stderr).toContain(`${OTHER}, cache: ${cached}`);
    expect(requests).toHaveLength(2);

    // the model executable is the downloaded base runtime, byte for byte, with the model's section after it
    const section = await AssetSection.open(path.join(work, 'cls'));
    expect(section?.manifest).toMatchObject({ target: OTHER, model: { name: 'cls', model_type: 'sequence_classification' } });
    await section?.close();
    const head = readFileSync(path.join(work, 'cls')).subarray(0, statSync(cached).size);
    expect(head.equals(readFileSync(cached))).toBe(true);
  });

  it('says where it looked and how to build offline when the release cannot be reached', async () => {
    const dir = await generateTinyModel();
    const config = path.join(work, 'offline.yaml');
    writeFileSync(config, `encoder:\n  name: offline\n  path: ${dir}\n  model_type: embedding\n  cache_dir: ${path.join(work, 'empty-cache')}\n`);
    const result = runExecutable(baseRuntimePath(), ['build', '-f', config, '--platform', OTHER, '-o', path.join(work, 'offline')], {
      cacheDir: path.join(work, 'native-cache'),
      env: { ENCODER_RELEASE_URL: 'http://127.0.0.1:9/v{version}' },
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(path.join(work, 'empty-cache', 'runtimes'));
    expect(result.stderr).toContain('http://127.0.0.1:9/');
    expect(result.stderr).toContain('--base-binary-path');
  });
});
