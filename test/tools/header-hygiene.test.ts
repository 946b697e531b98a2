import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { parseToolsConfig, ToolsConfigError } from '../../src/tools/config.ts';
import { startToolServer } from '../../src/tools/index.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';
import { EVERYTHING, NODE, eventually, freePort } from './helpers.ts';

// Header names and values of Streamable HTTP servers are checked wherever they enter — `tools add --header`, the
// file at start-up, a SIGHUP reload, after `${NAME}` substitution — and no value is ever printed: not in an error, not
// on stderr, not in a 503's detail, not in the audit log. The secrets below are marked so that any output can be
// searched for them.

const dir = mkdtempSync(path.join(tmpdir(), 'tools-header-hygiene-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MARK = 'SeCrEt-7f3a';
/** A secret with a line break: were it sent, its second line would be a header of its own. */
const SPLITTING = `${MARK}-token\r\nInjected: 1`;
const HEADER_PROBLEMS: [what: string, headers: string, message: string][] = [
  ['CR/LF in a value', `{X-A: "v\\r\\nInjected: ${MARK}"}`, 'the value of header "X-A" contains a line break (CR or LF)'],
  ['LF alone in a value', `{X-A: "v\\nInjected: ${MARK}"}`, 'contains a line break (CR or LF)'],
  ['a control character in a value', `{X-A: "v\\u0007${MARK}"}`, 'the value of header "X-A" contains a control character'],
  ['a character beyond U+00FF in a value', `{X-A: "v\\u0100${MARK}"}`, 'contains a character beyond U+00FF'],
  ['a space in a name', `{"X A${MARK}": v}`, `"X A${MARK}" is not a header name`],
  ['a line break in a name', `{"X-A\\r\\nInjected${MARK}": v}`, 'is not a header name'],
];

function configError(yaml: string, env: NodeJS.ProcessEnv = {}): string {
  try {
    parseToolsConfig(yaml, 'tools.yaml', env);
  } catch (error) {
    expect(error).toBeInstanceOf(ToolsConfigError);
    return (error as Error).message;
  }
  throw new Error('the configuration was accepted');
}

const remote = (headers: string) => `servers:\n  remote:\n    url: http://127.0.0.1:1/mcp\n    headers: ${headers}\n`;
/** The raw line breaks of a message: the lines it is printed as (a value with CR/LF would add its own). */
const lines = (text: string) => text.split(/\r\n|\r|\n/);

describe('the configuration file (start-up and reload read it the same way)', () => {
  it.each(HEADER_PROBLEMS)('refuses %s, naming the header, never showing the value', (_what, headers, message) => {
    const error = configError(remote(headers));
    expect(error).toContain('/servers/remote/headers: ');
    expect(error).toContain(message);
    // a name is shown JSON-quoted (so its line break stays "\r\n" on one line); a value is never shown
    expect(lines(error).some((line) => line.startsWith('Injected'))).toBe(false);
    if (!message.includes('header name')) expect(error).not.toContain(MARK);
  });

  it('checks after ${NAME} substitution, and does not print the secret that came from the environment', () => {
    const error = configError(remote('{Authorization: "Bearer ${TOKEN}"}'), { TOKEN: SPLITTING });
    expect(error).toContain('the value of header "Authorization" contains a line break (CR or LF), which no HTTP header may hold (the value is not shown: it may be a secret) (after ${NAME} substitution)');
    expect(error).not.toContain(MARK);
    expect(error).not.toContain('Injected');
  });

  it('accepts what HTTP allows: tabs, spaces and Latin-1 in values, tokens as names', () => {
    const config = parseToolsConfig(remote('{X-Token_1.a: "a\\tb é ${TOKEN}", "!#$%&\'*+-.^_`|~": v}'), 'tools.yaml', { TOKEN: `${MARK}-ok` });
    expect(config.servers[0]).toMatchObject({ headers: { 'X-Token_1.a': `a\tb é ${MARK}-ok` } });
  });

  it('shows a URL as the file writes it, not with the secret substituted in', () => {
    const error = configError('servers:\n  remote: {url: "http://exa mple.com/mcp?token=${TOKEN}"}\n', { TOKEN: MARK });
    expect(error).toContain('/servers/remote/url: "http://exa mple.com/mcp?token=${TOKEN}" is not a valid URL');
    expect(error).not.toContain(MARK);
  });

  it('keeps the running configuration when a reload brings a bad header, and says why without the value', async () => {
    const configFile = path.join(dir, 'reload.yaml');
    writeFileSync(configFile, `servers:\n  everything: {command: ${NODE}, args: [${EVERYTHING}]}\n`);
    const env = { ...process.env, TOKEN: SPLITTING };
    const server = await startToolServer({ configFile, host: '127.0.0.1', port: 0, version: '0.0.0-test', swaggerUiFiles: installedSwaggerUiFile, env });
    try {
      writeFileSync(configFile, `servers:\n  everything: {command: ${NODE}, args: [${EVERYTHING}]}\n${remote('{Authorization: "Bearer ${TOKEN}"}').replace('servers:\n', '')}`);
      expect(() => server.reload()).toThrow(ToolsConfigError);
      expect(() => server.reload()).toThrow(/"Authorization" contains a line break/);
      expect(() => server.reload()).not.toThrow(new RegExp(MARK));
      expect(server.upstreams.names()).toEqual(['everything']);
    } finally {
      await server.close();
    }
  }, 60_000);
});

describe('tools add --header', () => {
  const original = 'servers:\n';
  const add = async (...headers: string[]) => {
    const file = path.join(dir, `add-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(file, original);
    const result = await runCliCaptured(['tools', 'add', 'remote', '-c', file, '--url', 'http://127.0.0.1:1/mcp', ...headers.flatMap((header) => ['--header', header])]);
    if (result.code !== 0) expect(readFileSync(file, 'utf8')).toBe(original);
    return result;
  };

  it.each([
    ['CR/LF in a value', `X-A: v\r\nInjected: ${MARK}`, '--header: the value of header "X-A" contains a line break (CR or LF)'],
    ['a control character in a value', `X-A: v\u001b[31m${MARK}`, '--header: the value of header "X-A" contains a control character'],
    ['a name that is no token', `X A${MARK}: v`, `--header: "X A${MARK}" is not a header name`],
    ['no colon', `${MARK} without a name`, '--header number 1 has no colon'],
  ])('refuses %s: exit code 2, the file unchanged, the value not shown', async (_what, header, message) => {
    const result = await add('X-Ok: fine', header);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(message.replace('number 1', 'number 2'));
    expect(lines(result.stderr).some((line) => line.startsWith('Injected'))).toBe(false);
    if (!message.includes('header name')) expect(result.stderr).not.toContain(MARK);
    expect(result.stdout).toBe('');
  });

  it('refuses a ${NAME} whose value in this environment would split the header, without printing it', async () => {
    process.env.HEADER_HYGIENE_TOKEN = SPLITTING;
    try {
      const result = await add('Authorization: Bearer ${HEADER_HYGIENE_TOKEN}');
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('"Authorization" contains a line break (CR or LF)');
      expect(result.stderr).toContain('(after ${NAME} substitution)');
      expect(result.stderr).not.toContain(MARK);
    } finally {
      delete process.env.HEADER_HYGIENE_TOKEN;
    }
  });
});

describe('a running tools serve', () => {
  it('never prints a header secret: not on stderr, not in 503 details, not in the audit log', async () => {
    // one server that is not there, one that refuses every request (as a server refuses a bad token)
    const refusing = http.createServer((request, response) => {
      request.resume();
      response.writeHead(401, { 'content-type': 'text/plain' }).end('invalid token');
    });
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    const closedPort = await freePort();
    const configFile = path.join(dir, 'serve.yaml');
    const headers = '{Authorization: "Bearer ${TOKEN}", X-Api-Key: "${TOKEN}"}';
    writeFileSync(
      configFile,
      `servers:\n` +
        `  down: {url: "http://127.0.0.1:${closedPort}/mcp", headers: ${headers}, restart: {initialDelay: 50ms, maxDelay: 200ms}}\n` +
        `  refusing: {url: "http://127.0.0.1:${(refusing.address() as AddressInfo).port}/mcp", headers: ${headers}, restart: {initialDelay: 50ms, maxDelay: 200ms}}\n` +
        `audit: {file: "-", include_arguments: true}\n`,
    );
    const child = spawn(NODE, [path.join(repoRoot, 'src/cli/main.ts'), 'tools', 'serve', '--config', configFile, '--addr', '127.0.0.1:0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TOKEN: `${MARK}-valid-token` },
    });
    let output = '';
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    try {
      const base = await eventually(() => /tool server on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)![1], 60_000);
      const bodies: string[] = [];
      for (const server of ['down', 'refusing']) {
        for (const [method, route] of [
          ['GET', `/api/v1/servers/${server}/tools`],
          ['POST', `/api/v1/servers/${server}/tools/anything`],
          ['GET', `/api/v1/health/servers/${server}`],
        ]) {
          const response = await fetch(`${base}${route}`, { method, headers: { 'content-type': 'application/json' }, body: method === 'POST' ? '{}' : undefined });
          bodies.push(`${response.status} ${JSON.stringify([...response.headers])} ${await response.text()}`);
        }
      }
      expect(bodies.filter((body) => body.startsWith('503 '))).toHaveLength(4);
      // a few retries later, their failures logged too
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(output).toContain('[refusing]');
      expect(output).toContain('"operation":"call_tool"');
      expect(`${output}\n${bodies.join('\n')}`).not.toContain(MARK);
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
      refusing.close();
    }
    expect(output).not.toContain(MARK);
  }, 90_000);

  it('refuses to start with a secret that holds a line break, and prints no part of it', async () => {
    const configFile = path.join(dir, 'splitting.yaml');
    writeFileSync(configFile, remote('{Authorization: "Bearer ${TOKEN}"}'));
    const child = spawn(NODE, [path.join(repoRoot, 'src/cli/main.ts'), 'tools', 'serve', '--config', configFile, '--addr', '127.0.0.1:0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TOKEN: SPLITTING },
    });
    let output = '';
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code).toBe(2);
    expect(output).toContain('/servers/remote/headers: the value of header "Authorization" contains a line break');
    expect(output).not.toContain(MARK);
    expect(output).not.toContain('Injected');
  }, 60_000);
});
