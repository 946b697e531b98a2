/**
 * The trailing asset section of a model executable (docs/file-format.md, DESIGN decision 3), format version 2:
 *
 *   [base binary, unchanged] [header, HEADER_SIZE bytes] [manifest (UTF-8 JSON)] [asset] [asset] ... [footer, FOOTER_SIZE bytes]
 *
 * The section starts where the base binary's executable image ends (`executableEnd`). The footer at the end of
 * the file points back to the header; the header says how long the whole section is. So a model file whose tail
 * is cut off (no footer any more) is still recognised: its header sits at the executable's end and says the
 * section reaches beyond the file, and the manifest right after the header names the asset that was cut.
 *
 * `writeModelExecutable` builds such a file; `AssetSection.open` finds and checks the section of a file
 * (the runtime opens its own `process.execPath` at every start) and reads assets with positional reads.
 *
 * This module runs at every start-up of the executable: it imports node:fs and node:crypto only (plus the
 * dependency-free error classes and `executableEnd`, which is needed only when the footer is missing). The magic
 * bytes are built from numbers, never written as a string literal, so the bundled runtime inside a base binary
 * never contains them.
 */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, constants as fsConstants, fsyncSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { copyFile, open, rename, rm, stat } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, isEncoderError } from '../src/encoder/errors.ts';
import { executableEnd } from './executable-end.ts';

/** The format version this runtime writes and reads. */
export const FORMAT_VERSION = 2;

/** Size of the footer in bytes; the same in every format version. */
export const FOOTER_SIZE = 80;

/** Size of the section header in bytes (format version 2). */
export const HEADER_SIZE = 80;

/** First 8 bytes of the footer: 0x89, then the ASCII letters E N C O D E R. */
export const HEAD_MAGIC: Buffer = Buffer.from([0x89, 0x45, 0x4e, 0x43, 0x4f, 0x44, 0x45, 0x52]);

/** Last 8 bytes of the footer (the last 8 bytes of a model executable): the ASCII letters E N C A S S E T. */
export const TAIL_MAGIC: Buffer = Buffer.from([0x45, 0x4e, 0x43, 0x41, 0x53, 0x53, 0x45, 0x54]);

/** First 8 bytes of the section header (the first bytes after the base binary): 0x89, then E N C S E C T. */
export const HEADER_MAGIC: Buffer = Buffer.from([0x89, 0x45, 0x4e, 0x43, 0x53, 0x45, 0x43, 0x54]);

/**
 * Largest manifest, in bytes. Keeps header + manifest within 64 KiB, so the reader gets both with one read,
 * and the section's overhead (header + manifest + footer) within 64 KiB + 80 bytes.
 */
export const MAX_MANIFEST_SIZE = 64 * 1024 - HEADER_SIZE;

/**
 * When the base binary's format is not known (not ELF or Mach-O), how far from the end the reader looks for a
 * footer that is not at the very end (data appended after it, or a file cut inside its footer).
 */
export const TAIL_SCAN_SIZE = 64 * 1024;

/** Byte offsets of the footer's fields (docs/file-format.md, "Footer"). */
const FOOTER = {
  headMagic: 0,
  version: 8,
  reserved: 12,
  sectionStart: 16,
  manifestOffset: 24,
  manifestLength: 32,
  manifestSha256: 40,
  tailMagic: 72,
} as const;

/** Byte offsets of the section header's fields (docs/file-format.md, "Section header"). */
const HEADER = {
  magic: 0,
  version: 8,
  reserved: 12,
  sectionStart: 16,
  sectionLength: 24,
  manifestOffset: 32,
  manifestLength: 40,
  manifestSha256: 48,
} as const;

/** The sha256 of every asset while the manifest's size is worked out (same length as a real one). */
const PLACEHOLDER_SHA256 = '0'.repeat(64);

/** Names of the assets a model executable carries. */
export const ASSET_NAMES = ['model_weights', 'model_data', 'tokenizer', 'model_config', 'tokenizer_config', 'transform', 'preprocessor_config'] as const;
export type AssetName = (typeof ASSET_NAMES)[number];

/** One asset's place in the file. Offsets are absolute positions in the whole file. */
export interface AssetEntry {
  name: string;
  offset: number;
  length: number;
  /** SHA-256 of the asset's bytes, 64 lower-case hex digits. */
  sha256: string;
}

/** The model's metadata, as the build configuration gave it. Extra fields are kept. */
export interface ManifestModel {
  name: string;
  version: string;
  model_type: string;
  lua_libs: string[];
  [key: string]: unknown;
}

