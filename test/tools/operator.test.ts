import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { ChildRecords } from '../../src/tools/child-records.ts';
import { exportToolsConfig, parseToolsConfig, startToolServer, ToolsConfigError } from '../../src/tools/index.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';
import { EVERYTHING, NODE, eventually, fixture, isAlive } from './helpers.ts';

// mcpd's operator workflow: secrets in a file of their own, a sanitised export, allow-list changes applied without a
// restart, and no stdio server outliving the tool server (process groups, and a sweep after a SIGKILL).

const dir = mkdtempSync(path.join(tmpdir(), 'tools-operator-'));
const spawned: ChildProcess[] = [];
afterAll(() => {
  for (const child of spawned) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const start = (configFile: string, extra: { secretsFile?: string } = {}) =>
  startToolServer({ configFile, host: '127.0.0.1', port: 0, version: '0.0.0-test', swaggerUiFiles: installedSwaggerUiFile, stateDir: path.join(dir, 'state'), ...extra });

function write(name: string, text: string, mode = 0o600): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  chmodSync(file, mode);
  return file;
}

describe('secrets file', () => {
  const SECRET = 'sk-live-4f9a1c77e2';
  const config = write('secret-tools.yaml', `servers:\n  everything:\n    command: ${NODE}\n    args: [${EVERYTHING}, stdio]\n    env: {API_TOKEN: "\${secret:API_TOKEN}"}\n`);

  it('gives ${secret:NAME} its value from the secrets file', async () => {
    const secrets = write('secrets.yaml', `secrets:\n  API_TOKEN: ${SECRET}\n`);
    const server = await start(config, { secretsFile: secrets });
    try {
      await server.upstreams.get('everything').waitConnected(30_000);
      const env = await server.app.inject({ method: 'POST', url: '/api/v1/servers/everything/tools/get-env', payload: {} });
      expect(env.statusCode).toBe(200);
      expect(JSON.parse(env.json() as string).API_TOKEN).toBe(SECRET);
    } finally {
      await server.close();
    }
  });

  it('refuses a secrets file other users may read, an unknown secret, a missing file, never printing a value', async () => {
    const open = write('open-secrets.yaml', `secrets:\n  API_TOKEN: ${SECRET}\n`, 0o644);
    const refused = await start(config, { secretsFile: open }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(ToolsConfigError);
    expect((refused as Error).message).toMatch(/other users may read or change this secrets file \(mode 0644\); run: chmod 600/);
    expect((refused as Error).message).not.toContain(SECRET);
    const other = write('other-secrets.yaml', `secrets:\n  SOMETHING_ELSE: ${SECRET}\n`);
    expect(() => parseToolsConfig(readFileSync(config, 'utf8'), config, {}, () => ({ source: other, get: () => undefined }))).toThrow(
      /\/servers\/everything\/env\/API_TOKEN: secret API_TOKEN is not in .*other-secrets\.yaml/,
    );
    await expect(start(config, { secretsFile: path.join(dir, 'absent.yaml') })).rejects.toThrow(/cannot read the secrets file .*absent\.yaml/);
    const bad = write('bad-secrets.yaml', `secrets:\n  API_TOKEN: [${SECRET}]\n`);
    const badError = await start(config, { secretsFile: bad }).catch((error: Error) => error);
    expect(String(badError)).toMatch(/\/secrets\/API_TOKEN: must be a string/);
    expect(String(badError)).not.toContain(SECRET);
  });

  it('is not read when the configuration uses no secret', () => {
    const plain = `servers:\n  a: {command: x}\n`;
    expect(parseToolsConfig(plain, 'plain.yaml', {}, () => {
      throw new Error('read');
    }).servers).toHaveLength(1);
  });
});

describe('tools config export', () => {
  const config = write(
    'export-tools.yaml',
    [
      '# shared team configuration',
      'servers:',
      '  github:',
      '    url: https://api.example.com/mcp',
      '    headers: {Authorization: "Bearer ghp_literal_0123", X-Team: "${TEAM}"}',
      '  db:',
      '    url: https://admin:hunter2@db.example.com/mcp?token=abc',
      '  local:',
      `    command: ${NODE}`,
      '    args: [server.js]',
      '    env:',
      '      DB_PASSWORD: "${secret:DB_PASSWORD}"',
      '      API_KEY: plain-key-9876',
      '',
    ].join('\n'),
  );

  it('replaces every literal env and header value and credential URLs by references, keeping the rest', () => {
    const exported = exportToolsConfig(config);
    for (const value of ['ghp_literal_0123', 'hunter2', 'token=abc', 'plain-key-9876']) expect(exported.text).not.toContain(value);
    expect(exported.text).toContain('# shared team configuration');
    expect(exported.text).toContain('${TEAM}');
    expect(exported.text).toContain('${secret:DB_PASSWORD}');
    expect(exported.replaced).toEqual({
      '/servers/github/headers/Authorization': 'GITHUB_AUTHORIZATION',
      '/servers/db/url': 'DB_URL',
      '/servers/local/env/API_KEY': 'LOCAL_API_KEY',
    });
    expect(exported.secrets).toEqual(['DB_PASSWORD', 'DB_URL', 'GITHUB_AUTHORIZATION', 'LOCAL_API_KEY']);
    expect(exported.environment).toEqual(['TEAM']);
    // the copy is a configuration that works once its secrets are given
    const values: Record<string, string> = { DB_PASSWORD: 'p', DB_URL: 'https://db.example.com/mcp', GITHUB_AUTHORIZATION: 'Bearer x', LOCAL_API_KEY: 'k' };
    const parsed = parseToolsConfig(exported.text, 'exported.yaml', { TEAM: 't' }, () => ({ source: 's', get: (name) => values[name] }));
    expect(parsed.servers.map((server) => server.name)).toEqual(['github', 'db', 'local']);
  });

  it('runs as `encoder tools config export`: the copy on stdout, what it needs on stderr', async () => {
    const child = spawn(NODE, [path.join(repoRoot, 'src/cli/main.ts'), 'tools', 'config', 'export', '-c', config], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const code = await new Promise((resolve) => child.on('exit', resolve));
    expect(code).toBe(0);
    expect(stdout).toContain('${secret:GITHUB_AUTHORIZATION}');
    expect(stdout + stderr).not.toMatch(/ghp_literal_0123|hunter2|plain-key-9876/);
    expect(stderr).toContain('the copy needs secrets: DB_PASSWORD, DB_URL, GITHUB_AUTHORIZATION, LOCAL_API_KEY; environment variables: TEAM');
    const missing = spawn(NODE, [path.join(repoRoot, 'src/cli/main.ts'), 'tools', 'config', 'export', '-c', path.join(dir, 'nope.yaml')], { stdio: 'ignore' });
    expect(await new Promise((resolve) => missing.on('exit', resolve))).toBe(2);
  });
});

describe('a reload that changes only the allow-list', () => {
  it('applies it to the running server: same process, its state kept', async () => {
    const entry = (tools: string) => `servers:\n  counter:\n    command: ${NODE}\n    args: [${fixture('counter.ts')}]\n    tools: [${tools}]\n`;
    const config = write('counter-tools.yaml', entry('increment, get'));
    const server = await start(config);
    try {
      const counter = server.upstreams.get('counter');
      await counter.waitConnected(30_000);
      const call = (tool: string) => server.app.inject({ method: 'POST', url: `/api/v1/servers/counter/tools/${tool}`, payload: {} });
      expect((await call('increment')).json()).toBe('1');
      expect((await call('increment')).json()).toBe('2');
      const pid = counter.pid;
      writeFileSync(config, entry('get'));
      expect(server.reload()).toEqual({ added: [], removed: [], restarted: [], updated: ['counter'], unchanged: [] });
      expect(server.upstreams.get('counter')).toBe(counter);
      expect(counter.pid).toBe(pid);
      expect((await call('get')).json()).toBe('2');
      const refused = await call('increment');
      expect(refused.statusCode).toBe(403);
      expect(refused.json().detail).toContain('allow-list');
      const listed = await server.app.inject('/api/v1/servers/counter/tools?detail=minimal');
      expect(listed.json().tools.map((tool: { name: string }) => tool.name)).toEqual(['get']);
      // any other change still restarts it
      writeFileSync(config, entry('get').replace('tools:', 'timeouts: {request: 30s}\n    tools:'));
      expect(server.reload().restarted).toEqual(['counter']);
    } finally {
      await server.close();
    }
  });
});

describe('stdio servers never outlive the tool server', () => {
  const config = write('orphans-tools.yaml', `servers:\n  counter:\n    command: ${NODE}\n    args: [${fixture('counter.ts')}]\n`);
  const stateDir = path.join(dir, 'orphan-state');

  function serve(): { child: ChildProcess; output: () => string } {
    const child = spawn(NODE, [path.join(repoRoot, 'src/cli/main.ts'), 'tools', 'serve', '--config', config, '--state-dir', stateDir, '--addr', '127.0.0.1:0'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    spawned.push(child);
    let stderr = '';
    child.stderr!.on('data', (chunk) => (stderr += chunk));
    return { child, output: () => stderr };
  }
  const childPid = (output: string) => Number(/\[counter\] connected \(pid (\d+)\)/.exec(output)?.[1]);

  it('ends, at the next start, a server left running by a SIGKILLed tool server', async () => {
    const first = serve();
    const orphan = await eventually(() => {
      const pid = childPid(first.output());
      expect(pid, first.output()).toBeGreaterThan(0);
      return pid;
    }, 60_000);
    await eventually(() => expect(first.output()).toContain('tool server on'), 60_000);
    first.child.kill('SIGKILL');
    await new Promise((resolve) => first.child.once('exit', resolve));
    // the counter ignores the end of its stdin: it is an orphan now
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(isAlive(orphan)).toBe(true);
    const second = serve();
    await eventually(() => expect(second.output()).toContain('tool server on'), 60_000);
    expect(second.output()).toContain(`ending pid ${orphan}`);
    await eventually(() => expect(isAlive(orphan)).toBe(false), 10_000);
    const replacement = childPid(second.output());
    expect(replacement).not.toBe(orphan);
    // SIGTERM: the tool server closes its servers, the process group with them
    second.child.kill('SIGTERM');
    expect(await new Promise((resolve) => second.child.once('exit', resolve))).toBe(0);
    expect(isAlive(replacement)).toBe(false);
  });

  it('ends them at once on a second Ctrl+C (the terminal\'s SIGINT no longer reaches their process group)', async () => {
    const run = serve();
    await eventually(() => expect(run.output()).toContain('tool server on'), 60_000);
    const pid = childPid(run.output());
    expect(isAlive(pid)).toBe(true);
    run.child.kill('SIGINT');
    await eventually(() => expect(run.output()).toContain('SIGINT: stopping'));
    run.child.kill('SIGINT');
    expect(await new Promise((resolve) => run.child.once('exit', resolve))).toBe(130);
    expect(run.output()).toContain('SIGINT again: ending every child process now');
    await eventually(() => expect(isAlive(pid)).toBe(false), 5000);
  });

  it.runIf(process.platform === 'linux')('leaves alone a recorded pid that now belongs to another process', async () => {
    // a group leader, as the tool server's servers are
    const sleeper = spawn('sleep', ['30'], { stdio: 'ignore', detached: true });
    spawned.push(sleeper);
    await new Promise((resolve) => sleeper.once('spawn', resolve));
    const lines: string[] = [];
    const records = new ChildRecords(path.join(dir, 'reuse-state'), config, (line) => lines.push(line));
    const command = readFileSync(`/proc/${sleeper.pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
    const dead = { pid: 2 ** 22 + 12345, startTime: '1', command: 'gone' };
    const recordWith = (startTime: string) => {
      mkdirSync(path.dirname(records.file), { recursive: true });
      writeFileSync(records.file, JSON.stringify({ owner: dead, children: [{ pid: sleeper.pid, startTime, command }] }));
    };
    recordWith('999'); // the pid's start time differs: the pid was reused
    expect(await records.sweep()).toBe(0);
    expect(isAlive(sleeper.pid!)).toBe(true);
    expect(lines.join('\n')).toContain(`pid ${sleeper.pid} of a previous run now belongs to another process: left alone`);
    const stat = readFileSync(`/proc/${sleeper.pid}/stat`, 'utf8');
    recordWith(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]); // the very process: ended
    expect(await records.sweep()).toBe(1);
    await eventually(() => expect(sleeper.exitCode !== null || sleeper.signalCode !== null).toBe(true));
  });

  it.runIf(process.platform === 'linux')('takes a recorded server that has ended but was not reaped (a zombie) for gone, not for another process', async () => {
    // `sleep 0` ends at once and its parent, exec'd into `sleep 30`, never reaps it: a zombie with the recorded pid
    const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'], detached: true });
    spawned.push(parent);
    const zombie = Number(await new Promise<string>((resolve) => parent.stdout!.once('data', (chunk: Buffer) => resolve(chunk.toString()))));
    await eventually(() => expect(readFileSync(`/proc/${zombie}/stat`, 'utf8')).toMatch(/\) Z /));
    const stat = readFileSync(`/proc/${zombie}/stat`, 'utf8');
    const lines: string[] = [];
    const records = new ChildRecords(path.join(dir, 'zombie-state'), config, (line) => lines.push(line));
    mkdirSync(path.dirname(records.file), { recursive: true });
    const owner = { pid: 2 ** 22 + 12345, startTime: '1', command: 'gone' };
    writeFileSync(records.file, JSON.stringify({ owner, children: [{ pid: zombie, startTime: stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19], command: 'sleep 0' }] }));
    expect(await records.sweep()).toBe(0);
    expect(lines).toEqual([]);
    expect(existsSync(records.file)).toBe(false);
    parent.kill('SIGKILL');
  });
});
