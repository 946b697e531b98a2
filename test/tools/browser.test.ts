import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { startToolServer, type RunningToolServer } from '../../src/tools/index.ts';
import { browserSkipReason, CHROMIUM_PATH } from '../gateway/helpers/browser.ts';
import { EVERYTHING, MEMORY, NODE, eventually } from './helpers.ts';

// No web page reaches a tool (docs/tools.md, "Browsers"), in headless Chromium against a real tool server in its
// default mode (loopback, no keys) in front of server-memory, whose create_entities writes a graph we read back:
// a page on another origin (another loopback port) tries every way a page can send a request — a simple text/plain
// POST, a form POST, fetch with JSON (preflight), fetch no-cors, sendBeacon — and nothing is written. A DNS-rebinding
// page (Chromium resolves attacker.example to 127.0.0.1) is refused on the API, /mcp and /docs. A page of an origin
// listed in cors_allow_origins calls a tool and opens an /mcp session (preflights answered, headers exposed).

/** What the page scripts below use of the DOM (they run in Chromium; the project compiles without the DOM library). */
interface PageElement {
  append(...nodes: PageElement[]): void;
  submit(): void;
  addEventListener(type: string, listener: () => void): void;
}
declare const document: { createElement(tag: string): PageElement; body: PageElement };
declare const navigator: { sendBeacon(url: string, data: Blob): boolean };

const skipReason = browserSkipReason();
const dir = mkdtempSync(path.join(tmpdir(), 'tools-browser-'));
const REBINDING = 'attacker.example';

let tools: RunningToolServer;
let toolsPort: number;
let evil: http.Server;
let friend: http.Server;
let browser: Browser;
const auditFile = path.join(dir, 'audit.jsonl');

/** A loopback server of one blank page: the origin a test page runs in. */
async function pageServer(): Promise<http.Server> {
  const server = http.createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>page</title><body></body>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}
