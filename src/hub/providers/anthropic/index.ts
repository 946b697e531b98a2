// The Anthropic registry entry: static metadata; the SDK-backed implementation (./provider.ts) loads on first use.

import type { ProviderDefinition } from '../../provider.ts';
import { lazyDefinition } from '../shared/lazy.ts';
import { metadata } from './metadata.ts';

export const anthropicProvider: ProviderDefinition = lazyDefinition(metadata, () => import('./provider.ts').then((module) => module.createAnthropic));
