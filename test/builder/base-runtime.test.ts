import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runtimeBinaryPath, writeReleaseAssets } from '../../scripts/release-assets.ts';
import {
  baseRuntimeCacheDir,
  baseRuntimeCachePath,
  cacheMarkerPath,
  resolveBaseRuntime,
} from '../../src/builder/base-runtime.ts';
import type { BaseRuntimeProgress, CacheMarker, ResolveBaseRuntimeOptions } from '../../src/builder/base-runtime.ts';
import { writeModelExecutable } from '../../runtime/asset-section.ts';
import { RELEASE_URL_ENV } from '../../src/builder/release.ts';
import type { Target } from '../../src/builder/targets.ts';
import { ConfigError, InternalError } from '../../src/encoder/errors.ts';

const VERSION = '1.2.3';
const LINUX: Target = 'x86_64-unknown-linux-gnu';
const ARM: Target = 'aarch64-unknown-linux-gnu';
const WINDOWS: Target = 'x86_64-pc-windows-msvc';
const LINUX_GZ = `encoder-${VERSION}-${LINUX}.gz`;
const sha256 = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** A loopback HTTP server over a release root; records every path requested; routes can be overridden. */
interface ReleaseServer {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  requests: string[];
  overrides: Map<string, Handler>;
  /** Serve files without Content-Length (chunked). */
  chunked: boolean;
  close(): Promise<void>;
}

