/**
 * Finds the base runtime (the Node SEA binary `encoder` of one target triple) that `encoder build` appends a
 * model to: a local file given with `--base-binary-path`; else, for the host's own target, the host base runtime
 * (the running executable when it is a base runtime, or from source the repository's dist/runtime/<triple>/encoder);
 * else the verified copy in the cache, else a download from the release address (see release.ts and
 * docs/releases.md, "Release downloads").
 *
 * Cache layout, one folder per version and target:
 *
 *   <cacheDir>/runtimes/<version>/<triple>/encoder        the base binary, mode 0755
 *   <cacheDir>/runtimes/<version>/<triple>/encoder.json   marker: SHA-256 and size of `encoder`, where it came from
 *
 * The marker is written after the binary, so an entry without a marker is unfinished. On every use the binary
 * is hashed and compared with the marker (~0.15–0.2 s per 100 MB); a missing, unreadable or mismatching entry is
 * downloaded again. Downloads go to temporary files in the same folder and are renamed into place, so builds
 * running at the same time never see a partly written binary.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { AssetSection } from '../../runtime/asset-section.ts';
import { ConfigError, InternalError, isEncoderError } from '../encoder/errors.ts';
import {
  CHECKSUMS_FILE,
  RELEASE_URL_ENV,
  VERSION_PLACEHOLDER,
  checkVersion,
  describeOrigin,
  parseChecksums,
  releaseAssetName,
  releaseFileUrl,
  NO_RELEASE_ADDRESS,
  resolveReleaseLocation,
} from './release.ts';
import type { ReleaseLocation } from './release.ts';
import { executableExtension } from './targets.ts';
import type { Target } from './targets.ts';

export interface BaseRuntimeProgress {
  phase: 'download';
  /** Bytes of the .gz received so far (never decreases). */
  doneBytes: number;
  /** The .gz's Content-Length, or null when the server did not send one. */
  totalBytes: number | null;
}

export interface ResolveBaseRuntimeOptions {
  target: Target;
  /** The program's version: the base runtime must be of the same version. */
  version: string;
  /** The cache directory (the configuration's `cache_dir`, else `ENCODER_CACHE_DIR`, else the platform's). */
  cacheDir: string;
  /** `--base-binary-path`: use this file as is, no cache, no download. */
  baseBinaryPath?: string;
  /**
   * A base runtime of this version for the host's target, used for that target before cache and release: the running
   * executable (`self`) or the repository's build (`repository`). Not used when it has model assets appended.
   */
  hostBase?: HostBaseRuntime;
  /** The default release address (tests); default: package.json's repository (DEFAULT_RELEASE_URL). */
  defaultReleaseUrl?: string | null;
  /** Release address template; overrides `ENCODER_RELEASE_URL` and the default. */
  releaseUrl?: string;
  /** Where `ENCODER_RELEASE_URL` is read from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch;
  /** Called as the .gz arrives: first with 0 bytes, then per chunk, last with the full size. */
  onProgress?: (event: BaseRuntimeProgress) => void;
  /** false (`--no-download`): a base runtime not in the cache is an error instead of a download. */
  download?: boolean;
}

export interface HostBaseRuntime {
  path: string;
  target: Target;
  kind: 'self' | 'repository';
}

export interface BaseRuntime {
  /** Absolute path of the base binary. */
  path: string;
  source: 'local' | 'self' | 'repository' | 'cache' | 'download';
  /** Why the host base runtime was not used, when there was one and it was not. */
  note?: string;
}

/** The cache marker written next to a downloaded base binary. */
export interface CacheMarker {
  /** SHA-256 (hex) of the uncompressed binary. */
  sha256: string;
  size: number;
  /** The release file it came from and that file's SHA-256 as listed in SHA256SUMS. */
  archive: string;
  archiveSha256: string;
  url: string;
  downloadedAt: string;
}

/** Largest SHA256SUMS accepted (a real one is a few hundred bytes). */
const MAX_CHECKSUMS_BYTES = 1024 * 1024;

/** `<cacheDir>/runtimes/<version>/<triple>`. */
export function baseRuntimeCacheDir(cacheDir: string, version: string, target: Target): string {
  return path.resolve(cacheDir, 'runtimes', checkVersion(version), target);
}

/** `<cacheDir>/runtimes/<version>/<triple>/encoder`. */
export function baseRuntimeCachePath(cacheDir: string, version: string, target: Target): string {
  return path.join(baseRuntimeCacheDir(cacheDir, version, target), `encoder${executableExtension(target)}`);
}

