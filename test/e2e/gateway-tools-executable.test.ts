/**
 * The base runtime also runs the gateway and the tool server (DESIGN: "the same runtime also runs the gateway and
 * tools subcommands"): the vendor SDKs, node:sqlite and the MCP client must work inside the single executable, with
 * no Node on PATH. Each is driven over loopback like a user would: the gateway forwards a chat completion to a fake
 * OpenAI server and records its usage; the tool server starts the reference MCP memory server over stdio.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { FakeOpenAIServer } from '../hub/fakes/openai-compatible.ts';
import { baseRuntimePath, executableEnv, hasBaseRuntime, runExecutable, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

warnIfNoBaseRuntime('gateway and tools in the single executable');

/** Starts `encoder <args>` and resolves with the address it prints once it listens. */
function startListening(args: string[], env: NodeJS.ProcessEnv, pattern: RegExp): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const child = spawn(baseRuntimePath(), args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no address within 60 s; stderr:\n${stderr}`)), 60_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = pattern.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve({ child, url: match[1], stderr: () => stderr });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code} before listening; stderr:\n${stderr}`));
    });
  });
}

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`not true within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function stop(child: ChildProcess | undefined): Promise<number | null> {
  if (!child || child.exitCode !== null) return Promise.resolve(child?.exitCode ?? null);
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
    child.kill('SIGTERM');
  });
}

describe.runIf(hasBaseRuntime())('gateway and tools in the single executable', () => {
  let work: string;
  beforeAll(() => {
    work = mkdtempSync(path.join(os.tmpdir(), 'encoder-gateway-tools-'));
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('gateway keygen prints a URL-safe key of 32 random bytes', () => {
    const first = runExecutable(baseRuntimePath(), ['gateway', 'keygen'], { cacheDir: path.join(work, 'cache') });
    const second = runExecutable(baseRuntimePath(), ['gateway', 'keygen'], { cacheDir: path.join(work, 'cache') });
    expect(first.status, first.stderr).toBe(0);
    expect(first.stdout.trim()).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(second.stdout.trim()).not.toBe(first.stdout.trim());
  });

  it('gateway serve forwards a chat completion through Hub and records its usage in SQLite', async () => {
    const fake = await FakeOpenAIServer.start();
    const masterKey = 'mk-e2e-0123456789abcdef0123456789abcdef';
    const config = path.join(work, 'gateway.yaml');
    writeFileSync(
      config,
      [
        'master_key: ${E2E_MASTER_KEY}',
        `database_url: sqlite:${path.join(work, 'gateway.db')}`,
        'providers:',
        '  openai:',
        '    api_key: sk-e2e',
        `    api_base: ${fake.baseURL}`,
        'pricing:',
        '  openai:fake-model-1: {input_cost_per_million: 1, output_cost_per_million: 2}',
      ].join('\n'),
    );
    const env = executableEnv({ cacheDir: path.join(work, 'cache'), env: { E2E_MASTER_KEY: masterKey } });
    let gateway: ChildProcess | undefined;
    try {
      const started = await startListening(['gateway', 'serve', '--config', config, '--host', '127.0.0.1', '--port', '0'], env, /listening on (http:\/\/\S+)/);
      gateway = started.child;
      const call = (method: string, route: string, body?: unknown) =>
        fetch(`${started.url}${route}`, {
          method,
          headers: { authorization: `Bearer ${masterKey}`, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });

      expect((await call('POST', '/v1/users', { user_id: 'alice', alias: 'Alice' })).status).toBe(201);
      const completion = await call('POST', '/v1/chat/completions', {
        model: 'openai:fake-model-1',
        messages: [{ role: 'user', content: 'hello' }],
        user: 'alice',
      });
      expect(completion.status).toBe(200);
      const answer = (await completion.json()) as { choices: { message: { content: string } }[] };
      expect(answer.choices[0].message.content).toBe('Hello from the fake server');
      expect(fake.requests.some((request) => request.path === '/v1/chat/completions')).toBe(true);

      const usage = await call('GET', '/v1/users/alice/usage');
      expect(usage.status).toBe(200);
      expect(JSON.stringify(await usage.json())).toContain('fake-model-1');
      expect(started.stderr()).not.toContain(masterKey);
      expect(await stop(gateway)).toBe(0);
    } finally {
      await stop(gateway);
      await fake.close();
    }
  });

  it('tools serve starts the reference MCP memory server over stdio and calls its tools', async () => {
    const memoryServer = path.join(repoRoot, 'node_modules', '@modelcontextprotocol', 'server-memory', 'dist', 'index.js');
    const config = path.join(work, 'tools.yaml');
    writeFileSync(
      config,
      [
        'servers:',
        '  memory:',
        `    command: ${process.execPath}`,
        `    args: [${JSON.stringify(memoryServer)}]`,
        `    env: {MEMORY_FILE_PATH: ${JSON.stringify(path.join(work, 'memory.jsonl'))}}`,
      ].join('\n'),
    );
    let tools: ChildProcess | undefined;
    try {
      const started = await startListening(
        ['tools', 'serve', '--config', config, '--addr', '127.0.0.1:0'],
        executableEnv({ cacheDir: path.join(work, 'cache') }),
        /tool server on (http:\/\/\S+?):? /,
      );
      tools = started.child;
      const servers = await fetch(`${started.url}/api/v1/servers`);
      expect(await servers.json()).toEqual(['memory']);
      // the API answers at once; the MCP session comes up beside it (503 until then)
      await waitFor(async () => {
        const health = (await (await fetch(`${started.url}/api/v1/health/servers/memory`)).json()) as { status: string };
        return health.status === 'ok';
      });

      const created = await fetch(`${started.url}/api/v1/servers/memory/tools/create_entities`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ entities: [{ name: 'encoder', entityType: 'project', observations: ['ships as one file'] }] }),
      });
      expect(created.status, await created.clone().text()).toBe(200);
      const graph = await fetch(`${started.url}/api/v1/servers/memory/tools/read_graph`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect(graph.status).toBe(200);
      expect(await graph.text()).toContain('ships as one file');
      // /docs: Swagger UI's files travel inside the executable as SEA assets
      const bundle = await fetch(`${started.url}/docs/swagger-ui-bundle.js`);
      expect(bundle.status).toBe(200);
      expect(Buffer.from(await bundle.arrayBuffer()).equals(Buffer.from(installedSwaggerUiFile('swagger-ui-bundle.js')))).toBe(true);
      expect(await stop(tools)).toBe(0);
    } finally {
      await stop(tools);
    }
  });
});
