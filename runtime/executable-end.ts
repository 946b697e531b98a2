/**
 * The natural end of an executable image: the first byte after everything its own headers describe
 * (docs/file-format.md, "Where the executable ends"). Bytes after that end are not part of the executable;
 * a model executable keeps its asset section there.
 *
 * Formats: ELF (32/64-bit, either byte order), Mach-O 64-bit (either byte order), fat/universal Mach-O and
 * PE (PE32 and PE32+ images). Anything else (scripts, data, MS-DOS programs) gives null. Only the headers are read, with small positional reads.
 *
 * When the headers themselves say that something lies beyond the end of the file (a header, a table, a
 * segment or section cut short), the result is that position, larger than the file: `end > size` always means
 * the executable is truncated. A file cut inside its ELF, Mach-O or PE header gives the size of that header.
 * Headers that contradict themselves (a load command running past the load commands, an absurd table entry
 * size, a value beyond 2^53 - 1) give null: the end cannot be known.
 *
 * This module runs at start-up only when the asset section's footer is missing or damaged; it imports node:fs only.
 */
import { open } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';

/** Largest header region (ELF header tables, Mach-O load commands) read; more than any real executable has. */
const MAX_HEADER_READ = 16 * 1024 * 1024;

/** More slices than a universal binary has; a 0xcafebabe file claiming more is a Java class file. */
const MAX_FAT_ARCHS = 32;

/** Returns the natural end of the executable in `file` (a path or an open handle), or null for an unknown format. */
export async function executableEnd(file: FileHandle | string): Promise<number | null> {
  if (typeof file !== 'string') return endOf(file);
  const handle = await open(file, 'r');
  try {
    return await endOf(handle);
  } finally {
    await handle.close();
  }
}

/** Thrown inside the parsers for headers that contradict themselves; `executableEnd` turns it into null. */
class Malformed extends Error {}

interface Source {
  size: number;
  /** Up to `length` bytes at `position`: fewer when the file ends first. */
  read(position: number, length: number): Promise<Buffer>;
}

