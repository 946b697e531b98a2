/**
 * npm run image — OCI images of a model executable, or of the bare runtime (gateway and tool server), without a
 * container daemon: umoci writes the layers and configuration into an OCI layout directory, buildah makes the
 * multi-arch index, skopeo the optional docker-archive tarballs (Debian's umoci, buildah, skopeo; .ci/run installs
 * them). What goes in, and why: docs/deploying.md, "Images".
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { hostTarget, type Target } from '../src/builder/targets.ts';

const root = path.resolve(import.meta.dirname, '..');
const VERSION = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
/** The name this project publishes under: the npm scope @encoder-sea, the image namespace encoder-sea/. */
const PUBLISHED_NAMESPACE = 'encoder-sea';
const IMAGE_USER = { uid: 65532, name: 'nonroot' };
const IMAGE_CACHE_DIR = '/var/cache/encoder';

const HELP = `Usage: npm run image -- (-f <config.yaml> | --runtime) -o <dir> [options]

Writes an OCI image as an OCI layout directory (<dir>/index.json, <dir>/blobs/sha256/…): one image per target
and a multi-arch index, with no container daemon (umoci, buildah and skopeo from Debian).

  -f, --config <file>     build configuration of a model (as for \`encoder build -f\`): the image runs the model
                          executable, entrypoint /usr/local/bin/model, command \`serve\`
      --runtime           no model: the base runtime, entrypoint /usr/local/bin/encoder, for \`gateway serve\` and
                          \`tools serve\` (the manifests in deploy/kubernetes pass those as arguments)
  -o, --output <dir>      the OCI layout directory (created; an existing layout gets these tags added or replaced)
      --target <triple>   x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu, host, or all (default); repeatable.
                          Needs dist/runtime/<triple>/encoder (npm run build:runtime -- --target <triple>); arm64
                          runs under qemu-aarch64-static at build time with Debian's arm64 cross libraries
      --name <name>       image name (default: ${PUBLISHED_NAMESPACE}/<the model's name>, or ${PUBLISHED_NAMESPACE}/encoder)
      --docker-archive    also write <dir>.<arch>.docker.tar per target (docker load / podman load)
  -h, --help              this text

Tags in the layout: <version>-amd64, <version>-arm64 (one image each) and <version> (the index), where <version> is
package.json's (${VERSION}). Push with: skopeo copy --all oci:<dir>:${VERSION} docker://registry.example.com/<name>:${VERSION}`;

interface ImageTarget {
  arch: 'amd64' | 'arm64';
  variant?: string;
  /** Where the dynamic loader is in the image (the executable's PT_INTERP). */
  interpreter: string;
  /** The target's libraries on this machine: '/' for the host, Debian's cross sysroot for arm64. */
  sysroot: string;
  loader: string;
  /** How this machine runs the target's programs: nothing, or qemu with the sysroot. */
  runner: string[];
}

const TARGETS: Partial<Record<Target, ImageTarget>> = {
  'x86_64-unknown-linux-gnu': { arch: 'amd64', interpreter: '/lib64/ld-linux-x86-64.so.2', sysroot: '/', loader: '/lib64/ld-linux-x86-64.so.2', runner: [] },
  'aarch64-unknown-linux-gnu': {
    arch: 'arm64',
    variant: 'v8',
    interpreter: '/lib/ld-linux-aarch64.so.1',
    sysroot: '/usr/aarch64-linux-gnu',
    loader: '/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1',
    runner: ['qemu-aarch64-static', '-L', '/usr/aarch64-linux-gnu'],
  },
};

const run = (file: string, args: string[], options: { env?: NodeJS.ProcessEnv } = {}): string =>
  execFileSync(file, args, { encoding: 'utf8', maxBuffer: 64 * 2 ** 20, stdio: ['ignore', 'pipe', 'pipe'], ...options });