const originOf = (server: http.Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

/** The entities server-memory holds, read through the API by a client that is no browser. */
async function entities(): Promise<string[]> {
  const response = await fetch(`${tools.url}/api/v1/servers/memory/tools/read_graph`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  expect(response.status).toBe(200);
  return (JSON.parse((await response.json()) as string) as { entities: { name: string }[] }).entities.map((entity) => entity.name);
}

const auditLines = () =>
  readFileSync(auditFile, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { operation: string; server: string | null; name: string | null; status: number });

async function openPage(origin: string): Promise<Page> {
  const page = await browser.newPage();
  await page.goto(`${origin}/`);
  return page;
}

beforeAll(async () => {
  if (skipReason) return;
  evil = await pageServer();
  friend = await pageServer();
  const configFile = path.join(dir, 'tools.yaml');
  writeFileSync(
    configFile,
    `servers:\n` +
      `  memory: {command: ${NODE}, args: [${MEMORY}], env: {MEMORY_FILE_PATH: ${path.join(dir, 'memory.jsonl')}}}\n` +
      `  everything: {command: ${NODE}, args: [${EVERYTHING}]}\n` +
      `cors_allow_origins: [${originOf(friend)}]\n` +
      `audit: {file: ${auditFile}}\n`,
  );
  tools = await startToolServer({ configFile, host: '127.0.0.1', port: 0, version: '0.0.0-test', swaggerUiFiles: installedSwaggerUiFile });
  toolsPort = Number(new URL(tools.url).port);
  await tools.upstreams.firstAttemptsSettled();
  // --no-sandbox: CI runs as root; the resolver rule is DNS rebinding: a name of the attacker's that points here
  browser = await chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', `--host-resolver-rules=MAP ${REBINDING} 127.0.0.1`],
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await tools?.close();
  for (const server of [evil, friend]) server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(skipReason !== null)('a page of another origin', () => {
  const create = (name: string) => JSON.stringify({ entities: [{ name, entityType: 'attack', observations: ['written by a web page'] }] });

  it('cannot call a tool by any means a page has, and each attempt is refused before the tool', async () => {
    const page = await openPage(originOf(evil));
    const target = `${tools.url}/api/v1/servers/memory/tools/create_entities`;
    // Playwright reports the beacon's answer too, as a response of the page to the same URL (resource type "ping"),
    // whenever Chromium passes it on — possibly after the tool server has written its audit line (as the answer is
    // sent). Waiting for that line alone let the form's waitForResponse below take the beacon's late 403 for the
    // form's; the page was then closed before Chromium had sent the form, which left no audit line (two of four
    // clean-clone runs, 2026-11-29). So the beacon's answer is awaited here, and the form's is its navigation's.
    const beaconAnswer = page.waitForResponse((response) => response.url() === target && response.request().resourceType() === 'ping');
    const attempts = await page.evaluate(
      async ({ target, bodies }) => {
        const outcome = (promise: Promise<Response>) => promise.then((response) => `answered ${response.type} ${response.status}`, (error: Error) => `failed: ${error.name}`);
        return {
          // a "simple" request: no preflight, the body says JSON but the type is text/plain
          simple: await outcome(fetch(target, { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: bodies.simple })),
          // fetch in cors mode with JSON: the browser asks first (OPTIONS), and does not send the POST when refused
          preflight: await outcome(fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bodies.preflight })),
          // no-cors drops the JSON content type (not CORS-safelisted): text/plain;charset=UTF-8, opaque answer
          noCors: await outcome(fetch(target, { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'application/json' }, body: bodies.noCors })),
          beacon: navigator.sendBeacon(target, new Blob([bodies.beacon], { type: 'text/plain' })),
        };
      },
      { target, bodies: { simple: create('simple'), preflight: create('preflight'), noCors: create('no-cors'), beacon: create('beacon') } },
    );
    expect(attempts).toEqual({ simple: 'answered opaque 0', preflight: 'failed: TypeError', noCors: 'answered opaque 0', beacon: true });
    const refusedCalls = () => auditLines().filter((line) => line.operation === 'call_tool' && line.status === 403);
    // a beacon goes out in the background: wait for its refusal before the form navigates the page away
    expect((await beaconAnswer).status()).toBe(403);
    await eventually(() => expect(refusedCalls()).toHaveLength(3));

    // a form POST navigates the page to the tool server, which answers the page itself; enctype text/plain sends
    // `name=value`, so the name is a JSON text up to a string that the `=` and the value close: valid JSON
    const [formAnswer] = await Promise.all([
      page.waitForResponse((response) => response.url() === target && response.request().isNavigationRequest()),
      page.evaluate(
        ({ target, name }) => {
          const form = Object.assign(document.createElement('form'), { method: 'POST', action: target, enctype: 'text/plain' });
          form.append(Object.assign(document.createElement('input'), { name, value: '"}' }));
          document.body.append(form);
          form.submit();
        },
        { target, name: `${create('form').slice(0, -1)},"padding":"` },
      ),
    ]);
    // (the problem itself is not displayable, so Chromium downloads it rather than keep a body to read)
    expect(formAnswer.request().method()).toBe('POST');
    expect(formAnswer.status()).toBe(403);
    await page.close();

    expect(await entities()).toEqual([]);
    // each attempt reached the tool server and was refused there: the preflight (not an API request, so not in the
    // audit log) instead of the POST, and the four others as call_tool answered 403, without the names they chose
    // (test/tools/audit-coverage.test.ts replays the form's request byte for byte: exactly one line)
    const refused = await eventually(() => {
      const lines = refusedCalls();
      expect(lines).toHaveLength(4);
      return lines;
    });
    for (const line of refused) expect(line).toMatchObject({ server: null, name: null });
  });

  it('cannot read the API or the metrics either (no CORS headers for it)', async () => {
    const page = await openPage(originOf(evil));
    const reads = await page.evaluate(async (base) => {
      const read = (route: string) => fetch(`${base}${route}`).then((response) => `answered ${response.status}`, (error: Error) => `failed: ${error.name}`);
      return [await read('/api/v1/servers'), await read('/metrics'), await read('/openapi.json')];
    }, tools.url);
    expect(reads).toEqual(['failed: TypeError', 'failed: TypeError', 'failed: TypeError']);
    await page.close();
  });

  it('cannot frame /docs', async () => {
    const page = await openPage(originOf(evil));
    await page.evaluate(
      (src) =>
        new Promise<void>((resolve) => {
          const frame = Object.assign(document.createElement('iframe'), { src });
          frame.addEventListener('load', () => resolve());
          document.body.append(frame);
        }),
      `${tools.url}/docs`,
    );
    // a frame refused by frame-ancestors/X-Frame-Options holds Chromium's error page, not Swagger UI
    const frame = page.frames().find((candidate) => candidate !== page.mainFrame())!;
    expect(frame.url()).toMatch(/^chrome-error:/);
    await page.close();
  });
});

describe.skipIf(skipReason !== null)('a DNS-rebinding page (Host: attacker.example)', () => {
  it('is refused on the API, /mcp and /docs, in the browser and with a raw request', async () => {
    const rebound = `http://${REBINDING}:${toolsPort}`;
    const page = await browser.newPage();
    const docs = await page.goto(`${rebound}/docs`);
    expect(docs!.status()).toBe(403);
    expect(await docs!.json()).toMatchObject({ code: 'host_not_allowed' });
    // the page is now same-origin with "the tool server": its requests carry Host attacker.example and are refused
    const answers = await page.evaluate(async () => {
      const post = (route: string, body: string) =>
        fetch(route, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body }).then((response) => response.status);
      return {
        call: await post('/api/v1/servers/memory/tools/create_entities', JSON.stringify({ entities: [{ name: 'rebinding', entityType: 'attack', observations: [] }] })),
        mcp: await post('/mcp', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'page', version: '1' } } })),
        servers: await fetch('/api/v1/servers').then((response) => response.status),
      };
    });
    expect(answers).toEqual({ call: 403, mcp: 403, servers: 403 });
    await page.close();
    expect(await entities()).toEqual([]);

    for (const [method, route] of [
      ['GET', '/api/v1/servers'],
      ['POST', '/api/v1/servers/memory/tools/read_graph'],
      ['POST', '/mcp'],
      ['GET', '/docs'],
      ['GET', '/openapi.json'],
      ['GET', '/metrics'],
      ['GET', '/health'],
    ]) {
      const answer = await rawRequest(method, route, { host: `${REBINDING}:${toolsPort}`, 'content-type': 'application/json' }, method === 'POST' ? '{}' : undefined);
      expect(answer.status, route).toBe(403);
      expect(answer.type, route).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(answer.body), route).toMatchObject({ status: 403, code: 'host_not_allowed', instance: route });
    }
  });
});

