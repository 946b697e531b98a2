import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A span as OTLP/JSON carries it (ids in hex, times in nanoseconds as strings). */
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: { key: string; value: Record<string, unknown> }[];
  status?: { code?: number; message?: string };
}

export interface ExportRequest {
  resourceSpans: { resource: { attributes: { key: string; value: { stringValue?: string } }[] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
}

export const SPAN_KIND_INTERNAL = 1;
export const SPAN_KIND_SERVER = 2;
export const STATUS_CODE_ERROR = 2;

/** A local OTLP/HTTP collector for tests: keeps each export request (OTLP JSON) it receives and answers 200. */
export interface OtlpReceiver {
  /** Its base URL, http://127.0.0.1:<port>. */
  url: string;
  received: { path: string; contentType: string; body: ExportRequest }[];
  spans(): OtlpSpan[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const received: OtlpReceiver['received'] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({ path: request.url ?? '', contentType: request.headers['content-type'] ?? '', body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as ExportRequest });
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    spans: () => received.flatMap((request) => request.body.resourceSpans.flatMap((resource) => resource.scopeSpans.flatMap((scope) => scope.spans))),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A W3C traceparent of a fresh trace and caller span, sampled. */
export function callerContext(): { traceId: string; spanId: string; traceparent: string } {
  const hex = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString('hex');
  const [traceId, spanId] = [hex(16), hex(8)];
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}