/** The manifest: UTF-8 JSON right after the section header, before the assets. */
export interface Manifest {
  format_version: number;
  /** Version of the runtime (the `encoder` program) that built the file. */
  runtime_version: string;
  /** Target triple of the base binary, e.g. `x86_64-unknown-linux-gnu`. */
  target: string;
  /** ISO 8601 time of the build. */
  created_at?: string;
  model: ManifestModel;
  assets: AssetEntry[];
}

/** What the caller of `writeModelExecutable` gives; format version and asset entries are filled in. */
export type ManifestFields = Omit<Manifest, 'format_version' | 'assets'>;

/** An asset to append: a file (streamed, never read whole) or bytes in memory. Exactly one of the two. */
export interface AssetSource {
  name: string;
  path?: string;
  data?: Uint8Array;
}

export interface WriteModelExecutableOptions {
  baseBinaryPath: string;
  outputPath: string;
  assets: AssetSource[];
  manifest: ManifestFields;
  /**
   * Called as bytes are written: `doneBytes` grows monotonically from the base binary's size to `totalBytes`
   * (base binary + all assets; header, manifest and footer, a few hundred bytes, are not counted).
   */
  onProgress?: (doneBytes: number, totalBytes: number) => void;
}

const COPY_CHUNK_SIZE = 4 * 1024 * 1024;

/**
 * Writes `outputPath` = base binary bytes (unchanged) + header + manifest + assets + footer, and returns the
 * manifest. Asset sizes are known before copying, so the layout (and the manifest's size) is fixed up front:
 * the assets are streamed to their final places first, then the manifest (now with their SHA-256s, the same
 * length as planned) and the header are written after the base binary, and the footer at the end. The file is
 * written under a temporary name in the output directory and renamed when complete, so a failure leaves no
 * output file (and an existing one untouched). The result is made executable (0o755).
 */
export async function writeModelExecutable(options: WriteModelExecutableOptions): Promise<Manifest> {
  const { baseBinaryPath, outputPath, assets, manifest: fields, onProgress } = options;
  checkAssetSources(assets);

  const baseStat = await stat(baseBinaryPath).catch((error: unknown) => {
    throw new ConfigError(`base binary not found: ${baseBinaryPath}`, { cause: error });
  });
  if (!baseStat.isFile()) throw new ConfigError(`base binary is not a file: ${baseBinaryPath}`);
  const outputStat = await stat(outputPath).catch(() => null);
  if (outputStat && outputStat.dev === baseStat.dev && outputStat.ino === baseStat.ino) {
    throw new ConfigError(`the output path is the base binary itself: ${outputPath}`);
  }
  if (outputStat?.isDirectory()) {
    throw new ConfigError(`the output path is a folder: ${outputPath}; give a file path, e.g. ${path.join(outputPath, 'model')}`);
  }
  const outputFolder = path.dirname(path.resolve(outputPath));
  if (!(await stat(outputFolder).catch(() => null))?.isDirectory()) {
    throw new ConfigError(`cannot write the output file ${outputPath}: its folder ${outputFolder} does not exist`);
  }
  await refuseBuiltModelAsBase(baseBinaryPath);

  const sizes: number[] = [];
  for (const asset of assets) sizes.push(asset.data ? asset.data.byteLength : await fileSizeOfAsset(asset));
  const assetBytes = sizes.reduce((sum, size) => sum + size, 0);

  const manifestFor = (dataStart: number, hashes: readonly string[]): Manifest => {
    let offset = dataStart;
    const entries = assets.map((asset, index) => {
      const entry: AssetEntry = { name: asset.name, offset, length: sizes[index], sha256: hashes[index] ?? PLACEHOLDER_SHA256 };
      offset += sizes[index];
      return entry;
    });
    return {
      format_version: FORMAT_VERSION,
      runtime_version: fields.runtime_version,
      target: fields.target,
      ...(fields.created_at === undefined ? {} : { created_at: fields.created_at }),
      model: fields.model,
      assets: entries,
    };
  };

  const temporaryPath = `${outputPath}.partial-${process.pid}-${randomBytes(6).toString('hex')}`;
  let output: FileHandle | null = null;
  try {
    await copyFile(baseBinaryPath, temporaryPath, fsConstants.COPYFILE_FICLONE);
    output = await open(temporaryPath, 'r+');
    const sectionStart = (await output.stat()).size;
    const manifestOffset = sectionStart + HEADER_SIZE;
    // The assets' offsets depend on the manifest's length, which depends on their digits: iterate to the fixed
    // point (the length never shrinks from one round to the next, so this ends, in two or three rounds).
    let manifestLength = 0;
    for (;;) {
      const length = manifestByteLength(manifestFor(manifestOffset + manifestLength, []));
      if (length === manifestLength) break;
      manifestLength = length;
    }
    const dataStart = manifestOffset + manifestLength;
    const footerStart = dataStart + assetBytes;
    const totalBytes = sectionStart + assetBytes;
    let position = dataStart;
    let done = sectionStart;
    onProgress?.(done, totalBytes);

    const hashes: string[] = [];
    const buffers = assets.some((asset) => asset.path !== undefined)
      ? [Buffer.allocUnsafe(COPY_CHUNK_SIZE), Buffer.allocUnsafe(COPY_CHUNK_SIZE)]
      : [];
    for (const [index, asset] of assets.entries()) {
      const hash = createHash('sha256');
      const offset = position;
      const report = (bytes: number) => {
        position += bytes;
        done += bytes;
        onProgress?.(done, totalBytes);
      };
      if (asset.data) {
        hash.update(asset.data);
        await writeFully(output, asset.data, position);
        report(asset.data.byteLength);
      } else {
        await appendFile(output, asset as AssetSource & { path: string }, position, hash, buffers, report);
      }
      if (position - offset !== sizes[index]) {
        throw new ConfigError(`asset ${asset.name}: ${asset.path} changed size while it was being copied`);
      }
      hashes.push(hash.digest('hex'));
    }

    const manifest = manifestFor(dataStart, hashes);
    const manifestBytes = Buffer.from(JSON.stringify(manifest), 'utf8');
    if (manifestBytes.length !== manifestLength) {
      throw new Error(`internal error: the manifest is ${manifestBytes.length} bytes, ${manifestLength} were planned`);
    }
    const manifestSha256 = createHash('sha256').update(manifestBytes).digest();
    const header = encodeHeader({
      version: FORMAT_VERSION,
      sectionStart,
      sectionLength: footerStart + FOOTER_SIZE - sectionStart,
      manifestOffset,
      manifestLength,
      manifestSha256,
    });
    const footer = encodeFooter({ version: FORMAT_VERSION, sectionStart, manifestOffset, manifestLength, manifestSha256 });
    await writeFully(output, Buffer.concat([header, manifestBytes]), sectionStart);
    await writeFully(output, footer, footerStart);
    await output.chmod(0o755);
    await output.close();
    output = null;
    await rename(temporaryPath, outputPath);
    return manifest;
  } catch (error) {
    await output?.close().catch(() => undefined);
    await rm(temporaryPath, { force: true });
    // A system error here is about the output (permissions, a read-only or full disk): the user's to fix.
    if (!isEncoderError(error) && typeof (error as NodeJS.ErrnoException).code === 'string') {
      throw new ConfigError(`cannot write the output file ${outputPath}: ${(error as Error).message}`, { cause: error });
    }
    throw error;
  }
}

