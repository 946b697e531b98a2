import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { startToolServer, type RunningToolServer } from '../../src/tools/index.ts';
import { eventually } from './helpers.ts';

// Every refused request leaves exactly one audit line (docs/tools.md, "Metrics and audit"), whichever part of the
// server refuses it and whatever the client does after sending it. Requests are sent byte for byte over loopback
// sockets: the form POST exactly as Debian's Chromium sends it (captured from a cross-origin page's
// `<form enctype="text/plain">` submission with a raw listener), a beacon's body that the refusal leaves unread on
// a kept-alive connection, a client that goes away at once, paths the router cannot read, and /mcp requests its
// transport refuses itself after the route has handed the response over to it.

const dir = mkdtempSync(path.join(tmpdir(), 'tools-audit-coverage-'));
const auditFile = path.join(dir, 'audit.jsonl');
const CALL = '/api/v1/servers/memory/tools/create_entities';
const PAGE_ORIGIN = 'http://127.0.0.1:41439';

let tools: RunningToolServer;
let port: number;

interface AuditLine {
  key: string | null;
  server: string | null;
  operation: string;
  name: string | null;
  status: number;
}

const auditLines = (): AuditLine[] =>
  readFileSync(auditFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as AuditLine);

beforeAll(async () => {
  const configFile = path.join(dir, 'tools.yaml');
  writeFileSync(configFile, `servers: {}\naudit: {file: ${auditFile}}\n`);
  tools = await startToolServer({ configFile, host: '127.0.0.1', port: 0, version: '0.0.0-test', swaggerUiFiles: installedSwaggerUiFile });
  port = Number(new URL(tools.url).port);
});

