import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AuthenticationError, McpdClient, McpdError, ToolNotFoundError } from '@mozilla-ai/mcpd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { apiKeyDigest, startToolServer, type RunningToolServer } from '../../src/tools/index.ts';
import { EVERYTHING, MEMORY, NODE, eventually } from './helpers.ts';

// mozilla-ai's own JavaScript SDK for mcpd (@mozilla-ai/mcpd, from npm), unchanged, against the tool server: every
// call it offers — servers, health, tools (listed, called by name, as agent functions), prompts, resources, resource
// templates — without API keys (the default loopback mode) and with them (a full key, a narrow key, no key, a wrong
// key). The SDK sends `Content-Type: application/json` on every request, GETs included, and a body only on POSTs.

const dir = mkdtempSync(path.join(tmpdir(), 'tools-mcpd-sdk-'));
const ADMIN = 'etk_mcpd-sdk-admin';
const ECHO_ONLY = 'etk_mcpd-sdk-echo-only';
const SERVERS = `servers:\n  everything: {command: ${NODE}, args: [${EVERYTHING}]}\n  memory: {command: ${NODE}, args: [${MEMORY}], env: {MEMORY_FILE_PATH: ${path.join(dir, 'memory.jsonl')}}}\n`;

async function serve(name: string, yaml: string): Promise<RunningToolServer> {
  const configFile = path.join(dir, `${name}.yaml`);
  writeFileSync(configFile, yaml);
  const server = await startToolServer({ configFile, host: '127.0.0.1', port: 0, version: '0.0.0-test', swaggerUiFiles: installedSwaggerUiFile });
  await server.upstreams.firstAttemptsSettled();
  return server;
}

let open: RunningToolServer;
let keyed: RunningToolServer;

