/** Small timing helpers for the benchmarks: medians over repeated runs, printed as tables; `--priority`. */
import { writeFileSync } from 'node:fs';
import os from 'node:os';

export interface Timing {
  medianMs: number;
  minMs: number;
  runs: number;
}

/** Runs `fn` `warmup` times, then `runs` times, and returns the median and minimum wall time. */
export async function time(fn: () => unknown, options: { runs?: number; warmup?: number } = {}): Promise<Timing> {
  const runs = options.runs ?? 10;
  for (let i = 0; i < (options.warmup ?? 2); i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    await fn();
    samples.push(performance.now() - start);
  }
  return { medianMs: median(samples), minMs: Math.min(...samples), runs };
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Prints a Markdown table, so the output can go straight into docs/benchmarks.md. */
export function printTable(title: string, header: string[], rows: (string | number)[][]): void {
  const cells = [header, ...rows.map((row) => row.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((row) => row[i].length)));
  const line = (row: string[]) => `| ${row.map((cell, i) => cell.padEnd(widths[i])).join(' | ')} |`;
  console.log(`\n### ${title}\n`);
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const row of cells.slice(1)) console.log(line(row));
}

export const ms = (value: number): string => value.toFixed(value < 1 ? 3 : 1);

/**
 * Probes `GET {url}/health` every 5 ms until `done()` says the work being measured is over: each probe's latency in
 * ms. The worst is what a liveness check with a short timeout, or any request arriving meanwhile, would have waited.
 */
export async function probeHealthUntil(url: string, done: () => boolean): Promise<number[]> {
  const probes: number[] = [];
  while (!done()) {
    const started = performance.now();
    await (await fetch(`${url}/health`)).text();
    probes.push(performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return probes;
}

/**
 * `--priority` (root, Linux): this session's scheduler autogroup and this process at nice -20, inherited by the
 * processes the bench starts. Linux shares the cores between sessions' autogroups equally whatever their processes'
 * nice values, so on a machine shared with other sessions' work only the autogroup's nice gives a measurement the
 * cores when it wants them. Says what it did.
 */
export function takePriorityIfAsked(argv: readonly string[] = process.argv): void {
  if (!argv.includes('--priority')) return;
  try {
    writeFileSync('/proc/self/autogroup', '-20');
    os.setPriority(-20);
    console.log('scheduling: this session at nice -20 (--priority)');
  } catch (error) {
    console.log(`scheduling: --priority refused (${(error as Error).message}); shared as usual`);
  }
}