/**
 * Runs one of the target's programs. An arm64 program that loads onnxruntime runs in a mount namespace with an
 * empty CPU tree and an arm64 /proc/cpuinfo: onnxruntime's cpuinfo misreads the x86 host's under qemu-user and
 * crashes (as in test/e2e/aarch64-qemu.test.ts).
 */
function runTarget(target: ImageTarget, work: string, args: string[], env: NodeJS.ProcessEnv): string {
  if (target.runner.length === 0) return run(args[0], args.slice(1), { env });
  const cpuinfo = path.join(work, 'cpuinfo');
  writeFileSync(cpuinfo, 'processor\t: 0\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd0c\n\n');
  const script = `mount -t tmpfs none /sys/devices/system/cpu && mount --bind ${cpuinfo} /proc/cpuinfo && exec "$@"`;
  return run('unshare', ['-m', 'sh', '-c', script, 'sh', ...target.runner, ...args], { env });
}

/**
 * The shared libraries an ELF file needs, as the target's dynamic loader resolves them (`ld.so --list`, which is
 * what ldd runs): their paths in the image → their files on this machine. The loader itself is left out.
 */
function neededLibraries(target: ImageTarget, file: string): Map<string, string> {
  const listing = run(target.runner[0] ?? target.loader, [...target.runner.slice(1), ...(target.runner.length ? [target.loader] : []), '--list', file]);
  const found = new Map<string, string>();
  for (const line of listing.split('\n')) {
    const resolved = /=>\s+(\/\S+)\s+\(/.exec(line)?.[1];
    if (line.includes('=> not found')) throw new Error(`${file}: ${line.trim()}`);
    if (!resolved || path.basename(resolved) === path.basename(target.interpreter)) continue; // the loader: copied to PT_INTERP's path
    // under qemu -L the loader prints paths inside the sysroot
    found.set(resolved, existsSync(path.join(target.sysroot, resolved)) ? path.join(target.sysroot, resolved) : resolved);
  }
  return found;
}

function copyInto(rootfs: string, inImage: string, from: string, mode: number): void {
  const destination = path.join(rootfs, inImage);
  mkdirSync(path.dirname(destination), { recursive: true });
  copyFileSync(realpathSync(from), destination);
  chmodSync(destination, mode);
}

/** The layer every image shares: loader and libraries, CA certificates, the non-root user, an empty /tmp. */
function systemLayer(target: ImageTarget, rootfs: string, elfFiles: string[], app: string): void {
  const libraries = new Map<string, string>();
  for (const file of elfFiles) for (const [inImage, onHost] of neededLibraries(target, file)) libraries.set(inImage, onHost);
  copyInto(rootfs, target.interpreter, target.loader, 0o755);
  // libonnxruntime resolves beside its binding, in the extracted cache: already in the app layer
  for (const [inImage, onHost] of libraries) if (!onHost.startsWith(app)) copyInto(rootfs, inImage, onHost, 0o755);
  copyInto(rootfs, '/etc/ssl/certs/ca-certificates.crt', '/etc/ssl/certs/ca-certificates.crt', 0o644);
  const { uid, name } = IMAGE_USER;
  writeFileSync(path.join(rootfs, 'etc', 'passwd'), `root:x:0:0:root:/root:/sbin/nologin\n${name}:x:${uid}:${uid}:${name}:/nonexistent:/sbin/nologin\n`);
  writeFileSync(path.join(rootfs, 'etc', 'group'), `root:x:0:\n${name}:x:${uid}:\n`);
  mkdirSync(path.join(rootfs, 'tmp'));
  chmodSync(path.join(rootfs, 'tmp'), 0o1777);
}

/** Files of a folder tree, recursively. */
const filesUnder = (dir: string): string[] => readdirSync(dir, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath, entry.name));

interface ImageRequest {
  config?: string;
  name: string;
  output: string;
  targets: Target[];
  dockerArchive: boolean;
}

