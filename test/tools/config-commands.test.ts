import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/shared-fixtures.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';
import { EVERYTHING, MEMORY, NODE, eventually } from './helpers.ts';

// `encoder tools init|add|remove|list` on the command line: what each prints, the file it leaves, exit code 2 with
// a message for each mistake, and a running `tools serve` that picks an added server up on SIGHUP.

const dir = mkdtempSync(path.join(tmpdir(), 'tools-config-commands-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let fileCount = 0;
/** A fresh configuration file with `text`, or none yet. */
function configFile(text?: string): string {
  const file = path.join(dir, `tools-${++fileCount}.yaml`);
  if (text !== undefined) writeFileSync(file, text);
  return file;
}

const tools = (...args: string[]) => runCliCaptured(['tools', ...args]);
/** A tools subcommand on `file`: the option comes first, as anything after `--` belongs to the server's command. */
const toolsOn = (file: string, [command, ...args]: string[]) => tools(command, '-c', file, ...args);

describe('encoder tools init, add, remove, list', () => {
  it('builds a configuration from the starter, and lists it', async () => {
    const file = configFile();
    const init = await tools('init', '-c', file);
    expect(init).toMatchObject({ code: 0, stderr: '' });
    expect(init.stdout).toContain(`wrote ${file}`);
    const starter = readFileSync(file, 'utf8');
    expect(starter).toMatch(/^# Configuration of `encoder tools serve`/);

    const empty = await tools('list', '--config', file);
    expect(empty).toEqual({ code: 0, stdout: '', stderr: `no servers in ${file}; add one with "encoder tools add"\n` });

    const stdio = await tools('add', 'memory', '-c', file, '--env', 'MEMORY_FILE_PATH=/tmp/m=1.jsonl', '--env', 'LOG=debug', '--cwd', '/tmp', '--tools', 'read_graph, create_entities', '--', NODE, MEMORY, '--flag', 'two words');
    expect(stdio).toEqual({ code: 0, stdout: `added server "memory" to ${file}; a running "encoder tools serve" picks the change up on SIGHUP\n`, stderr: '' });
    const http = await tools('add', 'remote', '-c', file, '--url', 'https://mcp.example.com/mcp', '--header', 'Authorization: Bearer ${TOKEN}', '--header', 'X-Team:platform ');
    expect(http.code).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe(
      `${starter}  memory:\n    command: ${NODE}\n    args: [${MEMORY}, --flag, two words]\n    env:\n      MEMORY_FILE_PATH: /tmp/m=1.jsonl\n      LOG: debug\n` +
        `    cwd: /tmp\n    tools: [read_graph, create_entities]\n  remote:\n    url: https://mcp.example.com/mcp\n    headers:\n      Authorization: Bearer \${TOKEN}\n      X-Team: platform\n`,
    );

    const list = await tools('list', '-c', file);
    expect(list.code).toBe(0);
    const width = 'memory'.length;
    expect(list.stdout).toBe(
      `${'NAME'.padEnd(width)}  TRANSPORT  COMMAND / URL\n` +
        `memory  stdio      ${NODE} ${MEMORY} --flag 'two words'\n` +
        `remote  http       https://mcp.example.com/mcp\n`,
    );

    const replaced = await tools('add', 'memory', '-c', file, '--force', '--', 'npx', '-y', '@modelcontextprotocol/server-memory');
    expect(replaced.stdout).toContain(`replaced server "memory" in ${file}`);
    expect((await tools('list', '-c', file)).stdout).toContain('memory  stdio      npx -y @modelcontextprotocol/server-memory\n');

    expect(await tools('remove', 'memory', '-c', file)).toEqual({ code: 0, stdout: `removed server "memory" from ${file}; a running "encoder tools serve" picks the change up on SIGHUP\n`, stderr: '' });
    expect(await tools('remove', 'remote', '-c', file)).toMatchObject({ code: 0 });
    expect(readFileSync(file, 'utf8')).toBe(starter);
  });

  it('uses tools.yaml of the working directory by default', async () => {
    const cwd = process.cwd();
    const work = mkdtempSync(path.join(dir, 'cwd-'));
    process.chdir(work);
    try {
      expect((await tools('init')).code).toBe(0);
      expect((await tools('add', 'a', '--', 'x')).code).toBe(0);
      expect(readFileSync(path.join(work, 'tools.yaml'), 'utf8')).toMatch(/servers:\n {2}a:\n {4}command: x\n$/);
    } finally {
      process.chdir(cwd);
    }
  });
});

describe('mistakes: exit code 2, a message, the file unchanged', () => {
  const original = 'servers:   # mine\n  a:\n    command: x\n';

  it.each([
    ['init over an existing file', ['init'], 'already exists; use --force to replace it'],
    ['add an existing name', ['add', 'a', '--', 'y'], 'server "a" already exists; use --force to replace it'],
    ['add an invalid name', ['add', 'a b', '--', 'y'], '"a b" is not a valid server name'],
    ['remove a missing name', ['remove', 'b'], 'no server "b" (servers: a)'],
    ['add a server tools serve would refuse', ['add', 'b', '--url', 'ftp://x'], '/servers/b/url: must match pattern "^https?://"'],
    ['add without a command or URL', ['add', 'b'], 'give the server\'s command after -- (stdio'],
    ['add with both a command and a URL', ['add', 'b', '--url', 'http://x', '--', 'y'], 'give either --url or a command after --, not both'],
    ['add a header to a stdio server', ['add', 'b', '--header', 'A: b', '--', 'y'], '--header is for Streamable HTTP servers'],
    ['add an environment to an HTTP server', ['add', 'b', '--url', 'http://x', '--env', 'A=b'], '--env and --cwd are for stdio servers'],
    ['add a malformed --env', ['add', 'b', '--env', 'NOEQUALS', '--', 'y'], '--env "NOEQUALS": write KEY=VALUE'],
    ['add the same --env twice', ['add', 'b', '--env', 'A=1', '--env', 'A=2', '--', 'y'], '--env: A is given twice'],
    ['add a malformed --header', ['add', 'b', '--url', 'http://x', '--header', 'No colon'], `--header number 1 has no colon: write 'Name: value'`],
    ['add an empty tool in --tools', ['add', 'b', '--tools', 'a,,b', '--', 'y'], '"a,,b" is not a comma-separated list of tool names'],
    ['add an option of the command without --', ['add', 'b', 'npx', '-y', 'pkg'], "unknown option '-y'"],
  ])('%s', async (_what, args, message) => {
    const file = configFile(original);
    const result = await toolsOn(file, args);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(message);
    expect(result.stdout).toBe('');
    expect(readFileSync(file, 'utf8')).toBe(original);
  });

  it('a file that is not valid YAML', async () => {
    const broken = 'servers:\n  a: [x\n';
    for (const args of [['add', 'b', '--', 'y'], ['remove', 'a'], ['list']]) {
      const file = configFile(broken);
      const result = await toolsOn(file, args);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`error: ${file}: not valid YAML: `);
      expect(readFileSync(file, 'utf8')).toBe(broken);
    }
  });

  it('a file that does not exist', async () => {
    const file = configFile();
    for (const args of [['add', 'b', '--', 'y'], ['remove', 'a'], ['list']]) {
      const result = await toolsOn(file, args);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`cannot read the tools configuration ${file}`);
      expect(result.stderr).toContain('create it with "encoder tools init"');
    }
    expect(existsSync(file)).toBe(false);
  });
});

describe('a running tools serve', () => {
  it('picks up a server added by tools add (and removed by tools remove) on SIGHUP', async () => {
    const memoryDir = mkdtempSync(path.join(dir, 'memory-'));
    const file = configFile(`# served while edited\nservers:\n  everything:   # the reference server\n    command: ${NODE}\n    args: [${EVERYTHING}, stdio]\n`);
    const server = spawn(NODE, [path.join(repoRoot, 'src/cli/main.ts'), 'tools', 'serve', '--config', file, '--addr', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    server.stderr!.on('data', (chunk) => (stderr += chunk));
    try {
      const url = await eventually(() => {
        const match = /tool server on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
        expect(match, stderr).not.toBeNull();
        return match![1];
      }, 60_000);
      const servers = async () => (await fetch(`${url}/api/v1/servers`)).json();
      expect(await servers()).toEqual(['everything']);

      const added = await tools('add', 'memory', '-c', file, '--env', `MEMORY_FILE_PATH=${memoryDir}/memory.jsonl`, '--', NODE, MEMORY);
      expect(added.code, added.stderr).toBe(0);
      server.kill('SIGHUP');
      await eventually(() => expect(stderr).toContain('added: memory; removed: none; restarted: none; unchanged: everything'));
      expect(await servers()).toEqual(['everything', 'memory']);
      // the added server is the real server-memory, started with the environment tools add wrote
      const created = await eventually(async () => {
        const response = await fetch(`${url}/api/v1/servers/memory/tools/create_entities`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ entities: [{ name: 'config-commands', entityType: 'test', observations: ['added on SIGHUP'] }] }),
        });
        expect(response.status).toBe(200);
        return response;
      });
      expect(await created.json()).toContain('config-commands');
      expect(readFileSync(path.join(memoryDir, 'memory.jsonl'), 'utf8')).toContain('added on SIGHUP');

      expect((await tools('remove', 'everything', '-c', file)).code).toBe(0);
      server.kill('SIGHUP');
      await eventually(() => expect(stderr).toContain('added: none; removed: everything; restarted: none; unchanged: memory'));
      expect(await servers()).toEqual(['memory']);
    } finally {
      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGTERM');
      await exited;
    }
  }, 120_000);
});
