/**
 * npm run bench:startup — what a user of the single executable waits for, for the tiny model and the
 * MiniLM-shaped one (also built with quantize: int8): base and model binary sizes (and the base runtime of every
 * target built in dist/runtime, Windows beside Linux), build time, first run (empty cache: native files extracted),
 * warm start-up to the first `infer` result, and the same `infer` through plain node from source, side by side.
 * For the tiny model also: where a warm `infer` spends its time (ENCODER_TRACE_STARTUP=1 phases), how long `serve`
 * takes from spawn to its first `GET /health` answer, and the pinned Node's own floor (`node -e 0`), against the
 * aims of issue 14 (infer <= 120 ms, first /health <= 200 ms). `-- --before <base runtime>` (an older build of the
 * host's base runtime) measures those on the tiny model built with it as well, alternately, before beside after;
 * `-- --only aims` measures only those (the tiny model's phases and the two aims).
 *
 * Needs the host's base runtime: npm run build:runtime -- --target host.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PRESETS, writeModelDirectory } from '../scripts/model-generator/index.ts';
import { TARGETS, executableExtension, hostTarget } from '../src/builder/targets.ts';
import { formatBytes } from '../src/builder/build-model.ts';
import { median, ms, printTable } from './measure.ts';
import { ensureBenchModel, repoRoot as root } from './workload.ts';

const base = path.join(root, 'dist', 'runtime', hostTarget(), 'encoder');
const RUNS = 7;

function timed(command: string, args: string[], env: NodeJS.ProcessEnv): number {
  const start = performance.now();
  const result = spawnSync(command, args, { env, encoding: 'utf8', maxBuffer: 2 ** 28 });
  const elapsed = performance.now() - start;
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${result.stderr}`);
  return elapsed;
}

/** What every executable here runs with: no Node on PATH, the run's own cache under `work`. */
function executableEnv(work: string): NodeJS.ProcessEnv {
  return { PATH: '/usr/bin:/bin', ENCODER_CACHE_DIR: path.join(work, 'cache') };
}

/** `<work>/<name>.yaml`, an embedding model's config. */
function writeConfig(work: string, name: string, modelDir: string, extra = ''): string {
  const config = path.join(work, `${name}.yaml`);
  writeFileSync(config, `encoder:\n  name: ${name}\n  path: ${modelDir}\n  model_type: embedding\n${extra}`);
  return config;
}

async function measure(name: string, modelDir: string, work: string, extra = ''): Promise<(string | number)[]> {
  const config = writeConfig(work, name, modelDir, extra);
  const output = path.join(work, name);
  const env = executableEnv(work);

  const builds: number[] = [];
  for (let i = 0; i < 3; i++) builds.push(timed(base, ['build', '-f', config, '--base-binary-path', base, '-o', output], env));

  const text = 'The quick brown fox jumps over the lazy dog.';
  const cold: number[] = [];
  for (let i = 0; i < 3; i++) {
    const cache = mkdtempSync(path.join(work, 'cold-'));
    cold.push(timed(output, ['infer', text], { ...env, ENCODER_CACHE_DIR: cache }));
    rmSync(cache, { recursive: true, force: true });
  }
  const warm = Array.from({ length: RUNS }, () => timed(output, ['infer', text], env));
  const nodeBin = path.join(root, 'node_modules', '.bin', 'node');
  const fromSource = Array.from({ length: RUNS }, () =>
    timed(nodeBin, [path.join(root, 'src', 'cli', 'main.ts'), 'infer', '--config', config, text], { PATH: process.env.PATH }),
  );
  const [warmMs, sourceMs] = [median(warm), median(fromSource)];
  const manifest = JSON.parse(spawnSync(output, ['inspect'], { env, encoding: 'utf8' }).stdout) as { assets: { length: number }[] };
  const assetBytes = manifest.assets.reduce((sum, asset) => sum + asset.length, 0);
  const overhead = statSync(output).size - statSync(base).size - assetBytes;
  return [
    name,
    formatBytes(statSync(base).size),
    formatBytes(statSync(output).size),
    formatBytes(assetBytes),
    `${overhead} B`,
    ms(median(builds)),
    ms(median(cold)),
    ms(warmMs),
    ms(sourceMs),
    `${(sourceMs / warmMs).toFixed(2)}x`,
  ];
}

const INFER_ARGS = ['infer', 'The quick brown fox jumps over the lazy dog.'];

