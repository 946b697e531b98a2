// What Anthropic offers (static, read without loading the vendor SDK).

import { providerMetadata } from '../shared/metadata.ts';

export const ANTHROPIC_DEFAULT_API_BASE = 'https://api.anthropic.com';

export const metadata = providerMetadata({
  name: 'anthropic',
  env_key: 'ANTHROPIC_API_KEY',
  doc_url: 'https://docs.anthropic.com/en/api/messages',
  default_api_base: ANTHROPIC_DEFAULT_API_BASE,
  streaming: true, messages: true, list_models: true, batch: true, reasoning: true, image: true, count_tokens: true,
});
