import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import type { SwaggerUiFile } from '../../src/tools/http/docs-page.ts';
import { EVERYTHING, MEMORY, NODE, OpenApiChecker, eventually, fixture, freePort, startHarness, type ToolsHarness } from './helpers.ts';

// Real MCP servers from npm: @modelcontextprotocol/server-everything over stdio and over Streamable HTTP,
// @modelcontextprotocol/server-memory over stdio, plus a fixture that pages its lists (the reference servers
// do not page).

let harness: ToolsHarness;
let api: OpenApiChecker;
let httpServer: ChildProcess;
let memoryDir: string;

beforeAll(async () => {
  memoryDir = mkdtempSync(path.join(tmpdir(), 'tools-memory-'));
  const port = await freePort();
  httpServer = spawn(NODE, [EVERYTHING, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  httpServer.stderr!.on('data', (chunk) => (stderr += chunk));
  await eventually(() => expect(stderr).toContain('listening on port'), 60_000);

  harness = await startHarness(
    `
servers:
  everything:
    command: ${NODE}
    args: [${EVERYTHING}, stdio]
  everything-http:
    url: http://127.0.0.1:\${EVERYTHING_PORT}/mcp
    headers: {X-Test: tools}
    tools: [echo, get-sum]
  memory:
    command: ${NODE}
    args: [${MEMORY}]
    env: {MEMORY_FILE_PATH: "\${MEMORY_DIR}/memory.jsonl"}
  paged:
    command: ${NODE}
    args: [${fixture('paged.ts')}]
`,
    { ...process.env, EVERYTHING_PORT: String(port), MEMORY_DIR: memoryDir },
  );
  await Promise.all(harness.upstreams.all().map((upstream) => upstream.waitConnected(60_000)));
  api = await OpenApiChecker.of(harness.app);
});

afterAll(async () => {
  await harness?.close();
  httpServer?.kill();
  rmSync(memoryDir, { recursive: true, force: true });
});

type Json = Record<string, unknown>;

/** A request through the API; every answer is checked against the served OpenAPI document. */
async function call(method: 'GET' | 'POST', template: string, url: string, body?: string) {
  const response = await harness.app.inject({ method, url, payload: body, headers: body === undefined ? {} : { 'content-type': 'application/json' } });
  api.check(method, template, response);
  return response;
}
const TOOLS = '/api/v1/servers/{name}/tools';
const CALL = '/api/v1/servers/{server}/tools/{tool}';
const PROMPTS = '/api/v1/servers/{name}/prompts';
const RENDER = '/api/v1/servers/{name}/prompts/{promptName}';
const RESOURCES = '/api/v1/servers/{name}/resources';
const CONTENT = '/api/v1/servers/{name}/resources/content';
const TEMPLATES = '/api/v1/servers/{name}/resources/templates';

describe('servers and health', () => {
  it('lists the servers in configuration order', async () => {
    const response = await call('GET', '/api/v1/servers', '/api/v1/servers');
    expect(response.json()).toEqual(['everything', 'everything-http', 'memory', 'paged']);
  });

  it('reports every server ok from MCP pings, with a latency and dates', async () => {
    const body = await eventually(async () => {
      const response = await call('GET', '/api/v1/health/servers', '/api/v1/health/servers');
      const json = response.json() as { servers: Json[] } & Json;
      expect(json.servers.map((server) => server.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
      return json;
    });
    expect(body.$schema).toBe('/schemas/ServersHealthResponse.json');
    for (const server of body.servers) {
      expect(server.latency).toMatch(/^[0-9.]+(ns|µs|ms|s)$/);
      expect(Date.parse(server.lastChecked as string)).toBeGreaterThan(Date.now() - 120_000);
      expect(server.lastSuccessful).toBe(server.lastChecked);
    }
    const one = await call('GET', '/api/v1/health/servers/{name}', '/api/v1/health/servers/memory');
    expect(one.json()).toMatchObject({ $schema: '/schemas/ServerHealth.json', name: 'memory', status: 'ok' });
  });

  it('answers 404 problem details for an unknown server', async () => {
    const response = await call('GET', '/api/v1/health/servers/{name}', '/api/v1/health/servers/nope');
    expect(response.statusCode).toBe(404);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.json()).toMatchObject({ title: 'Not Found', status: 404, detail: expect.stringContaining('"nope"') });
    for (const url of ['/api/v1/servers/nope/tools', '/api/v1/servers/nope/prompts', '/api/v1/servers/nope/resources']) {
      expect((await harness.app.inject(url)).statusCode).toBe(404);
    }
  });

  it('answers 400 problem details, as documented, for a path that is not valid percent-encoding', async () => {
    for (const [template, url] of [
      ['/api/v1/health/servers/{name}', '/api/v1/health/servers/%E0%A4%A'],
      [TOOLS, '/api/v1/servers/%E0%A4%A/tools'],
      ['/schemas/{schema}', '/schemas/%E0%A4%A.json'],
      ['/docs/{file}', '/docs/%E0%A4%A'],
    ]) {
      const response = await call('GET', template, url);
      expect(response.statusCode, url).toBe(400);
      expect(response.json().detail).toContain('not a valid url');
    }
  });

  it('serves the JSON Schema that each $schema names, and the responses match it', async () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    for (const name of ['ServerHealth', 'ServersHealthResponse']) {
      const response = await call('GET', '/schemas/{schema}', `/schemas/${name}.json`);
      expect(response.statusCode).toBe(200);
      const schema = response.json() as Json;
      expect(schema.$id).toBe(`/schemas/${name}.json`);
      ajv.addSchema(schema);
    }
    const health = (await harness.app.inject('/api/v1/health/servers')).json() as Json;
    const validate = ajv.getSchema(health.$schema as string)!;
    expect(validate(health), JSON.stringify(validate.errors)).toBe(true);
    expect(validate({ ...health, servers: [{ name: 'x', status: 'sleeping' }] })).toBe(false);
    expect((await call('GET', '/schemas/{schema}', '/schemas/Nope.json')).statusCode).toBe(404);
    // names of Object.prototype's members are not schemas either
    for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
      expect((await call('GET', '/schemas/{schema}', `/schemas/${name}.json`)).statusCode, name).toBe(404);
    }
  });
});

describe('tools', () => {
  it('lists tools with full detail: schemas with $defs/properties/required, annotations', async () => {
    const response = await call('GET', TOOLS, '/api/v1/servers/everything/tools');
    const tools = (response.json() as { tools: Json[] }).tools;
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    const structured = byName.get('get-structured-content')!;
    expect(structured.inputSchema).toMatchObject({ type: 'object', required: ['location'], properties: { location: expect.any(Object) } });
    expect(structured.outputSchema).toMatchObject({ type: 'object', properties: { temperature: expect.any(Object) } });
    expect(byName.get('echo')!.annotations).toBeTypeOf('object');
    expect(byName.get('get-sum')!.description).toEqual(expect.any(String));
  });

  it('lists tools with minimal (name, title) and summary (plus description) detail; another detail is full, as in mcpd', async () => {
    const minimal = (await call('GET', TOOLS, '/api/v1/servers/everything/tools?detail=minimal')).json() as { tools: Json[] };
    expect(minimal.tools.length).toBeGreaterThan(5);
    for (const tool of minimal.tools) expect(Object.keys(tool).sort()).toEqual(['name', 'title']);
    const summary = (await call('GET', TOOLS, '/api/v1/servers/everything/tools?detail=summary')).json() as { tools: Json[] };
    for (const tool of summary.tools) expect(Object.keys(tool).sort()).toEqual(['description', 'name', 'title']);
    // mcpd reads the level in any case and with spaces around it, and falls back to full for anything else
    const upper = (await call('GET', TOOLS, '/api/v1/servers/everything/tools?detail=%20MINIMAL%20')).json() as { tools: Json[] };
    expect(upper.tools).toEqual(minimal.tools);
    const full = (await call('GET', TOOLS, '/api/v1/servers/everything/tools')).json() as { tools: Json[] };
    expect(full.tools.every((tool) => typeof tool.inputSchema === 'object')).toBe(true);
    for (const other of ['everything', '', 'minimal&detail=summary']) {
      const fallback = await call('GET', TOOLS, `/api/v1/servers/everything/tools?detail=${other}`);
      expect(fallback.statusCode, other).toBe(200);
      expect((fallback.json() as { tools: Json[] }).tools, other).toEqual(full.tools);
    }
  });

  it('calls a tool with text output: the text items joined with a newline', async () => {
    expect((await call('POST', CALL, '/api/v1/servers/everything/tools/get-sum', '{"a": 2, "b": 40}')).json()).toBe('The sum of 2 and 40 is 42.');
    expect((await call('POST', CALL, '/api/v1/servers/everything/tools/echo', '{"message": "héllo"}')).json()).toBe('Echo: héllo');
    // get-tiny-image: text, image, text
    const image = (await call('POST', CALL, '/api/v1/servers/everything/tools/get-tiny-image', '{}')).json() as string;
    expect(image.split('\n')).toHaveLength(2);
  });

  it('calls a tool with structured output: text when there is text, else the JSON of the structured content', async () => {
    const both = (await call('POST', CALL, '/api/v1/servers/everything/tools/get-structured-content', '{"location": "Chicago"}')).json() as string;
    expect(JSON.parse(both)).toMatchObject({ temperature: expect.any(Number), conditions: expect.any(String) });
    const only = (await call('POST', CALL, '/api/v1/servers/paged/tools/structured-only', '')).json() as string;
    expect(JSON.parse(only)).toEqual({ celsius: 21.5, sky: 'clear' });
    expect((await call('POST', CALL, '/api/v1/servers/paged/tools/image-only', '{}')).json()).toBe('');
  });

  it('calls a tool whose name has 128 characters (MCP\'s longest), and says 404 for an unknown one as long', async () => {
    const name = `long-${'n'.repeat(123)}`;
    expect(name).toHaveLength(128);
    const response = await call('POST', CALL, `/api/v1/servers/paged/tools/${name}`, '{}');
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toBe('a long name answers');
    // percent-encoded, a name of 128 characters can be three times as long in the path
    const unknown = await call('POST', CALL, `/api/v1/servers/paged/tools/${encodeURIComponent('é'.repeat(128))}`, '{}');
    expect(unknown.statusCode, unknown.body).toBe(404);
  });

  it('reports structured content that breaks the tool\'s output schema as 502 (the server is wrong, not the caller)', async () => {
    // The SDK client checks it and throws invalid params (-32602) itself: that is not the server rejecting the request.
    const response = await call('POST', CALL, '/api/v1/servers/paged/tools/structured-wrong', '{}');
    expect(response.statusCode, response.body).toBe(502);
    expect(response.json().detail).toContain('output schema');
  });

  it('reports a tool result with isError (bad arguments) as 502 with the server message', async () => {
    const response = await call('POST', CALL, '/api/v1/servers/everything/tools/get-structured-content', '{"location": "Atlantis"}');
    expect(response.statusCode).toBe(502);
    expect(response.json().detail).toMatch(/returned an error: .*location/);
  });

  it('answers 404 for an unknown tool, 400 for a body that is not a JSON object', async () => {
    const unknown = await call('POST', CALL, '/api/v1/servers/everything/tools/no-such-tool', '{}');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().detail).toContain('no-such-tool');
    for (const body of ['{"a": 1,', '[1, 2]', '"text"', '42', 'null']) {
      const response = await call('POST', CALL, '/api/v1/servers/everything/tools/get-sum', body);
      expect(response.statusCode, body).toBe(400);
      expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    }
  });

  it('answers 413 for a body over the limit', async () => {
    const big = JSON.stringify({ message: 'x'.repeat(5 * 2 ** 20) });
    const response = await call('POST', CALL, '/api/v1/servers/everything/tools/echo', big);
    expect(response.statusCode).toBe(413);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
  });

  it('applies the allow-list: only its tools are listed, others answer 403 (Streamable HTTP server)', async () => {
    const tools = (await call('GET', TOOLS, '/api/v1/servers/everything-http/tools?detail=minimal')).json() as { tools: Json[] };
    expect(tools.tools.map((tool) => tool.name).sort()).toEqual(['echo', 'get-sum']);
    expect((await call('POST', CALL, '/api/v1/servers/everything-http/tools/get-sum', '{"a": 1, "b": 2}')).json()).toBe('The sum of 1 and 2 is 3.');
    const forbidden = await call('POST', CALL, '/api/v1/servers/everything-http/tools/get-env', '{}');
    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.json().detail).toContain('allow-list');
  });

  it('works with server-memory: entities created by one call are found by the next', async () => {
    const created = await call(
      'POST',
      CALL,
      '/api/v1/servers/memory/tools/create_entities',
      JSON.stringify({ entities: [{ name: 'Ada', entityType: 'person', observations: ['wrote the first program'] }] }),
    );
    expect(created.statusCode).toBe(200);
    const found = (await call('POST', CALL, '/api/v1/servers/memory/tools/search_nodes', '{"query": "Ada"}')).json() as string;
    expect(JSON.parse(found).entities).toEqual([expect.objectContaining({ name: 'Ada', observations: ['wrote the first program'] })]);
  });
});

