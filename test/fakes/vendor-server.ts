// The loopback HTTP server under every vendor fake: records each request, answers through the vendor's routes, and
// lets a test script the next replies (an error status, a stream cut in the middle).

import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** The body parsed as JSON (undefined when it is not JSON). */
  json: unknown;
}

/**
 * One reply: JSON (or text) with a status, an SSE stream, an NDJSON stream, or a stream of binary frames written as
 * they are (AWS event streams). `cutAfter` destroys the socket.
 * `{delayMs, then}` waits before answering (a slow provider); a client that closes the connection meanwhile gets
 * nothing and is counted in `abandonedReplies`. On a stream, `delayMs` waits before each item (a slow but steady
 * provider) and `holdAfter: n` keeps the connection open after n items until the client closes it (a provider that
 * stalls mid-stream), counted in `abandonedStreams`. A JSON reply with `stallBody: true` sends its status, its
 * headers and the first half of its body, then stalls until the client closes the connection (a provider that hangs
 * after the headers), counted in `abandonedReplies`; `stalledBodies` counts those whose headers went out.
 */
export type Reply =
  | { delayMs: number; then: Reply }
  | { status?: number; headers?: Record<string, string>; json: unknown; stallBody?: boolean }
  | { status?: number; headers?: Record<string, string>; text: string; contentType?: string }
  | { sse: { event?: string; data: unknown }[]; cutAfter?: number; endEarly?: number; holdAfter?: number; delayMs?: number }
  | { ndjson: unknown[]; cutAfter?: number; endEarly?: number; holdAfter?: number; delayMs?: number }
  | { frames: Uint8Array[]; contentType: string; cutAfter?: number; endEarly?: number; holdAfter?: number; delayMs?: number };

export interface Route {
  method: string;
  path: RegExp;
  handle(request: RecordedRequest, match: RegExpExecArray): Reply | Promise<Reply>;
}

interface Scripted {
  reply: Reply;
  when: (request: RecordedRequest) => boolean;
}

export class VendorServer {
  readonly requests: RecordedRequest[] = [];
  private readonly server: http.Server;
  private readonly routes: Route[];
  private readonly scripted: Scripted[] = [];
  url = '';
  /** Delayed replies (`{delayMs, then}`) and stalled bodies (`stallBody`) whose client closed the connection before the answer. */
  abandonedReplies = 0;
  /** Replies with `stallBody` whose headers and first half were sent. */
  stalledBodies = 0;
  /** Held streams (`holdAfter`) whose client closed the connection. */
  abandonedStreams = 0;

  private constructor(routes: Route[]) {
    this.routes = routes;
    this.server = http.createServer((req, res) => void this.serve(req, res));
  }

  static async start(routes: Route[]): Promise<VendorServer> {
    const fake = new VendorServer(routes);
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    fake.url = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
    return fake;
  }

  /** The next request that `when` accepts (default: any) gets this reply instead of the route's. */
  enqueue(reply: Reply, when: (request: RecordedRequest) => boolean = () => true): void {
    this.scripted.push({ reply, when });
  }

  get lastRequest(): RecordedRequest {
    const last = this.requests.at(-1);
    if (!last) throw new Error('the fake received no request');
    return last;
  }

  reset(): void {
    this.requests.length = 0;
    this.scripted.length = 0;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const url = new URL(req.url ?? '/', 'http://fake');
    let json: unknown;
    try {
      json = body.length > 0 ? JSON.parse(body.toString('utf8')) : undefined;
    } catch {
      json = undefined;
    }
    const request: RecordedRequest = { method: req.method ?? 'GET', path: url.pathname, query: url.searchParams, headers: req.headers, body, json };
    this.requests.push(request);
    try {
      const scriptedIndex = this.scripted.findIndex((s) => s.when(request));
      let reply: Reply | undefined;
      if (scriptedIndex >= 0) reply = this.scripted.splice(scriptedIndex, 1)[0].reply;
      else {
        for (const route of this.routes) {
          const match = route.method === request.method ? route.path.exec(request.path) : null;
          if (match) {
            reply = await route.handle(request, match);
            break;
          }
        }
      }
      reply ??= { status: 404, json: { error: { message: `fake: no route for ${request.method} ${request.path}` } } };
      while ('then' in reply) {
        if (await closedWithin(res, reply.delayMs)) {
          this.abandonedReplies++;
          return;
        }
        reply = reply.then;
      }
      if ('json' in reply && reply.stallBody) {
        const text = JSON.stringify(reply.json);
        res.writeHead(reply.status ?? 200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...reply.headers });
        res.write(text.slice(0, Math.floor(text.length / 2)));
        this.stalledBodies++;
        if (await closedWithin(res, 3_600_000)) this.abandonedReplies++;
        return;
      }
      await write(res, reply, () => this.abandonedStreams++);
    } catch (error) {
      await write(res, { status: 500, json: { error: { message: `fake failed: ${String(error)}` } } });
    }
  }
}

