import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync, appendFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { executableEnd } from '../../runtime/executable-end.ts';
import { baseRuntimePath, hasBaseRuntime } from '../helpers/executables.ts';

const WINDOWS = 'x86_64-pc-windows-msvc' as const;

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'executable-end-'));
  return () => rmSync(dir, { recursive: true, force: true });
});

const NODE_BINARY = path.resolve('node_modules/node/bin/node'); // ELF x86-64 (the pinned Node 26)
const LS = ['/bin/ls', '/usr/bin/ls'].find((file) => existsSync(file)) as string;
const ORT = path.resolve('node_modules/onnxruntime-node/bin/napi-v6');
const TOKENIZERS = path.resolve('node_modules/tokenizers');
const MACHO_FILES = [
  `${ORT}/darwin/arm64/libonnxruntime.1.dylib`, // Mach-O 64-bit arm64, 44 MB
  `${ORT}/darwin/arm64/onnxruntime_binding.node`, // Mach-O 64-bit arm64
  `${TOKENIZERS}/tokenizers.darwin-x64.node`, // Mach-O 64-bit x86_64
];
const FAT_FILE = `${TOKENIZERS}/tokenizers.darwin-universal.node`; // universal: x86_64 + arm64
const PE_FILES = [
  `${ORT}/win32/x64/onnxruntime.dll`, // PE32+ x86-64, Authenticode-signed: the certificate table is last
  `${ORT}/win32/x64/onnxruntime_binding.node`, // PE32+ x86-64
  `${TOKENIZERS}/tokenizers.win32-ia32-msvc.node`, // PE32 i386
  `${TOKENIZERS}/tokenizers.win32-arm64-msvc.node`, // PE32+ arm64
];
/** An ELF64 little-endian file on every host (/bin/ls is a universal Mach-O on macOS). */
const ELF64_FILE = `${ORT}/linux/x64/onnxruntime_binding.node`;
const ELF_FILES = [
  `${ORT}/linux/arm64/libonnxruntime.so.1`, // ELF 64-bit aarch64
  `${ORT}/linux/x64/onnxruntime_binding.node`, // ELF 64-bit x86-64 shared object
  `${TOKENIZERS}/tokenizers.linux-arm-gnueabihf.node`, // ELF 32-bit ARM
];

const sizeOf = (file: string) => statSync(file).size;

/** A copy of `file` in the test folder, optionally cut to `keep` bytes. */
function copyOf(file: string, keep?: number): string {
  const copy = path.join(dir, `${path.basename(file)}.copy`);
  copyFileSync(file, copy);
  if (keep !== undefined) truncateSync(copy, keep);
  return copy;
}

describe('real executables end where their file ends', () => {
  it('the pinned Node binary (ELF x86-64, 150 MB), read with a handful of small reads', async () => {
    const handle = await open(NODE_BINARY, 'r');
    try {
      let bytes = 0;
      let reads = 0;
      const counting = {
        stat: () => handle.stat(),
        read: (buffer: Buffer, offset: number, length: number, position: number) => {
          bytes += length;
          reads += 1;
          return handle.read(buffer, offset, length, position);
        },
      } as unknown as FileHandle;
      expect(await executableEnd(counting)).toBe(sizeOf(NODE_BINARY));
      expect(reads).toBeLessThanOrEqual(4);
      expect(bytes).toBeLessThan(64 * 1024);
      // The caller's handle stays open.
      const { bytesRead } = await handle.read(Buffer.alloc(4), 0, 4, 0);
      expect(bytesRead).toBe(4);
    } finally {
      await handle.close();
    }
    expect(await executableEnd(NODE_BINARY)).toBe(sizeOf(NODE_BINARY));
  });

  it('/bin/ls and ELF shared objects of other machines and of 32 bits', async () => {
    for (const file of [LS, ...ELF_FILES]) {
      expect({ file, end: await executableEnd(file) }).toEqual({ file, end: sizeOf(file) });
    }
  });

  it('thin Mach-O 64-bit files (arm64 and x86_64, signed)', async () => {
    for (const file of MACHO_FILES) {
      expect({ file, end: await executableEnd(file) }).toEqual({ file, end: sizeOf(file) });
    }
  });

  it('a universal (fat) Mach-O file: the end of its last slice', async () => {
    const bytes = readFileSync(FAT_FILE);
    expect(bytes.readUInt32BE(0)).toBe(0xcafebabe);
    const count = bytes.readUInt32BE(4);
    let lastEnd = 0;
    for (let index = 0; index < count; index++) {
      const at = 8 + index * 20;
      lastEnd = Math.max(lastEnd, bytes.readUInt32BE(at + 8) + bytes.readUInt32BE(at + 12));
    }
    expect(count).toBe(2);
    expect(lastEnd).toBe(bytes.length);
    expect(await executableEnd(FAT_FILE)).toBe(lastEnd);
  });

  it('PE images: signed and unsigned, PE32 and PE32+', async () => {
    for (const file of PE_FILES) {
      expect({ file, end: await executableEnd(file) }).toEqual({ file, end: sizeOf(file) });
    }
  });

  it.skipIf(!hasBaseRuntime())('the encoder base runtime (a Node SEA made by postject)', async () => {
    expect(await executableEnd(baseRuntimePath())).toBe(sizeOf(baseRuntimePath()));
  });

  it.skipIf(!hasBaseRuntime(WINDOWS))('the Windows base runtime (postject into node.exe, a PE32+ image)', async () => {
    expect(await executableEnd(baseRuntimePath(WINDOWS))).toBe(sizeOf(baseRuntimePath(WINDOWS)));
  });
});