describe('prompts', () => {
  it('lists prompts with their arguments', async () => {
    const prompts = (await call('GET', PROMPTS, '/api/v1/servers/everything/prompts')).json() as { prompts: Json[] } & Json;
    expect(prompts.$schema).toBe('/schemas/Prompts.json');
    expect(prompts.prompts.find((prompt) => prompt.name === 'args-prompt')).toMatchObject({
      arguments: [expect.objectContaining({ name: 'city', required: true }), expect.objectContaining({ name: 'state', required: false })],
    });
  });

  it('renders a prompt with arguments', async () => {
    const response = await call('POST', RENDER, '/api/v1/servers/everything/prompts/args-prompt', '{"arguments": {"city": "Lyon", "state": "Rhône"}}');
    const body = response.json() as { messages: { role: string; content: { text: string } }[] };
    expect(body.messages[0].role).toBe('user');
    expect(body.messages[0].content.text).toContain('Lyon');
    expect(body.messages[0].content.text).toContain('Rhône');
  });

  it('answers 404 for an unknown prompt, 400 for missing required arguments (MCP invalid params) or non-string arguments', async () => {
    // server-everything answers both an unknown prompt and missing arguments with -32602 (invalid params)
    const unknown = await call('POST', RENDER, '/api/v1/servers/everything/prompts/nope', '{}');
    expect(unknown.statusCode).toBe(404);
    const missing = await call('POST', RENDER, '/api/v1/servers/everything/prompts/args-prompt', '{"arguments": {}}');
    expect(missing.statusCode).toBe(400);
    expect(missing.json().detail).toContain('city');
    for (const body of ['{"arguments": {"city": 3}}', '{"arguments": ["Lyon"]}', '{"city": "Lyon"}', '[]', '{']) {
      expect((await call('POST', RENDER, '/api/v1/servers/everything/prompts/args-prompt', body)).statusCode, body).toBe(400);
    }
  });
});