/** The manifest's size in bytes; over the limit is an error. */
function manifestByteLength(manifest: Manifest): number {
  const length = Buffer.byteLength(JSON.stringify(manifest), 'utf8');
  if (length > MAX_MANIFEST_SIZE) {
    throw new ConfigError(`asset section manifest is ${length} bytes; at most ${MAX_MANIFEST_SIZE} are allowed`);
  }
  return length;
}

function checkAssetSources(assets: AssetSource[]): void {
  const seen = new Set<string>();
  for (const asset of assets) {
    if (typeof asset.name !== 'string' || !/^[a-z0-9_]+$/.test(asset.name)) {
      throw new ConfigError(`invalid asset name ${JSON.stringify(asset.name)}: use lower-case letters, digits and "_"`);
    }
    if (seen.has(asset.name)) throw new ConfigError(`asset ${asset.name} is listed twice`);
    seen.add(asset.name);
    if ((asset.path === undefined) === (asset.data === undefined)) {
      throw new ConfigError(`asset ${asset.name}: give either a path or data`);
    }
  }
}

async function refuseBuiltModelAsBase(baseBinaryPath: string): Promise<void> {
  let section: AssetSection | null;
  try {
    section = await AssetSection.open(baseBinaryPath);
  } catch (error) {
    if (error instanceof ConfigError) {
      throw new ConfigError(`base binary ${baseBinaryPath} is not a base runtime: ${error.message}`, { cause: error });
    }
    throw error;
  }
  if (section) {
    await section.close();
    throw new ConfigError(
      `base binary already contains an asset section (it is a built model, not a base runtime): ${baseBinaryPath}`,
    );
  }
}

async function fileSizeOfAsset(asset: AssetSource): Promise<number> {
  const info = await stat(asset.path as string).catch((error: unknown) => {
    throw new ConfigError(`asset ${asset.name}: file not found: ${asset.path}`, { cause: error });
  });
  if (!info.isFile()) throw new ConfigError(`asset ${asset.name}: not a file: ${asset.path}`);
  return info.size;
}

