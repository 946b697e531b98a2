// The Vertex AI registry entry: static metadata; the @google/genai-backed implementation loads on first use.

import type { ProviderDefinition } from '../../provider.ts';
import { lazyDefinition } from '../shared/lazy.ts';
import { metadata } from './metadata.ts';

export const vertexaiProvider: ProviderDefinition = lazyDefinition(metadata, () => import('./provider.ts').then((module) => module.createVertexAI));
