import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAddr } from '../../src/cli/tools-command.ts';
import { ApiKeys } from '../../src/tools/auth.ts';
import { parseToolsConfig } from '../../src/tools/config.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';
import { NODE, eventually, fixture, isAlive } from './helpers.ts';

// `encoder tools serve` as a process: SIGHUP reloads the configuration restarting only what changed, SIGTERM
// closes every session and child process.

const dir = mkdtempSync(path.join(tmpdir(), 'tools-cli-'));
const configFile = path.join(dir, 'tools.yaml');
const server = (calls: number) => `{command: ${NODE}, args: [${fixture('exits-after-calls.ts')}, --calls, "${calls}"]}`;
const writeConfig = (entries: Record<string, string>) =>
  writeFileSync(configFile, `servers:\n${Object.entries(entries).map(([name, entry]) => `  ${name}: ${entry}`).join('\n')}\n`);

let child: ChildProcess;
let stderr = '';
let baseUrl: string;

beforeAll(async () => {
  writeConfig({ a: server(1000), b: server(1000), d: server(1000) });
  child = spawn(NODE, [path.join(repoRoot, 'src/cli/main.ts'), 'tools', 'serve', '--config', configFile, '--addr', '127.0.0.1:0'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  baseUrl = await eventually(() => {
    const match = /tool server on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
    expect(match, stderr).not.toBeNull();
    return match![1];
  }, 60_000);
});

afterAll(() => {
  if (child.exitCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** The pid of the process behind server `name`, as its echo tool reports it. */
async function pidOf(name: string): Promise<number> {
  return eventually(async () => {
    const response = await fetch(`${baseUrl}/api/v1/servers/${name}/tools/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"message": "pid?"}' });
    expect(response.status).toBe(200);
    return Number(/pid (\d+)/.exec((await response.json()) as string)![1]);
  });
}

describe('encoder tools serve', () => {
  it('announces itself once every server has started, listing their states', async () => {
    expect(stderr).toMatch(/MCP server\(s\); API at \/api\/v1.*\n {2}a: connected\n {2}b: connected\n {2}d: connected\n/);
    // No waiting after the banner: the servers answer at once.
    const response = await fetch(`${baseUrl}/api/v1/servers/a/tools/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"message": "ready?"}' });
    expect(response.status).toBe(200);
  });

  it('reloads on SIGHUP: starts added servers, stops removed ones, restarts only changed ones', async () => {
    const [a, b, d] = [await pidOf('a'), await pidOf('b'), await pidOf('d')];
    writeConfig({ a: server(1000), b: server(999), c: server(1000) });
    child.kill('SIGHUP');
    await eventually(() => expect(stderr).toContain('added: c; removed: d; restarted: b; unchanged: a'));
    expect(await (await fetch(`${baseUrl}/api/v1/servers`)).json()).toEqual(['a', 'b', 'c']);
    expect(await pidOf('a')).toBe(a);
    expect(await pidOf('b')).not.toBe(b);
    expect(await pidOf('c')).toEqual(expect.any(Number));
    await eventually(() => expect(isAlive(d)).toBe(false));
    await eventually(() => expect(isAlive(b)).toBe(false));
  });

  it('keeps the running configuration when the new one is invalid', async () => {
    writeFileSync(configFile, 'servers:\n  a: {command: "${TOOLS_CLI_TEST_UNSET}"}\n');
    child.kill('SIGHUP');
    await eventually(() => expect(stderr).toContain('configuration not reloaded, keeping the current one'));
    expect(stderr).toContain('environment variable TOOLS_CLI_TEST_UNSET is not set');
    expect(await (await fetch(`${baseUrl}/api/v1/servers`)).json()).toEqual(['a', 'b', 'c']);
    // a URL that matches the schema's pattern but that no URL parser takes: the process used to die of it
    writeFileSync(configFile, 'servers:\n  a: {url: "http://exa mple.com/mcp"}\n');
    child.kill('SIGHUP');
    await eventually(() => expect(stderr).toContain('"http://exa mple.com/mcp" is not a valid URL'));
    expect(child.exitCode).toBeNull();
    expect(await (await fetch(`${baseUrl}/api/v1/servers`)).json()).toEqual(['a', 'b', 'c']);
  });

  it('stops on SIGTERM, closing every child process', async () => {
    const pids = [await pidOf('a'), await pidOf('b'), await pidOf('c')];
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stderr).toContain('stopped');
    for (const pid of pids) await eventually(() => expect(isAlive(pid)).toBe(false));
  });
});

describe('encoder tools serve while it drains', () => {
  it('ignores SIGHUP after SIGTERM: the calls under way finish and it exits 0', async () => {
    const drainConfig = path.join(dir, 'drain.yaml');
    writeFileSync(drainConfig, `servers:\n  slow: {command: ${NODE}, args: [${fixture('hangs.ts')}], timeouts: {request: 3s}}\n`);
    const draining = spawn(NODE, [path.join(repoRoot, 'src/cli/main.ts'), 'tools', 'serve', '--config', drainConfig, '--addr', '127.0.0.1:0'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let output = '';
    draining.stderr!.on('data', (chunk) => (output += chunk));
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => draining.once('exit', (code, signal) => resolve([code, signal])));
    try {
      const url = await eventually(() => {
        const match = /tool server on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
        expect(match, output).not.toBeNull();
        return match![1];
      }, 60_000);
      // a call the server never answers holds the shutdown until its 3 s timeout
      const call = fetch(`${url}/api/v1/servers/slow/tools/hang`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      await new Promise((resolve) => setTimeout(resolve, 200));
      draining.kill('SIGTERM');
      await eventually(() => expect(output).toContain('SIGTERM: stopping'));
      draining.kill('SIGHUP');
      expect((await call).status).toBe(504);
      expect(await exited).toEqual([0, null]);
      expect(output).toContain('SIGHUP: stopping; configuration not reloaded');
    } finally {
      if (draining.exitCode === null) draining.kill('SIGKILL');
    }
  });
});

describe('command-line errors', () => {
  it('exits 2 naming the problem for a bad configuration or address', async () => {
    writeFileSync(path.join(dir, 'empty.yaml'), 'servers: {}\n');
    const missing = await runCliCaptured(['tools', 'serve', '--config', path.join(dir, 'absent.yaml')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cannot read the tools configuration');
    const occupier = createServer();
    await new Promise<void>((resolve) => occupier.listen(0, '127.0.0.1', resolve));
    const taken = `127.0.0.1:${(occupier.address() as AddressInfo).port}`;
    const busy = await runCliCaptured(['tools', 'serve', '--config', path.join(dir, 'empty.yaml'), '--addr', taken]);
    occupier.close();
    expect(busy.code).toBe(2);
    expect(busy.stderr).toContain(`cannot listen on ${taken}`);
    const badAddr = await runCliCaptured(['tools', 'serve', '--addr', 'localhost']);
    expect(badAddr.code).toBe(2);
    expect(badAddr.stderr).toContain('"localhost" is not an address');
  });

  it('refuses an address other machines reach without keys or --no-auth (exit 2)', async () => {
    writeFileSync(path.join(dir, 'empty.yaml'), 'servers: {}\n');
    const open = await runCliCaptured(['tools', 'serve', '--config', path.join(dir, 'empty.yaml'), '--addr', ':0']);
    expect(open.code).toBe(2);
    expect(open.stderr).toContain('error: refusing to serve 0.0.0.0:0 without authentication');
    expect(open.stderr).toContain('encoder tools keygen --name NAME');
  });

  it('keygen prints a key once on stdout and the entry for tools.yaml, which the server then accepts', async () => {
    const made = await runCliCaptured(['tools', 'keygen', '--name', 'ci-bot']);
    expect(made.code).toBe(0);
    const key = made.stdout.trim();
    expect(key).toMatch(/^etk_[A-Za-z0-9_-]{43}$/);
    expect(made.stderr).not.toContain(key);
    const entry = /\n( {4}ci-bot:\n.*\n.*\n)/.exec(made.stderr)?.[1];
    expect(entry, made.stderr).toBeDefined();
    expect(entry).toContain(`sha256: ${createHash('sha256').update(key).digest('hex')}`);
    const second = await runCliCaptured(['tools', 'keygen', '--name', 'ci-bot']);
    expect(second.stdout.trim()).not.toBe(key);

    const file = path.join(dir, 'keyed.yaml');
    writeFileSync(file, `servers: {}\nauth:\n  keys:\n${entry}`);
    const keys = new ApiKeys(parseToolsConfig(readFileSync(file, 'utf8'), file).auth!.keys);
    expect(keys.authenticate(`Bearer ${key}`, {}).keyName).toBe('ci-bot');

    const badName = await runCliCaptured(['tools', 'keygen', '--name', 'two words']);
    expect(badName.code).toBe(2);
    expect(badName.stderr).toContain('key names use letters');
    expect((await runCliCaptured(['tools', 'keygen'])).code).toBe(2);
  });

  it('parses addresses', () => {
    expect(parseAddr('0.0.0.0:8090')).toEqual({ host: '0.0.0.0', port: 8090 });
    expect(parseAddr(':9000')).toEqual({ host: '0.0.0.0', port: 9000 });
    expect(parseAddr('[::1]:80')).toEqual({ host: '::1', port: 80 });
    expect(() => parseAddr('host:70000')).toThrow(/not an address/);
  });
});