/** One warm `infer` with ENCODER_TRACE_STARTUP=1: each phase's time since the process started, and the whole run. */
function tracedInfer(executable: string, env: NodeJS.ProcessEnv): { phases: [string, number][]; total: number } {
  const start = performance.now();
  const result = spawnSync(executable, INFER_ARGS, { env: { ...env, ENCODER_TRACE_STARTUP: '1' }, encoding: 'utf8' });
  const total = performance.now() - start;
  if (result.status !== 0) throw new Error(`infer failed: ${result.stderr}`);
  const phases = [...result.stderr.matchAll(/^startup +([\d.]+) ms +\+ *[\d.]+ ms +(.+)$/gm)].map((m) => [m[2], Number(m[1])] as [string, number]);
  return { phases, total };
}

/**
 * Per-phase medians of warm `infer` runs of each executable, run alternately so that both see the same machine:
 * one row per phase (in the order they happen; a phase one build does not have is blank there), at and took.
 */
function startupPhases(executables: string[], env: NodeJS.ProcessEnv): (string | number)[][] {
  const runs = executables.map(() => [] as [string, number][][]);
  for (let i = 0; i < RUNS; i++) executables.forEach((executable, e) => runs[e].push(tracedInfer(executable, env).phases));
  // every phase of every build, each new one placed before the next phase of its own build that is already listed
  const names: string[] = [];
  for (const executableRuns of runs) {
    const own = executableRuns[0].map(([name]) => name);
    own.forEach((name, i) => {
      if (names.includes(name)) return;
      const next = own.slice(i + 1).find((later) => names.includes(later));
      names.splice(next === undefined ? names.length : names.indexOf(next), 0, name);
    });
  }
  // at: median time since the process started; took: since the build's own previous phase
  const columns = runs.map((executableRuns) => {
    const cells = new Map<string, [string, string]>();
    let previous = 0;
    for (const [name] of executableRuns[0]) {
      const at = median(executableRuns.map((run) => run.find(([phase]) => phase === name)?.[1]).filter((value): value is number => value !== undefined));
      cells.set(name, [ms(at), ms(at - previous)]);
      previous = at;
    }
    return cells;
  });
  return names.map((name) => [name, ...columns.flatMap((cells) => cells.get(name) ?? ['', ''])]);
}

/**
 * Spawn to the first 200 of GET /health. The request is sent when serve's banner (printed once it listens) appears on
 * stderr, so this is never earlier than the true first possible answer; polling instead (every 2 ms, as this bench
 * first did) kept one of the two cores busy with refused connections while serve was starting. The process is
 * stopped after each run.
 */
async function serveFirstHealth(executable: string, env: NodeJS.ProcessEnv, port: number): Promise<number> {
  const start = performance.now();
  const child = spawn(executable, ['serve', '--http-port', String(port), '--http-hostname', '127.0.0.1', '--disable-grpc'], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    await new Promise<void>((resolve, reject) => {
      let stderr = '';
      const timer = setTimeout(() => reject(new Error('serve did not listen within 30 s')), 30_000);
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        if (stderr.includes(`HTTP  http://127.0.0.1:${port}`)) {
          clearTimeout(timer);
          resolve();
        }
      });
      void exited.then(() => reject(new Error(`serve exited with ${child.exitCode}: ${stderr}`)));
    });
    const response = await fetch(`http://127.0.0.1:${port}/health`);
    if (!response.ok) throw new Error(`/health answered ${response.status}`);
    return performance.now() - start;
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

/**
 * The phases and the aims of issue 14 for the tiny model built on this base runtime and, with `--before <base runtime>`
 * (an older build of it), on that one too, measured alternately.
 */
