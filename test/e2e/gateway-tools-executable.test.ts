/**
 * The base runtime also runs the gateway and the tool server (DESIGN: "the same runtime also runs the gateway and
 * tools subcommands"), with no Node on PATH. `gateway serve` inside the executable is tested in
 * test/gateway/executable.test.ts; here, `gateway keygen`, and the tool server starting the reference MCP memory
 * server over stdio and serving Swagger UI's files from its SEA assets.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { baseRuntimePath, hasBaseRuntime, runExecutable, startListening, warnIfNoBaseRuntime, type ListeningExecutable } from '../helpers/executables.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';
import { eventually } from '../tools/helpers.ts';

warnIfNoBaseRuntime('gateway and tools in the single executable');

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

  it('tools serve starts the reference MCP memory server over stdio, calls its tools and serves /docs', async () => {
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
    let tools: ListeningExecutable | undefined;
    try {
      tools = await startListening(
        baseRuntimePath(),
        ['tools', 'serve', '--config', config, '--addr', '127.0.0.1:0'],
        { cacheDir: path.join(work, 'cache') },
        /tool server on (http:\/\/\S+?):? /,
      );
      const url = tools.address;
      const servers = await fetch(`${url}/api/v1/servers`);
      expect(await servers.json()).toEqual(['memory']);
      // the API answers at once; the MCP session comes up beside it (503 until then)
      await eventually(async () => {
        const health = (await (await fetch(`${url}/api/v1/health/servers/memory`)).json()) as { status: string };
        expect(health.status).toBe('ok');
      }, 60_000);

      const created = await fetch(`${url}/api/v1/servers/memory/tools/create_entities`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ entities: [{ name: 'encoder', entityType: 'project', observations: ['ships as one file'] }] }),
      });
      expect(created.status, await created.clone().text()).toBe(200);
      const graph = await fetch(`${url}/api/v1/servers/memory/tools/read_graph`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect(graph.status).toBe(200);
      expect(await graph.text()).toContain('ships as one file');
      // /docs: Swagger UI's files travel inside the executable as SEA assets
      const bundle = await fetch(`${url}/docs/swagger-ui-bundle.js`);
      expect(bundle.status).toBe(200);
      expect(Buffer.from(await bundle.arrayBuffer()).equals(Buffer.from(installedSwaggerUiFile('swagger-ui-bundle.js')))).toBe(true);
      expect(await tools.stop()).toBe(0);
    } finally {
      await tools?.stop();
    }
  });
});
