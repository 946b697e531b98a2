import type { z } from 'zod';
import { invalidRequest } from '../errors.ts';

/** A request body, which must be a JSON object. */
export function objectBody(value: unknown): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalidRequest('The request body must be a JSON object');
  return value as Record<string, unknown>;
}

/** Parses a body or query with its schema; the first problem becomes a 400 naming the field (`param`). */
export function parseWith<T extends z.ZodType>(schema: T, value: unknown, what = 'body'): z.infer<T> {
  if (what === 'body') objectBody(value);
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const param = issue.path.length > 0 ? issue.path.join('.') : null;
  const message =
    issue.code === 'unrecognized_keys' ? `Unknown field(s) in the ${what}: ${issue.keys.join(', ')}` : `${param ?? what}: ${issue.message}`;
  throw invalidRequest(message, issue.code === 'unrecognized_keys' ? issue.keys[0] : param);
}