async function startupAims(work: string, beforeBase: string | undefined): Promise<void> {
  const env = executableEnv(work);
  const builds: [string, string][] = [];
  if (beforeBase) {
    const before = path.join(work, 'tiny-before');
    timed(beforeBase, ['build', '-f', path.join(work, 'tiny.yaml'), '--base-binary-path', beforeBase, '-o', before], env);
    builds.push(['before', before]);
  }
  builds.push([beforeBase ? 'after' : 'this build', path.join(work, 'tiny')]);
  const executables = builds.map(([, executable]) => executable);
  const labels = builds.map(([label]) => label);
  printTable(
    `Warm \`infer\` of the tiny model by phase (ENCODER_TRACE_STARTUP=1; ms since the process started, medians of ${RUNS} alternating runs)`,
    ['phase', ...labels.flatMap((label) => [`${label}: at`, `${label}: took`])],
    startupPhases(executables, env),
  );
  const nodeBin = path.join(root, 'node_modules', '.bin', 'node');
  // Node's own start is timed between the runs, so that it saw the same machine: on a shared machine both drift.
  const floor: number[] = [];
  const infer = executables.map(() => [] as number[]);
  const health = executables.map(() => [] as number[]);
  for (let i = 0; i < RUNS; i++) {
    floor.push(timed(nodeBin, ['-e', '0'], {}));
    executables.forEach((executable, e) => infer[e].push(tracedInfer(executable, env).total));
  }
  for (let i = 0; i < 5; i++) {
    floor.push(timed(nodeBin, ['-e', '0'], {}));
    for (const [e, executable] of executables.entries()) health[e].push(await serveFirstHealth(executable, env, 18_700 + e));
  }
  const nodeFloor = median(floor);
  const ratio = (values: number[][]) => (values.length === 2 ? [`${(median(values[1]) / median(values[0])).toFixed(2)}x`] : []);
  const ofFloor = (values: number[][]) => `${(median(values.at(-1)!) / nodeFloor).toFixed(1)}x`;
  printTable(
    'Start-up aims (tiny model, whole-process ms, medians)',
    ['measure', ...labels, ...(builds.length === 2 ? ['after / before'] : []), 'aim', `${labels.at(-1)} / node -e 0`, 'aim / node -e 0 (24 ms on a quiet machine)'],
    [
      [`\`node -e 0\` (the pinned Node alone, ${floor.length} runs between the others)`, ms(nodeFloor), ...(builds.length === 2 ? ['', ''] : []), '', '', ''],
      [`warm \`infer\` (${RUNS} runs)`, ...infer.map((values) => ms(median(values))), ...ratio(infer), '<= 120', ofFloor(infer), '5.0x'],
      ['`serve`: spawn to first /health 200 (5 runs)', ...health.map((values) => ms(median(values))), ...ratio(health), '<= 200', ofFloor(health), '8.3x'],
    ],
  );
}

/** The tiny model's executable and config as `measure` leaves them for startupAims, and its cache filled by one run. */
function buildTiny(modelDir: string, work: string): void {
  const config = writeConfig(work, 'tiny', modelDir);
  const env = executableEnv(work);
  timed(base, ['build', '-f', config, '--base-binary-path', base, '-o', path.join(work, 'tiny')], env);
  timed(path.join(work, 'tiny'), ['infer', 'warm the cache'], env);
}

/** Every base runtime built in dist/runtime, and the tiny model packed onto it (`build --platform`). */
function baseRuntimeSizes(work: string): (string | number)[][] {
  const config = path.join(work, 'tiny.yaml');
  const env = executableEnv(work);
  return TARGETS.flatMap((target) => {
    const runtime = path.join(root, 'dist', 'runtime', target, `encoder${executableExtension(target)}`);
    if (!existsSync(runtime)) return [];
    const output = path.join(work, `tiny-${target}${executableExtension(target)}`);
    timed(base, ['build', '-f', config, '--platform', target, '--base-binary-path', runtime, '-o', output], env);
    return [[target, path.basename(runtime), formatBytes(statSync(runtime).size), formatBytes(statSync(output).size)]];
  });
}

async function main(): Promise<void> {
  if (!existsSync(base)) throw new Error(`${base} is absent: run npm run build:runtime -- --target host`);
  const { values } = parseArgs({ options: { before: { type: 'string' }, only: { type: 'string' } } });
  if (values.before !== undefined && !existsSync(values.before)) throw new Error(`--before ${values.before}: no such base runtime`);
  if (values.only !== undefined && values.only !== 'aims') throw new Error(`--only ${values.only}: the one part that runs alone is "aims"`);
  const work = mkdtempSync(path.join(os.tmpdir(), 'bench-startup-'));
  try {
    const tiny = path.join(work, 'tiny-model');
    await writeModelDirectory(tiny, PRESETS.tiny);
    if (values.only === 'aims') {
      // The aims alone, in seconds: for a machine that is quiet only now and then.
      buildTiny(tiny, work);
      await startupAims(work, values.before);
      return;
    }
    const minilm = await ensureBenchModel();
    const rows = [await measure('tiny', tiny, work), await measure('minilm', minilm, work), await measure('minilm-int8', minilm, work, '  quantize: int8\n')];
    printTable(
      `Single executable start-up (ms, medians: build of 3, first run of 3, warm of ${RUNS})`,
      ['model', 'base binary', 'model binary', 'assets', 'section overhead', 'build', 'first run (empty cache)', 'warm infer', 'node from source', 'source / warm'],
      rows,
    );
    printTable('Base runtimes by target (npm run build:runtime -- --target ...)', ['target', 'file', 'base runtime', 'tiny model executable'], baseRuntimeSizes(work));
    await startupAims(work, values.before);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