function buildTargetImage(request: ImageRequest, triple: Target, work: string): string {
  const target = TARGETS[triple]!;
  const base = path.join(root, 'dist', 'runtime', triple, 'encoder');
  if (!existsSync(base)) throw new Error(`${base} is absent: run npm run build:runtime -- --target ${triple}`);
  const app = path.join(work, triple, 'app');
  const system = path.join(work, triple, 'system');
  mkdirSync(path.join(system, 'etc'), { recursive: true });
  const executable = path.join(app, 'usr', 'local', 'bin', request.config ? 'model' : 'encoder');
  mkdirSync(path.dirname(executable), { recursive: true });

  console.log(`${triple}: ${request.config ? `building the model executable from ${request.config}` : 'the base runtime'}`);
  if (request.config) {
    const builder = path.join(root, 'dist', 'runtime', hostTarget(), 'encoder');
    if (!existsSync(builder)) throw new Error(`${builder} is absent: run npm run build:runtime -- --target host`);
    run(builder, ['build', '-f', request.config, '--platform', triple, '--base-binary-path', base, '-o', executable], { env: { ...process.env, ENCODER_CACHE_DIR: path.join(work, 'build-cache') } });
  } else {
    copyFileSync(base, executable);
    chmodSync(executable, 0o755);
  }

  // Native code and the model's weights data extracted now, into the image: a container with a read-only root
  // file system then starts without writing anything (docs/deploying.md, "Read-only, non-root").
  const cache = path.join(app, IMAGE_CACHE_DIR);
  const warmUp = request.config ? ['infer', 'extract the cache at image build'] : ['--version'];
  runTarget(target, work, [executable, ...warmUp], { PATH: process.env.PATH, ENCODER_CACHE_DIR: cache });
  const elfFiles = [executable, ...filesUnder(cache).filter((file) => /\.(so(\.\d+)*|node)$/.test(file))];
  console.log(`${triple}: libraries of ${elfFiles.map((file) => path.basename(file)).join(', ')}`);
  systemLayer(target, system, elfFiles, app);

  const tag = `${VERSION}-${target.arch}`;
  const image = `${request.output}:${tag}`;
  const rootless = process.getuid?.() === 0 ? [] : ['--rootless'];
  run('umoci', ['new', '--image', image]);
  run('umoci', ['insert', ...rootless, '--image', image, '--history.created_by', 'npm run image: loader, shared libraries, CA certificates, user nonroot', system, '/']);
  run('umoci', ['insert', ...rootless, '--image', image, '--history.created_by', `npm run image: ${path.basename(executable)} and its extracted cache`, app, '/']);
  const ports = request.config ? ['8080/tcp', '50051/tcp'] : ['8000/tcp', '8090/tcp'];
  const labels = {
    'org.opencontainers.image.title': request.name,
    'org.opencontainers.image.description': request.config
      ? `Encoder model ${path.basename(request.name)} served over HTTP, gRPC and MCP (one self-contained executable)`
      : 'encoder runtime: gateway serve, tools serve (and build)',
    'org.opencontainers.image.version': VERSION,
    'org.opencontainers.image.vendor': PUBLISHED_NAMESPACE,
    'org.opencontainers.image.licenses': 'Apache-2.0',
    'org.opencontainers.image.ref.name': `${request.name}:${VERSION}`,
  };
  run('umoci', [
    'config', '--image', image, '--os', 'linux', '--architecture', target.arch,
    '--config.user', `${IMAGE_USER.uid}:${IMAGE_USER.uid}`,
    '--config.entrypoint', `/${path.relative(app, executable)}`,
    '--config.cmd', request.config ? 'serve' : '--help',
    '--config.env', 'PATH=/usr/local/bin:/usr/bin:/bin',
    '--config.env', `ENCODER_CACHE_DIR=${IMAGE_CACHE_DIR}`,
    '--config.workingdir', '/tmp',
    ...ports.flatMap((port) => ['--config.exposedports', port]),
    ...Object.entries(labels).flatMap(([key, value]) => ['--config.label', `${key}=${value}`]),
    '--history.created_by', 'npm run image: configuration',
  ]);
  return tag;
}

