/**
 * Where prebuilt base runtimes are published and how a release is laid out. Shared by the downloader
 * (`base-runtime.ts`) and the script that writes a release (`scripts/release-assets.ts`), so both agree on
 * every name. See docs/releases.md ("Release downloads").
 *
 * A release is one folder per version:
 *
 *   <release address>/encoder-<version>-<triple>.gz   the gzipped base binary of one target
 *   <release address>/SHA256SUMS                      `<sha256 hex>  <file name>` per .gz (sha256sum's format)
 */
import packageJson from '../../package.json' with { type: 'json' };
import { ConfigError } from '../encoder/errors.ts';
import type { Target } from './targets.ts';

/** This program's version (package.json): the version of the base runtimes it builds with. */
export const PROGRAM_VERSION: string = packageJson.version;

/**
 * The release address of a GitHub repository: `{version}` is replaced by the program's version. The default release
 * address is that of package.json's `repository` (the one place that names where this program is published);
 * without one there is no default, and a build that needs a download says how to proceed without it.
 */
export function githubReleaseUrl(repository: unknown): string | null {
  const text = typeof repository === 'string' ? repository : (repository as { url?: unknown } | undefined)?.url;
  if (typeof text !== 'string') return null;
  const match = /^(?:github:|git\+https:\/\/github\.com\/|https:\/\/github\.com\/|git@github\.com:)?([\w.-]+)\/([\w.-]+?)(?:\.git)?\/?$/.exec(text.trim());
  return match ? `https://github.com/${match[1]}/${match[2]}/releases/download/v{version}` : null;
}

/** The default release address, from package.json's `repository`; null when it names none. */
export const DEFAULT_RELEASE_URL: string | null = githubReleaseUrl((packageJson as { repository?: unknown }).repository);

/** Environment variable that overrides the release address (may contain `{version}`). */
export const RELEASE_URL_ENV = 'ENCODER_RELEASE_URL';

/** The checksum list of a release. */
export const CHECKSUMS_FILE = 'SHA256SUMS';

/** The placeholder of a release address template. */
export const VERSION_PLACEHOLDER = '{version}';

const VERSION_PATTERN = /^[0-9A-Za-z][0-9A-Za-z.+_-]*$/;
const SHA256_PATTERN = /^[0-9a-f]{64}$/;

/**
 * Checks that a version can be part of file names, URLs and cache folders (no `/`, no leading dot).
 * Returns it unchanged.
 */
export function checkVersion(version: string): string {
  if (!VERSION_PATTERN.test(version)) {
    throw new ConfigError(
      `invalid version "${version}": expected letters, digits, ".", "+", "_" or "-", starting with a letter or digit`,
    );
  }
  return version;
}

/** `encoder-<version>-<triple>.gz`: the gzipped base binary of one target. */
export function releaseAssetName(version: string, target: Target): string {
  return `encoder-${checkVersion(version)}-${target}.gz`;
}

/** No release address: none given, and package.json names no repository. */
export const NO_RELEASE_ADDRESS = `no release address is configured (${RELEASE_URL_ENV} is not set, and this build of encoder names no repository in its package.json)`;

/** Where the release address came from, for messages. */
export type ReleaseUrlOrigin = 'option' | 'env' | 'default';

export interface ReleaseLocation {
  /** The address of the release folder, `{version}` substituted, without a trailing slash. */
  baseUrl: string;
  /** The template it was made from. */
  template: string;
  origin: ReleaseUrlOrigin;
}

/**
 * Resolves the release address: an explicit `releaseUrl`, else `ENCODER_RELEASE_URL` from `env`, else
 * `defaultUrl` ({@link DEFAULT_RELEASE_URL}). Every `{version}` is replaced. Only http:// and https:// addresses are
 * accepted. Null when there is none at all.
 */