/**
 * Copies a file into `output` at `position`, hashing it on the way. Two buffers: the next chunk is read
 * while the current one is written and hashed, so memory stays at 2 × COPY_CHUNK_SIZE.
 */
async function appendFile(
  output: FileHandle,
  asset: AssetSource & { path: string },
  position: number,
  hash: ReturnType<typeof createHash>,
  buffers: Buffer[],
  report: (bytes: number) => void,
): Promise<void> {
  const input = await open(asset.path, 'r').catch((error: unknown) => {
    throw new ConfigError(`asset ${asset.name}: cannot read ${asset.path}: ${(error as Error).message}`, { cause: error });
  });
  try {
    let [current, spare] = buffers;
    let pending = input.read(current, 0, current.length, null);
    for (;;) {
      const { bytesRead } = await pending;
      if (bytesRead === 0) break;
      const chunk = current.subarray(0, bytesRead);
      pending = input.read(spare, 0, spare.length, null);
      const written = writeFully(output, chunk, position);
      hash.update(chunk);
      await written;
      position += bytesRead;
      report(bytesRead);
      [current, spare] = [spare, current];
    }
  } finally {
    await input.close();
  }
}

async function writeFully(handle: FileHandle, data: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < data.byteLength) {
    const { bytesWritten } = await handle.write(data, done, data.byteLength - done, position + done);
    done += bytesWritten;
  }
}

/** The footer's fields (docs/file-format.md, "Footer"). */
export interface FooterFields {
  version: number;
  sectionStart: number;
  manifestOffset: number;
  manifestLength: number;
  manifestSha256: Uint8Array;
}

/** The section header's fields (docs/file-format.md, "Section header"). */
export interface HeaderFields extends FooterFields {
  /** Bytes from the header's first byte to the footer's last: header + manifest + assets + footer. */
  sectionLength: number;
}

/** The FOOTER_SIZE bytes of a footer. */
export function encodeFooter(fields: FooterFields): Buffer {
  const footer = Buffer.alloc(FOOTER_SIZE);
  HEAD_MAGIC.copy(footer, FOOTER.headMagic);
  footer.writeUInt32LE(fields.version, FOOTER.version);
  footer.writeUInt32LE(0, FOOTER.reserved);
  footer.writeBigUInt64LE(BigInt(fields.sectionStart), FOOTER.sectionStart);
  footer.writeBigUInt64LE(BigInt(fields.manifestOffset), FOOTER.manifestOffset);
  footer.writeBigUInt64LE(BigInt(fields.manifestLength), FOOTER.manifestLength);
  Buffer.from(fields.manifestSha256).copy(footer, FOOTER.manifestSha256);
  TAIL_MAGIC.copy(footer, FOOTER.tailMagic);
  return footer;
}

/** The HEADER_SIZE bytes of a section header. */
export function encodeHeader(fields: HeaderFields): Buffer {
  const header = Buffer.alloc(HEADER_SIZE);
  HEADER_MAGIC.copy(header, HEADER.magic);
  header.writeUInt32LE(fields.version, HEADER.version);
  header.writeUInt32LE(0, HEADER.reserved);
  header.writeBigUInt64LE(BigInt(fields.sectionStart), HEADER.sectionStart);
  header.writeBigUInt64LE(BigInt(fields.sectionLength), HEADER.sectionLength);
  header.writeBigUInt64LE(BigInt(fields.manifestOffset), HEADER.manifestOffset);
  header.writeBigUInt64LE(BigInt(fields.manifestLength), HEADER.manifestLength);
  Buffer.from(fields.manifestSha256).copy(header, HEADER.manifestSha256);
  return header;
}

/**
 * The asset section of a file, open for reading. Holds the file open until `close()`.
 */
export class AssetSection {
  readonly file: string;
  readonly manifest: Manifest;
  /** Where the section starts: the length of the base binary (the position of the section header). */
  readonly sectionStart: number;
  readonly fileSize: number;
  readonly #handle: FileHandle;
  readonly #entries: Map<string, AssetEntry>;
  #closed = false;

  private constructor(file: string, handle: FileHandle, fileSize: number, sectionStart: number, manifest: Manifest) {
    this.file = file;
    this.#handle = handle;
    this.fileSize = fileSize;
    this.sectionStart = sectionStart;
    this.manifest = manifest;
    this.#entries = new Map(manifest.assets.map((entry) => [entry.name, entry]));
  }

