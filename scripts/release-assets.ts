/**
 * CLI: turns the base runtimes built by `npm run build:runtime` into release files, in exactly the layout
 * the downloader (src/builder/base-runtime.ts) expects:
 *
 *   node scripts/release-assets.ts [--runtime-dir dist/runtime] [--out dist/release] [--version X]
 *
 * For every `<runtime-dir>/<triple>/encoder` present it writes `<out>/v<version>/encoder-<version>-<triple>.gz`,
 * then `<out>/v<version>/SHA256SUMS` listing them. Serving `<out>` over HTTP and setting
 * `ENCODER_RELEASE_URL=http://host/v{version}` makes `encoder build` download from it. See docs/releases.md.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { constants as zlibConstants, createGzip } from 'node:zlib';
import { Command } from 'commander';
import { TARGETS, executableExtension } from '../src/builder/targets.ts';
import type { Target } from '../src/builder/targets.ts';
import {
  CHECKSUMS_FILE,
  PROGRAM_VERSION,
  checkVersion,
  formatChecksums,
  releaseAssetName,
} from '../src/builder/release.ts';
import { ConfigError, isEncoderError } from '../src/encoder/errors.ts';

export interface ReleaseAssetsOptions {
  /** Folder with one `<triple>/encoder` per built target (default `dist/runtime`). */
  runtimeDir: string;
  /** Release root; files go to `<outDir>/v<version>/` (default `dist/release`). */
  outDir: string;
  /** Version in the file names (default: package.json's). */
  version?: string;
}

export interface ReleaseAsset {
  target: Target;
  /** The base binary it was made from. */
  source: string;
  fileName: string;
  path: string;
  /** SHA-256 (hex) of the .gz, as written to SHA256SUMS. */
  sha256: string;
  size: number;
}

export interface ReleaseAssetsResult {
  version: string;
  /** `<outDir>/v<version>`: the folder to publish as the release address. */
  releaseDir: string;
  assets: ReleaseAsset[];
  checksumsPath: string;
  /** `encoder-<version>-*.gz` files already in the folder that this run did not write (not in SHA256SUMS). */
  stale: string[];
}

/** The binary `npm run build:runtime` writes for one target. */
export function runtimeBinaryPath(runtimeDir: string, target: Target): string {
  return path.join(runtimeDir, target, `encoder${executableExtension(target)}`);
}

/** Writes the release files for every runtime present in `runtimeDir`. */
export async function writeReleaseAssets(options: ReleaseAssetsOptions): Promise<ReleaseAssetsResult> {
  const version = checkVersion(options.version ?? PROGRAM_VERSION);
  const runtimeDir = path.resolve(options.runtimeDir);
  const releaseDir = path.resolve(options.outDir, `v${version}`);

  let runtimeDirIsFolder = false;
  try {
    runtimeDirIsFolder = (await stat(runtimeDir)).isDirectory();
  } catch {
    // Reported below.
  }
  if (!runtimeDirIsFolder) {
    throw new ConfigError(`no base runtime was built: ${runtimeDir} does not exist. Run \`npm run build:runtime\` first.`);
  }
  const found: { target: Target; source: string }[] = [];
  for (const target of TARGETS) {
    const source = runtimeBinaryPath(runtimeDir, target);
    const info = await stat(source).catch(() => undefined);
    if (info?.isFile()) found.push({ target, source });
  }
  if (found.length === 0) {
    const looked = TARGETS.map((target) => `  ${runtimeBinaryPath(runtimeDir, target)}`).join('\n');
    throw new ConfigError(`no base runtime was built; none of these files exists:\n${looked}\nRun \`npm run build:runtime\` first.`);
  }

  await mkdir(releaseDir, { recursive: true });
  const assets: ReleaseAsset[] = [];
  for (const { target, source } of found) {
    const fileName = releaseAssetName(version, target);
    const destination = path.join(releaseDir, fileName);
    const { sha256, size } = await gzipFile(source, destination);
    assets.push({ target, source, fileName, path: destination, sha256, size });
  }
  const checksumsPath = path.join(releaseDir, CHECKSUMS_FILE);
  await writeAtomically(checksumsPath, formatChecksums(assets));

  const written = new Set(assets.map((asset) => asset.fileName));
  const prefix = `encoder-${version}-`;
  const stale = (await readdir(releaseDir))
    .filter((name) => name.startsWith(prefix) && name.endsWith('.gz') && !written.has(name))
    .sort();
  return { version, releaseDir, assets, checksumsPath, stale };
}

/** Gzips `from` into `to` (temporary file + rename), returning the SHA-256 and size of the .gz. */
async function gzipFile(from: string, to: string): Promise<{ sha256: string; size: number }> {
  const temp = temporaryName(to);
  const hash = createHash('sha256');
  let size = 0;
  try {
    await pipeline(
      createReadStream(from),
      createGzip({ level: zlibConstants.Z_DEFAULT_COMPRESSION }),
      async function* (chunks: AsyncIterable<Buffer>) {
        for await (const chunk of chunks) {
          hash.update(chunk);
          size += chunk.length;
          yield chunk;
        }
      },
      createWriteStream(temp, { flags: 'wx', mode: 0o644 }),
    );
    await rename(temp, to);
  } finally {
    await rm(temp, { force: true });
  }
  return { sha256: hash.digest('hex'), size };
}

async function writeAtomically(file: string, text: string): Promise<void> {
  const temp = temporaryName(file);
  try {
    await writeFile(temp, text, { flag: 'wx', mode: 0o644 });
    await rename(temp, file);
  } finally {
    await rm(temp, { force: true });
  }
}

function temporaryName(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}-${randomBytes(6).toString('hex')}.part`);
}

function formatSize(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${bytes} B`;
}

/** The command line; returns the exit code. */
export async function main(argv: string[], print: (line: string) => void = console.log): Promise<number> {
  const program = new Command()
    .name('release-assets')
    .description('Write the release files (one gzipped base binary per target, and SHA256SUMS) from built base runtimes.')
    .option('--runtime-dir <dir>', 'folder with <triple>/encoder per built target', 'dist/runtime')
    .option('--out <dir>', 'release root; files go to <out>/v<version>/', 'dist/release')
    .option('--version <version>', "version in the file names (default: package.json's)")
    .showHelpAfterError('(run with --help for usage)');
  program.parse(argv);
  const cli = program.opts<{ runtimeDir: string; out: string; version?: string }>();
  const result = await writeReleaseAssets({ runtimeDir: cli.runtimeDir, outDir: cli.out, version: cli.version });
  print(`Wrote release ${result.version} to ${result.releaseDir}:`);
  for (const asset of result.assets) print(`  ${asset.fileName.padEnd(48)} ${formatSize(asset.size)}`);
  print(`  ${CHECKSUMS_FILE}`);
  for (const name of result.stale) {
    print(`warning: ${name} is in ${result.releaseDir} but not in ${CHECKSUMS_FILE} (its runtime was not built this time); delete it or build that runtime.`);
  }
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      // Problems the user must fix: one line, no stack trace.
      if (isEncoderError(error)) console.error(`error: ${error.message}`);
      else console.error(error);
      process.exitCode = 1;
    },
  );
}
