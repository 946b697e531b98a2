// Helpers the Hub tests share: draining streams, catching failures, the vendor fakes' lifecycle, common fixtures.

import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import type Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import type { EmbeddingResponse } from '../../src/hub/provider.ts';
import { fakeVector, VendorServer } from '../fakes/vendor-server.ts';

/** Drains an async iterable into an array. */
export async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

/** Awaits a promise that must fail and returns what it threw. */
export async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail, it succeeded');
}

/** Polls `check` every 25 ms until it holds; fails after 10 s, saying `what` did not happen. */
export async function eventually(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`still not true after 10 s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * A full garbage collection, for tests of what happens to objects a caller dropped (the test processes do not run
 * with --expose-gc; the flag set at run time makes `gc` available to a new context).
 */
export function collectGarbage(): void {
  v8.setFlagsFromString('--expose_gc');
  (runInNewContext('gc') as () => void)();
}

/**
 * Starts a vendor fake for the enclosing describe block (or file): `ready` gets it once started (make the provider
 * there); its recorded requests and scripted replies are cleared before each test; it is closed after all.
 */
export function useVendorFake<F extends VendorServer | { server: VendorServer; close(): Promise<void> }>(start: () => Promise<F>, ready: (fake: F) => void): void {
  let fake: F | undefined;
  beforeAll(async () => {
    fake = await start();
    ready(fake);
  });
  afterAll(() => fake?.close());
  beforeEach(() => (fake instanceof VendorServer ? fake : fake?.server)?.reset());
}

/** The answer a provider should give for texts embedded by a fake (fakeVector), in input order. */
export function fakeEmbeddings(model: string, texts: string[], tokens: number): EmbeddingResponse {
  return {
    object: 'list',
    model,
    data: texts.map((text, index) => ({ object: 'embedding', index, embedding: fakeVector(text) })),
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}

/** A function tool with one string argument, as the provider tests send it. */
export const weatherTool: Anthropic.Tool = {
  name: 'weather',
  description: 'Weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } } },
};