  /**
   * Opens the asset section of `file`: null when the file has none (a plain base runtime), a ConfigError when
   * it has one that is truncated, corrupt, followed by appended data or of a newer format, or when unknown
   * data follows the executable. Normally two small reads: the footer, then header + manifest. Only without a
   * footer at the end are the executable's own headers read (`executableEnd`) to find the section header.
   * Asset bytes are read only by `read`.
   */
  static async open(file: string): Promise<AssetSection | null> {
    const handle = await open(file, 'r');
    try {
      const fileSize = (await handle.stat()).size;
      const footer = fileSize >= FOOTER_SIZE ? await readAt(handle, fileSize - FOOTER_SIZE, FOOTER_SIZE) : null;
      if (footer !== null && isFooter(footer)) {
        const { sectionStart, manifest } = await readWithFooter(handle, fileSize, footer);
        return new AssetSection(file, handle, fileSize, sectionStart, manifest);
      }
      await explainMissingFooter(handle, fileSize, footer);
      await handle.close();
      return null;
    } catch (error) {
      await handle.close().catch(() => undefined);
      throw error;
    }
  }

  /** Whether the section has an asset of this name. */
  has(name: string): boolean {
    return this.#entries.has(name);
  }

  /** The manifest entry of an asset, or undefined. */
  entry(name: string): AssetEntry | undefined {
    return this.#entries.get(name);
  }

  /** An asset's bytes, read at its offset and checked against its SHA-256. */
  async read(name: string): Promise<Buffer> {
    const entry = this.#readable(name);
    const bytes = await this.#readRange(entry, 0, entry.length);
    if (createHash('sha256').update(bytes).digest('hex') !== entry.sha256) {
      throw new ConfigError(`asset ${name}: checksum mismatch`);
    }
    return bytes;
  }

  /**
   * Copies an asset into the new file `file`, a piece at a time, checking its SHA-256 on the way, and makes it durable
   * (fsync) before returning; `onPiece` is called after each piece (a long extraction keeps its cache lock fresh).
   * Synchronous: it runs at start-up, in the extraction cache's staging folder (src/encoder/cache/extracted-entry.ts).
   * A mismatch is the ConfigError `read` gives, and removes the file.
   */
  extractSync(name: string, file: string, onPiece?: () => void): void {
    const entry = this.#readable(name);
    const hash = createHash('sha256');
    const output = openSync(file, 'wx', 0o644);
    let whole = false;
    try {
      const piece = Buffer.allocUnsafe(Math.min(EXTRACT_PIECE_BYTES, entry.length));
      for (let done = 0; done < entry.length; ) {
        const length = Math.min(piece.length, entry.length - done);
        for (let filled = 0; filled < length; ) {
          const read = readSync(this.#handle.fd, piece, filled, length - filled, entry.offset + done + filled);
          if (read === 0) throw new ConfigError(`file is truncated: asset ${entry.name} ends at byte ${entry.offset + entry.length}, file has ${entry.offset + done + filled}`);
          filled += read;
        }
        hash.update(piece.subarray(0, length));
        for (let written = 0; written < length; ) written += writeSync(output, piece, written, length - written, done + written);
        done += length;
        onPiece?.();
      }
      if (hash.digest('hex') !== entry.sha256) throw new ConfigError(`asset ${name}: checksum mismatch`);
      fsyncSync(output);
      whole = true;
    } finally {
      closeSync(output);
      if (!whole) rmSync(file, { force: true });
    }
  }

  #readable(name: string): AssetEntry {
    const entry = this.#entries.get(name);
    if (!entry) throw new ConfigError(`asset section has no asset "${name}"`);
    if (this.#closed) throw new ConfigError(`asset ${name}: the asset section of ${this.file} is closed`);
    return entry;
  }

  /** `length` bytes of an asset from `start` on; a file that ends before them is a ConfigError. */
  async #readRange(entry: AssetEntry, start: number, length: number): Promise<Buffer> {
    return readAt(this.#handle, entry.offset + start, length).catch((error: unknown) => {
      if (error instanceof ShortReadError) {
        throw new ConfigError(`file is truncated: asset ${entry.name} ends at byte ${entry.offset + entry.length}, file has ${error.fileEnd}`);
      }
      throw error;
    });
  }

  /** An asset's bytes as UTF-8 text (checked like `read`). */
  async readText(name: string): Promise<string> {
    const bytes = await this.read(name);
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch (error) {
      throw new ConfigError(`asset ${name} is not valid UTF-8 text`, { cause: error });
    }
  }

  /** Closes the file. Reading afterwards is an error; closing twice is harmless. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#handle.close();
  }
}

/** The file ended before `length` bytes could be read at a position. */
class ShortReadError extends Error {
  readonly fileEnd: number;
  constructor(fileEnd: number) {
    super(`file ends at byte ${fileEnd}`);
    this.fileEnd = fileEnd;
  }
}

/** How much of an asset `extract` holds at a time. */
const EXTRACT_PIECE_BYTES = 8 * 2 ** 20;

