import { createReadStream, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeReleaseAssets } from '../../scripts/release-assets.ts';
import { hostTarget } from '../../src/builder/targets.ts';
import { RUNTIME_VERSION } from '../../src/cli/program.ts';
import { baseRuntimePath, hasBaseRuntime, runExecutable, runExecutableAsync, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';

/**
 * The whole download path with the real base runtime: `npm run release:assets` output served from loopback,
 * `encoder build` without --base-binary-path downloads, verifies and caches it, and the model it builds runs.
 */
warnIfNoBaseRuntime('release download');
describe.skipIf(!hasBaseRuntime())('encoder build with a base runtime from a release', () => {
  let work: string;
  let server: Server;
  let releaseUrl: string;
  const requests: string[] = [];

  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), 'e2e-release-'));
    const runtimeDir = path.join(work, 'runtime');
    mkdirSync(path.join(runtimeDir, hostTarget()), { recursive: true });
    symlinkSync(baseRuntimePath(), path.join(runtimeDir, hostTarget(), 'encoder'));
    const release = await writeReleaseAssets({ runtimeDir, outDir: path.join(work, 'release') });
    server = createServer((request, response) => {
      requests.push(request.url ?? '');
      const file = path.join(release.releaseDir, path.basename(request.url ?? ''));
      try {
        response.writeHead(200, { 'content-length': statSync(file).size });
        createReadStream(file).pipe(response);
      } catch {
        response.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    releaseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v{version}`;
  }, 120_000);

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    rmSync(work, { recursive: true, force: true });
  });

  it('downloads once, verifies, caches, and builds a model that runs', async () => {
    const dir = await generateTinyModel({ modelType: 'sequence_classification' });
    const cacheDir = path.join(work, 'build-cache');
    const config = path.join(work, 'cls.yaml');
    writeFileSync(config, `encoder:\n  name: cls\n  path: ${dir}\n  model_type: sequence_classification\n  cache_dir: ${cacheDir}\n`);
    const build = () =>
      runExecutableAsync(baseRuntimePath(), ['build', '-f', config, '-o', path.join(work, 'cls')], {
        cacheDir: path.join(work, 'native-cache'),
        env: { ENCODER_RELEASE_URL: releaseUrl },
      });

    const first = await build();
    expect(first.status, first.stderr).toBe(0);
    expect(first.stderr).toContain(`[1/6] detect platform and fetch the base runtime: ${hostTarget()}, download:`);
    expect(requests).toEqual([`/v${RUNTIME_VERSION}/SHA256SUMS`, `/v${RUNTIME_VERSION}/encoder-${RUNTIME_VERSION}-${hostTarget()}.gz`]);
    const cached = path.join(cacheDir, 'runtimes', RUNTIME_VERSION, hostTarget(), 'encoder');
    expect(statSync(cached).size).toBe(statSync(baseRuntimePath()).size);

    const second = await build();
    expect(second.status, second.stderr).toBe(0);
    expect(second.stderr).toContain(`${hostTarget()}, cache: ${cached}`);
    expect(requests).toHaveLength(2);

    const run = runExecutable(path.join(work, 'cls'), ['infer', 'it works'], { cacheDir: path.join(work, 'native-cache') });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout).results).toHaveLength(1);
  });

  it('says where it looked and how to build offline when the release cannot be reached', async () => {
    const dir = await generateTinyModel();
    const config = path.join(work, 'offline.yaml');
    writeFileSync(config, `encoder:\n  name: offline\n  path: ${dir}\n  model_type: embedding\n  cache_dir: ${path.join(work, 'empty-cache')}\n`);
    const result = runExecutable(baseRuntimePath(), ['build', '-f', config, '-o', path.join(work, 'offline')], {
      cacheDir: path.join(work, 'native-cache'),
      env: { ENCODER_RELEASE_URL: 'http://127.0.0.1:9/v{version}' },
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(path.join(work, 'empty-cache', 'runtimes'));
    expect(result.stderr).toContain('http://127.0.0.1:9/');
    expect(result.stderr).toContain('--base-binary-path');
  });
});
