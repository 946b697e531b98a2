// What crosses the thread boundary between the synchronous forms and their worker: requests, results, and errors
// (rebuilt on the calling side as the same HubError classes, or the same vendor SDK error classes where possible).

import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { HUB_ERROR_TYPES, HubError } from '../errors.ts';

export type AsyncFunctionName =
  | 'amessages'
  | 'acompletion'
  | 'aresponses'
  | 'aembedding'
  | 'arerank'
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

/** Where a vendor SDK's error class is: the file its ESM entry resolves to, and the class's export path there. */
export interface VendorErrorClass {
  module: string;
  export: string[];
}

export interface SerializedError {
  hub: boolean;
  name: string;
  message: string;
  stack?: string | undefined;
  props: Record<string, unknown>;
  /** Own fields that were `Headers` (sent as [name, value] pairs, rebuilt as Headers). */
  headerProps?: string[];
  vendor?: VendorErrorClass | undefined;
}

export type WorkerReply = { ok: unknown } | { error: SerializedError };

function cloneable(value: unknown): unknown {
  try {
    return structuredClone(value);
  } catch {
    return value instanceof Error ? { name: value.name, message: value.message } : String(value);
  }
}

export function serializeError(error: unknown, vendor?: VendorErrorClass): SerializedError {
  if (!(error instanceof Error)) return { hub: false, name: 'Error', message: String(error), props: {} };
  const props: Record<string, unknown> = {};
  const headerProps: string[] = [];
  for (const [key, value] of Object.entries(error)) {
    if (value instanceof Headers) {
      props[key] = [...value.entries()];
      headerProps.push(key);
    } else props[key] = cloneable(value);
  }
  if (error instanceof HubError) props.original_exception = error.original_exception ? cloneable(error.original_exception) : null;
  return { hub: error instanceof HubError, name: error.name, message: error.message, stack: error.stack, props, headerProps, vendor };
}

/**
 * Loads the vendor's error class on this thread: the same file the worker resolved, through require(esm), which
 * gives the module instance `import` gives (so `instanceof` holds for the caller's own import of the SDK). Undefined
 * when it cannot be loaded (e.g. a Node without require(esm)): the error then stays a plain Error of the same shape.
 */
function vendorClass(vendor: VendorErrorClass | undefined): (abstract new (...args: never[]) => Error) | undefined {
  if (!vendor) return undefined;
  try {
    const file = fileURLToPath(vendor.module);
    const namespace = createRequire(file)(file) as Record<string, unknown>;
    let type: unknown = namespace;
    for (const key of vendor.export) type = (type as Record<string, unknown> | undefined)?.[key];
    return typeof type === 'function' && type.prototype instanceof Error ? (type as abstract new (...args: never[]) => Error) : undefined;
  } catch {
    return undefined;
  }
}

export function reviveError(data: SerializedError): Error {
  const type = data.hub ? ((HUB_ERROR_TYPES as Record<string, typeof HubError>)[data.name] ?? HubError) : (vendorClass(data.vendor) ?? Error);
  const error = Object.create(type.prototype) as Error;
  Object.assign(error, data.props);
  for (const key of data.headerProps ?? []) (error as unknown as Record<string, unknown>)[key] = new Headers(data.props[key] as [string, string][]);
  Object.defineProperty(error, 'message', { value: data.message, writable: true, configurable: true });
  Object.defineProperty(error, 'name', { value: data.name, writable: true, configurable: true });
  if (data.stack) Object.defineProperty(error, 'stack', { value: data.stack, writable: true, configurable: true });
  return error;
}
