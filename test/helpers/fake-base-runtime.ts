import { writeFileSync } from 'node:fs';

/**
 * Writes an x86_64 Linux ELF header to `file`: all that `build` checks of a base runtime before appending to it, so a
 * build test needs no real runtime (the output is then a model section behind a header, read back with AssetSection).
 */
export function writeFakeBaseRuntime(file: string): string {
  const header = Buffer.alloc(64);
  header.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1], 0);
  header.writeUInt16LE(62, 18);
  writeFileSync(file, header);
  return file;
}