async function endOf(handle: FileHandle): Promise<number | null> {
  const size = (await handle.stat()).size;
  const source: Source = {
    size,
    async read(position, length) {
      const wanted = Math.max(0, Math.min(length, size - position));
      const buffer = Buffer.alloc(wanted);
      let done = 0;
      while (done < wanted) {
        const { bytesRead } = await handle.read(buffer, done, wanted - done, position + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      return buffer.subarray(0, done);
    },
  };
  const head = await source.read(0, 64);
  try {
    if (head.length >= 4 && head[0] === 0x7f && head[1] === 0x45 && head[2] === 0x4c && head[3] === 0x46) {
      return await elfEnd(source, head);
    }
    if (head.length >= 4) {
      const le = head.readUInt32LE(0);
      if (le === MH_MAGIC_64) return await machOEnd(source, true);
      if (head.readUInt32BE(0) === MH_MAGIC_64) return await machOEnd(source, false);
      const be = head.readUInt32BE(0);
      if (be === FAT_MAGIC || be === FAT_MAGIC_64) return await fatEnd(source, be === FAT_MAGIC_64);
    }
    if (head.length >= 2 && head.readUInt16LE(0) === MZ_MAGIC) return await peEnd(source, head);
    return null;
  } catch (error) {
    if (error instanceof Malformed) return null;
    throw error;
  }
}

/** A u64 as a safe integer; beyond 2^53 - 1 no real file reaches, so the header is garbage. */
function safe(value: bigint): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new Malformed();
  return Number(value);
}

/** Multiplication and addition that stay exact. */
function checked(value: number): number {
  if (!Number.isSafeInteger(value)) throw new Malformed();
  return value;
}

// ---------------------------------------------------------------------------------------------------------
// ELF (System V gABI): e_ident, then the ELF header; program headers at e_phoff, section headers at e_shoff.

const ELFCLASS32 = 1;
const ELFCLASS64 = 2;
const ELFDATA2LSB = 1;
const ELFDATA2MSB = 2;
const EI_NIDENT = 16;
const SHT_NULL = 0;
const SHT_NOBITS = 8;
const PT_NULL = 0;
const PN_XNUM = 0xffff;

interface ElfLayout {
  headerSize: number;
  /** Field positions in the ELF header. */
  phoff: number;
  shoff: number;
  phentsize: number;
  phnum: number;
  shentsize: number;
  shnum: number;
  /** Smallest valid entry sizes and field positions inside a program / section header. */
  phentMin: number;
  pOffset: number;
  pFilesz: number;
  shentMin: number;
  shType: number;
  shOffset: number;
  shSize: number;
  shInfo: number;
}

const ELF32: ElfLayout = {
  headerSize: 52,
  phoff: 0x1c,
  shoff: 0x20,
  phentsize: 0x2a,
  phnum: 0x2c,
  shentsize: 0x2e,
  shnum: 0x30,
  phentMin: 32,
  pOffset: 4,
  pFilesz: 16,
  shentMin: 40,
  shType: 4,
  shOffset: 16,
  shSize: 20,
  shInfo: 28,
};

const ELF64: ElfLayout = {
  headerSize: 64,
  phoff: 0x20,
  shoff: 0x28,
  phentsize: 0x36,
  phnum: 0x38,
  shentsize: 0x3a,
  shnum: 0x3c,
  phentMin: 56,
  pOffset: 8,
  pFilesz: 32,
  shentMin: 64,
  shType: 4,
  shOffset: 24,
  shSize: 32,
  shInfo: 44,
};

async function elfEnd(source: Source, head: Buffer): Promise<number | null> {
  if (head.length < 6) return EI_NIDENT;
  const elfClass = head[4];
  const data = head[5];
  if ((elfClass !== ELFCLASS32 && elfClass !== ELFCLASS64) || (data !== ELFDATA2LSB && data !== ELFDATA2MSB)) return null;
  const is64 = elfClass === ELFCLASS64;
  const layout = is64 ? ELF64 : ELF32;
  if (head.length < layout.headerSize) return layout.headerSize;
  const little = data === ELFDATA2LSB;
  const u16 = (b: Buffer, at: number) => (little ? b.readUInt16LE(at) : b.readUInt16BE(at));
  const u32 = (b: Buffer, at: number) => (little ? b.readUInt32LE(at) : b.readUInt32BE(at));
  const word = (b: Buffer, at: number) => (is64 ? safe(little ? b.readBigUInt64LE(at) : b.readBigUInt64BE(at)) : u32(b, at));

  const phoff = word(head, layout.phoff);
  const shoff = word(head, layout.shoff);
  const phentsize = u16(head, layout.phentsize);
  const shentsize = u16(head, layout.shentsize);
  let phnum = u16(head, layout.phnum);
  let shnum = u16(head, layout.shnum);
  let end = layout.headerSize;

  // Extended numbering: with 0xffff program headers or 0 sections (and a section table), the real counts
  // are in section 0 (sh_info and sh_size).
  if (shoff !== 0 && (shnum === 0 || phnum === PN_XNUM)) {
    if (shentsize < layout.shentMin) throw new Malformed();
    const first = await source.read(shoff, shentsize);
    if (first.length < shentsize) return Math.max(end, checked(shoff + shentsize));
    if (shnum === 0) shnum = word(first, layout.shSize);
    if (phnum === PN_XNUM) phnum = u32(first, layout.shInfo);
  }

  const tables: { offset: number; count: number; entrySize: number; min: number; program: boolean }[] = [];
  if (phnum > 0) tables.push({ offset: phoff, count: phnum, entrySize: phentsize, min: layout.phentMin, program: true });
  if (shoff !== 0 && shnum > 0) tables.push({ offset: shoff, count: shnum, entrySize: shentsize, min: layout.shentMin, program: false });
  for (const table of tables) {
    if (table.entrySize < table.min) throw new Malformed();
    const length = checked(table.count * table.entrySize);
    if (length > MAX_HEADER_READ) throw new Malformed();
    end = Math.max(end, checked(table.offset + length));
  }
  // A table that does not fit in the file: the file is cut (the result is beyond its size).
  if (end > source.size) return end;

  for (const table of tables) {
    const bytes = await source.read(table.offset, table.count * table.entrySize);
    for (let at = 0; at < bytes.length; at += table.entrySize) {
      let offset: number;
      let size: number;
      if (table.program) {
        if (u32(bytes, at) === PT_NULL) continue;
        offset = word(bytes, at + layout.pOffset);
        size = word(bytes, at + layout.pFilesz);
      } else {
        const type = u32(bytes, at + layout.shType);
        if (type === SHT_NULL || type === SHT_NOBITS) continue;
        offset = word(bytes, at + layout.shOffset);
        size = word(bytes, at + layout.shSize);
      }
      if (size > 0) end = Math.max(end, checked(offset + size));
    }
  }
  return end;
}

// ---------------------------------------------------------------------------------------------------------
// Mach-O (<mach-o/loader.h>, <mach-o/fat.h>).

const MH_MAGIC_64 = 0xfeedfacf;
const MH_MAGIC = 0xfeedface;
const FAT_MAGIC = 0xcafebabe;
const FAT_MAGIC_64 = 0xcafebabf;
const MACH_HEADER_64_SIZE = 32;

const LC_SYMTAB = 0x2;
const LC_SEGMENT_64 = 0x19;
const LC_DYLD_INFO = 0x22;
const LC_DYLD_INFO_ONLY = 0x80000022;
/** Load commands that are a `linkedit_data_command` (cmd, cmdsize, dataoff, datasize). */
const LINKEDIT_DATA_COMMANDS = new Set([
  0x1d, // LC_CODE_SIGNATURE
  0x1e, // LC_SEGMENT_SPLIT_INFO
  0x26, // LC_FUNCTION_STARTS
  0x29, // LC_DATA_IN_CODE
  0x2b, // LC_DYLIB_CODE_SIGN_DRS
  0x2e, // LC_LINKER_OPTIMIZATION_HINT
  0x80000033, // LC_DYLD_EXPORTS_TRIE
  0x80000034, // LC_DYLD_CHAINED_FIXUPS
]);

/** End of a thin 64-bit Mach-O file. */
async function machOEnd(source: Source, little: boolean): Promise<number> {
  const header = await source.read(0, MACH_HEADER_64_SIZE);
  if (header.length < MACH_HEADER_64_SIZE) return MACH_HEADER_64_SIZE;
  const u32 = (b: Buffer, at: number) => (little ? b.readUInt32LE(at) : b.readUInt32BE(at));
  const u64 = (b: Buffer, at: number) => safe(little ? b.readBigUInt64LE(at) : b.readBigUInt64BE(at));
  const ncmds = u32(header, 16);
  const sizeofcmds = u32(header, 20);
  if (sizeofcmds > MAX_HEADER_READ) throw new Malformed();
  let end = MACH_HEADER_64_SIZE + sizeofcmds;
  if (end > source.size) return end;
  const commands = await source.read(MACH_HEADER_64_SIZE, sizeofcmds);
  let at = 0;
  for (let index = 0; index < ncmds; index++) {
    if (at + 8 > commands.length) throw new Malformed();
    const cmd = u32(commands, at);
    const cmdsize = u32(commands, at + 4);
    if (cmdsize < 8 || at + cmdsize > commands.length) throw new Malformed();
    const need = (bytes: number) => {
      if (cmdsize < bytes) throw new Malformed();
    };
    const extend = (offset: number, size: number) => {
      if (size > 0) end = Math.max(end, checked(offset + size));
    };
    if (cmd === LC_SEGMENT_64) {
      need(72);
      extend(u64(commands, at + 40), u64(commands, at + 48));
    } else if (LINKEDIT_DATA_COMMANDS.has(cmd)) {
      need(16);
      extend(u32(commands, at + 8), u32(commands, at + 12));
    } else if (cmd === LC_SYMTAB) {
      need(24);
      extend(u32(commands, at + 8), checked(u32(commands, at + 12) * 16)); // nlist_64 entries
      extend(u32(commands, at + 16), u32(commands, at + 20));
    } else if (cmd === LC_DYLD_INFO || cmd === LC_DYLD_INFO_ONLY) {
      need(48);
      for (let pair = 8; pair < 48; pair += 8) extend(u32(commands, at + pair), u32(commands, at + pair + 4));
    }
    at += cmdsize;
  }
  return end;
}

/** End of a fat (universal) file: the end of its last slice, each slice checked to be a Mach-O image. */
async function fatEnd(source: Source, is64: boolean): Promise<number | null> {
  const header = await source.read(0, 8);
  if (header.length < 8) return 8;
  const count = header.readUInt32BE(4);
  if (count === 0 || count > MAX_FAT_ARCHS) return null; // a Java class file, or not a universal binary
  const entrySize = is64 ? 32 : 20;
  let end = 8 + count * entrySize;
  if (end > source.size) return end;
  const table = await source.read(8, count * entrySize);
  for (let at = 0; at < table.length; at += entrySize) {
    const offset = is64 ? safe(table.readBigUInt64BE(at + 8)) : table.readUInt32BE(at + 8);
    const size = is64 ? safe(table.readBigUInt64BE(at + 16)) : table.readUInt32BE(at + 12);
    end = Math.max(end, checked(offset + size));
  }
  if (end > source.size) return end;
  for (let at = 0; at < table.length; at += entrySize) {
    const offset = is64 ? safe(table.readBigUInt64BE(at + 8)) : table.readUInt32BE(at + 8);
    const magic = await source.read(offset, 4);
    if (magic.length < 4) throw new Malformed();
    const le = magic.readUInt32LE(0);
    const be = magic.readUInt32BE(0);
    if (le !== MH_MAGIC_64 && be !== MH_MAGIC_64 && le !== MH_MAGIC && be !== MH_MAGIC) throw new Malformed();
  }
  return end;
}

// ---------------------------------------------------------------------------------------------------------
// PE/COFF (Microsoft's "PE Format" specification): the MS-DOS header points at the "PE\0\0" signature, then come
// the COFF file header, the optional header (SizeOfHeaders, data directories) and the section table. The image
// ends after the last section's raw data, the COFF symbol and string tables (rare in images) or the attribute
// certificate table (an Authenticode signature), which lies outside every section and is addressed by file
// offset rather than by RVA.

const MZ_MAGIC = 0x5a4d;
const PE_SIGNATURE = 0x00004550;
const DOS_HEADER_SIZE = 0x40;
const COFF_HEADER_SIZE = 20;
const SECTION_HEADER_SIZE = 40;
const SYMBOL_SIZE = 18;
const PE32_MAGIC = 0x10b;
const PE32_PLUS_MAGIC = 0x20b;
/** Index of the attribute certificate table among the data directories. */
const CERTIFICATE_TABLE = 4;

async function peEnd(source: Source, head: Buffer): Promise<number | null> {
  if (head.length < DOS_HEADER_SIZE) return DOS_HEADER_SIZE;
  const signatureAt = head.readUInt32LE(0x3c);
  const coffAt = checked(signatureAt + 4);
  const coff = await source.read(signatureAt, 4 + COFF_HEADER_SIZE);
  if (coff.length >= 4 && coff.readUInt32LE(0) !== PE_SIGNATURE) return null;
  if (coff.length < 4 + COFF_HEADER_SIZE) return checked(coffAt + COFF_HEADER_SIZE);
  const sections = coff.readUInt16LE(4 + 2);
  const symbolTable = coff.readUInt32LE(4 + 8);
  const symbols = coff.readUInt32LE(4 + 12);
  const optionalSize = coff.readUInt16LE(4 + 16);
  const optionalAt = coffAt + COFF_HEADER_SIZE;
  const sectionTableAt = optionalAt + optionalSize;
  let end = checked(sectionTableAt + sections * SECTION_HEADER_SIZE);
  if (end > source.size) return end;

  const optional = await source.read(optionalAt, optionalSize);
  const magic = optional.length >= 2 ? optional.readUInt16LE(0) : 0;
  // An image has an optional header; without one this is a COFF object file, not an executable.
  if (magic !== PE32_MAGIC && magic !== PE32_PLUS_MAGIC) return null;
  const directoriesAt = magic === PE32_PLUS_MAGIC ? 112 : 96;
  if (optional.length < directoriesAt) throw new Malformed();
  end = Math.max(end, optional.readUInt32LE(60)); // SizeOfHeaders
  const directories = optional.readUInt32LE(directoriesAt - 4);
  const certificateAt = directoriesAt + CERTIFICATE_TABLE * 8;
  if (directories > CERTIFICATE_TABLE && certificateAt + 8 <= optional.length) {
    const size = optional.readUInt32LE(certificateAt + 4);
    if (size > 0) end = Math.max(end, checked(optional.readUInt32LE(certificateAt) + size));
  }

  const table = await source.read(sectionTableAt, sections * SECTION_HEADER_SIZE);
  for (let at = 0; at < table.length; at += SECTION_HEADER_SIZE) {
    const rawSize = table.readUInt32LE(at + 16);
    if (rawSize > 0) end = Math.max(end, checked(table.readUInt32LE(at + 20) + rawSize));
  }
  if (symbolTable !== 0) {
    const stringsAt = checked(symbolTable + symbols * SYMBOL_SIZE);
    const length = await source.read(stringsAt, 4);
    end = Math.max(end, stringsAt + (length.length === 4 ? Math.max(4, length.readUInt32LE(0)) : 4));
  }
  return end;
}