/** Waits `ms`; true when the client closed the connection first (the wait then ends at once). */
export function closedWithin(res: http.ServerResponse, ms: number): Promise<boolean> {
  if (res.destroyed || res.socket?.destroyed) return Promise.resolve(true);
  return new Promise((resolve) => {
    const onClose = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      res.off('close', onClose);
      resolve(false);
    }, ms);
    res.once('close', onClose);
  });
}

async function write(res: http.ServerResponse, reply: Exclude<Reply, { then: Reply }>, onAbandoned: () => void = () => {}): Promise<void> {
  if ('json' in reply) {
    res.writeHead(reply.status ?? 200, { 'content-type': 'application/json', ...reply.headers });
    res.end(JSON.stringify(reply.json));
    return;
  }
  if ('text' in reply) {
    res.writeHead(reply.status ?? 200, { 'content-type': reply.contentType ?? 'text/plain', ...reply.headers });
    res.end(reply.text);
    return;
  }
  const isSse = 'sse' in reply;
  const isFrames = 'frames' in reply;
  const items: unknown[] = isSse ? reply.sse : isFrames ? reply.frames : reply.ndjson;
  const contentType = isSse ? 'text/event-stream' : isFrames ? reply.contentType : 'application/x-ndjson';
  res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-cache' });
  for (let i = 0; i < items.length; i++) {
    if (reply.holdAfter !== undefined && i === reply.holdAfter) {
      // stall: send nothing more and keep the connection open until the client closes it
      if (await closedWithin(res, 3_600_000)) onAbandoned();
      return;
    }
    if (reply.delayMs && (await closedWithin(res, reply.delayMs))) return;
    if (reply.cutAfter !== undefined && i === reply.cutAfter) {
      // wait until what was written is flushed, then drop the connection without ending the response
      await new Promise((resolve) => setTimeout(resolve, 20));
      res.socket?.destroy();
      return;
    }
    if (reply.endEarly !== undefined && i === reply.endEarly) break;
    if (isFrames) {
      res.write(items[i] as Uint8Array);
    } else if (isSse) {
      const event = items[i] as { event?: string; data: unknown };
      const data = typeof event.data === 'string' ? event.data : JSON.stringify(event.data);
      res.write(`${event.event ? `event: ${event.event}\n` : ''}data: ${data}\n\n`);
    } else {
      res.write(`${JSON.stringify(items[i])}\n`);
    }
  }
  res.end();
}

/** Reads the JSON body of a recorded request as a record (tests assert the wire shape on it). */
export function bodyOf(request: RecordedRequest): Record<string, unknown> {
  if (typeof request.json !== 'object' || request.json === null) throw new Error(`request body is not a JSON object: ${request.body.toString('utf8').slice(0, 200)}`);
  return request.json as Record<string, unknown>;
}

/**
 * A deterministic embedding of a text: 4 numbers from its characters (every embedding fake answers these). With
 * `dimensions` (a request's output dimension) it has that many numbers: the 4 repeated, or the first ones.
 */
export function fakeVector(text: string, dimensions?: number): number[] {
  const codes = [...text].map((c) => c.codePointAt(0)!);
  const base = [text.length, codes.reduce((a, b) => a + b, 0) % 97, codes[0] ?? 0, codes.at(-1) ?? 0].map((n) => n / 100);
  return dimensions === undefined ? base : Array.from({ length: dimensions }, (_, i) => base[i % base.length]);
}

/**
 * A deterministic relevance of a document to a query, between 0 and 1 (every rerank fake answers these): the share of
 * the query's words the document contains, nudged by the document's length so that ties are rare.
 */
export function fakeRelevance(query: string, document: string): number {
  const words = (text: string) => text.toLowerCase().split(/\W+/).filter(Boolean);
  const wanted = new Set(words(query));
  const found = new Set(words(document).filter((word) => wanted.has(word)));
  return Math.round(((found.size / Math.max(1, wanted.size)) * 0.9 + 0.1 / (1 + document.length)) * 1e6) / 1e6;
}

/** Indexes and fake relevances of documents, most relevant first (as the vendors answer), at most `top` of them. */
export function fakeRanking(query: string, documents: string[], top = documents.length): { index: number; relevance_score: number }[] {
  return documents
    .map((document, index) => ({ index, relevance_score: fakeRelevance(query, document) }))
    .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
    .slice(0, top);
}
