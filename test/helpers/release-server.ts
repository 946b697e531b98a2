import { createReadStream, mkdirSync, statSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { writeReleaseAssets } from '../../scripts/release-assets.ts';
import type { Target } from '../../src/builder/targets.ts';
import { baseRuntimePath } from './executables.ts';

export interface ReleaseServer {
  /** The release address template, as ENCODER_RELEASE_URL takes it (`…/v{version}`). */
  url: string;
  /** The paths asked for, in order. */
  requests: string[];
  close(): Promise<void>;
}

/**
 * `npm run release:assets` output for the built base runtimes of `targets` (written under `work`), served from
 * loopback as a GitHub release would serve it; any other file is a 404.
 */
export async function startReleaseServer(work: string, targets: readonly Target[]): Promise<ReleaseServer> {
  const runtimeDir = path.join(work, 'runtime');
  for (const target of targets) {
    mkdirSync(path.join(runtimeDir, target), { recursive: true });
    symlinkSync(baseRuntimePath(target), path.join(runtimeDir, target, 'encoder'));
  }
  const release = await writeReleaseAssets({ runtimeDir, outDir: path.join(work, 'release') });
  const requests: string[] = [];
  const server = createServer((request, response) => {
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
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v{version}`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
