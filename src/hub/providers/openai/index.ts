// OpenAI and the OpenAI-compatible services, as registry entries. The `openai` SDK and the implementation
// (./provider.ts) load on the first call of any of them.

import type { ProviderDefinition } from '../../provider.ts';
import { lazyProvider, onceLoader } from '../shared/lazy.ts';
import { baseAddress, OPENAI_COMPATIBLE_SERVICES, type OpenAICompatibleService } from './services.ts';

const loadImplementation = onceLoader(() => import('./provider.ts'));

function openAICompatibleDefinition(service: OpenAICompatibleService): ProviderDefinition {
  return {
    metadata: service.metadata,
    create(options) {
      // Checked now, not on first use: a missing Azure endpoint is raised where the client is made, as before.
      baseAddress(service, options);
      return lazyProvider(service.metadata, () => loadImplementation().then((module) => module.createOpenAICompatible(service, options)));
    },
  };
}

export const openAICompatibleProviders: Readonly<Record<string, ProviderDefinition>> = Object.fromEntries(
  OPENAI_COMPATIBLE_SERVICES.map((service) => [service.metadata.name, openAICompatibleDefinition(service)]),
);

export { OPENAI_COMPATIBLE_SERVICES } from './services.ts';
