import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { asciiOnly, bundleRuntime, entryBundleOf, splitBundleOf } from '../../scripts/build-runtime.ts';
import { SPLIT_BUNDLES, type SplitBundleName } from '../../runtime/split-bundles.ts';

describe('the bundled runtime', () => {
  it('is pure ASCII (the executable uses its main script without decoding it), the gateway, tool server, metrics and tracing apart', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bundle-'));
    try {
      const main = path.join(dir, 'main.cjs');
      await bundleRuntime(main);
      const splits = Object.keys(SPLIT_BUNDLES).map((name) => splitBundleOf(main, name as SplitBundleName));
      for (const file of [main, entryBundleOf(main), path.join(dir, 'onnx-worker.cjs'), ...splits]) {
        const bytes = readFileSync(file);
        expect(bytes.length).toBeGreaterThan(1_000);
        expect(bytes.findIndex((byte) => byte >= 0x80), file).toBe(-1);
      }
      // the gateway's, the tool server's and serve's metrics' and tracing's code is in their split bundles, not in the main script; the program is
      // not in the entry script, which evaluates it from its asset
      const mainCode = readFileSync(main, 'utf8');
      expect(readFileSync(entryBundleOf(main), 'utf8').length).toBeLessThan(mainCode.length / 50);
      expect(mainCode.length).toBeGreaterThan(1_000_000);
      for (const [name, marker] of [['gateway', 'A budget this key spends from'], ['tools', 'Swagger'], ['metrics', 'encoder_batch_rows'], ['tracing', 'OTEL_BSP_SCHEDULE_DELAY']] as const) {
        expect(mainCode.includes(marker), `${name}: ${marker}`).toBe(false);
        expect(readFileSync(splitBundleOf(main, name), 'utf8').includes(marker), `${name}: ${marker}`).toBe(true);
      }
      // the inference worker runs the Lua transform (wasmoon's glue, the tensor API), without the YAML parser of the
      // build configuration, which every worker thread would compile at its start for nothing
      const workerCode = readFileSync(path.join(dir, 'onnx-worker.cjs'), 'utf8');
      expect(workerCode).toContain('luaL_newstate');
      expect(workerCode).toContain('the Lua runtime (wasmoon .wasm file) was not found');
      expect(mainCode).toContain('YAMLParseError');
      expect(workerCode).not.toContain('YAMLParseError');
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
