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
import pg from 'pg';
import { startPostgres } from '../test/gateway/helpers/postgres.ts';
import { MASTER_KEY, prefillUsage, startGatewayProcess } from './gateway-process.ts';
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

/** The same rows as prefillUsage writes to SQLite, made inside PostgreSQL by one INSERT … SELECT. */
async function prefillPostgres(url: string, count: number): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const span = 30 * 86_400_000;
    await client.query(
      `INSERT INTO usage (id, request_id, created_at, user_id, key_id, endpoint, provider, model, prompt_tokens, completion_tokens, cost_nanos, status, status_code, duration_ms)
       SELECT 'usage_prefill_' || lpad(i::text, 10, '0'), 'prefill_' || i, $1::bigint + floor(i::float8 / $2 * $3)::bigint,
              'user_' || (i % 20), 'key_' || (i % 50), 'chat.completions', m.provider, m.provider || ':' || m.model, 12, 16, 11400,
              CASE WHEN i % 50 = 0 THEN 'error' ELSE 'success' END, CASE WHEN i % 50 = 0 THEN 502 ELSE 200 END, 1.5
       FROM generate_series(0, $2 - 1) AS i
       JOIN (SELECT ordinality - 1 AS slot, provider, model FROM unnest($4::text[], $5::text[]) WITH ORDINALITY AS t(provider, model)) m ON m.slot = i % 4`,
      [Date.now() - span, count, span, MODELS.map(([provider]) => provider), MODELS.map(([, model]) => model)],
    );
    await client.query('ANALYZE usage');
  } finally {
    await client.end();
  }
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
      await measureDatabase('SQLite', `sqlite:${file}`, () =>
        prefillUsage(file, ROWS, (i) => {
          const [provider, model] = MODELS[i % MODELS.length];
          return { key_id: `key_${i % 50}`, user_id: `user_${i % 20}`, provider, model: `${provider}:${model}`, status: i % 50 === 0 ? 'error' : 'success' };
        }), dir);
    }
    if (ONLY !== 'sqlite') {
      const postgres = await startPostgres({ durable: true });
      if (!postgres.server) {
        console.log(`PostgreSQL skipped: ${postgres.reason}`);
        return;
      }
      try {
        const url = await postgres.server.createDatabase();
        await measureDatabase('PostgreSQL', url, () => prefillPostgres(url, ROWS), dir);
      } finally {
        await postgres.server.stop();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