async function startReleaseServer(root: string): Promise<ReleaseServer> {
  const requests: string[] = [];
  const overrides = new Map<string, Handler>();
  const state = { chunked: false };
  const server = createServer((request, response) => {
    const pathname = decodeURIComponent(new URL(request.url ?? '/', 'http://localhost').pathname);
    requests.push(pathname);
    const override = overrides.get(pathname);
    if (override) {
      override(request, response);
      return;
    }
    readFile(path.join(root, path.normalize(pathname))).then(
      (data) => {
        if (state.chunked) {
          response.writeHead(200, { 'content-type': 'application/octet-stream' });
          // Several writes so that the client sees several chunks.
          for (let offset = 0; offset < data.length; offset += 4096) response.write(data.subarray(offset, offset + 4096));
          response.end();
        } else {
          response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': data.length });
          response.end(data);
        }
      },
      () => {
        response.writeHead(404, 'Not Found', { 'content-type': 'text/plain' });
        response.end('not found');
      },
    );
  });
  server.requestTimeout = 10_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    overrides,
    get chunked() {
      return state.chunked;
    },
    set chunked(value: boolean) {
      state.chunked = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port on 127.0.0.1 that nothing listens on (a server was there a moment ago). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the promise to reject');
}

describe('resolveBaseRuntime', { timeout: 20_000 }, () => {
  let work: string;
  let cacheDir: string;
  let releaseRoot: string;
  let server: ReleaseServer;
  /** The fake base binaries: one large enough for several chunks, one small. */
  const linuxBinary = Buffer.concat([Buffer.from('#!fake runtime\n'), randomBytes(300 * 1024)]);
  const armBinary = Buffer.from('fake arm runtime\n');

  beforeEach(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'encoder-base-runtime-'));
    cacheDir = path.join(work, 'cache');
    releaseRoot = path.join(work, 'release');
    const runtimeDir = path.join(work, 'runtime');
    for (const [target, bytes] of [
      [LINUX, linuxBinary],
      [ARM, armBinary],
    ] as const) {
      const file = runtimeBinaryPath(runtimeDir, target);
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, bytes, { mode: 0o755 });
    }
    await writeReleaseAssets({ runtimeDir, outDir: releaseRoot, version: VERSION });
    server = await startReleaseServer(releaseRoot);
  });

  afterEach(async () => {
    await server.close();
    await rm(work, { recursive: true, force: true });
  });

  function options(extra: Partial<ResolveBaseRuntimeOptions> = {}): ResolveBaseRuntimeOptions {
    return { target: LINUX, version: VERSION, cacheDir, releaseUrl: `${server.origin}/v{version}`, env: {}, ...extra };
  }

  const linuxGz = async (): Promise<Buffer> => readFile(path.join(releaseRoot, `v${VERSION}`, LINUX_GZ));
  const cacheFolderFiles = async (target: Target = LINUX): Promise<string[]> =>
    readdir(baseRuntimeCacheDir(cacheDir, VERSION, target)).catch(() => []);

  describe('the host base runtime', () => {
    const refusing = (() => Promise.reject(new Error('no request expected'))) as typeof fetch;

    it('is used for its own target before cache and release, without any request', async () => {
      const self = path.join(work, 'encoder');
      await writeFile(self, linuxBinary, { mode: 0o755 });
      for (const kind of ['self', 'repository'] as const) {
        const result = await resolveBaseRuntime(options({ hostBase: { path: self, target: LINUX, kind }, fetch: refusing }));
        expect(result).toEqual({ path: self, source: kind });
      }
      expect(await cacheFolderFiles()).toEqual([]);
      // another target still comes from the release
      const arm = await resolveBaseRuntime(options({ target: ARM, hostBase: { path: self, target: LINUX, kind: 'self' } }));
      expect(arm.source).toBe('download');
    });

    it('is not used when it has a model appended: a model executable is not a base runtime, and the step says why', async () => {
      const base = path.join(work, 'base');
      await writeFile(base, linuxBinary, { mode: 0o755 });
      const modelExecutable = path.join(work, 'my-model');
      await writeModelExecutable({
        baseBinaryPath: base,
        outputPath: modelExecutable,
        assets: [{ name: 'model_weights', data: Buffer.from('weights') }],
        manifest: { runtime_version: VERSION, target: LINUX, model: { name: 'my-model', version: '0.1.0', model_type: 'embedding', lua_libs: [] } },
      });
      const result = await resolveBaseRuntime(options({ hostBase: { path: modelExecutable, target: LINUX, kind: 'self' } }));
      expect(result.source).toBe('download');
      expect(result.note).toBe('this executable was not used as the base runtime: it has the model "my-model" appended (a model executable, not a base runtime)');
      const fromRepository = await resolveBaseRuntime(options({ hostBase: { path: modelExecutable, target: LINUX, kind: 'repository' }, fetch: refusing }));
      expect(fromRepository.source).toBe('cache');
      expect(fromRepository.note).toMatch(new RegExp(`^${modelExecutable} was not used as the base runtime: it has the model "my-model" appended`));
    });
  });

  it('downloads, verifies and caches; the second call uses the cache without any request', async () => {
    const first = await resolveBaseRuntime(options());

    const expectedPath = path.join(cacheDir, 'runtimes', VERSION, LINUX, 'encoder');
    expect(first).toEqual({ path: expectedPath, source: 'download' });
    expect(baseRuntimeCachePath(cacheDir, VERSION, LINUX)).toBe(expectedPath);
    expect(server.requests).toEqual([`/v${VERSION}/SHA256SUMS`, `/v${VERSION}/${LINUX_GZ}`]);
    expect((await readFile(first.path)).equals(linuxBinary)).toBe(true);
    expect((await stat(first.path)).mode & 0o777).toBe(0o755);
    expect((await cacheFolderFiles()).sort()).toEqual(['encoder', 'encoder.json']);
    const marker = JSON.parse(await readFile(cacheMarkerPath(first.path), 'utf8')) as CacheMarker;
    expect(marker).toMatchObject({
      sha256: sha256(linuxBinary),
      size: linuxBinary.length,
      archive: LINUX_GZ,
      archiveSha256: sha256(await linuxGz()),
      url: `${server.origin}/v${VERSION}/${LINUX_GZ}`,
    });

    const refusingFetch = (() => Promise.reject(new Error('no request expected'))) as typeof fetch;
    const second = await resolveBaseRuntime(options({ fetch: refusingFetch }));
    expect(second).toEqual({ path: expectedPath, source: 'cache' });
    const third = await resolveBaseRuntime(options());
    expect(third.source).toBe('cache');
    expect(server.requests).toHaveLength(2);
  });

  it('keeps versions and targets apart in the cache', async () => {
    const linux = await resolveBaseRuntime(options());
    const arm = await resolveBaseRuntime(options({ target: ARM }));
    expect(arm).toEqual({ path: path.join(cacheDir, 'runtimes', VERSION, ARM, 'encoder'), source: 'download' });
    expect((await readFile(arm.path)).equals(armBinary)).toBe(true);
    expect((await readFile(linux.path)).equals(linuxBinary)).toBe(true);
  });

  it('substitutes {version} in the release address', async () => {
    await writeReleaseAssets({ runtimeDir: path.join(work, 'runtime'), outDir: path.join(releaseRoot, 'mirror'), version: '9.8.7' });
    const result = await resolveBaseRuntime(
      options({ version: '9.8.7', releaseUrl: `${server.origin}/mirror/v{version}/` }),
    );
    expect(result).toEqual({ path: path.join(cacheDir, 'runtimes', '9.8.7', LINUX, 'encoder'), source: 'download' });
    expect(server.requests).toEqual(['/mirror/v9.8.7/SHA256SUMS', `/mirror/v9.8.7/encoder-9.8.7-${LINUX}.gz`]);
  });

  it('takes the release address from ENCODER_RELEASE_URL in env', async () => {
    const result = await resolveBaseRuntime(
      options({ releaseUrl: undefined, env: { [RELEASE_URL_ENV]: `${server.origin}/v{version}` } }),
    );
    expect(result.source).toBe('download');
    expect(server.requests).toEqual([`/v${VERSION}/SHA256SUMS`, `/v${VERSION}/${LINUX_GZ}`]);
  });

  it('uses the default release address when nothing overrides it', async () => {
    const urls: string[] = [];
    const offlineFetch = ((url: string) => {
      urls.push(url);
      return Promise.reject(new TypeError('fetch failed', { cause: new Error('getaddrinfo ENOTFOUND github.com') }));
    }) as typeof fetch;
    const defaultReleaseUrl = 'https://github.com/acme/encoder/releases/download/v{version}';
    const error = await rejection(resolveBaseRuntime(options({ releaseUrl: undefined, defaultReleaseUrl, fetch: offlineFetch })));
    expect(urls).toEqual([`https://github.com/acme/encoder/releases/download/v${VERSION}/SHA256SUMS`]);
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain('(default release address)');
    expect(error.message).toContain('fetch failed: getaddrinfo ENOTFOUND github.com');
  });

  it('without any release address, contacts nothing and says what to do offline', async () => {
    const urls: string[] = [];
    const fetchSpy = ((url: string) => {
      urls.push(url);
      return Promise.reject(new Error('must not be called'));
    }) as typeof fetch;
    const error = await rejection(resolveBaseRuntime(options({ releaseUrl: undefined, defaultReleaseUrl: null, env: {}, fetch: fetchSpy })));
    expect(urls).toEqual([]);
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain(`cannot get the base runtime for ${LINUX} (encoder ${VERSION}): no release address is configured`);
    expect(error.message).toContain('--base-binary-path <path>');
    expect(error.message).toContain(`set ${RELEASE_URL_ENV} to a release address`);
    expect(error.message).not.toContain('release address: ');
  });

  it('rejects a tampered archive naming the file and both digests, and caches nothing', async () => {
    const tampered = Buffer.from(await linuxGz());
    tampered[tampered.length >> 1] ^= 0xff;
    server.overrides.set(`/v${VERSION}/${LINUX_GZ}`, (_request, response) => {
      response.writeHead(200, { 'content-length': tampered.length });
      response.end(tampered);
    });

    const error = await rejection(resolveBaseRuntime(options()));

    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain(
      `checksum mismatch for ${LINUX_GZ} downloaded from ${server.origin}/v${VERSION}/${LINUX_GZ}: ` +
        `expected SHA-256 ${sha256(await linuxGz())} (from ${server.origin}/v${VERSION}/SHA256SUMS), got ${sha256(tampered)}`,
    );
    expect(error.message).toContain('Nothing was cached');
    expect(error.message).toContain('--base-binary-path');
    expect(await cacheFolderFiles()).toEqual([]);
  });

  it('names the URL and status of a 404 for the checksum list and suggests --base-binary-path', async () => {
    const error = await rejection(resolveBaseRuntime(options({ version: '4.0.4' })));
    expect(error).toBeInstanceOf(ConfigError);
    const message = error.message;
    expect(message).toContain(`cannot get the base runtime for ${LINUX} (encoder 4.0.4): the release could not be reached.`);
    expect(message).toContain(`cache: ${path.join(cacheDir, 'runtimes', '4.0.4', LINUX, 'encoder')} (not there)`);
    expect(message).toContain(`tried ${server.origin}/v4.0.4/SHA256SUMS: HTTP 404 Not Found`);
    expect(message).toContain('npm run build:runtime');
    expect(message).toContain('--base-binary-path <path>');
    expect(message).toContain(`dist/runtime/${LINUX}/encoder`);
    expect(message).toContain(RELEASE_URL_ENV);
    expect(server.requests).toEqual(['/v4.0.4/SHA256SUMS']);
  });

  it('names both URLs when the archive itself is missing', async () => {
    await rm(path.join(releaseRoot, `v${VERSION}`, LINUX_GZ));
    const error = await rejection(resolveBaseRuntime(options()));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain(`tried ${server.origin}/v${VERSION}/SHA256SUMS: ok`);
    expect(error.message).toContain(`tried ${server.origin}/v${VERSION}/${LINUX_GZ}: HTTP 404 Not Found`);
    expect(error.message).toContain('--base-binary-path');
    expect(await cacheFolderFiles()).toEqual([]);
  });

  it('reports an HTTP 500 with its status text', async () => {
    server.overrides.set(`/v${VERSION}/SHA256SUMS`, (_request, response) => {
      response.writeHead(503, 'Service Unavailable');
      response.end();
    });
    const error = await rejection(resolveBaseRuntime(options()));
    expect(error.message).toContain(`${server.origin}/v${VERSION}/SHA256SUMS: HTTP 503 Service Unavailable`);
  });

  it('reports the network error when the server is down, with the same advice', async () => {
    const port = await closedPort();
    const error = await rejection(resolveBaseRuntime(options({ releaseUrl: `http://127.0.0.1:${port}/v{version}` })));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain(`tried http://127.0.0.1:${port}/v${VERSION}/SHA256SUMS: fetch failed`);
    expect(error.message).toMatch(/ECONNREFUSED/);
    expect(error.message).toContain('(release address option)');
    expect(error.message).toContain('--base-binary-path');
    expect(error.message).toContain('npm run build:runtime');
    expect(await cacheFolderFiles()).toEqual([]);
  });

  it('says so when SHA256SUMS does not list the target, without requesting an archive', async () => {
    const error = await rejection(resolveBaseRuntime(options({ target: 'aarch64-apple-darwin' })));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain(
      `SHA256SUMS does not list encoder-${VERSION}-aarch64-apple-darwin.gz ` +
        `(it lists: encoder-${VERSION}-aarch64-unknown-linux-gnu.gz, ${LINUX_GZ})`,
    );
    expect(error.message).toContain('--base-binary-path');
    expect(error.message).toContain('dist/runtime/aarch64-apple-darwin/encoder');
    expect(server.requests).toEqual([`/v${VERSION}/SHA256SUMS`]);
  });

  it('reports a malformed SHA256SUMS with its URL and line', async () => {
    server.overrides.set(`/v${VERSION}/SHA256SUMS`, (_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end('<html><body>Sign in to continue</body></html>\n');
    });
    const error = await rejection(resolveBaseRuntime(options()));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain(`malformed checksum list ${server.origin}/v${VERSION}/SHA256SUMS, line 1`);
    expect(error.message).toContain('--base-binary-path');
    expect(server.requests).toHaveLength(1);
  });

  it('refuses an oversized checksum list', async () => {
    server.overrides.set(`/v${VERSION}/SHA256SUMS`, (_request, response) => {
      response.writeHead(200);
      response.end(Buffer.alloc(2 * 1024 * 1024, 0x61));
    });
    const error = await rejection(resolveBaseRuntime(options()));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toMatch(/SHA256SUMS: larger than 1048576 bytes; not a checksum list/);
  });

  it('reports an archive that matches its checksum but is not gzip, caching nothing', async () => {
    const notGzip = Buffer.from('this is not gzip');
    server.overrides.set(`/v${VERSION}/SHA256SUMS`, (_request, response) => {
      response.end(`${sha256(notGzip)}  ${LINUX_GZ}\n`);
    });
    server.overrides.set(`/v${VERSION}/${LINUX_GZ}`, (_request, response) => {
      response.end(notGzip);
    });
    const error = await rejection(resolveBaseRuntime(options()));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain(`${LINUX_GZ} from ${server.origin}/v${VERSION}/${LINUX_GZ} matches SHA256SUMS but is not a valid gzip file`);
    expect(await cacheFolderFiles()).toEqual([]);
  });

  it('reports an interrupted download and caches nothing', async () => {
    const gz = await linuxGz();
    server.overrides.set(`/v${VERSION}/${LINUX_GZ}`, (_request, response) => {
      response.writeHead(200, { 'content-length': gz.length });
      response.write(gz.subarray(0, 1000), () => response.destroy());
    });
    const error = await rejection(resolveBaseRuntime(options()));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain(`the download was interrupted`);
    expect(error.message).toContain(`tried ${server.origin}/v${VERSION}/${LINUX_GZ}: download interrupted:`);
    expect(await cacheFolderFiles()).toEqual([]);
  });

  it('re-downloads a corrupted cache entry (same size, different bytes)', async () => {
    const first = await resolveBaseRuntime(options());
    const corrupted = Buffer.from(linuxBinary);
    corrupted[100] ^= 0x01;
    await writeFile(first.path, corrupted);

    const second = await resolveBaseRuntime(options());
    expect(second).toEqual({ path: first.path, source: 'download' });
    expect((await readFile(second.path)).equals(linuxBinary)).toBe(true);
    expect(server.requests).toHaveLength(4);
    expect((await resolveBaseRuntime(options())).source).toBe('cache');
  });

  it('re-downloads a truncated binary, a missing marker and an unreadable marker', async () => {
    const first = await resolveBaseRuntime(options());
    await truncate(first.path, 10);
    expect((await resolveBaseRuntime(options())).source).toBe('download');
    await rm(cacheMarkerPath(first.path));
    expect((await resolveBaseRuntime(options())).source).toBe('download');
    await writeFile(cacheMarkerPath(first.path), '{not json');
    expect((await resolveBaseRuntime(options())).source).toBe('download');
    await writeFile(cacheMarkerPath(first.path), '{}');
    expect((await resolveBaseRuntime(options())).source).toBe('download');
    expect((await readFile(first.path)).equals(linuxBinary)).toBe(true);
    expect(server.requests).toHaveLength(10);
    expect((await cacheFolderFiles()).sort()).toEqual(['encoder', 'encoder.json']);
  });

  it('keeps a binary without a marker from being used (an unfinished entry)', async () => {
    const binaryPath = baseRuntimeCachePath(cacheDir, VERSION, LINUX);
    await mkdir(path.dirname(binaryPath), { recursive: true });
    await writeFile(binaryPath, 'half written');
    const result = await resolveBaseRuntime(options());
    expect(result.source).toBe('download');
    expect((await readFile(binaryPath)).equals(linuxBinary)).toBe(true);
  });

  it('does not corrupt the cache when two builds download at once', async () => {
    const results = await Promise.all([resolveBaseRuntime(options()), resolveBaseRuntime(options()), resolveBaseRuntime(options())]);
    expect(results.map((result) => result.source)).toEqual(['download', 'download', 'download']);
    expect((await readFile(results[0].path)).equals(linuxBinary)).toBe(true);
    expect((await cacheFolderFiles()).sort()).toEqual(['encoder', 'encoder.json']);
    expect((await resolveBaseRuntime(options({ fetch: undefined }))).source).toBe('cache');
  });

  it('reports progress monotonically, ending at the Content-Length', async () => {
    const events: BaseRuntimeProgress[] = [];
    await resolveBaseRuntime(options({ onProgress: (event) => events.push({ ...event }) }));
    const total = (await linuxGz()).length;
    expect(events.length).toBeGreaterThan(2);
    expect(events[0]).toEqual({ phase: 'download', doneBytes: 0, totalBytes: total });
    for (let index = 1; index < events.length; index++) {
      expect(events[index].doneBytes).toBeGreaterThanOrEqual(events[index - 1].doneBytes);
      expect(events[index].totalBytes).toBe(total);
      expect(events[index].phase).toBe('download');
    }
    expect(events.at(-1)).toEqual({ phase: 'download', doneBytes: total, totalBytes: total });
  });

  it('reports progress with a null total when the server sends no Content-Length', async () => {
    server.chunked = true;
    const events: BaseRuntimeProgress[] = [];
    const result = await resolveBaseRuntime(options({ onProgress: (event) => events.push({ ...event }) }));
    expect((await readFile(result.path)).equals(linuxBinary)).toBe(true);
    expect(events.every((event) => event.totalBytes === null)).toBe(true);
    for (let index = 1; index < events.length; index++) {
      expect(events[index].doneBytes).toBeGreaterThan(events[index - 1].doneBytes);
    }
    expect(events.at(-1)?.doneBytes).toBe((await linuxGz()).length);
  });

  it('uses --base-binary-path as is, without cache or download', async () => {
    const local = path.join(work, 'my-runtime');
    await writeFile(local, elfHeader(62));
    const result = await resolveBaseRuntime(options({ baseBinaryPath: path.relative(process.cwd(), local) }));
    expect(result).toEqual({ path: local, source: 'local' });
    expect(server.requests).toEqual([]);
    expect(await cacheFolderFiles()).toEqual([]);
  });

  it('rejects a --base-binary-path that is missing or a folder', async () => {
    const missing = path.join(work, 'nope', 'encoder');
    const error = await rejection(resolveBaseRuntime(options({ baseBinaryPath: missing })));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe(`base binary not found: ${missing}`);
    const folder = await rejection(resolveBaseRuntime(options({ baseBinaryPath: work })));
    expect(folder).toBeInstanceOf(ConfigError);
    expect(folder.message).toBe(`base binary not found: ${work}`);
    expect(server.requests).toEqual([]);
  });

  it('rejects a --base-binary-path that is not an executable of the target, saying what it is', async () => {
    const cases: [string, Uint8Array, Target, string][] = [
      ['text', Buffer.from('root:x:0:0:root:/root:/bin/bash\n'), LINUX, 'not an executable'],
      ['gzip', gzipSync(Buffer.from('x')), LINUX, 'gzip-compressed: unpack it first (gunzip)'],
      ['arm-elf', elfHeader(183), LINUX, 'an executable for aarch64 Linux'],
      ['x64-elf', elfHeader(62), ARM, 'an executable for x86_64 Linux'],
      ['mach-o', machOHeader(0x0100000c), LINUX, 'an executable for arm64 macOS'],
      ['pe-x64', peHeader(0x8664), LINUX, 'an executable for x86_64 Windows'],
      ['pe-arm64', peHeader(0xaa64), WINDOWS, 'an executable for arm64 Windows'],
      ['x64-elf-for-windows', elfHeader(62), WINDOWS, 'an executable for x86_64 Linux'],
      ['ms-dos', Buffer.concat([Buffer.from('MZ'), Buffer.alloc(100)]), WINDOWS, 'not an executable'],
      ['empty', new Uint8Array(0), LINUX, 'not an executable'],
    ];
    for (const [name, bytes, target, what] of cases) {
      const file = path.join(work, name);
      await writeFile(file, bytes);
      const error = await rejection(resolveBaseRuntime(options({ baseBinaryPath: file, target })));
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.message).toBe(`base binary ${file} is not a base runtime for ${target}: it is ${what}`);
    }
    const mac = path.join(work, 'mac');
    await writeFile(mac, machOHeader(0x0100000c));
    await expect(resolveBaseRuntime(options({ baseBinaryPath: mac, target: 'aarch64-apple-darwin' }))).resolves.toEqual({ path: mac, source: 'local' });
    const windows = path.join(work, 'windows.exe');
    await writeFile(windows, peHeader(0x8664));
    await expect(resolveBaseRuntime(options({ baseBinaryPath: windows, target: WINDOWS }))).resolves.toEqual({ path: windows, source: 'local' });
    expect(server.requests).toEqual([]);
  });

  it('rejects a release address that is not http(s)', async () => {
    const error = await rejection(
      resolveBaseRuntime(options({ releaseUrl: undefined, env: { [RELEASE_URL_ENV]: 'ftp://mirror/v{version}' } })),
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain('(from ENCODER_RELEASE_URL): only http:// and https:// addresses are supported');
  });

  it('reports an unwritable cache folder as a configuration problem', async () => {
    const blocker = path.join(work, 'blocked');
    await writeFile(blocker, 'a file where the cache folder should be');
    const error = await rejection(resolveBaseRuntime(options({ cacheDir: blocker })));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain(`cannot create the base runtime cache folder ${path.join(blocker, 'runtimes', VERSION, LINUX)}`);
  });

  it('wraps an unexpected failure as an InternalError', async () => {
    const error = await rejection(
      resolveBaseRuntime(
        options({
          onProgress: () => {
            throw new RangeError('progress bar broke');
          },
        }),
      ),
    );
    // A throwing callback is not the network's fault; it must not read like an offline problem.
    expect(error).not.toBeInstanceOf(ConfigError);
    expect(error).toBeInstanceOf(InternalError);
    expect(error.message).toContain('progress bar broke');
    expect(await cacheFolderFiles()).toEqual([]);
  });

  it('accepts any valid gzip whose checksum matches (binary marker, upper-case hex, CRLF)', async () => {
    const other = Buffer.from('built by another tool');
    const gz = gzipSync(other);
    server.overrides.set(`/v${VERSION}/SHA256SUMS`, (_request, response) => {
      response.end(`${sha256(gz).toUpperCase()} *${LINUX_GZ}\r\n`);
    });
    server.overrides.set(`/v${VERSION}/${LINUX_GZ}`, (_request, response) => {
      response.end(gz);
    });
    const result = await resolveBaseRuntime(options());
    expect((await readFile(result.path)).equals(other)).toBe(true);
  });
});

/** The first bytes of a 64-bit little-endian ELF file for a machine (62 x86_64, 183 aarch64). */
function elfHeader(machine: number): Buffer {
  const header = Buffer.alloc(64);
  header.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1], 0);
  header.writeUInt16LE(2, 16);
  header.writeUInt16LE(machine, 18);
  return header;
}

/** The first bytes of a 64-bit Mach-O file for a CPU type (0x01000007 x86_64, 0x0100000c arm64). */
function machOHeader(cpuType: number): Buffer {
  const header = Buffer.alloc(32);
  header.writeUInt32LE(0xfeedfacf, 0);
  header.writeUInt32LE(cpuType, 4);
  return header;
}

/** The first bytes of a PE image for a machine (0x8664 x86_64, 0xaa64 arm64): MS-DOS header, "PE\0\0", COFF header. */
function peHeader(machine: number): Buffer {
  const header = Buffer.alloc(0x80 + 24);
  header.write('MZ', 0, 'latin1');
  header.writeUInt32LE(0x80, 0x3c);
  header.write('PE\0\0', 0x80, 'latin1');
  header.writeUInt16LE(machine, 0x84);
  return header;
}
