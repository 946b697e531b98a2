import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { asciiOnly, bundleRuntime } from '../../scripts/build-runtime.ts';

describe('the bundled runtime', () => {
  it('is pure ASCII, so that the executable uses its main script without decoding it at every start', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bundle-'));
    try {
      const main = path.join(dir, 'main.cjs');
      await bundleRuntime(main);
      for (const file of [main, path.join(dir, 'onnx-worker.cjs')]) {
        const bytes = readFileSync(file);
        expect(bytes.length).toBeGreaterThan(100_000);
        expect(bytes.findIndex((byte) => byte >= 0x80), file).toBe(-1);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('escapes what esbuild leaves without changing what the code means', () => {
    const source = 'const units = /(ns|µs|ms)$/; const name = "naïve"; const emoji = "😀"; [units.test("3µs"), name.length, emoji];';
    const escaped = asciiOnly(source);
    expect([...escaped].every((char) => char.charCodeAt(0) < 0x80)).toBe(true);
    expect(escaped).toContain('\\u00b5');
    expect(eval(escaped)).toEqual(eval(source));
    expect(eval(escaped)).toEqual([true, 5, '😀']);
  });
});
