/** What the gateway benchmarks share: the gateway from source as its own process, its management API, a grown usage table (SQLite or PostgreSQL). */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { newUsageId } from '../src/gateway/ledger.ts';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export const MASTER_KEY = 'bench-master-key-0123456789abcdefghijklmnop';

export interface GatewayProcess {
  /** http://host:port */
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/**
 * `encoder gateway serve` from source (the pinned Node), configured by `configLines` (YAML), on a free port; `root`:
 * the source tree (default: this one).
 */
export async function startGatewayProcess(databaseUrl: string, configLines: string[], dir: string, root = repoRoot): Promise<GatewayProcess> {
  const config = path.join(dir, 'gateway.yaml');
  writeFileSync(config, ['log_level: warn', ...configLines, ''].join('\n'));
  const child = spawn(process.execPath, [path.join(root, 'src', 'cli', 'main.ts'), 'gateway', 'serve', '--config', config, '--host', '127.0.0.1', '--port', '0', '--database-url', databaseUrl], {
    env: { PATH: process.env.PATH, GATEWAY_MASTER_KEY: MASTER_KEY },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let err = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      err += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(err);
      if (match) resolve(match[1]);
    });
    child.once('exit', (code) => reject(new Error(`gateway exited with ${code}: ${err}`)));
  });
  const stop = async () => {
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  };
  return { url, child, stop };
}

/** A management call with the master key; throws unless it succeeds. */
export async function management(url: string, method: string, pathname: string, body?: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(url + pathname, {
    method,
    headers: { 'x-hub-key': `Bearer ${MASTER_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!response.ok) throw new Error(`${method} ${pathname}: ${response.status} ${await response.text()}`);
  return (await response.json()) as Record<string, unknown>;
}

/** The columns of a prefilled row that vary: which key, user, model and outcome. */
export interface PrefillRow {
  key_id: string | null;
  user_id: string | null;
  provider: string;
  model: string;
  status: 'success' | 'error';
}

/** A prefilled row, whole: the varying columns and what follows from them. */
interface PrefilledRow extends PrefillRow {
  id: string;
  request_id: string;
  created_at: number;
  status_code: number;
}

/** `count` rows spread evenly over the 30 days before now, ids made as the gateway makes them, in chunks of 50,000. */
function* prefillChunks(count: number, rowOf: (index: number) => PrefillRow): Generator<PrefilledRow[]> {
  const span = 30 * 86_400_000;
  const start = Date.now() - span;
  for (let done = 0; done < count; done += 50_000) {
    const chunk: PrefilledRow[] = [];
    for (let i = done; i < Math.min(count, done + 50_000); i++) {
      const row = rowOf(i);
      chunk.push({ ...row, id: newUsageId(), request_id: `prefill_${i}`, created_at: start + Math.floor((i / count) * span), status_code: row.status === 'success' ? 200 : 502 });
    }
    yield chunk;
  }
}

/** Fills the usage table of a SQLite gateway with `count` rows (prefillChunks): a gateway that has served for a while. */
export function prefillUsage(file: string, count: number, rowOf: (index: number) => PrefillRow): void {
  const database = new DatabaseSync(file, { timeout: 5000 });
  try {
    const insert = database.prepare(
      `INSERT INTO usage (id, request_id, created_at, user_id, key_id, endpoint, provider, model, prompt_tokens, completion_tokens, cost_nanos, status, status_code, duration_ms)
       VALUES (?, ?, ?, ?, ?, 'chat.completions', ?, ?, 12, 16, 11400, ?, ?, 1.5)`,
    );
    for (const chunk of prefillChunks(count, rowOf)) {
      database.exec('BEGIN');
      for (const row of chunk) insert.run(row.id, row.request_id, row.created_at, row.user_id, row.key_id, row.provider, row.model, row.status, row.status_code);
      database.exec('COMMIT');
    }
    database.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  } finally {
    database.close();
  }
}

/** The same rows in a PostgreSQL gateway's usage table (one INSERT … SELECT FROM unnest per chunk), then ANALYZE. */
export async function prefillPostgresUsage(databaseUrl: string, count: number, rowOf: (index: number) => PrefillRow): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const columns = ['id', 'request_id', 'created_at', 'user_id', 'key_id', 'provider', 'model', 'status', 'status_code'] as const;
    const types = ['text', 'text', 'bigint', 'text', 'text', 'text', 'text', 'text', 'int'];
    for (const chunk of prefillChunks(count, rowOf)) {
      await client.query(
        `INSERT INTO usage (id, request_id, created_at, user_id, key_id, endpoint, provider, model, prompt_tokens, completion_tokens, cost_nanos, status, status_code, duration_ms)
         SELECT id, request_id, created_at, user_id, key_id, 'chat.completions', provider, model, 12, 16, 11400, status, status_code, 1.5
         FROM unnest(${types.map((type, i) => `$${i + 1}::${type}[]`).join(', ')}) AS t(${columns.join(', ')})`,
        columns.map((column) => chunk.map((row) => row[column])),
      );
    }
    await client.query('ANALYZE usage');
  } finally {
    await client.end();
  }
}
