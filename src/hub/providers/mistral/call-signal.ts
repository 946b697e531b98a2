// Gives every request of the Mistral client the Hub call's own AbortSignal. The SDK fetches a clone of its Request,
// and undici links a clone's signal to the original's only through a weak reference that nothing else holds: once
// a collection has taken it (in a busy process, soon), an abort no longer reaches the request. An answer that stalls
// after its headers would then hang the call — abort and timeout alike — and keep its connection for good.

import { AsyncLocalStorage } from 'node:async_hooks';
import { HTTPClient } from '@mistralai/mistralai';
import type { CallOptions } from '../../provider.ts';

const callSignal = new AsyncLocalStorage<AbortSignal | undefined>();

/** The client's HTTP layer: fetch with the signal of the call it runs in (fetch keeps that link until the body is read). */
export function signalledHttpClient(): HTTPClient {
  return new HTTPClient({
    fetcher: (input, init) => {
      const signal = callSignal.getStore();
      return signal ? fetch(input, { ...init, signal }) : fetch(input, init);
    },
  });
}

/** Runs `request` (SDK calls) with the call's signal where the client's fetcher finds it. */
export function withCallSignal<T>(call: CallOptions, request: () => Promise<T>): Promise<T> {
  return callSignal.run(call.signal, request);
}

/** The same for every operation of an object whose operations take the call as their last argument. */
export function withCallSignals<T extends { [K in keyof T]: (...args: never[]) => Promise<unknown> }>(operations: T): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, operation] of Object.entries(operations as Record<string, unknown>)) {
    wrapped[name] = (...args: unknown[]) => withCallSignal(args.at(-1) as CallOptions, () => (operation as (...a: unknown[]) => Promise<unknown>)(...args));
  }
  return wrapped as T;
}
