import { createHash, randomBytes } from 'node:crypto';
import {
  appendFileSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  AssetSection,
  FOOTER_SIZE,
  FORMAT_VERSION,
  HEADER_SIZE,
  MAX_MANIFEST_SIZE,
  TAIL_SCAN_SIZE,
  writeModelExecutable,
  type AssetSource,
  type Manifest,
  type ManifestFields,
} from '../../runtime/asset-section.ts';
import { ConfigError } from '../../src/encoder/errors.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'asset-section-'));
  return () => rmSync(dir, { recursive: true, force: true });
});

const FIELDS: ManifestFields = {
  runtime_version: '0.1.0',
  target: 'x86_64-unknown-linux-gnu',
  created_at: '2025-01-02T03:04:05.000Z',
  model: { name: 'tiny', version: '1.2.3', model_type: 'embedding', lua_libs: ['table', 'math'], description: 'kept as is' },
};

/** The documented layout, written out independently of the implementation (docs/file-format.md). */
const DOC_HEAD_MAGIC = Buffer.from([0x89, ...Buffer.from('ENCODER', 'ascii')]);
const DOC_TAIL_MAGIC = Buffer.from('ENCASSET', 'ascii');
const DOC_HEADER_MAGIC = Buffer.from([0x89, ...Buffer.from('ENCSECT', 'ascii')]);

/** A small real executable (ELF on Linux, Mach-O on macOS): its headers say where it ends. */
const REAL_EXECUTABLE = ['/bin/true', '/usr/bin/true'].find((file) => existsSync(file)) as string;

interface Fixture {
  base: Buffer;
  basePath: string;
  outputPath: string;
  contents: Record<string, Buffer>;
  assets: AssetSource[];
}

/**
 * A base binary and five assets: three files, two in memory. The base is a copy of a real executable, unless
 * `unknownBase` asks for random bytes (a format the reader cannot find the end of).
 */
function fixture(options: { weightsSize?: number; unknownBase?: boolean; baseSize?: number } = {}): Fixture {
  const base = options.unknownBase ? randomBytes(options.baseSize ?? 5003) : readFileSync(REAL_EXECUTABLE);
  const basePath = path.join(dir, 'base-runtime');
  writeFileSync(basePath, base);
  const contents: Record<string, Buffer> = {
    model_weights: randomBytes(options.weightsSize ?? 100_001),
    tokenizer: Buffer.from(JSON.stringify({ model: { vocab: { '[PAD]': 0, héllo: 1 } } })),
    model_config: Buffer.from('{"id2label":{"0":"NEG","1":"POS"}}'),
    tokenizer_config: Buffer.from('{"model_max_length":128}'),
    transform: Buffer.from('return output -- ünïcode'),
  };
  const files = ['model_weights', 'tokenizer', 'model_config'];
  for (const name of files) writeFileSync(path.join(dir, `${name}.src`), contents[name]);
  const assets: AssetSource[] = [
    ...files.map((name) => ({ name, path: path.join(dir, `${name}.src`) })),
    { name: 'tokenizer_config', data: contents.tokenizer_config },
    { name: 'transform', data: contents.transform },
  ];
  return { base, basePath, outputPath: path.join(dir, 'model'), contents, assets };
}

async function build(f: Fixture, extra: Partial<Parameters<typeof writeModelExecutable>[0]> = {}): Promise<Manifest> {
  return writeModelExecutable({ baseBinaryPath: f.basePath, outputPath: f.outputPath, assets: f.assets, manifest: FIELDS, ...extra });
}

async function openSection(file: string): Promise<AssetSection> {
  const section = await AssetSection.open(file);
  if (!section) throw new Error(`no asset section in ${file}`);
  return section;
}

