// OpenAI and the OpenAI-compatible services, as registry entries.

import type { ProviderDefinition } from '../../provider.ts';
import { openAICompatibleDefinition } from './provider.ts';
import { OPENAI_COMPATIBLE_SERVICES } from './services.ts';

export const openAICompatibleProviders: Readonly<Record<string, ProviderDefinition>> = Object.fromEntries(
  OPENAI_COMPATIBLE_SERVICES.map((service) => [service.metadata.name, openAICompatibleDefinition(service)]),
);

export { OPENAI_COMPATIBLE_SERVICES } from './services.ts';
