// A provider instance with its resolved credential. Instances (and their SDK clients, with their connection pools)
// are reused across calls with the same provider, key and base address.

import type { Provider, ProviderDefinition } from '../provider.ts';
import { resolveApiKey } from './credentials.ts';
import { providerDefinition } from './selection.ts';

export interface ClientOptions {
  api_key?: string | undefined;
  api_base?: string | undefined;
  client_args?: Record<string, unknown> | undefined;
}

export interface ProviderHandle {
  definition: ProviderDefinition;
  provider: Provider;
  /** The key in use (never logged; scrubbed from error messages). */
  secret: string | undefined;
}

const CACHE_LIMIT = 32;
const cache = new Map<string, ProviderHandle>();

export function createHandle(providerKey: string, options: ClientOptions): ProviderHandle {
  const definition = providerDefinition(providerKey);
  const secret = resolveApiKey(definition.metadata, options.api_key);
  const provider = definition.create({
    ...(secret !== undefined ? { api_key: secret } : {}),
    ...(options.api_base !== undefined ? { api_base: options.api_base } : {}),
    ...(options.client_args !== undefined ? { client_args: options.client_args } : {}),
  });
  return { definition, provider, secret };
}

/** Like createHandle, reusing an instance when no client_args are given (those may hold functions or agents). */
export function cachedHandle(providerKey: string, options: ClientOptions): ProviderHandle {
  if (options.client_args !== undefined) return createHandle(providerKey, options);
  const definition = providerDefinition(providerKey);
  const secret = resolveApiKey(definition.metadata, options.api_key);
  const key = `${definition.metadata.name}\u0000${options.api_base ?? ''}\u0000${secret ?? ''}`;
  const found = cache.get(key);
  if (found) return found;
  const handle = createHandle(definition.metadata.name, { ...options, api_key: secret });
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!);
  cache.set(key, handle);
  return handle;
}
