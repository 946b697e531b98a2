/**
 * npm run bench:usage-analytics — the gateway's usage analytics over a grown usage table, on SQLite and on
 * PostgreSQL: each request's time and size, and how long `GET /health` waits meanwhile (probed every 5 ms), which is
 * how long model calls in flight would wait too. The table holds `--rows` rows (default 500,000) spread over 30 days:
 * 4 models of 2 providers, 20 users, 50 keys, 2% errors. The gateway runs from source as its own process.
 * `--only sqlite|postgres` runs one database; PostgreSQL is skipped, with the reason, where it is not installed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startPostgres } from '../test/gateway/helpers/postgres.ts';
import { MASTER_KEY, prefillPostgresUsage, prefillUsage, startGatewayProcess, type PrefillRow } from './gateway-process.ts';
import { median, printTable, probeHealthUntil } from './measure.ts';

const args = process.argv.slice(2);
const option = (name: string) => {
  const at = args.indexOf(name);
  return at === -1 ? undefined : args[at + 1];
};
const ROWS = Number(option('--rows') ?? 500_000);
const ONLY = option('--only');
const MODELS = [
  ['openai', 'gpt-4o'],
  ['openai', 'gpt-4o-mini'],
  ['anthropic', 'claude-sonnet'],
  ['anthropic', 'claude-haiku'],
];

/** Row i of the table: the models, users and keys in turn, one call in 50 failed. */
function rowOf(i: number): PrefillRow {
  const [provider, model] = MODELS[i % MODELS.length];
  return { key_id: `key_${i % 50}`, user_id: `user_${i % 20}`, provider, model: `${provider}:${model}`, status: i % 50 === 0 ? 'error' : 'success' };
}

/** One GET with /health probed every 5 ms until its whole response is in. */
async function probeDuring(url: string, pathname: string): Promise<(string | number)[]> {
  let done = false;
  const started = performance.now();
  const answered = fetch(url + pathname, { headers: { 'x-hub-key': `Bearer ${MASTER_KEY}` } }).then(async (response) => {
    const bytes = (await response.arrayBuffer()).byteLength;
    if (response.status !== 200) throw new Error(`${pathname}: ${response.status}`);
    return bytes;
  }).finally(() => {
    done = true; // a failed request ends the probing too
  });
  const probes = await probeHealthUntil(url, () => done);
  const bytes = await answered;
  const seconds = (performance.now() - started) / 1000;
  const size = bytes >= 2 ** 20 ? `${(bytes / 2 ** 20).toFixed(1)} MiB` : `${(bytes / 1024).toFixed(1)} KiB`;
  return [pathname, size, seconds.toFixed(2), probes.length, median(probes).toFixed(1), Math.max(...probes).toFixed(1)];
}

async function measureDatabase(name: string, databaseUrl: string, prefill: () => Promise<void> | void, dir: string): Promise<void> {
  const gateway = await startGatewayProcess(databaseUrl, [], dir);
  try {
    const started = performance.now();
    await prefill();
    console.log(`${name}: ${ROWS} usage rows written in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const week = `since=${new Date(Date.now() - 7 * 86_400_000).toISOString()}`;
    const rows: (string | number)[][] = [];
    for (const pathname of [
      '/v1/usage/summary',
      `/v1/usage/summary?${week}`,
      '/v1/usage/series?interval=day',
      '/v1/usage/series?interval=hour',
      '/v1/usage?limit=100',
      '/v1/usage?limit=100&key_id=key_7',
      '/v1/usage.csv',
    ]) {
      rows.push(await probeDuring(gateway.url, pathname));
    }
    printTable(
      `Usage analytics over ${ROWS} rows (${name}), /health probed every 5 ms (node ${process.versions.node}, ${os.cpus().length} cores)`,
      ['request', 'response', 'seconds', '/health probes', 'median ms', 'worst ms'],
      rows,
    );
  } finally {
    await gateway.stop();
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-usage-analytics-'));
  try {
    if (ONLY !== 'postgres') {
      const file = path.join(dir, 'gateway.db');
      await measureDatabase('SQLite', `sqlite:${file}`, () => prefillUsage(file, ROWS, rowOf), dir);
    }
    if (ONLY !== 'sqlite') {
      const postgres = await startPostgres({ durable: true });
      if (!postgres.server) {
        console.log(`PostgreSQL skipped: ${postgres.reason}`);
        return;
      }
      try {
        const url = await postgres.server.createDatabase();
        await measureDatabase('PostgreSQL', url, () => prefillPostgresUsage(url, ROWS, rowOf), dir);
      } finally {
        await postgres.server.stop();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