export function resolveReleaseLocation(options: {
  version: string;
  releaseUrl?: string;
  env?: NodeJS.ProcessEnv;
  defaultUrl?: string | null;
}): ReleaseLocation | null {
  const version = checkVersion(options.version);
  const fromEnv = (options.env ?? process.env)[RELEASE_URL_ENV];
  let template: string;
  let origin: ReleaseUrlOrigin;
  if (options.releaseUrl !== undefined && options.releaseUrl !== '') {
    template = options.releaseUrl;
    origin = 'option';
  } else if (fromEnv !== undefined && fromEnv.trim() !== '') {
    template = fromEnv.trim();
    origin = 'env';
  } else {
    const defaultUrl = options.defaultUrl === undefined ? DEFAULT_RELEASE_URL : options.defaultUrl;
    if (defaultUrl === null) return null;
    template = defaultUrl;
    origin = 'default';
  }
  const baseUrl = template.split(VERSION_PLACEHOLDER).join(version).replace(/\/+$/, '');
  let parsed: URL;
  try {
    parsed = new URL(baseUrl);
  } catch {
    throw new ConfigError(`invalid release address "${template}"${describeOrigin(origin)}: not a URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ConfigError(
      `invalid release address "${template}"${describeOrigin(origin)}: only http:// and https:// addresses are supported`,
    );
  }
  return { baseUrl, template, origin };
}

/** The URL of one file of a release folder. */
export function releaseFileUrl(baseUrl: string, fileName: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/${encodeURIComponent(fileName)}`;
}

/** ` (from ENCODER_RELEASE_URL)` and the like, for messages. */
export function describeOrigin(origin: ReleaseUrlOrigin): string {
  switch (origin) {
    case 'env':
      return ` (from ${RELEASE_URL_ENV})`;
    case 'option':
      return ' (release address option)';
    case 'default':
      return ' (default release address)';
  }
}

export interface ChecksumEntry {
  fileName: string;
  /** Lower-case hex SHA-256. */
  sha256: string;
}

/** Formats a checksum list like `sha256sum`'s output: `<hex>  <name>\n` per file, sorted by name. */
export function formatChecksums(entries: readonly ChecksumEntry[]): string {
  const seen = new Set<string>();
  for (const { fileName, sha256 } of entries) {
    if (!SHA256_PATTERN.test(sha256)) throw new ConfigError(`invalid SHA-256 for ${fileName}: "${sha256}"`);
    if (fileName === '' || /[\n\r\\]/.test(fileName) || fileName.includes('/')) {
      throw new ConfigError(`invalid file name for a checksum list: ${JSON.stringify(fileName)}`);
    }
    if (seen.has(fileName)) throw new ConfigError(`file ${fileName} is listed twice`);
    seen.add(fileName);
  }
  return [...entries]
    .sort((a, b) => (a.fileName < b.fileName ? -1 : a.fileName > b.fileName ? 1 : 0))
    .map(({ fileName, sha256 }) => `${sha256}  ${fileName}\n`)
    .join('');
}

/**
 * Parses a checksum list in `sha256sum` format into file name → lower-case hex digest. Accepts the text
 * (`<hex>  <name>`) and binary (`<hex> *<name>`) markers, upper- or lower-case hex, CRLF line ends and blank
 * lines. Anything else is a ConfigError naming `source` and the line.
 */
export function parseChecksums(text: string, source: string = CHECKSUMS_FILE): Map<string, string> {
  const result = new Map<string, string>();
  const lines = text.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index].replace(/\r$/, '');
    if (line.trim() === '') continue;
    const match = /^([0-9A-Fa-f]{64}) [ *](.+)$/.exec(line);
    if (!match) {
      const shown = line.length > 120 ? `${line.slice(0, 120)}…` : line;
      throw new ConfigError(
        `malformed checksum list ${source}, line ${index + 1}: expected "<64 hex digits>  <file name>", got ${JSON.stringify(shown)}`,
      );
    }
    const digest = match[1].toLowerCase();
    const fileName = match[2];
    const previous = result.get(fileName);
    if (previous !== undefined && previous !== digest) {
      throw new ConfigError(`malformed checksum list ${source}, line ${index + 1}: ${fileName} is listed twice with different digests`);
    }
    result.set(fileName, digest);
  }
  if (result.size === 0) throw new ConfigError(`malformed checksum list ${source}: it lists no files`);
  return result;
}