async function readAt(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(buffer, done, length - done, position + done);
    if (bytesRead === 0) throw new ShortReadError(position + done);
    done += bytesRead;
  }
  return buffer;
}

const corrupt = (part: 'footer' | 'header', what: string) => new ConfigError(`asset section ${part} is corrupt: ${what}`);
const truncated = (what: string, end: number, fileSize: number) =>
  new ConfigError(`file is truncated: ${what} ends at byte ${end}, file has ${fileSize}`);

/** FOOTER_SIZE bytes that start with the head magic and end with the tail magic. */
function isFooter(bytes: Buffer): boolean {
  return (
    bytes.length === FOOTER_SIZE &&
    bytes.subarray(FOOTER.headMagic, FOOTER.headMagic + HEAD_MAGIC.length).equals(HEAD_MAGIC) &&
    bytes.subarray(FOOTER.tailMagic).equals(TAIL_MAGIC)
  );
}

function checkVersion(version: number): void {
  if (version !== FORMAT_VERSION) {
    throw new ConfigError(`unsupported asset section format version ${version} (this runtime reads ${FORMAT_VERSION})`);
  }
}

function readU64(bytes: Buffer, offset: number, part: 'footer' | 'header', field: string): number {
  const value = bytes.readBigUInt64LE(offset);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw corrupt(part, `${field} ${value} is out of range`);
  return Number(value);
}

/** The footer's fields, version checked. */
function parseFooter(footer: Buffer): FooterFields {
  const version = footer.readUInt32LE(FOOTER.version);
  checkVersion(version);
  const fields: FooterFields = {
    version,
    sectionStart: readU64(footer, FOOTER.sectionStart, 'footer', 'section start'),
    manifestOffset: readU64(footer, FOOTER.manifestOffset, 'footer', 'manifest offset'),
    manifestLength: readU64(footer, FOOTER.manifestLength, 'footer', 'manifest length'),
    manifestSha256: Buffer.from(footer.subarray(FOOTER.manifestSha256, FOOTER.manifestSha256 + 32)),
  };
  if (fields.manifestLength > MAX_MANIFEST_SIZE) {
    throw corrupt('footer', `manifest length ${fields.manifestLength} is over the limit of ${MAX_MANIFEST_SIZE} bytes`);
  }
  return fields;
}

/**
 * A section header's fields (`bytes` starts with HEADER_MAGIC and is HEADER_SIZE long; `position` is where it
 * was found), checked on their own: version, the header's own position, the manifest right after the header,
 * and a section long enough to hold header, manifest and footer.
 */
function parseHeader(bytes: Buffer, position: number): HeaderFields {
  const version = bytes.readUInt32LE(HEADER.version);
  checkVersion(version);
  const fields: HeaderFields = {
    version,
    sectionStart: readU64(bytes, HEADER.sectionStart, 'header', 'section start'),
    sectionLength: readU64(bytes, HEADER.sectionLength, 'header', 'section length'),
    manifestOffset: readU64(bytes, HEADER.manifestOffset, 'header', 'manifest offset'),
    manifestLength: readU64(bytes, HEADER.manifestLength, 'header', 'manifest length'),
    manifestSha256: Buffer.from(bytes.subarray(HEADER.manifestSha256, HEADER.manifestSha256 + 32)),
  };
  if (fields.sectionStart !== position) {
    throw corrupt('header', `it says the section starts at byte ${fields.sectionStart}, but it is at byte ${position}`);
  }
  if (fields.manifestOffset !== position + HEADER_SIZE) {
    throw corrupt('header', `the manifest starts at byte ${fields.manifestOffset}, not right after the header (byte ${position + HEADER_SIZE})`);
  }
  if (fields.manifestLength > MAX_MANIFEST_SIZE) {
    throw corrupt('header', `manifest length ${fields.manifestLength} is over the limit of ${MAX_MANIFEST_SIZE} bytes`);
  }
  const minimum = HEADER_SIZE + fields.manifestLength + FOOTER_SIZE;
  if (fields.sectionLength < minimum) {
    throw corrupt('header', `section length ${fields.sectionLength} is less than its header, manifest and footer (${minimum} bytes)`);
  }
  if (!Number.isSafeInteger(position + fields.sectionLength)) throw corrupt('header', `section length ${fields.sectionLength} is out of range`);
  return fields;
}

/**
 * The normal case: a footer at the end of the file. Reads header + manifest with one read at the section start
 * the footer gives, cross-checks header and footer, and checks the manifest.
 */
