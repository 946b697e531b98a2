import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/**
 * A throwaway PostgreSQL server on 127.0.0.1 for tests and benchmarks: Debian's `postgresql` package (installed
 * by .ci/run), initdb into a temporary folder, pg_ctl start on a free port. PostgreSQL refuses to run as root,
 * so as root it runs as the `postgres` user. GATEWAY_TEST_DATABASE_URL (an admin URL of a running server) skips
 * all of that. `startPostgres` returns null with a reason when no server can be had.
 */
export interface TestPostgres {
  /** A URL to a new, empty database on the server. */
  createDatabase(): Promise<string>;
  stop(): Promise<void>;
  /** The server's main process (its postmaster) when started here; undefined for GATEWAY_TEST_DATABASE_URL's. */
  pid?: number;
}

export type PostgresStart = { server: TestPostgres; reason?: undefined } | { server: null; reason: string };

function findBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((name) => existsSync(path.join(root, name, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? path.join(root, versions[0], 'bin') : null;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

let databases = 0;

function serverAt(adminUrl: string, stop: () => Promise<void>): TestPostgres {
  return {
    async createDatabase() {
      const name = `gw_test_${process.pid}_${++databases}_${Date.now().toString(36)}`;
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      const url = new URL(adminUrl);
      url.pathname = `/${name}`;
      return url.toString();
    },
    stop,
  };
}

export async function startPostgres(options: { durable?: boolean } = {}): Promise<PostgresStart> {
  const external = process.env.GATEWAY_TEST_DATABASE_URL;
  if (external) return { server: serverAt(external, async () => {}) };
  const bin = findBinDir();
  if (!bin) return { server: null, reason: 'PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/pg_ctl; .ci/run installs Debian\'s postgresql)' };
  const asRoot = process.getuid?.() === 0;
  const run = (program: string, args: string[]) =>
    asRoot
      ? execFileSync('runuser', ['-u', 'postgres', '--', path.join(bin, program), ...args], { stdio: 'pipe' })
      : execFileSync(path.join(bin, program), args, { stdio: 'pipe' });
  // As root the server runs as `postgres`, which must reach the folder: /tmp, not a TMPDIR that may be private.
  const dir = mkdtempSync(path.join(asRoot ? '/tmp' : os.tmpdir(), 'gateway-pg-'));
  try {
    if (asRoot) {
      const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
      const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
      chownSync(dir, uid, gid);
      chmodSync(dir, 0o700);
    }
    const data = path.join(dir, 'data');
    run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
    const port = await freePort();
    const settings = [`-h 127.0.0.1`, `-p ${port}`, `-k ${dir}`, '-c max_connections=200'];
    if (!options.durable) settings.push('-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off');
    run('pg_ctl', ['-D', data, '-l', path.join(dir, 'log'), '-o', settings.join(' '), '-w', '-t', '60', 'start']);
    let stopped = false;
    const pid = Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return {
      server: { pid, ...serverAt(`postgres://postgres@127.0.0.1:${port}/postgres`, async () => {
        if (stopped) return;
        stopped = true;
        try {
          run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      }) },
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    const e = error as { stderr?: Buffer; message: string };
    return { server: null, reason: `PostgreSQL could not be started: ${e.stderr?.toString().trim() || e.message}` };
  }
}