describe('copies with data appended or cut off', () => {
  it('ignores data appended after the executable', async () => {
    for (const file of [LS, MACHO_FILES[1], FAT_FILE, ELF_FILES[2], PE_FILES[0], PE_FILES[2]]) {
      const copy = copyOf(file);
      appendFileSync(copy, randomBytes(12_345));
      expect({ file, end: await executableEnd(copy) }).toEqual({ file, end: sizeOf(file) });
    }
  });

  it('gives an end beyond the file for a copy cut short', async () => {
    // ELF (Linux): the section header table is the last thing in the file; fat Mach-O (macOS): the last slice.
    const ls = sizeOf(LS);
    expect(await executableEnd(copyOf(LS, ls - 100))).toBe(ls);
    expect(await executableEnd(copyOf(LS, Math.floor(ls / 2)))).toBe(ls);
    // Mach-O: the code signature (linkedit data) is last.
    const binding = sizeOf(MACHO_FILES[1]);
    expect(await executableEnd(copyOf(MACHO_FILES[1], binding - 1))).toBe(binding);
    // Fat: the last slice's end, from the fat header alone.
    const fat = sizeOf(FAT_FILE);
    expect(await executableEnd(copyOf(FAT_FILE, fat - 1))).toBe(fat);
    expect(await executableEnd(copyOf(FAT_FILE, 30))).toBe(8 + 2 * 20);
    // PE: the certificate table of a signed DLL is last.
    const dll = sizeOf(PE_FILES[0]);
    expect(await executableEnd(copyOf(PE_FILES[0], dll - 1))).toBe(dll);
  });

  it('gives the size of a header that is cut', async () => {
    expect(await executableEnd(copyOf(ELF64_FILE, 40))).toBe(64); // ELF64 header
    expect(await executableEnd(copyOf(ELF_FILES[2], 40))).toBe(52); // ELF32 header
    expect(await executableEnd(copyOf(ELF64_FILE, 5))).toBe(16); // e_ident
    expect(await executableEnd(copyOf(MACHO_FILES[1], 20))).toBe(32); // mach_header_64
    const commands = readFileSync(MACHO_FILES[1]).readUInt32LE(20); // sizeofcmds
    expect(await executableEnd(copyOf(MACHO_FILES[1], 32 + 100))).toBe(32 + commands);
    expect(await executableEnd(copyOf(PE_FILES[1], 30))).toBe(0x40); // MS-DOS header
    const signatureAt = readFileSync(PE_FILES[1]).readUInt32LE(0x3c);
    expect(await executableEnd(copyOf(PE_FILES[1], signatureAt + 10))).toBe(signatureAt + 4 + 20); // COFF header
  });
});

