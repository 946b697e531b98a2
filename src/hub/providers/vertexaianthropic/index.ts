// The vertexaianthropic registry entry: static metadata; the Vertex SDK-backed implementation loads on first use.

import type { ProviderDefinition } from '../../provider.ts';
import { lazyDefinition } from '../shared/lazy.ts';
import { metadata } from './metadata.ts';

export const vertexaianthropicProvider: ProviderDefinition = lazyDefinition(metadata, () => import('./provider.ts').then((module) => module.createVertexAIAnthropic));
