// The synchronous forms: each runs its asynchronous twin on a worker thread and blocks the caller with
// Atomics.wait (through synckit) until the answer is there. Streams come back as Iterables that fetch one event
// per step. Provider selection, credentials and HUB_UNIFIED_EXCEPTIONS are resolved on the calling thread (the
// worker's environment is a copy taken when it started). Not available inside the single-executable bundle.

import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createSyncFn } from 'synckit';
import type { z } from 'zod';
import type {
  BatchRequest,
  CompletionRequest,
  CreateBatchRequest,
  EmbeddingRequest,
  ListBatchesRequest,
  ListModelsRequest,
  MessagesRequest,
  ParsedMessage,
  RerankRequest,
  ResponsesRequest,
} from '../api.ts';
import { resolveApiKey } from '../core/credentials.ts';
import { unifiedFromEnv } from '../core/invoke.ts';
import { isZodSchema, planOutputFormat, withParsedOutput } from '../core/output-format.ts';
import { providerDefinition, selectProvider } from '../core/selection.ts';
import { InvalidRequestError } from '../errors.ts';
import type {
  Batch,
  BatchResultItem,
  CompletionChunk,
  CompletionResponse,
  EmbeddingResponse,
  MessagesResponse,
  MessagesStreamEvent,
  Model,
  RerankResponse,
  ResponsesResponse,
  ResponsesStreamEvent,
} from '../provider.ts';
import { reviveError } from './protocol.ts';
import type { AsyncFunctionName, WorkerCommand, WorkerReply } from './protocol.ts';

let run: ((command: WorkerCommand) => WorkerReply) | undefined;

/**
 * This module's own file, from the call site of this function. (Not `import.meta.url`: the sources are also
 * bundled to CommonJS, where import.meta is empty and esbuild warns about it.)
 */
function thisModuleFile(): string | undefined {
  const original = Error.prepareStackTrace;
  try {
    Error.prepareStackTrace = (_error, sites) => sites;
    const sites = new Error().stack as unknown as NodeJS.CallSite[];
    return sites[0]?.getFileName() ?? undefined;
  } finally {
    Error.prepareStackTrace = original;
  }
}

function worker(): (command: WorkerCommand) => WorkerReply {
  if (run) return run;
  // Resolved only on first use, so bundling src/hub never touches the worker file.
  const file = thisModuleFile();
  if (!file || !/[\\/]sync[\\/]index\.[cm]?[tj]s$/.test(file)) {
    throw new InvalidRequestError('The synchronous Hub functions need the library from source or its package; use the a-prefixed forms');
  }
  const here = file.startsWith('file:') ? new URL(file) : pathToFileURL(file);
  run = createSyncFn<(command: WorkerCommand) => Promise<WorkerReply>>(new URL(`./worker${path.extname(here.pathname)}`, here));
  return run;
}

function send(command: WorkerCommand): unknown {
  const reply = worker()(command);
  if ('error' in reply) throw reviveError(reply.error);
  return reply.ok;
}

/** Resolves on this thread what the worker cannot see or receive. */
function prepare(request: Record<string, unknown>, modelField: boolean): Record<string, unknown> {
  if (request.signal !== undefined) {
    throw new InvalidRequestError('signal cannot cross to the worker of the synchronous forms; use timeout', null, null, {
      param: 'signal',
    });
  }
  const out: Record<string, unknown> = { ...request };
  out.unified_exceptions = request.unified_exceptions ?? unifiedFromEnv();
  if (modelField) {
    const selected = selectProvider(request.provider as string | undefined, String(request.model ?? ''));
    out.provider = selected.provider;
    out.model = selected.model;
  }
  if (typeof out.provider === 'string' && !out.api_key) {
    const key = resolveApiKey(providerDefinition(out.provider).metadata, undefined);
    if (key !== undefined) out.api_key = key;
  }
  return out;
}

function call<T>(fn: AsyncFunctionName, request: Record<string, unknown>, modelField = true): T {
  return send({ op: 'call', fn, request: prepare(request, modelField) }) as T;
}

/**
 * Closes, on the worker, the streams whose iterators the caller dropped without finishing them (no break, no
 * return()): without this the worker would keep each such stream, and its connection to the provider, for the life
 * of the process. Collection may come late; a caller that stops early should break out of its loop.
 */