/** The marker file of a cached binary: `<binary>.json`. */
export function cacheMarkerPath(binaryPath: string): string {
  return `${binaryPath}.json`;
}

/** Resolves the base runtime for `target` and `version`: local path, cache, or download (in that order). */
export async function resolveBaseRuntime(options: ResolveBaseRuntimeOptions): Promise<BaseRuntime> {
  if (options.baseBinaryPath !== undefined) return { path: await checkLocalBinary(options.baseBinaryPath, options.target), source: 'local' };

  let note: string | undefined;
  if (options.hostBase !== undefined && options.hostBase.target === options.target) {
    note = await hostBaseProblem(options.hostBase);
    if (note === undefined) return { path: path.resolve(options.hostBase.path), source: options.hostBase.kind };
  }
  const withNote = (runtime: BaseRuntime): BaseRuntime => (note === undefined ? runtime : { ...runtime, note });

  const binaryPath = baseRuntimeCachePath(options.cacheDir, options.version, options.target);
  const cached = await checkCacheEntry(binaryPath);
  if (cached.state === 'valid') return withNote({ path: binaryPath, source: 'cache' });
  if (options.download === false) {
    throw new ConfigError(
      `no base runtime ${options.version} for ${options.target} in the cache (${binaryPath}: ${cached.note}) and downloads are off ` +
        `(--no-download): run \`encoder runtime add ${options.target}\` first, or pass --base-binary-path`,
    );
  }

  const location = resolveReleaseLocation({ version: options.version, releaseUrl: options.releaseUrl, env: options.env, defaultUrl: options.defaultReleaseUrl });
  if (location === null) {
    throw new ConfigError(unavailableMessage({ ...options, binaryPath, location, cacheNote: cached.note }, [], NO_RELEASE_ADDRESS));
  }
  try {
    await download({ ...options, binaryPath, location, cacheNote: cached.note });
  } catch (error) {
    if (isEncoderError(error)) throw error;
    throw new InternalError(`unexpected failure while getting the base runtime for ${options.target}: ${errorMessage(error)}`, {
      cause: error,
    });
  }
  return withNote({ path: binaryPath, source: 'download' });
}

/**
 * Why the host base runtime cannot be a base, or undefined when it can. A model executable is that same binary
 * with a model appended: building from it would stack a second model after the first, so it is refused.
 */
async function hostBaseProblem(hostBase: HostBaseRuntime): Promise<string | undefined> {
  const which = hostBase.kind === 'self' ? 'this executable' : hostBase.path;
  let section: AssetSection | null;
  try {
    section = await AssetSection.open(hostBase.path);
  } catch (error) {
    return `${which} was not used as the base runtime: ${errorMessage(error)}`;
  }
  if (section === null) return undefined;
  const model = section.manifest.model.name;
  await section.close();
  return `${which} was not used as the base runtime: it has the model "${model}" appended (a model executable, not a base runtime)`;
}

async function checkLocalBinary(given: string, target: Target): Promise<string> {
  const absolute = path.resolve(given);
  let isFile = false;
  try {
    isFile = (await stat(absolute)).isFile();
  } catch {
    // Reported below.
  }
  if (!isFile) throw new ConfigError(`base binary not found: ${given}`);
  const what = executableKindOf(await readHead(absolute, 1024));
  if (what !== EXECUTABLE_KINDS[target]) {
    throw new ConfigError(`base binary ${given} is not a base runtime for ${target}: it is ${what}`);
  }
  return absolute;
}

/** What each target's executables are, in the words of `executableKindOf`. */
const EXECUTABLE_KINDS: Record<Target, string> = {
  'x86_64-unknown-linux-gnu': 'an executable for x86_64 Linux',
  'aarch64-unknown-linux-gnu': 'an executable for aarch64 Linux',
  'x86_64-apple-darwin': 'an executable for x86_64 macOS',
  'aarch64-apple-darwin': 'an executable for arm64 macOS',
  'x86_64-pc-windows-msvc': 'an executable for x86_64 Windows',
};

/**
 * What a file is, from its first bytes: an ELF, Mach-O or PE executable and its machine, or not an executable. A wrong
 * --base-binary-path (a release .gz not unpacked, the runtime of another target, any other file) was packed as
 * given and made an output that cannot start.
 */
