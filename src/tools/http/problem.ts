import { STATUS_CODES } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { STATUS_OF_KIND, ToolsError } from '../errors.ts';

export const PROBLEM_TYPE = 'application/problem+json';

export interface Problem {
  status: number;
  detail: string;
  /** Sent as Retry-After (503: when the server's next start attempt is due; 429: when the key may go on). */
  retryAfterSeconds?: number;
  /** An extension member saying which rule refused the request, where the status alone does not (browser-guard.ts, 415). */
  code?: string;
}

/** RFC 6750's challenge, sent with every 401. */
const WWW_AUTHENTICATE = 'Bearer realm="encoder tools"';

/** Retry-After of a 503: the wait in whole seconds, rounded up, and at least 1 (0 would invite a busy loop). */
export function retryAfterSecondsOf(ms: number | undefined): number {
  return Math.max(1, Math.ceil((ms ?? 0) / 1000));
}

/** Any error of a request as a problem: ToolsErrors by kind, fastify's own (body too large, …) by status. */
export function problemOf(error: unknown): Problem {
  if (error instanceof ToolsError) {
    const status = STATUS_OF_KIND[error.kind];
    return status === 503 || status === 429 ? { status, detail: error.message, retryAfterSeconds: retryAfterSecondsOf(error.retryAfterMs) } : { status, detail: error.message };
  }
  if ((error as { code?: unknown } | null)?.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    // bodies are JSON only: a web page's "simple" request (text/plain, a form) can never reach a tool
    return { status: 415, detail: 'a request body must be JSON: send "Content-Type: application/json"', code: 'unsupported_media_type' };
  }
  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  const message = error instanceof Error ? error.message : String(error);
  if (typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500) return { status: statusCode, detail: message };
  return { status: 500, detail: `internal error: ${message}` };
}

/**
 * The `$schema` link of an object: a reference relative to this server (`/schemas/<Name>.json`). It was built from
 * the request's Host header, so any client could make the server print an address of its choosing.
 */
export function schemaUrl(name: string): string {
  return `/schemas/${name}.json`;
}

/** Sends an RFC 9457 problem details body. */
export function sendProblem(request: FastifyRequest, reply: FastifyReply, problem: Problem): FastifyReply {
  const path = request.url.split('?')[0];
  const body = {
    $schema: schemaUrl('ErrorModel'),
    type: 'about:blank',
    title: STATUS_CODES[problem.status] ?? 'Error',
    status: problem.status,
    detail: problem.detail,
    instance: path,
    ...(problem.code === undefined ? {} : { code: problem.code }),
  };
  if (problem.retryAfterSeconds !== undefined) reply.header('retry-after', String(problem.retryAfterSeconds));
  if (problem.status === 401) reply.header('www-authenticate', WWW_AUTHENTICATE);
  return reply.code(problem.status).type(PROBLEM_TYPE).send(JSON.stringify(body));
}