describe.skipIf(skipReason !== null)('a page of an origin in cors_allow_origins', () => {
  it('calls a tool and opens an /mcp session: preflights answered, the session id readable', async () => {
    const page = await openPage(originOf(friend));
    const result = await page.evaluate(async (base) => {
      const call = await fetch(`${base}/api/v1/servers/everything/tools/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"message": "from a friend"}' });
      const init = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'page', version: '1' } } }),
      });
      return {
        call: { status: call.status, body: await call.json() },
        // /mcp answers each POST as an event stream (docs/tools.md): the answer is the data of its message event
        mcp: { status: init.status, type: init.headers.get('content-type'), session: init.headers.get('mcp-session-id'), answer: await init.text() },
      };
    }, tools.url);
    expect(result.call).toEqual({ status: 200, body: 'Echo: from a friend' });
    expect(result.mcp.status).toBe(200);
    expect(result.mcp.session).toMatch(/^[0-9a-f-]{36}$/);
    expect(result.mcp.type).toMatch(/^text\/event-stream/);
    const data = /^data: (.*)$/m.exec(result.mcp.answer)?.[1];
    expect((JSON.parse(data ?? 'null') as { result: { serverInfo: { name: string } } }).result.serverInfo.name).toBeTruthy();
    await page.close();
  });

  it('renders /docs on the server itself under its Content-Security-Policy, and "Try it out" works there', async () => {
    const page = await browser.newPage();
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text());
    });
    await page.goto(`${tools.url}/docs`);
    await page.waitForSelector('.opblock-summary-path', { timeout: 30_000 });
    expect(await page.locator('.opblock-summary-path').count()).toBeGreaterThan(10);
    // the page's own requests are same-origin (Origin = the server's own): accepted
    const call = await page.evaluate(() =>
      fetch('/api/v1/servers/everything/tools/echo', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"message": "docs"}' }).then((response) => response.json()),
    );
    expect(call).toBe('Echo: docs');
    expect(violations).toEqual([]);
    await page.close();
  });
});

/** A request with exactly these headers (fetch cannot set Host). */
function rawRequest(method: string, route: string, headers: Record<string, string>, body?: string): Promise<{ status: number; type: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port: toolsPort, method, path: route, headers }, (response) => {
      let text = '';
      response.on('data', (chunk) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, type: response.headers['content-type'], body: text }));
    });
    request.on('error', reject);
    request.end(body);
  });
}
