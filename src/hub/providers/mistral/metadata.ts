// What Mistral offers (static, read without loading the vendor SDK).

import { providerMetadata } from '../shared/metadata.ts';

export const MISTRAL_DEFAULT_API_BASE = 'https://api.mistral.ai';

export const metadata = providerMetadata({
  name: 'mistral',
  env_key: 'MISTRAL_API_KEY',
  doc_url: 'https://docs.mistral.ai/api/',
  default_api_base: MISTRAL_DEFAULT_API_BASE,
  streaming: true, messages: true, embedding: true, list_models: true, batch: true, reasoning: true, image: true,
});
