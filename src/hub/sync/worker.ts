// The worker thread of the synchronous forms: runs the asynchronous functions and keeps open streams by id.

import { runAsWorker } from 'synckit';
import * as api from '../api.ts';
import { serializeError } from './protocol.ts';
import type { AsyncFunctionName, WorkerCommand, WorkerReply } from './protocol.ts';
import { vendorErrorClassOf } from './vendor-errors.ts';

type AnyFunction = (request: Record<string, unknown>) => unknown;
const streams = new Map<number, AsyncIterator<unknown>>();
/** The provider of each open stream (its errors are looked up in that provider's SDK). */
const streamProviders = new Map<number, string | undefined>();
let nextId = 1;

function fn(name: AsyncFunctionName): AnyFunction {
  return api[name] as unknown as AnyFunction;
}

function providerOf(command: WorkerCommand): string | undefined {
  if (command.op === 'call' || command.op === 'open') return typeof command.request.provider === 'string' ? command.request.provider : undefined;
  return streamProviders.get(command.id);
}

runAsWorker(async (command: WorkerCommand): Promise<WorkerReply> => {
  const provider = providerOf(command);
  try {
    switch (command.op) {
      case 'call':
        return { ok: await fn(command.fn)(command.request) };
      case 'open': {
        const iterable = fn(command.fn)({ ...command.request, stream: true }) as AsyncIterable<unknown>;
        const iterator = iterable[Symbol.asyncIterator]();
        // The first event is fetched now so that connection and HTTP errors surface at call time.
        const first = await iterator.next();
        const id = nextId++;
        if (!first.done) {
          streams.set(id, iterator);
          streamProviders.set(id, provider);
        }
        return { ok: { id, first } };
      }
      case 'next': {
        const iterator = streams.get(command.id);
        if (!iterator) return { ok: { done: true, value: undefined } };
        try {
          const step = await iterator.next();
          if (step.done) forget(command.id);
          return { ok: step };
        } catch (error) {
          forget(command.id);
          throw error;
        }
      }
      case 'close': {
        const iterator = streams.get(command.id);
        forget(command.id);
        await iterator?.return?.();
        return { ok: true };
      }
    }
  } catch (error) {
    return { error: serializeError(error, await vendorErrorClassOf(error, provider)) };
  }
});

function forget(id: number): void {
  streams.delete(id);
  streamProviders.delete(id);
}