describe('files that are not executables of a known format', () => {
  it('gives null for data, scripts, an empty file, MS-DOS programs, COFF objects and a Java class file', async () => {
    const cases: [string, Buffer][] = [
      ['data', randomBytes(10_000)],
      ['script', Buffer.from('#!/bin/sh\necho hello\n')],
      ['empty', Buffer.alloc(0)],
      ['tiny', Buffer.from([0x7f, 0x45, 0x4c])],
      ['java', Buffer.concat([Buffer.from([0xca, 0xfe, 0xba, 0xbe, 0x00, 0x00, 0x00, 0x41]), randomBytes(500)])],
    ];
    for (const [name, bytes] of cases) {
      const file = path.join(dir, name);
      writeFileSync(file, bytes);
      expect({ name, end: await executableEnd(file) }).toEqual({ name, end: null });
    }
    const dosProgram = Buffer.concat([Buffer.from('MZ'), Buffer.alloc(200)]); // e_lfanew 0: no "PE\\0\\0" there
    writeFileSync(path.join(dir, 'dos'), dosProgram);
    expect(await executableEnd(path.join(dir, 'dos'))).toBeNull();
    const object = readFileSync(PE_FILES[1]);
    object.writeUInt16LE(0, object.readUInt32LE(0x3c) + 4 + 16); // SizeOfOptionalHeader 0: an object file's COFF header
    writeFileSync(path.join(dir, 'object'), object);
    expect(await executableEnd(path.join(dir, 'object'))).toBeNull();
    expect(await executableEnd(path.resolve('package.json'))).toBeNull();
  });

  it('gives null for ELF, Mach-O and PE headers that contradict themselves', async () => {
    const shortOptional = readFileSync(PE_FILES[1]);
    shortOptional.writeUInt16LE(64, shortOptional.readUInt32LE(0x3c) + 4 + 16); // too short for the data directories
    writeFileSync(path.join(dir, 'short-optional'), shortOptional);
    expect(await executableEnd(path.join(dir, 'short-optional'))).toBeNull();

    const badClass = Buffer.from(readFileSync(ELF64_FILE).subarray(0, 4096));
    badClass[4] = 3;
    writeFileSync(path.join(dir, 'bad-class'), badClass);
    expect(await executableEnd(path.join(dir, 'bad-class'))).toBeNull();

    const badEntrySize = readFileSync(ELF64_FILE);
    badEntrySize.writeUInt16LE(8, 0x3a); // e_shentsize smaller than a section header
    writeFileSync(path.join(dir, 'bad-entsize'), badEntrySize);
    expect(await executableEnd(path.join(dir, 'bad-entsize'))).toBeNull();

    const badCommand = readFileSync(MACHO_FILES[1]);
    badCommand.writeUInt32LE(0, 32 + 4); // the first load command's cmdsize
    writeFileSync(path.join(dir, 'bad-command'), badCommand);
    expect(await executableEnd(path.join(dir, 'bad-command'))).toBeNull();

    const fatOfData = Buffer.alloc(200);
    fatOfData.writeUInt32BE(0xcafebabe, 0);
    fatOfData.writeUInt32BE(1, 4);
    fatOfData.writeUInt32BE(100, 8 + 8); // offset
    fatOfData.writeUInt32BE(100, 8 + 12); // size
    writeFileSync(path.join(dir, 'fat-of-data'), fatOfData);
    expect(await executableEnd(path.join(dir, 'fat-of-data'))).toBeNull();
  });

  it('rejects with the system error for a missing file', async () => {
    await expect(executableEnd(path.join(dir, 'missing'))).rejects.toThrow(/ENOENT/);
  });
});

// ---------------------------------------------------------------------------------------------------------
// Hand-made headers, written from the ELF and Mach-O specifications, for the variants no real file here has.

interface ElfSpec {
  is64: boolean;
  little: boolean;
  length: number;
  phoff: number;
  programs: { type: number; offset: number; filesz: number }[];
  shoff: number;
  sections: { type: number; offset: number; size: number; info?: number }[];
  /** Write 0 as e_shnum and the count into section 0's sh_size (extended numbering). */
  extendedCount?: boolean;
}

function makeElf(spec: ElfSpec): Buffer {
  const b = Buffer.alloc(spec.length, 0xaa);
  const { is64, little } = spec;
  const u16 = (value: number, at: number) => (little ? b.writeUInt16LE(value, at) : b.writeUInt16BE(value, at));
  const u32 = (value: number, at: number) => (little ? b.writeUInt32LE(value, at) : b.writeUInt32BE(value, at));
  const word = (value: number, at: number) =>
    is64 ? (little ? b.writeBigUInt64LE(BigInt(value), at) : b.writeBigUInt64BE(BigInt(value), at)) : u32(value, at);
  b.fill(0, 0, is64 ? 64 : 52);
  b.set([0x7f, 0x45, 0x4c, 0x46, is64 ? 2 : 1, little ? 1 : 2, 1], 0);
  u16(2, 16); // ET_EXEC
  u32(1, 20);
  const phentsize = is64 ? 56 : 32;
  const shentsize = is64 ? 64 : 40;
  word(spec.phoff, is64 ? 32 : 28);
  word(spec.shoff, is64 ? 40 : 32);
  u16(is64 ? 64 : 52, is64 ? 52 : 40);
  u16(phentsize, is64 ? 54 : 42);
  u16(spec.programs.length, is64 ? 56 : 44);
  u16(shentsize, is64 ? 58 : 46);
  u16(spec.extendedCount ? 0 : spec.sections.length, is64 ? 60 : 48);
  for (const [index, p] of spec.programs.entries()) {
    const at = spec.phoff + index * phentsize;
    b.fill(0, at, at + phentsize);
    u32(p.type, at);
    word(p.offset, at + (is64 ? 8 : 4));
    word(p.filesz, at + (is64 ? 32 : 16));
  }
  for (const [index, s] of spec.sections.entries()) {
    const at = spec.shoff + index * shentsize;
    b.fill(0, at, at + shentsize);
    u32(s.type, at + 4);
    word(s.offset, at + (is64 ? 24 : 16));
    word(index === 0 && spec.extendedCount ? spec.sections.length : s.size, at + (is64 ? 32 : 20));
    u32(s.info ?? 0, at + (is64 ? 44 : 28));
  }
  return b;
}

