import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { urlToHttpOptions } from 'node:url';
import { nodeProxyEnv } from '../hub/providers/shared/proxy-env.ts';
import { BufferedResponse, ParsedHeaders } from './buffered-response.ts';

interface Target {
  url: URL;
  transport: typeof http | typeof https;
  /** Only what node:http reads for a request: it copies the options object twice, a property at a time. */
  options: Pick<http.RequestOptions, 'protocol' | 'hostname' | 'port' | 'path'>;
}

/** Addresses parsed once: a gateway calls the same few provider addresses over and over. */
const targets = new Map<string, Target | null>();
const MAX_TARGETS = 256;

function targetOf(input: string | URL): Target | null {
  const key = String(input);
  let target = targets.get(key);
  if (target === undefined) {
    const url = new URL(key);
    const transport = url.protocol === 'https:' ? https : url.protocol === 'http:' ? http : null;
    // An address with credentials is the global fetch's to refuse, as it does.
    const { protocol, hostname, port, path } = urlToHttpOptions(url);
    target = transport && !url.username && !url.password ? { url, transport, options: { protocol, hostname, port, path } } : null;
    if (targets.size >= MAX_TARGETS) targets.clear();
    targets.set(key, target);
  }
  return target;
}

/**
 * A `fetch` for the provider SDKs over node:http/https with keep-alive agents. The SDKs' default (undici's
 * spec-complete fetch) costs ~0.3 ms of CPU per call on this project's machine, as much as the rest of the gateway
 * together; this one covers what the SDKs send (string or byte bodies, abort signals, streamed responses) and hands
 * anything else (FormData, streams as request bodies) to the global fetch. Answers read whole are BufferedResponses
 * (buffered-response.ts); event streams and empty answers are web Responses.
 */
export function createNodeFetch(options: { maxSockets?: number; proxyEnv?: NodeJS.ProcessEnv } = {}): typeof fetch {
  // Through the proxies of the environment (NO_PROXY aside) when Node's switch says so, as its global fetch goes.
  const proxyEnv = 'proxyEnv' in options ? options.proxyEnv : nodeProxyEnv();
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: options.maxSockets ?? 256, proxyEnv }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: options.maxSockets ?? 256, proxyEnv }),
  };
  const nodeFetch = (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const body = init.body;
    if (input instanceof Request || (body !== undefined && body !== null && typeof body !== 'string' && !(body instanceof Uint8Array))) {
      return fetch(input, init);
    }
    const target = targetOf(input);
    if (!target) return fetch(input, init);
    const { url, transport, options: address } = target;
    const headers: Record<string, string> = {};
    // The SDKs hand over a Headers, Hub's JSON posts a record: copied, not through another Headers (node:http checks
    // the values).
    const given = init.headers;
    if (given instanceof Headers) given.forEach((value, name) => (headers[name] = value));
    else if (given !== undefined && !Array.isArray(given)) for (const [name, value] of Object.entries(given as Record<string, string>)) headers[name.toLowerCase()] = value;
    else new Headers(given).forEach((value, name) => (headers[name] = value));
    if (body !== undefined && body !== null) headers['content-length'] = String(Buffer.byteLength(body));
    // Handed to node:http as a list of names and values, which it writes as they are (after checking them) instead of
    // storing each through setHeader; it then adds no Host of its own.
    const list: string[] = headers.host === undefined ? ['host', url.host] : [];
    for (const name in headers) list.push(name, headers[name]!);
    const signal = init.signal ?? undefined;
    return new Promise<Response>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason ?? new DOMException('This operation was aborted', 'AbortError'));
      const request = transport.request(
        { ...address, method: init.method ?? 'GET', headers: list, agent: agents[url.protocol as 'http:' | 'https:'] },
        (response) => {
          const status = response.statusCode ?? 500;
          const statusText = response.statusMessage ?? '';
          const meta = () => ({ status, statusText, headers: [...new ParsedHeaders(response.headers)] });
          if (status === 204 || status === 205 || status === 304 || init.method === 'HEAD') {
            response.resume();
            return resolve(new Response(null, meta()));
          }
          // Event streams are handed on as they arrive; anything else is read whole first, which is much cheaper
          // than a web stream for the small JSON answers that make up most calls.
          if (/^text\/event-stream/i.test(response.headers['content-type'] ?? '')) {
            return resolve(new Response(Readable.toWeb(response) as ReadableStream<Uint8Array>, meta()));
          }
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => {
            const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
            resolve(new BufferedResponse(bytes, status, statusText, response.headers, url.href) as unknown as Response);
          });
          response.on('error', reject);
        },
      );
      const onAbort = () => request.destroy(signal?.reason instanceof Error ? signal.reason : new DOMException('This operation was aborted', 'AbortError'));
      signal?.addEventListener('abort', onAbort, { once: true });
      request.on('close', () => signal?.removeEventListener('abort', onAbort));
      request.on('error', reject);
      request.end(body ?? undefined);
    });
  };
  return nodeFetch as typeof fetch;
}