function executableKindOf(head: Buffer): string {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip-compressed: unpack it first (gunzip)';
  if (head.length >= 20 && head.readUInt32BE(0) === 0x7f454c46) {
    const machine = head.readUInt16LE(18);
    const name = machine === 62 ? 'x86_64' : machine === 183 ? 'aarch64' : `machine ${machine}`;
    return `an executable for ${name} Linux`;
  }
  if (head.length >= 8 && head.readUInt32LE(0) === 0xfeedfacf) {
    const cpu = head.readUInt32LE(4);
    const name = cpu === 0x01000007 ? 'x86_64' : cpu === 0x0100000c ? 'arm64' : `CPU type ${cpu}`;
    return `an executable for ${name} macOS`;
  }
  // PE: "MZ", the offset of the "PE\0\0" signature at 0x3c, then the COFF header's machine
  if (head.length >= 0x40 && head.readUInt16LE(0) === 0x5a4d) {
    const pe = head.readUInt32LE(0x3c);
    if (pe + 6 <= head.length && head.readUInt32LE(pe) === 0x00004550) {
      const machine = head.readUInt16LE(pe + 4);
      const name = machine === 0x8664 ? 'x86_64' : machine === 0xaa64 ? 'arm64' : `machine 0x${machine.toString(16)}`;
      return `an executable for ${name} Windows`;
    }
  }
  return 'not an executable';
}

