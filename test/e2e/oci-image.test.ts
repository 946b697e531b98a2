/**
 * `npm run image` for this machine's target (scripts/image.ts): the OCI layout is read back with the OCI tools
 * (skopeo, umoci), its root file system unpacked, and the entrypoint run in it the way a container runtime with
 * `readOnlyRootFilesystem: true` and `runAsUser: 65532` runs it: a read-only bind mount of the root as the root
 * directory (chroot), uid 65532, the image's environment only, /proc and /dev mounted, no /tmp and nothing else
 * writable, a network namespace with only loopback. It answers /v1/embeddings there: the image holds everything the
 * model server needs, and its extraction cache is used as it is.
 *
 * podman is not used: container runtimes cannot run inside this machine's sandbox (setting rlimits in a container is
 * refused), so the test does by hand, with unshare, mount and chroot, what a runtime would. Needs root (namespaces,
 * mounts) and Debian's umoci, skopeo and buildah (.ci/run installs them); skips and says why otherwise.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostTarget } from '../../src/builder/targets.ts';
import { hasBaseRuntime, runExecutable, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { generateTinySentenceEmbeddingModel } from '../helpers/generated-models.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

const version = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
const arch = hostTarget() === 'aarch64-unknown-linux-gnu' ? 'arm64' : 'amd64';
const tools = ['umoci', 'skopeo', 'buildah', 'unshare', 'nsenter', 'chroot', 'ip'];

function missing(): string | null {
  if (process.platform !== 'linux') return 'images are made on Linux';
  const absent = tools.filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } }).status !== 0);
  if (absent.length > 0) return `${absent.join(', ')} not installed (Debian umoci, skopeo, buildah, util-linux, iproute2)`;
  if (spawnSync('unshare', ['--net', '--mount', 'true']).status !== 0) return 'namespaces cannot be made here (needs root)';
  return null;
}

warnIfNoBaseRuntime('OCI image');
const reason = hasBaseRuntime() ? missing() : 'no base runtime';
if (reason && hasBaseRuntime()) console.warn(`OCI image: skipped, ${reason}`);

const run = (file: string, args: string[]) => {
  const result = spawnSync(file, args, { encoding: 'utf8', maxBuffer: 2 ** 26, env: { ...process.env, PATH: `/usr/sbin:/sbin:${process.env.PATH}` } });
  if (result.status !== 0) throw new Error(`${file} ${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
};

describe.skipIf(reason !== null)('OCI image of a model executable (npm run image)', () => {
  let work: string;
  let layout: string;
  let rootfs: string;
  let config: string;

  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), 'e2e-oci-'));
    const model = await generateTinySentenceEmbeddingModel();
    config = path.join(work, 'tiny-sentences.yaml');
    writeFileSync(config, `encoder:\n  name: tiny-sentences\n  path: ${model}\n  model_type: sentence_embedding\n`);
    layout = path.join(work, 'image');
    const built = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'image.ts'), '-f', config, '-o', layout, '--target', 'host', '--docker-archive'], {
      encoding: 'utf8',
      timeout: 240_000,
    });
    if (built.status !== 0) throw new Error(`npm run image failed:\n${built.stdout}${built.stderr}`);
    rootfs = path.join(work, 'rootfs');
    run('umoci', ['raw', 'unpack', '--image', `${layout}:${version}-${arch}`, rootfs]);
  }, 300_000);
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('is an OCI layout with a multi-arch index, two layers, a non-root user, an exec-form entrypoint and labels', () => {
    expect(existsSync(path.join(layout, 'index.json')) && statSync(path.join(layout, 'blobs', 'sha256')).isDirectory()).toBe(true);
    const index = JSON.parse(run('skopeo', ['inspect', '--raw', `oci:${layout}:${version}`])) as { mediaType: string; manifests: { platform: { os: string; architecture: string } }[] };
    expect(index.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(index.manifests.map((manifest) => manifest.platform)).toEqual([{ os: 'linux', architecture: arch }]);

    const image = JSON.parse(run('skopeo', ['inspect', '--config', `oci:${layout}:${version}`])) as {
      architecture: string;
      os: string;
      rootfs: { diff_ids: string[] };
      config: { User: string; Entrypoint: string[]; Cmd: string[]; Env: string[]; ExposedPorts: object; Labels: Record<string, string> };
    };
    expect([image.os, image.architecture]).toEqual(['linux', arch]);
    expect(image.rootfs.diff_ids).toHaveLength(2); // system files; the executable and its extracted cache
    expect(image.config.User).toBe('65532:65532');
    expect(image.config.Entrypoint).toEqual(['/usr/local/bin/model']);
    expect(image.config.Cmd).toEqual(['serve']);
    expect(image.config.Env).toContain('ENCODER_CACHE_DIR=/var/cache/encoder');
    expect(Object.keys(image.config.ExposedPorts).sort()).toEqual(['50051/tcp', '8080/tcp']);
    expect(image.config.Labels).toMatchObject({
      'org.opencontainers.image.title': 'encoder-sea/tiny-sentences',
      'org.opencontainers.image.version': version,
      'org.opencontainers.image.vendor': 'encoder-sea',
    });
    const history = JSON.parse(run('umoci', ['stat', '--json', '--image', `${layout}:${version}-${arch}`])) as { history: { created_by: string; empty_layer?: boolean }[] };
    expect(history.history.filter((entry) => !entry.empty_layer).map((entry) => entry.created_by)).toEqual([
      'npm run image: loader, shared libraries, CA certificates, user nonroot',
      'npm run image: model and its extracted cache',
    ]);
    // the docker-archive beside it holds the same image
    const archived = JSON.parse(run('skopeo', ['inspect', '--config', `docker-archive:${layout}.${arch}.docker.tar`])) as typeof image;
    expect(archived.rootfs.diff_ids).toEqual(image.rootfs.diff_ids);
  });

  it('holds the executable, its loader and libraries, CA certificates, the user and the cache, and no shell', () => {
    const files = readdirSync(rootfs, { recursive: true, withFileTypes: true })
      .filter((entry) => !entry.isDirectory())
      .map((entry) => path.relative(rootfs, path.join(entry.parentPath, entry.name)))
      .sort();
    expect(files.filter((file) => /(^|\/)(s?bin\/(sh|bash|dash|busybox))$/.test(file))).toEqual([]);
    expect(files.filter((file) => !/^(usr\/local\/bin\/model|etc\/(passwd|group)|etc\/ssl\/certs\/ca-certificates\.crt|lib(64)?\/.+\.so[.\d]*|var\/cache\/encoder\/.+)$/.test(file))).toEqual([]);
    expect(files).toEqual(expect.arrayContaining(['usr/local/bin/model', 'etc/ssl/certs/ca-certificates.crt']));
    expect(files.some((file) => /^lib\/.+\/libc\.so\.6$/.test(file))).toBe(true);
    expect(files.some((file) => /^var\/cache\/encoder\/native\/[^/]+\/libonnxruntime\.so\.1$/.test(file))).toBe(true);
    expect(files.some((file) => /^var\/cache\/encoder\/models\/[0-9a-f]{64}\/model\.data$/.test(file))).toBe(true);
    expect(readFileSync(path.join(rootfs, 'etc', 'passwd'), 'utf8')).toContain('nonroot:x:65532:65532:');
    expect(statSync(path.join(rootfs, 'tmp')).mode & 0o1777).toBe(0o1777);
  });

  it('serves /v1/embeddings from the read-only root as uid 65532, on loopback only, and stops on SIGTERM', async () => {
    const image = JSON.parse(run('skopeo', ['inspect', '--config', `oci:${layout}:${version}`])) as { config: { Entrypoint: string[]; Env: string[] } };
    // what a container runtime prepares: mount points, then the root made read-only
    for (const dir of ['proc', 'dev']) mkdirSync(path.join(rootfs, dir), { recursive: true });
    const root = path.join(work, 'root');
    mkdirSync(root);
    const chroot = run('sh', ['-c', 'command -v chroot']).trim();
    const script = [
      'set -e',
      'ip link set lo up',
      `mount --bind ${rootfs} ${root}`,
      `mount -o remount,ro,bind ${root}`,
      `mount -t proc proc ${root}/proc`,
      `mount --rbind /dev ${root}/dev`,
      `exec env -i ${image.config.Env.map((variable) => `'${variable}'`).join(' ')} ${chroot} --userspec=65532:65532 ${root} "$@"`,
    ].join('\n');
    const child: ChildProcess = spawn('unshare', ['--net', '--mount', '--pid', '--fork', '--', 'sh', '-c', script, 'sh', ...image.config.Entrypoint, 'serve', '--disable-grpc'], {
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await expect.poll(() => stderr, { timeout: 60_000, interval: 100 }).toMatch(/HTTP\s+http:\/\/0\.0\.0\.0:8080/);
      const server = Number(readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim());
      expect(readFileSync(`/proc/${server}/status`, 'utf8')).toMatch(/^Uid:\s+65532\s/m);

      // a client in the server's network namespace: the only way to reach it
      const client = `const r = await fetch('http://127.0.0.1:8080/v1/embeddings', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: ['a read-only container', 'hello'] }) });
        console.log(JSON.stringify({ status: r.status, body: await r.json(), livez: (await fetch('http://127.0.0.1:8080/livez')).status }));`;
      const answer = JSON.parse(run('nsenter', [`--net=/proc/${server}/ns/net`, process.execPath, '--input-type=module', '-e', client])) as {
        status: number;
        livez: number;
        body: { model: string; data: { embedding: number[] }[] };
      };
      expect(answer.status).toBe(200);
      expect(answer.livez).toBe(200);
      expect(answer.body.model).toBe('tiny-sentences');
      expect(answer.body.data).toHaveLength(2);
      // the same vectors as the executable of the image run on this machine, outside any container
      const outside = runExecutable(path.join(rootfs, 'usr', 'local', 'bin', 'model'), ['infer', 'a read-only container'], { cacheDir: path.join(work, 'host-cache') });
      expect(outside.status, outside.stderr).toBe(0);
      const expected = (JSON.parse(outside.stdout) as { results: { embedding: number[] }[] }).results[0].embedding;
      answer.body.data[0].embedding.forEach((value, i) => expect(Math.abs(value - expected[i])).toBeLessThan(1e-6));
      // nothing to extract, nowhere to write: no fallback note, no error
      expect(stderr).not.toMatch(/note:|error/);

      process.kill(server, 'SIGTERM');
      expect(await exited).toBe(0);
      expect(stderr).toContain('stopped');
    } finally {
      child.kill('SIGKILL');
    }
  }, 120_000);
});
