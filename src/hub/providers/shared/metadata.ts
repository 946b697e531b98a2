// ProviderMetadata with every capability off unless named, so a provider lists only what it offers.

import type { ProviderMetadata } from '../../provider.ts';

type Capability = Exclude<keyof ProviderMetadata, 'name' | 'env_key' | 'api_key_optional' | 'doc_url' | 'default_api_base'>;

export type MetadataSpec = Pick<ProviderMetadata, 'name' | 'env_key' | 'doc_url'> & {
  default_api_base: string;
  api_key_optional?: boolean;
} & Partial<Record<Capability, boolean>>;

export function providerMetadata(spec: MetadataSpec): ProviderMetadata {
  return {
    name: spec.name,
    env_key: spec.env_key,
    ...(spec.api_key_optional ? { api_key_optional: true } : {}),
    doc_url: spec.doc_url,
    default_api_base: spec.default_api_base,
    streaming: spec.streaming ?? false,
    messages: spec.messages ?? false,
    completion: spec.completion ?? false,
    embedding: spec.embedding ?? false,
    responses: spec.responses ?? false,
    list_models: spec.list_models ?? false,
    batch: spec.batch ?? false,
    reasoning: spec.reasoning ?? false,
    image: spec.image ?? false,
    rerank: spec.rerank ?? false,
    count_tokens: spec.count_tokens ?? false,
  };
}