describe('resources', () => {
  it('lists resources and reads a text resource', async () => {
    const resources = (await call('GET', RESOURCES, '/api/v1/servers/everything/resources')).json() as { resources: Json[] };
    expect(resources.resources.length).toBeGreaterThan(0);
    const first = resources.resources[0];
    const content = await call('GET', CONTENT, `/api/v1/servers/everything/resources/content?uri=${encodeURIComponent(first.uri as string)}`);
    const items = content.json() as Json[];
    expect(items[0].uri).toBe(first.uri);
    expect(items[0].text).toEqual(expect.any(String));
  });

  it('reads a binary resource as a base64 blob, from a template over Streamable HTTP too', async () => {
    for (const server of ['everything', 'everything-http']) {
      const response = await call('GET', CONTENT, `/api/v1/servers/${server}/resources/content?uri=${encodeURIComponent('demo://resource/dynamic/blob/7')}`);
      const [item] = response.json() as Json[];
      expect(item.text).toBeUndefined();
      expect(Buffer.from(item.blob as string, 'base64').toString()).toContain('Resource 7');
    }
  });

  it('lists resource templates', async () => {
    const templates = (await call('GET', TEMPLATES, '/api/v1/servers/everything/resources/templates')).json() as { templates: Json[] } & Json;
    expect(templates.$schema).toBe('/schemas/ResourceTemplates.json');
    expect(templates.templates.map((template) => template.uriTemplate)).toContain('demo://resource/dynamic/text/{resourceId}');
  });

  it('answers 404 for an unknown resource and 400 without uri', async () => {
    const unknown = await call('GET', CONTENT, `/api/v1/servers/everything/resources/content?uri=${encodeURIComponent('demo://nowhere/1')}`);
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().detail).toContain('demo://nowhere/1');
    expect((await call('GET', CONTENT, '/api/v1/servers/everything/resources/content')).statusCode).toBe(400);
  });

  it('answers 501 when the server does not offer prompts (server-memory)', async () => {
    const resources = (await call('GET', RESOURCES, '/api/v1/servers/memory/resources')).json() as { resources: Json[] };
    expect(resources.resources.length).toBeGreaterThan(0);
    const prompts = await call('GET', PROMPTS, '/api/v1/servers/memory/prompts');
    expect(prompts.statusCode).toBe(501);
    expect(prompts.json().detail).toContain('does not offer prompts');
    expect((await call('POST', RENDER, '/api/v1/servers/memory/prompts/any', '{}')).statusCode).toBe(501);
  });
});