async function readWithFooter(handle: FileHandle, fileSize: number, footerBytes: Buffer): Promise<{ sectionStart: number; manifest: Manifest }> {
  const footer = parseFooter(footerBytes);
  const footerStart = fileSize - FOOTER_SIZE;
  const { sectionStart } = footer;
  if (sectionStart + HEADER_SIZE > footerStart) {
    throw corrupt('footer', `the section starts at byte ${sectionStart}, less than a section header before the footer (byte ${footerStart})`);
  }
  const bytes = await readAt(handle, sectionStart, Math.min(HEADER_SIZE + footer.manifestLength, footerStart - sectionStart));
  if (!bytes.subarray(0, HEADER_MAGIC.length).equals(HEADER_MAGIC)) {
    throw corrupt('footer', `no section header at byte ${sectionStart}, where the footer says the section starts`);
  }
  const header = parseHeader(bytes.subarray(0, HEADER_SIZE), sectionStart);
  if (
    header.manifestOffset !== footer.manifestOffset ||
    header.manifestLength !== footer.manifestLength ||
    !Buffer.from(header.manifestSha256).equals(footer.manifestSha256)
  ) {
    throw corrupt('footer', `its manifest offset, length or checksum differs from the section header's (at byte ${sectionStart})`);
  }
  const sectionEnd = sectionStart + header.sectionLength;
  // Bytes missing (or added) between header and footer.
  if (sectionEnd > fileSize) throw truncated('asset section', sectionEnd, fileSize);
  if (sectionEnd < fileSize) {
    throw corrupt('header', `the section ends at byte ${sectionEnd}, but its footer ends at the end of the file (byte ${fileSize})`);
  }
  // parseHeader checked that header + manifest + footer fit in the section, so `bytes` holds the whole manifest.
  const manifestBytes = bytes.subarray(HEADER_SIZE, HEADER_SIZE + header.manifestLength);
  if (!createHash('sha256').update(manifestBytes).digest().equals(header.manifestSha256)) {
    throw new ConfigError('asset section manifest: checksum mismatch');
  }
  const manifestEnd = header.manifestOffset + header.manifestLength;
  return { sectionStart, manifest: parseManifest(manifestBytes, { manifestEnd, footerStart, fileSize }) };
}

/**
 * There is no valid footer at the end of the file (`footer`: its last FOOTER_SIZE bytes, null when shorter).
 * Returns when the file has no asset section (a plain base runtime); throws a ConfigError that names the problem
 * when it has a damaged, truncated or hidden one, or unknown data after the executable.
 */
async function explainMissingFooter(handle: FileHandle, fileSize: number, footer: Buffer | null): Promise<void> {
  const end = await executableEnd(handle);
  if (end === null) {
    // Not an ELF or Mach-O file: where its section would start is unknown. Only a footer near the end can be seen.
    await scanTailForFooter(handle, fileSize);
    if (footer !== null && footer.subarray(FOOTER.tailMagic).equals(TAIL_MAGIC)) {
      throw corrupt('footer', `no footer magic at byte ${fileSize - FOOTER_SIZE}`);
    }
    return;
  }
  if (end === fileSize) return;
  if (end > fileSize) throw truncated('the executable', end, fileSize);

  const headerBytes = await readAt(handle, end, Math.min(HEADER_SIZE, fileSize - end));
  const magic = headerBytes.subarray(0, HEADER_MAGIC.length);
  if (!magic.equals(HEADER_MAGIC.subarray(0, magic.length))) {
    await scanTailForFooter(handle, fileSize);
    throw new ConfigError(`not a model executable: ${fileSize - end} bytes of unknown data after the executable`);
  }
  if (headerBytes.length < HEADER_SIZE) throw truncated('asset section header', end + HEADER_SIZE, fileSize);
  const header = parseHeader(headerBytes, end);
  const sectionEnd = end + header.sectionLength;
  const footerStart = sectionEnd - FOOTER_SIZE;
  if (sectionEnd < fileSize) {
    // The section is complete: is its footer where the header puts it, with data after it?
    if (isFooter(await readAt(handle, footerStart, FOOTER_SIZE))) {
      throw new ConfigError(`no asset section footer at the end of the file (${fileSize - sectionEnd} bytes after the last one: appended data?)`);
    }
    throw corrupt('footer', `no footer magic at byte ${footerStart}`);
  }
  if (sectionEnd === fileSize) throw corrupt('footer', `no footer magic at byte ${footerStart}`);

  // The file ends inside the section. Say which part is cut: the manifest, an asset (named by the manifest), or the footer.
  const manifestEnd = header.manifestOffset + header.manifestLength;
  if (manifestEnd > fileSize) throw truncated('manifest', manifestEnd, fileSize);
  const whole = truncated('asset section', sectionEnd, fileSize);
  const manifestBytes = await readAt(handle, header.manifestOffset, header.manifestLength);
  if (!createHash('sha256').update(manifestBytes).digest().equals(header.manifestSha256)) throw whole;
  try {
    parseManifest(manifestBytes, { manifestEnd, footerStart, fileSize });
  } catch (error) {
    if (error instanceof ConfigError && error.message.startsWith('file is truncated: ')) throw error;
    throw whole;
  }
  throw truncated('asset section footer', sectionEnd, fileSize);
}