async function openError(file: string): Promise<ConfigError> {
  const error = await AssetSection.open(file).then(
    (section) => {
      void section?.close();
      return new Error(`expected an error, got ${section ? 'a section' : 'null'}`);
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConfigError);
  return error as ConfigError;
}

function flipByte(file: string, position: number): void {
  const bytes = readFileSync(file);
  bytes[position] ^= 0xff;
  writeFileSync(file, bytes);
}

/** The section header's fields, read at the documented offsets. */
function docHeader(file: Buffer, at: number) {
  return {
    magic: file.subarray(at, at + 8),
    version: file.readUInt32LE(at + 8),
    reserved: file.readUInt32LE(at + 12),
    sectionStart: Number(file.readBigUInt64LE(at + 16)),
    sectionLength: Number(file.readBigUInt64LE(at + 24)),
    manifestOffset: Number(file.readBigUInt64LE(at + 32)),
    manifestLength: Number(file.readBigUInt64LE(at + 40)),
    manifestSha256: file.subarray(at + 48, at + 80),
  };
}

/**
 * Writes `base + header + manifest + payload + footer` by hand, following the documented layout byte by byte.
 * The manifest is given the position where the payload starts; its JSON is padded with spaces to
 * `manifestArea` bytes so that this position does not depend on its length.
 */
function handMadeFile(
  file: string,
  options: {
    base?: Buffer;
    payload?: Buffer;
    manifest: (dataStart: number) => unknown;
    manifestArea?: number;
    version?: number;
  },
): { manifestBytes: Buffer; size: number; dataStart: number } {
  const base = options.base ?? Buffer.from('#!/fake base runtime\n');
  const payload = options.payload ?? Buffer.alloc(0);
  const area = options.manifestArea ?? 1024;
  const manifestOffset = base.length + 80;
  const manifest = options.manifest(manifestOffset + area);
  const manifestBytes = Buffer.isBuffer(manifest)
    ? manifest
    : Buffer.from(JSON.stringify(manifest).padEnd(area, ' '));
  const dataStart = manifestOffset + manifestBytes.length;
  const sectionLength = 80 + manifestBytes.length + payload.length + 80;
  const sha = createHash('sha256').update(manifestBytes).digest();
  const header = Buffer.alloc(80);
  DOC_HEADER_MAGIC.copy(header, 0);
  header.writeUInt32LE(options.version ?? 2, 8);
  header.writeBigUInt64LE(BigInt(base.length), 16);
  header.writeBigUInt64LE(BigInt(sectionLength), 24);
  header.writeBigUInt64LE(BigInt(manifestOffset), 32);
  header.writeBigUInt64LE(BigInt(manifestBytes.length), 40);
  sha.copy(header, 48);
  const footer = Buffer.alloc(80);
  DOC_HEAD_MAGIC.copy(footer, 0);
  footer.writeUInt32LE(options.version ?? 2, 8);
  footer.writeBigUInt64LE(BigInt(base.length), 16);
  footer.writeBigUInt64LE(BigInt(manifestOffset), 24);
  footer.writeBigUInt64LE(BigInt(manifestBytes.length), 32);
  sha.copy(footer, 40);
  DOC_TAIL_MAGIC.copy(footer, 72);
  const whole = Buffer.concat([base, header, manifestBytes, payload, footer]);
  writeFileSync(file, whole);
  return { manifestBytes, size: whole.length, dataStart };
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

describe('writing and reading a model executable', () => {
  it('round-trips every asset and the manifest, leaving the base binary byte-identical at the front', async () => {
    const f = fixture();
    const written = await build(f);
    const file = readFileSync(f.outputPath);
    expect(file.subarray(0, f.base.length).equals(f.base)).toBe(true);

    const section = await openSection(f.outputPath);
    try {
      expect(section.sectionStart).toBe(f.base.length);
      expect(section.fileSize).toBe(file.length);
      expect(section.manifest).toEqual(written);
      expect(section.manifest).toMatchObject({
        format_version: FORMAT_VERSION,
        runtime_version: '0.1.0',
        target: 'x86_64-unknown-linux-gnu',
        created_at: '2025-01-02T03:04:05.000Z',
        model: { name: 'tiny', version: '1.2.3', model_type: 'embedding', lua_libs: ['table', 'math'], description: 'kept as is' },
      });
      expect(section.manifest.assets.map((a) => a.name)).toEqual(f.assets.map((a) => a.name));
      for (const [name, bytes] of Object.entries(f.contents)) {
        expect(section.has(name)).toBe(true);
        expect((await section.read(name)).equals(bytes)).toBe(true);
        expect(section.entry(name)).toMatchObject({ length: bytes.length, sha256: sha256(bytes) });
      }
      expect(await section.readText('transform')).toBe('return output -- ünïcode');
      expect(section.has('vocab')).toBe(false);
    } finally {
      await section.close();
    }
  });

  it('writes header, manifest, assets back to back, then the footer, as documented', async () => {
    const f = fixture();
    const manifest = await build(f);
    const file = readFileSync(f.outputPath);
    expect(FORMAT_VERSION).toBe(2);
    expect(HEADER_SIZE).toBe(80);
    expect(FOOTER_SIZE).toBe(80);

    const header = docHeader(file, f.base.length);
    expect(header.magic.equals(DOC_HEADER_MAGIC)).toBe(true);
    expect(header.version).toBe(2);
    expect(header.reserved).toBe(0);
    expect(header.sectionStart).toBe(f.base.length);
    expect(header.sectionStart + header.sectionLength).toBe(file.length);
    expect(header.manifestOffset).toBe(f.base.length + 80);
    const manifestBytes = file.subarray(header.manifestOffset, header.manifestOffset + header.manifestLength);
    expect(header.manifestSha256.equals(createHash('sha256').update(manifestBytes).digest())).toBe(true);
    expect(manifestBytes.toString('utf8')).toBe(JSON.stringify(manifest)); // no whitespace, no padding
    expect(JSON.parse(manifestBytes.toString('utf8'))).toEqual(manifest);

    let offset = header.manifestOffset + header.manifestLength;
    for (const entry of manifest.assets) {
      expect(entry.offset).toBe(offset);
      expect(file.subarray(entry.offset, entry.offset + entry.length).equals(f.contents[entry.name])).toBe(true);
      offset += entry.length;
    }

    const footer = file.subarray(file.length - 80);
    expect(offset).toBe(file.length - 80);
    expect(footer.subarray(0, 8).equals(DOC_HEAD_MAGIC)).toBe(true);
    expect(footer.readUInt32LE(8)).toBe(2);
    expect(footer.readUInt32LE(12)).toBe(0);
    expect(footer.readBigUInt64LE(16)).toBe(BigInt(f.base.length));
    expect(footer.readBigUInt64LE(24)).toBe(BigInt(header.manifestOffset));
    expect(footer.readBigUInt64LE(32)).toBe(BigInt(header.manifestLength));
    expect(footer.subarray(40, 72).equals(header.manifestSha256)).toBe(true);
    expect(footer.subarray(72, 80).equals(DOC_TAIL_MAGIC)).toBe(true);
  });

  it('gets the manifest length right when asset offsets gain a digit', async () => {
    // The manifest sits before the assets, so their offsets depend on its length. Slide the base size, byte by
    // byte, across the point where the first asset's offset reaches 100 000: every layout must still be exact.
    const f = fixture({ weightsSize: 1000, unknownBase: true, baseSize: 1 });
    await build(f);
    const shortLength = docHeader(readFileSync(f.outputPath), 1).manifestLength;
    const crossing = 100_000 - 80 - shortLength;
    const lengths = new Set<number>();
    for (let baseSize = crossing - 12; baseSize <= crossing + 3; baseSize++) {
      writeFileSync(f.basePath, randomBytes(baseSize));
      const manifest = await build(f);
      const file = readFileSync(f.outputPath);
      const header = docHeader(file, baseSize);
      lengths.add(header.manifestLength);
      expect(manifest.assets[0].offset).toBe(header.manifestOffset + header.manifestLength);
      let offset = header.manifestOffset + header.manifestLength;
      for (const entry of manifest.assets) {
        expect(entry.offset).toBe(offset);
        offset += entry.length;
      }
      expect(offset + 80).toBe(file.length);
      const section = await openSection(f.outputPath);
      expect((await section.read('transform')).equals(f.contents.transform)).toBe(true);
      await section.close();
    }
    expect(lengths.size).toBe(2); // the manifest did gain a digit on the way
  });

  it('adds a tiny overhead and makes the output executable', async () => {
    const f = fixture();
    await build(f);
    const assetBytes = Object.values(f.contents).reduce((sum, b) => sum + b.length, 0);
    const size = statSync(f.outputPath).size;
    expect(size).toBeGreaterThan(f.base.length + assetBytes + 160);
    expect(size).toBeLessThanOrEqual(f.base.length + assetBytes + 64 * 1024 + 80);
    expect(size - f.base.length - assetBytes).toBeLessThan(2048);
    expect(statSync(f.outputPath).mode & 0o777).toBe(0o755);
  });

  it('streams a file asset larger than its copy buffer, and keeps an empty asset', async () => {
    const f = fixture({ weightsSize: 9 * 1024 * 1024 + 7 });
    f.assets[4] = { name: 'transform', data: new Uint8Array(0) };
    await build(f);
    const section = await openSection(f.outputPath);
    try {
      expect((await section.read('model_weights')).equals(f.contents.model_weights)).toBe(true);
      expect((await section.read('transform')).length).toBe(0);
      expect(await section.readText('transform')).toBe('');
    } finally {
      await section.close();
    }
  });

  it('reports monotonic progress from the base size to the total', async () => {
    const f = fixture({ weightsSize: 9 * 1024 * 1024 });
    const calls: [number, number][] = [];
    await build(f, { onProgress: (done, total) => calls.push([done, total]) });
    const total = f.base.length + Object.values(f.contents).reduce((sum, b) => sum + b.length, 0);
    expect(calls.length).toBeGreaterThan(3);
    expect(calls[0]).toEqual([f.base.length, total]);
    expect(calls.at(-1)).toEqual([total, total]);
    for (const [index, [done, t]] of calls.entries()) {
      expect(t).toBe(total);
      if (index > 0) expect(done).toBeGreaterThanOrEqual(calls[index - 1][0]);
    }
  });

  it('replaces an existing output file', async () => {
    const f = fixture();
    writeFileSync(f.outputPath, 'old build');
    await build(f);
    const section = await openSection(f.outputPath);
    await section.close();
    expect(readdirSync(dir).filter((name) => name.includes('partial'))).toEqual([]);
  });

  it('names an output path it cannot write (a folder, a missing folder) in a ConfigError, leaving nothing behind', async () => {
    const f = fixture();
    const folder = path.join(dir, 'a-folder');
    mkdirSync(folder);
    const intoFolder = (await build(f, { outputPath: folder }).catch((e: unknown) => e)) as Error;
    expect(intoFolder).toBeInstanceOf(ConfigError);
    expect(intoFolder.message).toBe(`the output path is a folder: ${folder}; give a file path, e.g. ${path.join(folder, 'model')}`);
    const missing = path.join(dir, 'no-such-folder', 'model');
    const noFolder = (await build(f, { outputPath: missing }).catch((e: unknown) => e)) as Error;
    expect(noFolder).toBeInstanceOf(ConfigError);
    expect(noFolder.message).toBe(`cannot write the output file ${missing}: its folder ${path.dirname(missing)} does not exist`);
    expect(readdirSync(dir).filter((name) => name.includes('.partial-'))).toEqual([]);
  });

  it('works with a base binary of unknown format (random bytes)', async () => {
    const f = fixture({ unknownBase: true });
    await build(f);
    const section = await openSection(f.outputPath);
    try {
      expect(section.sectionStart).toBe(5003);
      expect((await section.read('model_weights')).equals(f.contents.model_weights)).toBe(true);
    } finally {
      await section.close();
    }
  });
});

describe('files without an asset section', () => {
  it('returns null for a plain base runtime (a real executable), an empty file and a small data file', async () => {
    const f = fixture();
    expect(await AssetSection.open(f.basePath)).toBeNull();
    writeFileSync(path.join(dir, 'empty'), '');
    expect(await AssetSection.open(path.join(dir, 'empty'))).toBeNull();
    writeFileSync(path.join(dir, 'small'), 'ENCASSET');
    expect(await AssetSection.open(path.join(dir, 'small'))).toBeNull();
    writeFileSync(path.join(dir, 'data'), randomBytes(100_000));
    expect(await AssetSection.open(path.join(dir, 'data'))).toBeNull();
  });

  it('reports unknown data after a real executable', async () => {
    const f = fixture();
    appendFileSync(f.basePath, 'junk');
    expect((await openError(f.basePath)).message).toBe('not a model executable: 4 bytes of unknown data after the executable');
    appendFileSync(f.basePath, randomBytes(200_000));
    expect((await openError(f.basePath)).message).toBe('not a model executable: 200004 bytes of unknown data after the executable');
  });

  it('reports a real executable that is itself cut short', async () => {
    const f = fixture();
    truncateSync(f.basePath, f.base.length - 1000);
    const message = (await openError(f.basePath)).message;
    expect(message).toMatch(new RegExp(`^file is truncated: the executable ends at byte \\d+, file has ${f.base.length - 1000}$`));
    expect(Number(/byte (\d+)/.exec(message)![1])).toBeGreaterThan(f.base.length - 1000);
  });

  it('reports a file that holds only the start of a footer as truncated', async () => {
    const f = fixture();
    await build(f);
    const footer = readFileSync(f.outputPath).subarray(-80);
    writeFileSync(path.join(dir, 'cut'), footer.subarray(0, 40));
    expect((await openError(path.join(dir, 'cut'))).message).toBe(
      'file is truncated: the asset section footer is incomplete (40 of 80 bytes at byte 0)',
    );
  });

  it('throws the system error for a missing file', async () => {
    await expect(AssetSection.open(path.join(dir, 'nope'))).rejects.toThrow(/ENOENT/);
  });
});

describe('integrity checks', () => {
  for (const name of ['model_weights', 'tokenizer', 'model_config', 'tokenizer_config', 'transform']) {
    it(`detects a flipped byte in ${name} only when that asset is read`, async () => {
      const f = fixture();
      const manifest = await build(f);
      const entry = manifest.assets.find((a) => a.name === name)!;
      flipByte(f.outputPath, entry.offset + Math.floor(entry.length / 2));
      const section = await openSection(f.outputPath);
      try {
        for (const other of manifest.assets.filter((a) => a.name !== name)) {
          expect((await section.read(other.name)).equals(f.contents[other.name])).toBe(true);
        }
        await expect(section.read(name)).rejects.toThrow(new ConfigError(`asset ${name}: checksum mismatch`));
        await expect(section.readText(name)).rejects.toThrow(`asset ${name}: checksum mismatch`);
      } finally {
        await section.close();
      }
    });
  }

  it('detects a flipped byte in the manifest', async () => {
    const f = fixture();
    await build(f);
    flipByte(f.outputPath, f.base.length + 80 + 10);
    expect((await openError(f.outputPath)).message).toBe('asset section manifest: checksum mismatch');
  });

  it('detects a flipped byte in the footer magic, and a footer checksum that differs from the header', async () => {
    const f = fixture();
    await build(f);
    const size = statSync(f.outputPath).size;
    flipByte(f.outputPath, size - 80 + 2);
    expect((await openError(f.outputPath)).message).toBe(`asset section footer is corrupt: no footer magic at byte ${size - 80}`);
    flipByte(f.outputPath, size - 80 + 2);
    flipByte(f.outputPath, size - 80 + 50);
    expect((await openError(f.outputPath)).message).toBe(
      `asset section footer is corrupt: its manifest offset, length or checksum differs from the section header's (at byte ${f.base.length})`,
    );
  });

  it('detects a flipped footer magic on a base of unknown format too', async () => {
    const f = fixture({ unknownBase: true });
    await build(f);
    const size = statSync(f.outputPath).size;
    flipByte(f.outputPath, size - 80 + 2);
    expect((await openError(f.outputPath)).message).toBe(`asset section footer is corrupt: no footer magic at byte ${size - 80}`);
  });

  it('detects a damaged header: magic, checksum, own position', async () => {
    const f = fixture();
    await build(f);
    const start = f.base.length;
    flipByte(f.outputPath, start + 3);
    expect((await openError(f.outputPath)).message).toBe(
      `asset section footer is corrupt: no section header at byte ${start}, where the footer says the section starts`,
    );
    flipByte(f.outputPath, start + 3);
    flipByte(f.outputPath, start + 60);
    expect((await openError(f.outputPath)).message).toBe(
      `asset section footer is corrupt: its manifest offset, length or checksum differs from the section header's (at byte ${start})`,
    );
    flipByte(f.outputPath, start + 60);
    flipByte(f.outputPath, start + 16);
    expect((await openError(f.outputPath)).message).toBe(
      `asset section header is corrupt: it says the section starts at byte ${start ^ 0xff}, but it is at byte ${start}`,
    );
  });

  it('refuses a newer format version, and a version 1 file', async () => {
    const f = fixture();
    await build(f);
    const bytes = readFileSync(f.outputPath);
    bytes.writeUInt32LE(3, bytes.length - 80 + 8);
    writeFileSync(f.outputPath, bytes);
    expect((await openError(f.outputPath)).message).toBe('unsupported asset section format version 3 (this runtime reads 2)');
    bytes.writeUInt32LE(2, bytes.length - 80 + 8);
    bytes.writeUInt32LE(3, f.base.length + 8);
    writeFileSync(f.outputPath, bytes);
    expect((await openError(f.outputPath)).message).toBe('unsupported asset section format version 3 (this runtime reads 2)');

    // Format version 1: [base][assets][manifest][footer], no header.
    const manifest = Buffer.from('{"format_version":1}');
    const footer = Buffer.alloc(80);
    DOC_HEAD_MAGIC.copy(footer, 0);
    footer.writeUInt32LE(1, 8);
    footer.writeBigUInt64LE(BigInt(f.base.length), 16);
    footer.writeBigUInt64LE(BigInt(f.base.length), 24);
    footer.writeBigUInt64LE(BigInt(manifest.length), 32);
    createHash('sha256').update(manifest).digest().copy(footer, 40);
    DOC_TAIL_MAGIC.copy(footer, 72);
    writeFileSync(f.outputPath, Buffer.concat([f.base, manifest, footer]));
    expect((await openError(f.outputPath)).message).toBe('unsupported asset section format version 1 (this runtime reads 2)');
  });

  it('checks that header, footer and file size agree', async () => {
    const f = fixture();
    await build(f);
    const original = readFileSync(f.outputPath);
    const start = f.base.length;
    const footerAt = original.length - 80;
    const withField = (at: number, value: bigint) => {
      const bytes = Buffer.from(original);
      bytes.writeBigUInt64LE(value, at);
      writeFileSync(f.outputPath, bytes);
    };
    const message = async () => (await openError(f.outputPath)).message;
    const manifestOffset = original.readBigUInt64LE(footerAt + 24);
    const sectionLength = original.readBigUInt64LE(start + 24);

    withField(footerAt + 24, manifestOffset - 1n);
    expect(await message()).toBe(`asset section footer is corrupt: its manifest offset, length or checksum differs from the section header's (at byte ${start})`);
    withField(footerAt + 16, BigInt(start + 1));
    expect(await message()).toBe(`asset section footer is corrupt: no section header at byte ${start + 1}, where the footer says the section starts`);
    withField(footerAt + 16, BigInt(footerAt - 79));
    expect(await message()).toBe(
      `asset section footer is corrupt: the section starts at byte ${footerAt - 79}, less than a section header before the footer (byte ${footerAt})`,
    );
    withField(footerAt + 32, 1n << 60n);
    expect(await message()).toBe(`asset section footer is corrupt: manifest length ${1n << 60n} is out of range`);
    withField(footerAt + 32, BigInt(MAX_MANIFEST_SIZE + 1));
    expect(await message()).toBe(`asset section footer is corrupt: manifest length ${MAX_MANIFEST_SIZE + 1} is over the limit of ${MAX_MANIFEST_SIZE} bytes`);

    withField(start + 32, manifestOffset + 1n);
    expect(await message()).toBe(
      `asset section header is corrupt: the manifest starts at byte ${manifestOffset + 1n}, not right after the header (byte ${manifestOffset})`,
    );
    withField(start + 24, sectionLength + 1n);
    expect(await message()).toBe(`file is truncated: asset section ends at byte ${original.length + 1}, file has ${original.length}`);
    withField(start + 24, sectionLength - 1n);
    expect(await message()).toBe(
      `asset section header is corrupt: the section ends at byte ${original.length - 1}, but its footer ends at the end of the file (byte ${original.length})`,
    );
    withField(start + 24, 100n);
    expect(await message()).toMatch(/^asset section header is corrupt: section length 100 is less than its header, manifest and footer \(\d+ bytes\)$/);
    withField(start + 24, 1n << 62n);
    expect(await message()).toBe(`asset section header is corrupt: section length ${1n << 62n} is out of range`);
  });
});

describe('extracting an asset to a file', () => {
  it('writes the bytes a piece at a time (larger than one piece), leaving no partial file', async () => {
    const f = fixture({ weightsSize: 20 * 2 ** 20 + 7 });
    await build(f);
    const section = await openSection(f.outputPath);
    const target = path.join(dir, 'extracted.data');
    try {
      section.extractSync('model_weights', target);
    } finally {
      await section.close();
    }
    expect(readFileSync(target).equals(f.contents.model_weights)).toBe(true);
    expect(readdirSync(dir).filter((file) => file.includes('.partial'))).toEqual([]);
  });

  it('names a damaged asset and writes nothing; names a cut one as truncated', async () => {
    const f = fixture();
    const manifest = await build(f);
    const entry = manifest.assets.find((a) => a.name === 'model_weights')!;
    flipByte(f.outputPath, entry.offset + 5);
    const target = path.join(dir, 'damaged.data');
    let section = await openSection(f.outputPath);
    try {
      expect(() => section.extractSync('model_weights', target)).toThrow(new ConfigError('asset model_weights: checksum mismatch'));
      expect(() => section.extractSync('model_data', target)).toThrow(new ConfigError('asset section has no asset "model_data"'));
    } finally {
      await section.close();
    }
    expect(readdirSync(dir).filter((file) => file.startsWith('damaged.data'))).toEqual([]);

    await build(f);
    section = await openSection(f.outputPath);
    truncateSync(f.outputPath, entry.offset + 10);
    try {
      expect(() => section.extractSync('model_weights', target)).toThrow(/^file is truncated: asset model_weights ends at byte/);
    } finally {
      await section.close();
    }
    expect(readdirSync(dir).filter((file) => file.startsWith('damaged.data'))).toEqual([]);
  });
});

describe('truncated files', () => {
  /** Builds a model on a real executable and returns a function that cuts a fresh copy and opens it. */
  async function cutter() {
    const f = fixture();
    const manifest = await build(f);
    const size = statSync(f.outputPath).size;
    const copy = path.join(dir, 'cut-model');
    const cutAt = async (keep: number) => {
      copyFileSync(f.outputPath, copy);
      truncateSync(copy, keep);
      return (await openError(copy)).message;
    };
    const entry = (name: string) => manifest.assets.find((a) => a.name === name)!;
    const manifestEnd = manifest.assets[0].offset;
    return { f, manifest, size, copy, cutAt, entry, manifestEnd };
  }

  it('names the asset a cut falls in: first, middle and last asset', async () => {
    const { manifest, cutAt } = await cutter();
    for (const asset of manifest.assets) {
      const end = asset.offset + asset.length;
      for (const keep of [asset.offset, asset.offset + 1, asset.offset + Math.floor(asset.length / 2), end - 1]) {
        expect(await cutAt(keep)).toBe(`file is truncated: asset ${asset.name} ends at byte ${end}, file has ${keep}`);
      }
    }
    const weights = manifest.assets[0];
    expect(weights.name).toBe('model_weights');
    expect(await cutAt(weights.offset + 1000)).toBe(
      `file is truncated: asset model_weights ends at byte ${weights.offset + weights.length}, file has ${weights.offset + 1000}`,
    );
  });

  it('reports a cut inside the footer, or right before it', async () => {
    const { size, cutAt } = await cutter();
    for (const keep of [79, 72, 41, 8, 1, 0]) {
      expect(await cutAt(size - 80 + keep)).toBe(`file is truncated: asset section footer ends at byte ${size}, file has ${size - 80 + keep}`);
    }
  });

  it('reports a cut inside the manifest, or right after the header', async () => {
    const { f, cutAt, manifestEnd } = await cutter();
    const manifestOffset = f.base.length + 80;
    for (const keep of [manifestOffset, manifestOffset + 1, manifestOffset + 100, manifestEnd - 1]) {
      expect(await cutAt(keep)).toBe(`file is truncated: manifest ends at byte ${manifestEnd}, file has ${keep}`);
    }
  });

  it('reports a cut inside the section header', async () => {
    const { f, cutAt } = await cutter();
    const start = f.base.length;
    for (const keep of [start + 79, start + 20, start + 8, start + 1]) {
      expect(await cutAt(keep)).toBe(`file is truncated: asset section header ends at byte ${start + 80}, file has ${keep}`);
    }
  });

  it('reads a file cut right after the base binary as the base runtime it now is, and a cut in the base as truncated', async () => {
    const { f, copy, cutAt } = await cutter();
    copyFileSync(f.outputPath, copy);
    truncateSync(copy, f.base.length);
    expect(await AssetSection.open(copy)).toBeNull();
    expect(await cutAt(f.base.length - 1)).toMatch(new RegExp(`^file is truncated: the executable ends at byte ${f.base.length}, file has ${f.base.length - 1}$`));
  });

  it('still names a damaged header or version in a cut file', async () => {
    const { f, copy, entry } = await cutter();
    const weights = entry('model_weights');
    const cut = (change: (bytes: Buffer) => void) => {
      const bytes = readFileSync(f.outputPath).subarray(0, weights.offset + 10);
      change(bytes);
      writeFileSync(copy, bytes);
    };
    cut((bytes) => bytes.writeUInt32LE(7, f.base.length + 8));
    expect((await openError(copy)).message).toBe('unsupported asset section format version 7 (this runtime reads 2)');
    cut((bytes) => bytes.writeBigUInt64LE(5n, f.base.length + 16));
    expect((await openError(copy)).message).toBe(`asset section header is corrupt: it says the section starts at byte 5, but it is at byte ${f.base.length}`);
    // A damaged manifest cannot name the asset: the whole section's end is given.
    const size = statSync(f.outputPath).size;
    cut((bytes) => {
      bytes[f.base.length + 80 + 5] ^= 0xff;
    });
    expect((await openError(copy)).message).toBe(`file is truncated: asset section ends at byte ${size}, file has ${weights.offset + 10}`);
  });

  it('reports bytes missing in the middle, with header and footer intact', async () => {
    const { f, manifest, copy } = await cutter();
    const bytes = readFileSync(f.outputPath);
    const weights = manifest.assets[0];
    const cut = Buffer.concat([bytes.subarray(0, weights.offset + 500), bytes.subarray(weights.offset + 1500)]);
    writeFileSync(copy, cut);
    expect((await openError(copy)).message).toBe(`file is truncated: asset section ends at byte ${bytes.length}, file has ${cut.length}`);
  });

  it('cannot see a cut inside an asset when the base binary is of unknown format (no executable end)', async () => {
    const f = fixture({ unknownBase: true });
    const manifest = await build(f);
    const size = statSync(f.outputPath).size;
    truncateSync(f.outputPath, size - 40);
    expect((await openError(f.outputPath)).message).toBe(`file is truncated: the asset section footer is incomplete (40 of 80 bytes at byte ${size - 80})`);
    truncateSync(f.outputPath, manifest.assets[0].offset + 1000);
    expect(await AssetSection.open(f.outputPath)).toBeNull();
  });
});

describe('appended data', () => {
  it('reports data appended after the footer, however much there is', async () => {
    const f = fixture();
    await build(f);
    appendFileSync(f.outputPath, randomBytes(100));
    expect((await openError(f.outputPath)).message).toBe(
      'no asset section footer at the end of the file (100 bytes after the last one: appended data?)',
    );
    appendFileSync(f.outputPath, Buffer.from('ENCASSET'));
    expect((await openError(f.outputPath)).message).toBe(
      'no asset section footer at the end of the file (108 bytes after the last one: appended data?)',
    );
    appendFileSync(f.outputPath, Buffer.alloc(TAIL_SCAN_SIZE * 4));
    expect((await openError(f.outputPath)).message).toBe(
      `no asset section footer at the end of the file (${108 + TAIL_SCAN_SIZE * 4} bytes after the last one: appended data?)`,
    );
  });

  it('reports a damaged footer followed by appended data', async () => {
    const f = fixture();
    await build(f);
    const size = statSync(f.outputPath).size;
    flipByte(f.outputPath, size - 80 + 1);
    appendFileSync(f.outputPath, randomBytes(100));
    expect((await openError(f.outputPath)).message).toBe(`asset section footer is corrupt: no footer magic at byte ${size - 80}`);
  });

  it('with a base of unknown format: sees appended data within the scanned tail only', async () => {
    const f = fixture({ unknownBase: true });
    await build(f);
    appendFileSync(f.outputPath, randomBytes(100));
    expect((await openError(f.outputPath)).message).toBe(
      'no asset section footer at the end of the file (100 bytes after the last one: appended data?)',
    );
    appendFileSync(f.outputPath, Buffer.alloc(TAIL_SCAN_SIZE));
    expect(await AssetSection.open(f.outputPath)).toBeNull();
  });
});

describe('manifest checks', () => {
  const asset = (name: string, offset: number, bytes: Buffer) => ({ name, offset, length: bytes.length, sha256: sha256(bytes) });
  const manifestWith = (assets: unknown[], model: unknown = FIELDS.model) => ({
    format_version: 2,
    runtime_version: '0.1.0',
    target: 'x86_64-unknown-linux-gnu',
    model,
    assets,
  });

  it('reads a hand-made file that follows the documented layout', async () => {
    const file = path.join(dir, 'hand');
    const payload = Buffer.from('weights!tokenizer');
    handMadeFile(file, {
      payload,
      manifest: (start) => manifestWith([asset('tokenizer', start + 8, payload.subarray(8)), asset('model_weights', start, payload.subarray(0, 8))]),
    });
    const section = await openSection(file);
    try {
      expect(await section.readText('model_weights')).toBe('weights!');
      expect(await section.readText('tokenizer')).toBe('tokenizer');
    } finally {
      await section.close();
    }
  });

  it('reads a hand-made file on a real executable, and names the cut asset when its tail is lost', async () => {
    const file = path.join(dir, 'hand');
    const payload = Buffer.from('weights!tokenizer');
    const base = readFileSync(REAL_EXECUTABLE);
    const { dataStart } = handMadeFile(file, {
      base,
      payload,
      manifest: (start) => manifestWith([asset('tokenizer', start + 8, payload.subarray(8)), asset('model_weights', start, payload.subarray(0, 8))]),
    });
    const section = await openSection(file);
    await section.close();
    truncateSync(file, dataStart + 12);
    expect((await openError(file)).message).toBe(`file is truncated: asset tokenizer ends at byte ${dataStart + 17}, file has ${dataStart + 12}`);
    truncateSync(file, dataStart + 7);
    expect((await openError(file)).message).toBe(`file is truncated: asset model_weights ends at byte ${dataStart + 8}, file has ${dataStart + 7}`);
  });

  it('reports an asset that runs past the end of the file as truncation, naming the asset', async () => {
    const file = path.join(dir, 'hand');
    const payload = Buffer.from('0123456789');
    const { size, dataStart } = handMadeFile(file, {
      payload,
      manifest: (start) => manifestWith([{ ...asset('model_weights', start, payload), length: 1_000_000 }]),
    });
    expect((await openError(file)).message).toBe(`file is truncated: asset model_weights ends at byte ${dataStart + 1_000_000}, file has ${size}`);
  });

  it('rejects assets outside the asset data, listed twice, or malformed', async () => {
    const file = path.join(dir, 'hand');
    const payload = Buffer.from('0123456789');
    // base 21 bytes + header 80 + manifest 1024: the payload starts at byte 1125, the footer at 1135.
    const cases: [(start: number) => unknown, string][] = [
      [(start) => manifestWith([asset('tokenizer', start - 1, payload)]), 'asset section manifest: asset tokenizer starts at byte 1124, before the end of the manifest (byte 1125)'],
      [(start) => manifestWith([asset('tokenizer', start + 5, payload)]), 'asset section manifest: asset tokenizer ends at byte 1140, inside the footer (byte 1135)'],
      [(start) => manifestWith([asset('tokenizer', start, payload), asset('tokenizer', start, payload)]), 'asset section manifest: asset tokenizer is listed twice'],
      [(start) => manifestWith([{ name: 'tokenizer', offset: start, length: -1, sha256: sha256(payload) }]), 'asset section manifest: assets[0] must have'],
      [(start) => manifestWith([{ name: 'tokenizer', offset: start, length: 10, sha256: 'abc' }]), 'asset section manifest: assets[0] must have'],
      [() => manifestWith([], { name: 'x', version: '1', model_type: 'embedding' }), 'asset section manifest: model.lua_libs must be a list of strings'],
      [() => manifestWith([], null), 'asset section manifest: model must be an object'],
      [() => ({ ...manifestWith([]), format_version: 1 }), 'asset section manifest: format_version is 1, the footer says 2'],
      [() => ({ ...manifestWith([]), target: 5 }), 'asset section manifest: target must be a string'],
      [() => ({ ...manifestWith([]), assets: {} }), 'asset section manifest: assets must be a list'],
      [() => [1, 2], 'asset section manifest: not a JSON object'],
      [() => Buffer.from('{"format_version":'), 'asset section manifest: not valid UTF-8 JSON'],
      [() => Buffer.from([0x7b, 0xff, 0x7d]), 'asset section manifest: not valid UTF-8 JSON'],
    ];
    for (const [manifest, message] of cases) {
      handMadeFile(file, { payload, manifest });
      expect((await openError(file)).message).toContain(message);
    }
  });

  it('rejects a manifest larger than the limit', async () => {
    const file = path.join(dir, 'hand');
    handMadeFile(file, { manifest: () => Buffer.alloc(MAX_MANIFEST_SIZE + 1, 0x20) });
    expect((await openError(file)).message).toBe(
      `asset section footer is corrupt: manifest length ${MAX_MANIFEST_SIZE + 1} is over the limit of ${MAX_MANIFEST_SIZE} bytes`,
    );
  });
});

describe('reading assets', () => {
  it('names unknown assets, refuses reads after close, and closes twice harmlessly', async () => {
    const f = fixture();
    await build(f);
    const section = await openSection(f.outputPath);
    await expect(section.read('vocab')).rejects.toThrow(new ConfigError('asset section has no asset "vocab"'));
    await section.close();
    await section.close();
    await expect(section.read('tokenizer')).rejects.toThrow('the asset section of');
  });

  it('rejects an asset that is not UTF-8 text when read as text', async () => {
    const f = fixture();
    f.assets[4] = { name: 'transform', data: Buffer.from([0x72, 0xff, 0xfe]) };
    await build(f);
    const section = await openSection(f.outputPath);
    try {
      await expect(section.readText('transform')).rejects.toThrow('asset transform is not valid UTF-8 text');
      expect([...(await section.read('transform'))]).toEqual([0x72, 0xff, 0xfe]);
    } finally {
      await section.close();
    }
  });

  it('reports a file shortened after it was opened', async () => {
    const f = fixture();
    const manifest = await build(f);
    const section = await openSection(f.outputPath);
    try {
      const weights = manifest.assets[0];
      truncateSync(f.outputPath, weights.offset + 10);
      await expect(section.read('model_weights')).rejects.toThrow(
        `file is truncated: asset model_weights ends at byte ${weights.offset + weights.length}, file has ${weights.offset + 10}`,
      );
    } finally {
      await section.close();
    }
  });
});

describe('writer refusals and atomic output', () => {
  const noLeftovers = () => expect(readdirSync(dir).filter((name) => name === 'model' || name.startsWith('model.partial'))).toEqual([]);

  it('refuses a base binary that already carries an asset section', async () => {
    const f = fixture();
    await build(f);
    const built = path.join(dir, 'built-model');
    writeFileSync(built, readFileSync(f.outputPath));
    const again = { ...f, basePath: built, outputPath: path.join(dir, 'model-2') };
    await expect(build(again)).rejects.toThrow(
      new ConfigError(`base binary already contains an asset section (it is a built model, not a base runtime): ${built}`),
    );
    expect(existsSync(again.outputPath)).toBe(false);
  });

  it('refuses a base binary with a damaged, truncated or unknown tail', async () => {
    const f = fixture();
    const manifest = await build(f);
    const built = path.join(dir, 'built-model');
    const model = readFileSync(f.outputPath);
    const again = { ...f, basePath: built, outputPath: path.join(dir, 'model-2') };
    writeFileSync(built, Buffer.concat([model, Buffer.from('junk')]));
    await expect(build(again)).rejects.toThrow(
      `base binary ${built} is not a base runtime: no asset section footer at the end of the file (4 bytes after the last one: appended data?)`,
    );
    const weights = manifest.assets[0];
    writeFileSync(built, model.subarray(0, weights.offset + 7));
    await expect(build(again)).rejects.toThrow(
      `base binary ${built} is not a base runtime: file is truncated: asset model_weights ends at byte ${weights.offset + weights.length}, file has ${weights.offset + 7}`,
    );
    writeFileSync(built, Buffer.concat([f.base, Buffer.from('junk')]));
    await expect(build(again)).rejects.toThrow(
      `base binary ${built} is not a base runtime: not a model executable: 4 bytes of unknown data after the executable`,
    );
    expect(existsSync(again.outputPath)).toBe(false);
  });

  it('names a missing base binary and refuses to overwrite the base binary itself', async () => {
    const f = fixture();
    await expect(build({ ...f, basePath: path.join(dir, 'missing') })).rejects.toThrow(`base binary not found: ${path.join(dir, 'missing')}`);
    await expect(build({ ...f, outputPath: f.basePath })).rejects.toThrow(`the output path is the base binary itself: ${f.basePath}`);
    expect(readFileSync(f.basePath).equals(f.base)).toBe(true);
  });

  it('leaves no output file when an asset path fails', async () => {
    const f = fixture();
    const missing = path.join(dir, 'no-tokenizer.json');
    f.assets[1] = { name: 'tokenizer', path: missing };
    await expect(build(f)).rejects.toThrow(new ConfigError(`asset tokenizer: file not found: ${missing}`));
    noLeftovers();
    mkdirSync(missing);
    await expect(build(f)).rejects.toThrow(`asset tokenizer: not a file: ${missing}`);
    noLeftovers();
  });

  it('removes its partial file when writing fails half way, and keeps an existing output untouched', async () => {
    const f = fixture({ weightsSize: 9 * 1024 * 1024 });
    writeFileSync(f.outputPath, 'previous build');
    const failAfterFirstChunk = (done: number) => {
      if (done > f.base.length) throw new Error('disk full (simulated)');
    };
    await expect(build(f, { onProgress: failAfterFirstChunk })).rejects.toThrow('disk full (simulated)');
    expect(readFileSync(f.outputPath, 'utf8')).toBe('previous build');
    expect(readdirSync(dir).filter((name) => name.includes('partial'))).toEqual([]);
  });

  it('checks the asset list', async () => {
    const f = fixture();
    const cases: [AssetSource[], string][] = [
      [[...f.assets, { name: 'tokenizer', data: new Uint8Array(1) }], 'asset tokenizer is listed twice'],
      [[{ name: 'transform', data: new Uint8Array(1), path: f.basePath }], 'asset transform: give either a path or data'],
      [[{ name: 'transform' }], 'asset transform: give either a path or data'],
      [[{ name: 'Bad Name', data: new Uint8Array(1) }], 'invalid asset name "Bad Name"'],
    ];
    for (const [assets, message] of cases) {
      await expect(build({ ...f, assets })).rejects.toThrow(message);
      noLeftovers();
    }
  });

  it('refuses a manifest over the size limit', async () => {
    const f = fixture();
    const manifest = { ...FIELDS, model: { ...FIELDS.model, notes: 'x'.repeat(MAX_MANIFEST_SIZE) } };
    await expect(build(f, { manifest })).rejects.toThrow(/asset section manifest is \d+ bytes; at most 65456 are allowed/);
    noLeftovers();
  });
});