const dropped = new FinalizationRegistry<number>((id) => {
  try {
    send({ op: 'close', id });
  } catch {
    // The provider's error on closing: nobody is left to receive it.
  }
});

function stream<T>(fn: AsyncFunctionName, request: Record<string, unknown>): Iterable<T> {
  const { id, first } = send({ op: 'open', fn, request: prepare(request, true) }) as {
    id: number;
    first: IteratorResult<T>;
  };
  const token = {};
  const iterator = (function* () {
    let finished = first.done === true;
    try {
      if (finished) return;
      yield first.value as T;
      for (;;) {
        const step = send({ op: 'next', id }) as IteratorResult<T>;
        if (step.done) {
          finished = true;
          return;
        }
        yield step.value;
      }
    } catch (error) {
      finished = true;
      throw error;
    } finally {
      dropped.unregister(token);
      if (!finished) send({ op: 'close', id });
    }
  })();
  if (first.done !== true) dropped.register(iterator, id, token);
  return iterator;
}

export function messages(request: MessagesRequest & { stream: true }): Iterable<MessagesStreamEvent>;
export function messages<S extends z.ZodType>(request: MessagesRequest & { output_format: S; stream?: false }): ParsedMessage<z.output<S>>;
export function messages(request: MessagesRequest & { output_format: Record<string, unknown>; stream?: false }): ParsedMessage<unknown>;
export function messages(request: MessagesRequest & { stream?: false }): MessagesResponse;
export function messages(request: MessagesRequest): MessagesResponse | Iterable<MessagesStreamEvent>;
export function messages(request: MessagesRequest): MessagesResponse | Iterable<MessagesStreamEvent> {
  if (request.stream) return stream('amessages', request);
  if (isZodSchema(request.output_format)) {
    // A zod schema cannot cross threads: the worker gets its JSON schema, the result is parsed here.
    // The worker raises the finish-reason errors; parse failures are raised here, with the provider's name.
    const provider = selectProvider(request.provider, String(request.model ?? '')).provider;
    const plan = planOutputFormat(request.output_format, provider);
    const raw = call<MessagesResponse>('amessages', { ...request, output_format: { type: 'json_schema', schema: plan.format.schema } });
    return withParsedOutput(raw, plan, provider);
  }
  return call('amessages', request);
}

export function completion(request: CompletionRequest & { stream: true }): Iterable<CompletionChunk>;
export function completion(request: CompletionRequest & { stream?: false }): CompletionResponse;
export function completion(request: CompletionRequest): CompletionResponse | Iterable<CompletionChunk>;
export function completion(request: CompletionRequest): CompletionResponse | Iterable<CompletionChunk> {
  const plain = request as unknown as Record<string, unknown>;
  return request.stream ? stream('acompletion', plain) : call('acompletion', plain);
}

export function responses(request: ResponsesRequest & { stream: true }): Iterable<ResponsesStreamEvent>;
export function responses(request: ResponsesRequest & { stream?: false }): ResponsesResponse;
export function responses(request: ResponsesRequest): ResponsesResponse | Iterable<ResponsesStreamEvent>;
export function responses(request: ResponsesRequest): ResponsesResponse | Iterable<ResponsesStreamEvent> {
  const plain = request as unknown as Record<string, unknown>;
  return request.stream ? stream('aresponses', plain) : call('aresponses', plain);
}

export function embedding(request: EmbeddingRequest): EmbeddingResponse {
  return call('aembedding', request);
}

export function rerank(request: RerankRequest): RerankResponse {
  return call('arerank', request);
}

export function list_models(request: ListModelsRequest): Model[] {
  return call('alist_models', request, false);
}

export function create_batch(request: CreateBatchRequest): Batch {
  return call('acreate_batch', request, false);
}

export function retrieve_batch(request: BatchRequest): Batch {
  return call('aretrieve_batch', request, false);
}

export function cancel_batch(request: BatchRequest): Batch {
  return call('acancel_batch', request, false);
}

export function list_batches(request: ListBatchesRequest): Batch[] {
  return call('alist_batches', request, false);
}

export function retrieve_batch_results(request: BatchRequest): BatchResultItem[] {
  return call('aretrieve_batch_results', request, false);
}
