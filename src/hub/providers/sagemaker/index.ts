// The SageMaker registry entry: static metadata; the AWS SDK-backed implementation (./provider.ts) loads on first use.

import type { ProviderDefinition } from '../../provider.ts';
import { lazyDefinition } from '../shared/lazy.ts';
import { metadata } from './metadata.ts';

export const sagemakerProvider: ProviderDefinition = lazyDefinition(metadata, () => import('./provider.ts').then((module) => module.createSagemaker));
