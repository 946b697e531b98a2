// Providers whose vendor SDK loads on first use. Importing the Hub then costs only the registry's static metadata;
// a process pays for an SDK (up to 700 ms and 120 MiB for @mistralai/mistralai) only when it calls that provider.
//
// A provider folder keeps its metadata in metadata.ts, its SDK-backed implementation in provider.ts, and in
// index.ts the registry entry `lazyDefinition(metadata, () => import('./provider.ts').then((m) => m.create…))`.
// The import path must be a string literal: esbuild then bundles the module and loads it lazily (computed paths
// are not bundled).

import type { BatchOperations, Provider, ProviderDefinition, ProviderMetadata, ProviderOptions } from '../../provider.ts';

/** The real factory of a provider, as its lazily loaded module exports it. */
export type ProviderFactory = (options: ProviderOptions) => Provider;

/**
 * One-time loader of a provider's module: the first caller starts the import, the others share it. A failed import
 * is not remembered, so a later call tries again (and raises the same error if the cause remains).
 */
export function onceLoader<T>(load: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    pending ??= load().catch((error: unknown) => {
      pending = undefined;
      throw error;
    });
    return pending;
  };
}

/** The lazy providers and how to load each; read by the core through whenLoaded. */
const pendingLoads = new WeakMap<Provider, () => Promise<Provider>>();

/**
 * Resolves when a lazy provider's implementation is loaded (undefined for any other provider). The core awaits it
 * before a call's first attempt so that loading an SDK (up to ~1 s) does not count against the call's timeout.
 */
export function whenLoaded(provider: Provider): Promise<unknown> | undefined {
  return pendingLoads.get(provider)?.();
}

/**
 * A Provider that loads and creates the real one on its first call. The optional members exist exactly when the
 * metadata flag says so (completion/completionStream ← completion, responses/responsesStream ← responses,
 * embedding ← embedding, rerank ← rerank, countTokens ← count_tokens, listModels ← list_models, batches ← batch), because the core decides what a provider can
 * do by their presence before anything is loaded; test/hub/lazy-providers.test.ts checks that every real
 * implementation agrees. toHubError delegates to the real provider once it exists; before that nothing vendor-
 * specific can have been raised (only a failed import or constructor), so it maps nothing.
 */
export function lazyProvider(metadata: ProviderMetadata, createReal: () => Promise<Provider>): Provider {
  let real: Provider | undefined;
  let creating: Promise<Provider> | undefined;
  const provider = (): Promise<Provider> => {
    if (real) return Promise.resolve(real);
    // a failed creation (import or constructor) is not kept: the next call tries again
    creating ??= createReal()
      .then((created) => (real = created))
      .finally(() => {
        creating = undefined;
      });
    return creating;
  };

  const batches: BatchOperations = {
    create: async (params, call) => (await provider()).batches!.create(params, call),
    retrieve: async (id, call) => (await provider()).batches!.retrieve(id, call),
    cancel: async (id, call) => (await provider()).batches!.cancel(id, call),
    list: async (params, call) => (await provider()).batches!.list(params, call),
    results: async (id, call) => (await provider()).batches!.results(id, call),
  };

  const lazy: Provider = {
    metadata,
    messages: async (params, call) => (await provider()).messages(params, call),
    async *messagesStream(params, call) {
      yield* (await provider()).messagesStream(params, call);
    },
    ...(metadata.completion
      ? {
          completion: async (params, call) => (await provider()).completion!(params, call),
          async *completionStream(params, call) {
            yield* (await provider()).completionStream!(params, call);
          },
        }
      : {}),
    ...(metadata.responses
      ? {
          responses: async (params, call) => (await provider()).responses!(params, call),
          async *responsesStream(params, call) {
            yield* (await provider()).responsesStream!(params, call);
          },
        }
      : {}),
    ...(metadata.embedding ? { embedding: async (params, call) => (await provider()).embedding!(params, call) } : {}),
    ...(metadata.rerank ? { rerank: async (params, call) => (await provider()).rerank!(params, call) } : {}),
    ...(metadata.count_tokens ? { countTokens: async (params, call) => (await provider()).countTokens!(params, call) } : {}),
    ...(metadata.list_models ? { listModels: async (call) => (await provider()).listModels!(call) } : {}),
    ...(metadata.batch ? { batches } : {}),
    toHubError: (error) => real?.toHubError(error),
  };
  pendingLoads.set(lazy, provider);
  return lazy;
}

/** A registry entry whose `create` returns a lazyProvider; the module is loaded once per process. */
export function lazyDefinition(metadata: ProviderMetadata, load: () => Promise<ProviderFactory>): ProviderDefinition {
  const loadOnce = onceLoader(load);
  return { metadata, create: (options) => lazyProvider(metadata, () => loadOnce().then((create) => create(options))) };
}
