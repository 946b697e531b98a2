// What crosses the thread boundary between the synchronous forms and their worker: requests, results, and errors
// (rebuilt on the calling side as the same HubError classes).

import { HUB_ERROR_TYPES, HubError } from '../errors.ts';

export type AsyncFunctionName =
  | 'amessages'
  | 'acompletion'
  | 'aresponses'
  | 'aembedding'
  | 'alist_models'
  | 'acreate_batch'
  | 'aretrieve_batch'
  | 'acancel_batch'
  | 'alist_batches'
  | 'aretrieve_batch_results';

export type WorkerCommand =
  | { op: 'call'; fn: AsyncFunctionName; request: Record<string, unknown> }
  | { op: 'open'; fn: AsyncFunctionName; request: Record<string, unknown> }
  | { op: 'next'; id: number }
  | { op: 'close'; id: number };

export interface SerializedError {
  hub: boolean;
  name: string;
  message: string;
  stack?: string | undefined;
  props: Record<string, unknown>;
}

export type WorkerReply = { ok: unknown } | { error: SerializedError };

function cloneable(value: unknown): unknown {
  try {
    return structuredClone(value);
  } catch {
    return value instanceof Error ? { name: value.name, message: value.message } : String(value);
  }
}

export function serializeError(error: unknown): SerializedError {
  if (!(error instanceof Error)) return { hub: false, name: 'Error', message: String(error), props: {} };
  const props: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(error)) props[key] = cloneable(value);
  if (error instanceof HubError) props.original_exception = error.original_exception ? cloneable(error.original_exception) : null;
  return { hub: error instanceof HubError, name: error.name, message: error.message, stack: error.stack, props };
}

export function reviveError(data: SerializedError): Error {
  const type = data.hub ? ((HUB_ERROR_TYPES as Record<string, typeof HubError>)[data.name] ?? HubError) : Error;
  const error = Object.create(type.prototype) as Error;
  Object.assign(error, data.props);
  Object.defineProperty(error, 'message', { value: data.message, writable: true, configurable: true });
  Object.defineProperty(error, 'name', { value: data.name, writable: true, configurable: true });
  if (data.stack) Object.defineProperty(error, 'stack', { value: data.stack, writable: true, configurable: true });
  return error;
}
