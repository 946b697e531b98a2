import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { EmbeddingResponse } from '../../src/encoder/schemas.ts';
import { baseRuntimePath, hasBaseRuntime, runExecutable } from '../helpers/executables.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';
import type { JsonOf } from '../../src/shared/float32-json.ts';

/**
 * Smoke test of the aarch64 Linux target under qemu user emulation (Debian qemu-user-static, with the arm64
 * C and C++ runtime libraries of libc6-arm64-cross / libstdc++6-arm64-cross / libatomic1-arm64-cross as sysroot).
 * .ci/run installs those and builds the aarch64 base runtime; elsewhere the test skips and says why.
 */
const ARM = 'aarch64-unknown-linux-gnu' as const;
const SYSROOT = '/usr/aarch64-linux-gnu';
const QEMU = '/usr/bin/qemu-aarch64-static';

function missing(): string | null {
  if (!hasBaseRuntime(ARM)) return `${baseRuntimePath(ARM)} is absent (npm test builds it)`;
  if (!existsSync(QEMU)) return `${QEMU} is absent (Debian qemu-user-static)`;
  if (!existsSync(path.join(SYSROOT, 'lib', 'libatomic.so.1'))) return `${SYSROOT} lacks the arm64 runtime libraries`;
  if (spawnSync('unshare', ['-m', 'true']).status !== 0) return '`unshare -m` is not permitted here (needs root)';
  return null;
}

const reason = missing();
if (reason) console.warn(`aarch64 under qemu: skipped, ${reason}`);

describe.skipIf(reason !== null || !hasBaseRuntime())('aarch64 model executable under qemu', () => {
  const work = mkdtempSync(path.join(os.tmpdir(), 'e2e-arm-'));
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('is built from the x86_64 builder and answers infer like the in-process pipeline', async () => {
    const dir = await generateTinyModel({ modelType: 'embedding' });
    const config = path.join(work, 'arm.yaml');
    writeFileSync(config, `encoder:\n  name: arm\n  path: ${dir}\n  model_type: embedding\n`);
    const output = path.join(work, 'arm');
    const cacheDir = path.join(work, 'cache');
    const built = runExecutable(
      baseRuntimePath(),
      ['build', '-f', config, '--platform', ARM, '--base-binary-path', baseRuntimePath(ARM), '-o', output],
      { cacheDir },
    );
    expect(built.status, built.stderr).toBe(0);
    expect(spawnSync('file', [output], { encoding: 'utf8' }).stdout).toContain('ARM aarch64');

    // onnxruntime's cpuinfo misreads the x86 host's /sys under qemu-user and crashes; a mount namespace gives it
    // an empty CPU tree and an arm64 /proc/cpuinfo, which it handles (with a warning).
    const cpuinfo = path.join(work, 'cpuinfo');
    writeFileSync(cpuinfo, 'processor\t: 0\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd0c\n\n');
    const script = `mount -t tmpfs none /sys/devices/system/cpu && mount --bind ${cpuinfo} /proc/cpuinfo && exec ${QEMU} -L ${SYSROOT} "$@"`;
    const text = 'hello from an arm machine';
    const run = spawnSync('unshare', ['-m', 'sh', '-c', script, 'sh', output, 'infer', text], {
      encoding: 'utf8',
      env: { PATH: '/usr/bin:/bin', ENCODER_CACHE_DIR: cacheDir },
      timeout: 180_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const arm = JSON.parse(run.stdout) as JsonOf<EmbeddingResponse>;
    const host = JSON.parse((await runCliCaptured(['infer', '--config', config, text])).stdout) as JsonOf<EmbeddingResponse>;
    const armTokens = arm.results[0].embeddings;
    const hostTokens = host.results[0].embeddings;
    expect(armTokens.map((t) => t.token_info)).toEqual(hostTokens.map((t) => t.token_info));
    // different CPU kernels: equal within float32 rounding, not bit for bit
    armTokens.forEach((token, i) => token.embedding.forEach((v, j) => expect(Math.abs(v - hostTokens[i].embedding[j])).toBeLessThan(1e-4)));
  });
});
