// The watsonx registry entry. It speaks watsonx.ai's HTTP API with fetch (no SDK to defer).

import type { ProviderDefinition } from '../../provider.ts';
import { metadata } from './metadata.ts';
import { createWatsonx } from './provider.ts';

export const watsonxProvider: ProviderDefinition = { metadata, create: createWatsonx };