describe('pagination', () => {
  for (const [kind, template, field] of [
    ['prompts', PROMPTS, 'prompts'],
    ['resources', RESOURCES, 'resources'],
    ['resources/templates', TEMPLATES, 'templates'],
  ] as const) {
    it(`passes cursors of ${kind} through to the server and nextCursor back`, async () => {
      const names: unknown[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const query = cursor === undefined ? '' : `?cursor=${encodeURIComponent(cursor)}`;
        const body = (await call('GET', template, `/api/v1/servers/paged/${kind}${query}`)).json() as Json;
        names.push(...(body[field] as Json[]).map((item) => item.name));
        cursor = body.nextCursor as string | undefined;
        pages++;
      } while (cursor !== undefined && pages < 10);
      expect(pages).toBe(3);
      expect(names).toHaveLength(5);
      const bad = await call('GET', template, `/api/v1/servers/paged/${kind}?cursor=${encodeURIComponent('not a cursor!')}`);
      expect(bad.statusCode).toBe(400);
      expect(bad.json().detail).toContain('Invalid cursor');
      // a repeated cursor is not one cursor
      const twice = await call('GET', template, `/api/v1/servers/everything/${kind}?cursor=a&cursor=b`);
      expect(twice.statusCode, twice.body).toBe(400);
    });
  }
});