beforeAll(async () => {
  [open, keyed] = await Promise.all([
    serve('open', SERVERS),
    serve(
      'keyed',
      `${SERVERS}auth:\n  keys:\n    admin: {sha256: ${apiKeyDigest(ADMIN)}, servers: "*"}\n` +
        `    echo-only: {sha256: ${apiKeyDigest(ECHO_ONLY)}, servers: {everything: {tools: [echo], prompts: [], resources: []}}}\n`,
    ),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.all([open?.close(), keyed?.close()]);
  rmSync(dir, { recursive: true, force: true });
});

/** Every call of the SDK a client of mcpd makes, against `url` with `apiKey`. */
async function everyCall(url: string, apiKey?: string) {
  const client = new McpdClient({ apiEndpoint: url, apiKey, timeout: 20_000 });
  expect(await client.listServers()).toEqual(['everything', 'memory']);
  await eventually(async () => expect(await client.isServerHealthy('everything')).toBe(true), 30_000);
  client.clearServerHealthCache();
  const health = await client.getServerHealth();
  expect(Object.keys(health)).toEqual(['everything', 'memory']);
  expect(health.everything).toMatchObject({ name: 'everything', status: 'ok', lastChecked: expect.any(String), latency: expect.any(String) });
  expect(await client.getServerHealth('memory')).toMatchObject({ name: 'memory', status: expect.stringMatching(/^(ok|unknown)$/) });

  const everything = client.servers.everything;
  const tools = await everything.getTools();
  expect(tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(['echo', 'get-sum']));
  expect(tools.find((tool) => tool.name === 'get-sum')!.inputSchema).toMatchObject({ type: 'object', properties: { a: expect.any(Object), b: expect.any(Object) } });
  expect(await everything.hasTool('echo')).toBe(true);
  expect(await everything.hasTool('no-such-tool')).toBe(false);
  expect(await everything.tools.echo({ message: 'through the mcpd SDK' })).toBe('Echo: through the mcpd SDK');
  expect(await everything.callTool('get-sum', { a: 2, b: 40 })).toBe('The sum of 2 and 40 is 42.');
  await expect(everything.callTool('no-such-tool', {})).rejects.toBeInstanceOf(ToolNotFoundError);
  // a structured result comes back as its JSON text, which the SDK parses
  expect(await everything.callTool('get-structured-content', { location: 'Chicago' })).toMatchObject({ temperature: expect.any(Number) });

  const prompts = await everything.getPrompts();
  expect(prompts.map((prompt) => prompt.name)).toEqual(expect.arrayContaining(['simple-prompt', 'args-prompt']));
  expect(await everything.hasPrompt('args-prompt')).toBe(true);
  const rendered = await everything.generatePrompt('args-prompt', { city: 'Lyon', state: 'Rhône' });
  expect(JSON.stringify(rendered.messages)).toContain('Lyon');
  expect(await everything.prompts['simple-prompt']()).toMatchObject({ messages: [expect.objectContaining({ role: 'user' })] });

  const resources = await everything.getResources();
  expect(resources.length).toBeGreaterThan(0);
  expect(await everything.hasResource(resources[0].uri)).toBe(true);
  const contents = await everything.readResource(resources[0].uri);
  expect(contents[0]).toMatchObject({ uri: resources[0].uri });
  expect((await everything.getResourceTemplates()).map((template) => template.uriTemplate).length).toBeGreaterThan(0);

  const agentTools = await client.getAgentTools({ format: 'object', servers: ['everything'] });
  expect(await agentTools.everything__echo({ message: 'as an agent function' })).toBe('Echo: as an agent function');
  const memoryTools = await client.getAgentTools({ format: 'map', servers: ['memory'], tools: ['read_graph'] });
  expect([...memoryTools.keys()]).toEqual(['memory__read_graph']);
  expect(JSON.parse(JSON.stringify(await memoryTools.get('memory__read_graph')!({})))).toMatchObject({ entities: expect.any(Array) });

  // a server that is not configured: the SDK reads the problem's detail
  await expect(client.servers.nope.getTools()).rejects.toThrow(/Not Found: no server named "nope"/);
}

describe('the mcpd SDK without API keys', () => {
  it('makes every call it offers', async () => {
    await everyCall(open.url);
  }, 120_000);
});

describe('the mcpd SDK with API keys', () => {
  it('makes every call it offers with a key for every server', async () => {
    await everyCall(keyed.url, ADMIN);
  }, 120_000);

  it('sees only what a narrow key may use, and is refused the rest (AuthenticationError, as mcpd\'s 403)', async () => {
    const client = new McpdClient({ apiEndpoint: keyed.url, apiKey: ECHO_ONLY });
    expect(await client.listServers()).toEqual(['everything']);
    expect(Object.keys(await client.getServerHealth())).toEqual(['everything']);
    expect((await client.servers.everything.getTools()).map((tool) => tool.name)).toEqual(['echo']);
    expect(await client.servers.everything.tools.echo({ message: 'narrow' })).toBe('Echo: narrow');
    expect(await client.servers.everything.getPrompts()).toEqual([]);
    await expect(client.servers.memory.getTools()).rejects.toBeInstanceOf(AuthenticationError);
    await expect(client.servers.memory.getTools()).rejects.toThrow('key "echo-only" may not use server "memory"');
  });

  it('reports a missing or wrong key as an AuthenticationError, without the key in the message', async () => {
    for (const apiKey of [undefined, 'etk_wrong-key']) {
      const client = new McpdClient({ apiEndpoint: keyed.url, apiKey });
      const refusal = await client.listServers().then(
        () => null,
        (error: unknown) => error,
      );
      expect(refusal).toBeInstanceOf(AuthenticationError);
      expect((refusal as Error).message).toMatch(apiKey ? /unknown API key/ : /requires an API key/);
      expect((refusal as Error).message).not.toContain('wrong-key');
      await expect(client.servers.everything.tools.echo({ message: 'x' })).rejects.toBeInstanceOf(McpdError);
    }
  });
});
