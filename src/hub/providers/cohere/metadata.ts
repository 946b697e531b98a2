// What Cohere offers (static, read without loading the vendor SDK).

import { providerMetadata } from '../shared/metadata.ts';

export const COHERE_DEFAULT_API_BASE = 'https://api.cohere.com';

export const metadata = providerMetadata({
  name: 'cohere',
  env_key: 'CO_API_KEY',
  doc_url: 'https://docs.cohere.com/reference/chat',
  default_api_base: COHERE_DEFAULT_API_BASE,
  streaming: true, messages: true, embedding: true, list_models: true, reasoning: true, image: true, rerank: true,
});