describe('tool pagination', () => {
  it('lists every page of a server\'s tools in one answer, and calls a tool of the last page', async () => {
    const tools = (await call('GET', TOOLS, '/api/v1/servers/paged/tools?detail=minimal')).json() as { tools: Json[] } & Json;
    expect(tools.tools.map((tool) => tool.name)).toEqual(['image-only', `long-${'n'.repeat(123)}`, 'structured-only', 'structured-wrong']);
    expect(tools.nextCursor).toBeUndefined();
    expect((await call('POST', CALL, '/api/v1/servers/paged/tools/structured-only', '{}')).statusCode).toBe(200);
  });
});

describe('documents', () => {
  it('serves /docs as Swagger UI on /openapi.json, with every file it loads served from here', async () => {
    const response = await call('GET', '/docs', '/docs');
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(response.body).toContain("SwaggerUIBundle({ url: '/openapi.json'");
    expect(response.body).not.toMatch(/(src|href)=["']?(https?:)?\/\//);
    const loaded = [...response.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]);
    expect(loaded.sort()).toEqual(['/docs/swagger-ui-bundle.js', '/docs/swagger-ui.css']);
    for (const file of loaded) {
      const served = await call('GET', '/docs/{file}', file);
      expect(served.statusCode).toBe(200);
      expect(served.rawPayload.equals(Buffer.from(installedSwaggerUiFile(path.basename(file) as SwaggerUiFile)))).toBe(true);
      expect(served.headers['content-type']).toMatch(file.endsWith('.js') ? /^text\/javascript/ : /^text\/css/);
    }
    const missing = await call('GET', '/docs/{file}', '/docs/index.html');
    expect(missing.statusCode).toBe(404);
    expect(missing.json().detail).toContain('swagger-ui-bundle.js');
  });

  it('documents every route it serves', async () => {
    expect((await call('GET', '/openapi.json', '/openapi.json')).json()).toEqual(api.document);
    const paths = Object.keys(api.document.paths as Json);
    expect(paths).toEqual(expect.arrayContaining([CALL, TOOLS, PROMPTS, RENDER, RESOURCES, CONTENT, TEMPLATES, '/api/v1/health/servers/{name}']));
    expect((await harness.app.inject('/api/v1/nothing')).statusCode).toBe(404);
  });
});
