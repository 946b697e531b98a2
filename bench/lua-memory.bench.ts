/**
 * node bench/lua-memory.bench.ts — Lua memory of a transform over 10,000 calls (docs/transforms.md, "Memory").
 *
 * Two transforms that build tables on every call, each in a fresh process (the wasm memory of a process only grows):
 * one drops its tables when the call returns, one keeps them in a global (what grew the wasm memory towards 2 GB
 * before the limit). Printed every 1,000 calls: the wasm memory of the Lua runtime (what the process holds for Lua),
 * the bytes the transform's state holds, how many times its state was replaced, and the median time of a call over
 * the last 1,000. Default limit (256 MiB) unless --limit-mib says otherwise.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Tensor } from '../src/encoder/tensor.ts';
import { DEFAULT_MEMORY_LIMIT_BYTES, LuaTransform } from '../src/encoder/transform/index.ts';
import { loadLuaModule } from '../src/encoder/transform/lua-module.ts';
import { median, ms, printTable } from './measure.ts';

const SCRIPTS = {
  'drops its tables': 'calls = (calls or 0) + 1\nlocal t = {}\nfor i = 1, 1000 do t[i] = { i, tostring(i) } end\nreturn output',
  'keeps them in a global': 'cache = cache or {}\nfor i = 1, 1000 do cache[#cache + 1] = { i, tostring(i) } end\nreturn output',
} as const;
type Scenario = keyof typeof SCRIPTS;
const CALLS = 10_000;
const EVERY = 1_000;

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(2);

async function run(scenario: Scenario, limitBytes: number): Promise<void> {
  const transform = await LuaTransform.create(SCRIPTS[scenario], { modelType: 'sequence_classification', memoryLimitBytes: limitBytes });
  const module = await loadLuaModule();
  const output = new Tensor(new Float32Array(2 * 3), [2, 3]);
  const rows: (string | number)[][] = [];
  const times: number[] = [];
  let resets = 0;
  let previous = 0;
  for (let call = 1; call <= CALLS; call++) {
    const started = performance.now();
    transform.run(output);
    times.push(performance.now() - started);
    const used = transform.memoryUsed;
    if (used < previous / 2) resets++;
    previous = used;
    if (call === 1 || call % EVERY === 0) {
      rows.push([call, mib(module.lua.module.HEAPU8.buffer.byteLength), mib(used), resets, ms(median(times.slice(-EVERY)))]);
    }
  }
  transform.close();
  printTable(`Transform that ${scenario}, limit ${mib(limitBytes)} MiB`, ['calls', 'wasm memory MiB', 'state MiB', 'states replaced', 'ms/call (median of last 1,000)'], rows);
}

const [scenario, limit] = process.argv.slice(2);
if (scenario in SCRIPTS) {
  await run(scenario as Scenario, Number(limit));
} else {
  const at = process.argv.indexOf('--limit-mib');
  const limitBytes = at > 0 ? Number(process.argv[at + 1]) * 2 ** 20 : DEFAULT_MEMORY_LIMIT_BYTES;
  for (const name of Object.keys(SCRIPTS)) {
    const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), name, String(limitBytes)], { stdio: 'inherit' });
    if (child.status !== 0) process.exit(child.status ?? 1);
  }
}