/**
 * Looks for a footer's head magic in the file's last TAIL_SCAN_SIZE bytes: a footer cut short, or one followed
 * by appended data, is reported instead of treating the file as a base runtime. Returns when there is none.
 */
async function scanTailForFooter(handle: FileHandle, fileSize: number): Promise<void> {
  const tailStart = Math.max(0, fileSize - TAIL_SCAN_SIZE);
  const tail = await readAt(handle, tailStart, fileSize - tailStart);
  for (let at = tail.lastIndexOf(HEAD_MAGIC); at >= 0; at = at > 0 ? tail.lastIndexOf(HEAD_MAGIC, at - 1) : -1) {
    const available = tail.length - at;
    if (available < FOOTER_SIZE) {
      throw new ConfigError(
        `file is truncated: the asset section footer is incomplete (${available} of ${FOOTER_SIZE} bytes at byte ${tailStart + at})`,
      );
    }
    const candidate = tail.subarray(at, at + FOOTER_SIZE);
    if (candidate.subarray(FOOTER.tailMagic).equals(TAIL_MAGIC)) {
      const after = available - FOOTER_SIZE;
      throw new ConfigError(`no asset section footer at the end of the file (${after} bytes after the last one: appended data?)`);
    }
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/**
 * Parses and checks the manifest: its shape; that no asset runs past the end of the file (a truncated file:
 * the first asset, by offset, that does is named); that every asset lies between the manifest and the footer.
 */
function parseManifest(bytes: Buffer, where: { manifestEnd: number; footerStart: number; fileSize: number }): Manifest {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (error) {
    throw new ConfigError(`asset section manifest: not valid UTF-8 JSON: ${(error as Error).message}`, { cause: error });
  }
  const fail = (what: string): never => {
    throw new ConfigError(`asset section manifest: ${what}`);
  };
  if (!isObject(value)) return fail('not a JSON object');
  if (value.format_version !== FORMAT_VERSION) {
    fail(`format_version is ${JSON.stringify(value.format_version)}, the footer says ${FORMAT_VERSION}`);
  }
  for (const key of ['runtime_version', 'target'] as const) {
    if (typeof value[key] !== 'string') fail(`${key} must be a string`);
  }
  if (value.created_at !== undefined && typeof value.created_at !== 'string') fail('created_at must be a string');
  const model = value.model;
  if (!isObject(model)) return fail('model must be an object');
  for (const key of ['name', 'version', 'model_type'] as const) {
    if (typeof model[key] !== 'string') fail(`model.${key} must be a string`);
  }
  if (!Array.isArray(model.lua_libs) || !model.lua_libs.every((lib) => typeof lib === 'string')) {
    fail('model.lua_libs must be a list of strings');
  }
  if (!Array.isArray(value.assets)) return fail('assets must be a list');
  const names = new Set<string>();
  const entries: AssetEntry[] = [];
  for (const [index, entry] of (value.assets as unknown[]).entries()) {
    if (
      !isObject(entry) ||
      typeof entry.name !== 'string' ||
      !Number.isSafeInteger(entry.offset) ||
      !Number.isSafeInteger(entry.length) ||
      (entry.offset as number) < 0 ||
      (entry.length as number) < 0 ||
      !Number.isSafeInteger((entry.offset as number) + (entry.length as number)) ||
      typeof entry.sha256 !== 'string' ||
      !SHA256_HEX.test(entry.sha256)
    ) {
      return fail(`assets[${index}] must have a name, a non-negative integer offset and length, and a hex sha256`);
    }
    if (names.has(entry.name)) fail(`asset ${entry.name} is listed twice`);
    names.add(entry.name);
    entries.push(entry as unknown as AssetEntry);
  }
  const cut = entries
    .filter((entry) => entry.offset + entry.length > where.fileSize)
    .sort((a, b) => a.offset - b.offset)[0];
  if (cut) throw truncated(`asset ${cut.name}`, cut.offset + cut.length, where.fileSize);
  for (const { name, offset, length } of entries) {
    if (offset < where.manifestEnd) fail(`asset ${name} starts at byte ${offset}, before the end of the manifest (byte ${where.manifestEnd})`);
    if (offset + length > where.footerStart) fail(`asset ${name} ends at byte ${offset + length}, inside the footer (byte ${where.footerStart})`);
  }
  return value as unknown as Manifest;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