afterAll(async () => {
  await tools?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A request's bytes: the request line, the headers in this order (Host first, as browsers send it) and the body. */
function requestBytes(method: string, target: string, headers: [string, string][], body = ''): string {
  const lines = [`${method} ${target} HTTP/1.1`, `Host: 127.0.0.1:${port}`, ...headers.map(([name, value]) => `${name}: ${value}`)];
  if (body !== '' || method === 'POST') lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

/** The request Chromium 156 sends for a cross-origin page's form POST (enctype text/plain), header for header. */
function chromiumFormPost(body: string): string {
  return requestBytes(
    'POST',
    CALL,
    [
      ['Connection', 'keep-alive'],
      ['Cache-Control', 'max-age=0'],
      ['sec-ch-ua', '"Not:A-Brand";v="8", "Chromium";v="156"'],
      ['sec-ch-ua-mobile', '?0'],
      ['sec-ch-ua-platform', '"Linux"'],
      ['Upgrade-Insecure-Requests', '1'],
      ['Content-Type', 'text/plain'],
      ['User-Agent', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0 Safari/537.36'],
      ['Origin', PAGE_ORIGIN],
      ['Accept', 'text/html,application/xhtml+xml,application/xml;q=0.9,image/jxl,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7'],
      ['Sec-Fetch-Site', 'same-site'],
      ['Sec-Fetch-Mode', 'navigate'],
      ['Sec-Fetch-User', '?1'],
      ['Sec-Fetch-Dest', 'document'],
      ['Referer', `${PAGE_ORIGIN}/`],
      ['Accept-Encoding', 'gzip, deflate, br, zstd'],
      ['Accept-Language', 'en-US,en;q=0.9'],
    ],
    body,
  );
}

/** The request Chromium sends for navigator.sendBeacon(url, Blob of text/plain) from that page. */
function chromiumBeacon(body: string): string {
  return requestBytes(
    'POST',
    CALL,
    [
      ['Connection', 'keep-alive'],
      ['Content-Type', 'text/plain'],
      ['Accept', '*/*'],
      ['Origin', PAGE_ORIGIN],
      ['Sec-Fetch-Site', 'same-site'],
      ['Sec-Fetch-Mode', 'no-cors'],
      ['Sec-Fetch-Dest', 'empty'],
      ['Referer', `${PAGE_ORIGIN}/`],
    ],
    body,
  );
}

interface RawAnswer {
  status: number;
  headers: string;
  body: string;
}

/** A loopback connection that sends requests one after another and reads each answer (Content-Length bodies). */
class RawConnection {
  readonly #socket: net.Socket;
  #buffer = Buffer.alloc(0);
  #waiting: (() => void) | undefined;
  #ended = false;

  private constructor(socket: net.Socket) {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      this.#waiting?.();
    });
    socket.on('close', () => {
      this.#ended = true;
      this.#waiting?.();
    });
  }

  static open(): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => resolve(new RawConnection(socket)));
      socket.once('error', reject);
    });
  }

  /** Sends `bytes` and reads one answer. */
  async exchange(bytes: string): Promise<RawAnswer> {
    this.#socket.write(bytes);
    for (;;) {
      const end = this.#buffer.indexOf('\r\n\r\n');
      if (end >= 0) {
        const head = this.#buffer.subarray(0, end).toString('latin1');
        const length = Number(/^content-length: *(\d+)$/im.exec(head)?.[1] ?? 0);
        if (this.#buffer.length >= end + 4 + length) {
          const body = this.#buffer.subarray(end + 4, end + 4 + length).toString('utf8');
          this.#buffer = this.#buffer.subarray(end + 4 + length);
          return { status: Number(head.split(' ')[1]), headers: head, body };
        }
      }
      if (this.#ended) throw new Error(`the connection closed before a whole answer: ${JSON.stringify(this.#buffer.toString('latin1'))}`);
      await new Promise<void>((resolve) => (this.#waiting = resolve));
    }
  }

  close(): void {
    this.#socket.destroy();
  }
}

async function exchangeOnce(bytes: string): Promise<RawAnswer> {
  const connection = await RawConnection.open();
  try {
    return await connection.exchange(bytes);
  } finally {
    connection.close();
  }
}

let markers = 0;

/**
 * Every line written so far, once the line of a marker request sent now is among them: the log is one stream, written
 * in order, so the lines of earlier requests are there too (the marker is an unknown route, an API request; /health
 * is not one).
 */
async function linesSoFar(): Promise<AuditLine[]> {
  const marker = `/audit-marker-${++markers}`;
  expect((await exchangeOnce(requestBytes('GET', marker, []))).status).toBe(404);
  return eventually(() => {
    const all = auditLines();
    expect(all.at(-1)).toMatchObject({ operation: 'unknown_route', status: 404 });
    expect(all.filter((line) => line.operation === 'unknown_route' && line.status === 404)).toHaveLength(markers);
    return all;
  });
}

/** The audit lines that `act` adds: exactly `expected`, so that a duplicate written late would be seen too. */
async function addedLines(expected: number, act: () => Promise<void>): Promise<AuditLine[]> {
  const before = (await linesSoFar()).length;
  await act();
  const lines = (await linesSoFar()).slice(before, -1);
  expect(lines).toHaveLength(expected);
  return lines;
}

const form = (name: string) => `{"entities":[{"name":"${name}","entityType":"attack","observations":[]}],"padding":"="}"\r\n`;
const refusedCall = { key: null, server: null, operation: 'call_tool', name: null, status: 403 };

describe('the audit log of refused requests', () => {
  it("has one line for the form POST a cross-origin page's Chromium sends, refused for its Origin", async () => {
    const lines = await addedLines(1, async () => {
      const answer = await exchangeOnce(chromiumFormPost(form('form')));
      expect(answer.status).toBe(403);
      expect(JSON.parse(answer.body)).toMatchObject({ code: 'origin_not_allowed', instance: CALL });
    });
    expect(lines).toEqual([expect.objectContaining(refusedCall)]);
  });

  it('has one line each for a beacon and a form sent on one kept-alive connection (the beacon\'s body is never read)', async () => {
    const lines = await addedLines(2, async () => {
      const connection = await RawConnection.open();
      try {
        expect((await connection.exchange(chromiumBeacon(form('beacon')))).status).toBe(403);
        expect((await connection.exchange(chromiumFormPost(form('form')))).status).toBe(403);
      } finally {
        connection.close();
      }
    });
    expect(lines).toEqual([expect.objectContaining(refusedCall), expect.objectContaining(refusedCall)]);
  });

  it('has one line for a form whose sender goes away without reading the answer', async () => {
    const lines = await addedLines(1, async () => {
      const socket = net.connect(port, '127.0.0.1');
      await new Promise<void>((resolve) => socket.end(chromiumFormPost(form('gone')), resolve));
      await new Promise<void>((resolve) => socket.once('close', () => resolve()).resume());
    });
    expect(lines).toEqual([expect.objectContaining(refusedCall)]);
  });

  it('has one line for the same form without an Origin (415: bodies are JSON only)', async () => {
    const withoutOrigin = chromiumFormPost(form('form')).replace(`Origin: ${PAGE_ORIGIN}\r\n`, '');
    const lines = await addedLines(1, async () => {
      const answer = await exchangeOnce(withoutOrigin);
      expect(answer.status).toBe(415);
    });
    expect(lines).toEqual([expect.objectContaining({ operation: 'call_tool', status: 415 })]);
  });

  it('has one line for a path the router cannot read (bad percent-encoding, an over-long name), answered as a problem', async () => {
    const lines = await addedLines(2, async () => {
      const badEncoding = await exchangeOnce(requestBytes('POST', '/api/v1/servers/memory/tools/%E0%A4%A', [['Origin', PAGE_ORIGIN], ['Content-Type', 'text/plain']], '{}'));
      expect(badEncoding.status).toBe(400);
      expect(badEncoding.headers).toMatch(/^content-type: application\/problem\+json/im);
      expect(badEncoding.headers).toMatch(/^x-content-type-options: nosniff/im);
      const longName = await exchangeOnce(requestBytes('GET', `/api/v1/servers/${'n'.repeat(9000)}/tools`, []));
      expect(longName.status).toBe(414);
    });
    expect(lines).toEqual([
      expect.objectContaining({ key: null, server: null, operation: 'unknown_route', name: null, status: 400 }),
      expect.objectContaining({ key: null, server: null, operation: 'unknown_route', name: null, status: 414 }),
    ]);
  });

  it("has one line for each request /mcp's transport refuses itself (406: no event stream in Accept; 400: no JSON-RPC message)", async () => {
    const initialize = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
    const bothTypes: [string, string][] = [['Content-Type', 'application/json'], ['Accept', 'application/json, text/event-stream']];
    // a session of its own (the initialize request is the MCP server's line)
    const opened = await exchangeOnce(requestBytes('POST', '/mcp', bothTypes, initialize));
    expect(opened.status).toBe(200);
    const session = /^mcp-session-id: *(\S+)$/im.exec(opened.headers)![1];
    const lines = await addedLines(2, async () => {
      expect((await exchangeOnce(requestBytes('POST', '/mcp', [['Content-Type', 'application/json'], ['Accept', 'application/json']], initialize))).status).toBe(406);
      expect((await exchangeOnce(requestBytes('POST', '/mcp', [...bothTypes, ['Mcp-Session-Id', session]], '{"not": "JSON-RPC"}'))).status).toBe(400);
    });
    expect(lines).toEqual([
      expect.objectContaining({ server: null, operation: 'mcp', name: null, status: 406 }),
      expect.objectContaining({ server: null, operation: 'mcp', name: null, status: 400 }),
    ]);
  });

  it('has one line for a refusal of /mcp made before its transport (no session), not two', async () => {
    const lines = await addedLines(1, async () => {
      const answer = await exchangeOnce(requestBytes('POST', '/mcp', [['Content-Type', 'application/json'], ['Accept', 'application/json, text/event-stream']], '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'));
      expect(answer.status).toBe(400);
    });
    expect(lines).toEqual([expect.objectContaining({ operation: 'mcp', status: 400 })]);
  });
});
