// The azureanthropic registry entry: static metadata; the Foundry SDK-backed implementation loads on first use.

import type { ProviderDefinition } from '../../provider.ts';
import { lazyDefinition } from '../shared/lazy.ts';
import { metadata } from './metadata.ts';

export const azureanthropicProvider: ProviderDefinition = lazyDefinition(metadata, () => import('./provider.ts').then((module) => module.createAzureAnthropic));