/** The multi-arch index `<version>` over the per-target images, made by buildah in a throwaway store. */
function writeIndex(request: ImageRequest, tags: string[], work: string): void {
  const store = ['--root', path.join(work, 'buildah', 'root'), '--runroot', path.join(work, 'buildah', 'run'), '--storage-driver', 'vfs'];
  const list = `${path.basename(request.name)}-${process.pid}`;
  run('buildah', [...store, 'manifest', 'create', list]);
  for (const tag of tags) {
    const target = Object.values(TARGETS).find((candidate) => tag.endsWith(`-${candidate.arch}`))!;
    run('buildah', [...store, 'manifest', 'add', '--os', 'linux', '--arch', target.arch, ...(target.variant ? ['--variant', target.variant] : []), list, `oci:${request.output}:${tag}`]);
  }
  run('buildah', [...store, 'manifest', 'push', '--all', '--format', 'oci', list, `oci:${request.output}:${VERSION}`]);
  run('buildah', [...store, 'manifest', 'rm', list]);
}

function buildImage(request: ImageRequest): void {
  const work = mkdtempSync(path.join(os.tmpdir(), 'encoder-image-'));
  try {
    if (!existsSync(path.join(request.output, 'index.json'))) run('umoci', ['init', '--layout', request.output]);
    const tags = request.targets.map((triple) => buildTargetImage(request, triple, work));
    writeIndex(request, tags, work);
    if (request.dockerArchive) {
      for (const tag of tags) {
        const archive = `${request.output}.${tag.split('-').at(-1)}.docker.tar`;
        rmSync(archive, { force: true });
        run('skopeo', ['copy', '--quiet', `oci:${request.output}:${tag}`, `docker-archive:${archive}:${request.name}:${VERSION}`]);
        console.log(`wrote ${archive}`);
      }
    }
    run('umoci', ['gc', '--layout', request.output]);
    console.log(`wrote ${request.output}: ${[...tags, VERSION].map((tag) => `oci:${request.output}:${tag}`).join(', ')}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function main(): void {
  const { values } = parseArgs({
    options: {
      config: { type: 'string', short: 'f' },
      runtime: { type: 'boolean' },
      output: { type: 'string', short: 'o' },
      target: { type: 'string', multiple: true },
      name: { type: 'string' },
      'docker-archive': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return void console.log(HELP);
  if (!values.output || Boolean(values.config) === Boolean(values.runtime)) {
    console.error(`error: give -o and exactly one of -f or --runtime\n\n${HELP}`);
    process.exit(2);
  }
  const requested = values.target ?? ['all'];
  const targets = [...new Set(requested.flatMap((value) => (value === 'all' ? Object.keys(TARGETS) : [value === 'host' ? hostTarget() : value])))] as Target[];
  const unknown = targets.filter((triple) => !TARGETS[triple]);
  if (unknown.length > 0) {
    console.error(`error: no image for ${unknown.join(', ')}: images are made for ${Object.keys(TARGETS).join(', ')}`);
    process.exit(2);
  }
  const config = values.config ? path.resolve(values.config) : undefined;
  const modelName = config ? (parseYaml(readFileSync(config, 'utf8')) as { encoder?: { name?: string } }).encoder?.name : 'encoder';
  buildImage({ config, name: values.name ?? `${PUBLISHED_NAMESPACE}/${modelName ?? 'model'}`, output: path.resolve(values.output), targets, dockerArchive: Boolean(values['docker-archive']) });
}

if (import.meta.main) {
  try {
    main();
  } catch (error) {
    console.error(`error: ${(error as Error).message}`); // a failed command's message holds its stderr
    process.exit(1);
  }
}