async function readHead(file: string, bytes: number): Promise<Buffer> {
  const handle = await open(file, 'r');
  try {
    const buffer = Buffer.alloc(bytes);
    const { bytesRead } = await handle.read(buffer, 0, bytes, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

export type CacheState = { state: 'valid' } | { state: 'missing' | 'invalid'; note: string };

/** Is there a finished, intact cache entry at `binaryPath`? */
/** Whether the cached binary at `binaryPath` is complete and matches its marker (and why not). */
export async function checkCacheEntry(binaryPath: string): Promise<CacheState> {
  let markerText: string;
  try {
    markerText = await readFile(cacheMarkerPath(binaryPath), 'utf8');
  } catch {
    return { state: 'missing', note: 'not there' };
  }
  let marker: Partial<CacheMarker>;
  try {
    marker = JSON.parse(markerText) as Partial<CacheMarker>;
  } catch {
    return { state: 'invalid', note: 'its marker is unreadable' };
  }
  if (typeof marker.sha256 !== 'string' || typeof marker.size !== 'number') {
    return { state: 'invalid', note: 'its marker is incomplete' };
  }
  let size: number;
  try {
    const info = await stat(binaryPath);
    if (!info.isFile()) return { state: 'invalid', note: 'not a file' };
    size = info.size;
  } catch {
    return { state: 'missing', note: 'the binary is missing' };
  }
  if (size !== marker.size) return { state: 'invalid', note: `corrupted: ${size} bytes instead of ${marker.size}` };
  let digest: string;
  try {
    digest = await sha256OfFile(binaryPath);
  } catch (error) {
    return { state: 'invalid', note: `unreadable: ${errorMessage(error)}` };
  }
  if (digest !== marker.sha256) return { state: 'invalid', note: 'corrupted: its SHA-256 does not match the marker' };
  try {
    await chmod(binaryPath, 0o755);
  } catch {
    // A read-only cache still works for reading; the builder copies the binary anyway.
  }
  return { state: 'valid' };
}

interface DownloadPlan extends ResolveBaseRuntimeOptions {
  binaryPath: string;
  location: ReleaseLocation;
  cacheNote: string;
}

/** What an unavailable base runtime's message says; `location` is null when there is no release address at all. */
type UnavailablePlan = Omit<DownloadPlan, 'location'> & { location: ReleaseLocation | null };

async function download(plan: DownloadPlan): Promise<void> {
  const fetchImpl = plan.fetch ?? globalThis.fetch;
  const { baseUrl } = plan.location;
  const archive = releaseAssetName(plan.version, plan.target);
  const sumsUrl = releaseFileUrl(baseUrl, CHECKSUMS_FILE);
  const archiveUrl = releaseFileUrl(baseUrl, archive);
  const tried: string[] = [];
  const unavailable = (reason: string, cause?: unknown): ConfigError =>
    new ConfigError(unavailableMessage(plan, tried, reason), { cause });

  // 1. The checksum list.
  const sumsResponse = await request(fetchImpl, sumsUrl);
  if (!sumsResponse.ok) {
    tried.push(`${sumsUrl}: ${sumsResponse.failure}`);
    throw unavailable('the release could not be reached', sumsResponse.error);
  }
  let sumsText: string;
  try {
    sumsText = await readLimitedText(sumsResponse.response, MAX_CHECKSUMS_BYTES);
  } catch (error) {
    tried.push(`${sumsUrl}: ${errorMessage(error)}`);
    throw unavailable('the checksum list could not be read', error);
  }
  let sums: Map<string, string>;
  try {
    sums = parseChecksums(sumsText, sumsUrl);
  } catch (error) {
    tried.push(`${sumsUrl}: received, but unusable`);
    throw unavailable(errorMessage(error), error);
  }
  tried.push(`${sumsUrl}: ok`);
  const expected = sums.get(archive);
  if (expected === undefined) {
    throw unavailable(`${CHECKSUMS_FILE} does not list ${archive} (it lists: ${[...sums.keys()].join(', ')})`);
  }

  // 2. The archive, into a temporary file next to the cache entry.
  const dir = path.dirname(plan.binaryPath);
  try {
    await mkdir(dir, { recursive: true });
  } catch (error) {
    throw new ConfigError(`cannot create the base runtime cache folder ${dir}: ${errorMessage(error)}`, { cause: error });
  }
  const stem = path.join(dir, `.${path.basename(plan.binaryPath)}-download-${process.pid}-${randomBytes(6).toString('hex')}`);
  const archiveTemp = `${stem}.gz.part`;
  const binaryTemp = `${stem}.part`;
  const markerTemp = `${stem}.json.part`;
  try {
    const archiveResponse = await request(fetchImpl, archiveUrl);
    if (!archiveResponse.ok) {
      tried.push(`${archiveUrl}: ${archiveResponse.failure}`);
      throw unavailable('the base runtime could not be downloaded', archiveResponse.error);
    }
    let actual: string;
    try {
      actual = await saveWithProgress(archiveResponse.response, archiveTemp, plan.onProgress);
    } catch (error) {
      if (isEncoderError(error)) throw error;
      if (isFileSystemError(error)) throw cacheWriteError(dir, error);
      tried.push(`${archiveUrl}: download interrupted: ${describeFetchError(error)}`);
      throw unavailable('the download was interrupted', error);
    }
    tried.push(`${archiveUrl}: ok`);
    if (actual !== expected) {
      throw new ConfigError(
        `checksum mismatch for ${archive} downloaded from ${archiveUrl}: expected SHA-256 ${expected} ` +
          `(from ${sumsUrl}), got ${actual}. Nothing was cached.\n${advice(plan)}`,
      );
    }

    // 3. Unpack, then publish with renames: binary first, marker last.
    let binary: { sha256: string; size: number };
    try {
      binary = await gunzipFile(archiveTemp, binaryTemp);
    } catch (error) {
      if (isFileSystemError(error)) throw cacheWriteError(dir, error);
      throw new ConfigError(
        `${archive} from ${archiveUrl} matches ${CHECKSUMS_FILE} but is not a valid gzip file (${errorMessage(error)}). ` +
          `The release is broken.\n${advice(plan)}`,
        { cause: error },
      );
    }
    const marker: CacheMarker = {
      sha256: binary.sha256,
      size: binary.size,
      archive,
      archiveSha256: actual,
      url: archiveUrl,
      downloadedAt: new Date().toISOString(),
    };
    try {
      await chmod(binaryTemp, 0o755);
      await rename(binaryTemp, plan.binaryPath);
      await writeFile(markerTemp, `${JSON.stringify(marker, null, 2)}\n`, { flag: 'wx' });
      await rename(markerTemp, cacheMarkerPath(plan.binaryPath));
    } catch (error) {
      throw cacheWriteError(dir, error);
    }
  } finally {
    await Promise.all([archiveTemp, binaryTemp, markerTemp].map((file) => rm(file, { force: true }).catch(() => undefined)));
  }
}

type RequestResult =
  | { ok: true; response: Response }
  | { ok: false; failure: string; error?: unknown };

/** GET `url`; a network error or a non-2xx status becomes a failure text (`HTTP 404 Not Found`, `fetch failed: …`). */
async function request(fetchImpl: typeof fetch, url: string): Promise<RequestResult> {
  let response: Response;
  try {
    // identity: the bytes hashed must be the bytes of the file, not a re-encoding of them.
    response = await fetchImpl(url, { headers: { 'accept-encoding': 'identity' }, redirect: 'follow' });
  } catch (error) {
    return { ok: false, failure: describeFetchError(error), error };
  }
  if (!response.ok) {
    await response.body?.cancel().catch(() => undefined);
    return { ok: false, failure: `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}` };
  }
  return { ok: true, response };
}

async function readLimitedText(response: Response, limit: number): Promise<string> {
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += chunk.byteLength;
    if (size > limit) {
      throw new ConfigError(`larger than ${limit} bytes; not a checksum list`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Streams the body to `file` (created exclusively), returning the SHA-256 of the bytes written. */
async function saveWithProgress(
  response: Response,
  file: string,
  onProgress: ResolveBaseRuntimeOptions['onProgress'],
): Promise<string> {
  const lengthHeader = response.headers.get('content-length');
  const totalBytes = lengthHeader !== null && /^\d+$/.test(lengthHeader.trim()) ? Number(lengthHeader) : null;
  const hash = createHash('sha256');
  let doneBytes = 0;
  const report = (): void => {
    try {
      onProgress?.({ phase: 'download', doneBytes, totalBytes });
    } catch (error) {
      throw new InternalError(`the download progress callback failed: ${errorMessage(error)}`, { cause: error });
    }
  };
  report();
  const source = response.body ? Readable.fromWeb(response.body) : Readable.from([]);
  await pipeline(
    source,
    async function* (chunks: AsyncIterable<Buffer>) {
      for await (const chunk of chunks) {
        hash.update(chunk);
        doneBytes += chunk.length;
        if (chunk.length > 0) report();
        yield chunk;
      }
    },
    createWriteStream(file, { flags: 'wx', mode: 0o600 }),
  );
  if (totalBytes !== null && doneBytes !== totalBytes) {
    throw new Error(`received ${doneBytes} of ${totalBytes} bytes`);
  }
  return hash.digest('hex');
}

async function gunzipFile(from: string, to: string): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  await pipeline(
    createReadStream(from),
    createGunzip(),
    async function* (chunks: AsyncIterable<Buffer>) {
      for await (const chunk of chunks) {
        hash.update(chunk);
        size += chunk.length;
        yield chunk;
      }
    },
    createWriteStream(to, { flags: 'wx', mode: 0o600 }),
  );
  return { sha256: hash.digest('hex'), size };
}

async function sha256OfFile(file: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(file), hash);
  return hash.digest('hex');
}

function unavailableMessage(plan: UnavailablePlan, tried: readonly string[], reason: string): string {
  const lines = [
    `cannot get the base runtime for ${plan.target} (encoder ${plan.version}): ${reason}.`,
    `  cache: ${plan.binaryPath} (${plan.cacheNote})`,
    ...(plan.location ? [`  release address: ${plan.location.baseUrl}${describeOrigin(plan.location.origin)}`] : []),
    ...tried.map((line) => `  tried ${line}`),
    advice(plan),
  ];
  return lines.join('\n');
}

function advice(plan: UnavailablePlan): string {
  const binary = `dist/runtime/${plan.target}/encoder${executableExtension(plan.target)}`;
  return [
    'To proceed, either:',
    `  - build a base runtime with \`npm run build:runtime\` (it writes ${binary}) and pass it with --base-binary-path <path>, or`,
    `  - set ${RELEASE_URL_ENV} to a release address with ${CHECKSUMS_FILE} and ${releaseAssetName(plan.version, plan.target)} ` +
      `("${VERSION_PLACEHOLDER}" in it is replaced by the version).`,
  ].join('\n');
}

function cacheWriteError(dir: string, error: unknown): ConfigError {
  return new ConfigError(`cannot write the base runtime cache in ${dir}: ${errorMessage(error)}`, { cause: error });
}

function isFileSystemError(error: unknown): boolean {
  return error instanceof Error && typeof (error as NodeJS.ErrnoException).syscall === 'string' &&
    ['open', 'write', 'rename', 'chmod', 'mkdir', 'close', 'fsync', 'read'].includes((error as NodeJS.ErrnoException).syscall ?? '');
}

/** `fetch failed: connect ECONNREFUSED 127.0.0.1:9` — the message and its causes, deduplicated. */
export function describeFetchError(error: unknown): string {
  const parts: string[] = [];
  const add = (text: string): void => {
    if (text && !parts.some((part) => part.includes(text))) parts.push(text);
  };
  let current: unknown = error;
  for (let depth = 0; current !== undefined && current !== null && depth < 6; depth++) {
    if (current instanceof AggregateError && current.errors.length > 0) {
      add(current.errors.map((inner: unknown) => errorMessage(inner)).join('; '));
    } else if (current instanceof Error) {
      const code = (current as NodeJS.ErrnoException).code;
      add(current.message || (code ?? current.name));
      if (code && !current.message.includes(code)) add(code);
    } else {
      add(String(current));
    }
    current = current instanceof Error ? current.cause : undefined;
  }
  return parts.join(': ') || 'unknown network error';
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