const PT_LOAD = 1;
const PT_NOTE = 4;
const SHT_PROGBITS = 1;
const SHT_NOBITS = 8;

describe('ELF variants (hand-made)', () => {
  for (const is64 of [true, false]) {
    for (const little of [true, false]) {
      const variant = `${is64 ? 'ELF64' : 'ELF32'} ${little ? 'little' : 'big'}-endian`;
      const shentsize = is64 ? 64 : 40;
      const base = (overrides: Partial<ElfSpec> = {}): ElfSpec => ({
        is64,
        little,
        length: 0x800,
        phoff: 0x40,
        programs: [
          { type: PT_LOAD, offset: 0, filesz: 0x200 },
          { type: PT_NOTE, offset: 0x200, filesz: 0x20 },
        ],
        shoff: 0x500,
        sections: [
          { type: 0, offset: 0, size: 0 },
          { type: SHT_PROGBITS, offset: 0x220, size: 0x100 },
          { type: SHT_NOBITS, offset: 0x320, size: 0x100000 }, // .bss: no bytes in the file
        ],
        ...overrides,
      });

      it(`${variant}: the section header table's end, program and section contents`, async () => {
        const file = path.join(dir, 'elf');
        writeFileSync(file, makeElf(base()));
        expect(await executableEnd(file)).toBe(0x500 + 3 * shentsize); // the table is last; junk follows up to 0x800
        // A section's contents after the table.
        writeFileSync(file, makeElf(base({ sections: [...base().sections, { type: SHT_PROGBITS, offset: 0x600, size: 0x50 }] })));
        expect(await executableEnd(file)).toBe(0x650);
        // A segment's contents after everything else.
        writeFileSync(file, makeElf(base({ programs: [...base().programs, { type: PT_NOTE, offset: 0x700, filesz: 0x10 }] })));
        expect(await executableEnd(file)).toBe(0x710);
        // Extended numbering: e_shnum 0, the count in section 0.
        writeFileSync(file, makeElf(base({ extendedCount: true, sections: [...base().sections, { type: SHT_PROGBITS, offset: 0x780, size: 0x8 }] })));
        expect(await executableEnd(file)).toBe(0x788);
        // The section table beyond the end of a cut file.
        writeFileSync(file, makeElf(base()).subarray(0, 0x510));
        expect(await executableEnd(file)).toBe(0x500 + 3 * shentsize);
      });
    }
  }
});

describe('Mach-O variants (hand-made)', () => {
  /** A thin 64-bit Mach-O header with one LC_SEGMENT_64 and one LC_CODE_SIGNATURE. */
  function makeMachO(little: boolean, segment: [number, number], signature: [number, number], length: number): Buffer {
    const b = Buffer.alloc(length, 0x55);
    const u32 = (value: number, at: number) => (little ? b.writeUInt32LE(value, at) : b.writeUInt32BE(value, at));
    const u64 = (value: number, at: number) => (little ? b.writeBigUInt64LE(BigInt(value), at) : b.writeBigUInt64BE(BigInt(value), at));
    b.fill(0, 0, 32 + 72 + 16);
    u32(0xfeedfacf, 0);
    u32(2, 16); // ncmds
    u32(72 + 16, 20); // sizeofcmds
    u32(0x19, 32); // LC_SEGMENT_64
    u32(72, 36);
    u64(segment[0], 32 + 40);
    u64(segment[1], 32 + 48);
    u32(0x1d, 32 + 72); // LC_CODE_SIGNATURE
    u32(16, 32 + 76);
    u32(signature[0], 32 + 80);
    u32(signature[1], 32 + 84);
    return b;
  }

  for (const little of [true, false]) {
    it(`${little ? 'little' : 'big'}-endian: the largest of segments and code signature`, async () => {
      const file = path.join(dir, 'macho');
      writeFileSync(file, makeMachO(little, [0, 0x1000], [0x1000, 0x230], 0x1400));
      expect(await executableEnd(file)).toBe(0x1230);
      writeFileSync(file, makeMachO(little, [0, 0x1300], [0x1000, 0x230], 0x1400));
      expect(await executableEnd(file)).toBe(0x1300);
      writeFileSync(file, makeMachO(little, [0, 0x1000], [0x1000, 0x230], 0x1100));
      expect(await executableEnd(file)).toBe(0x1230); // cut inside the signature
    });
  }
});
