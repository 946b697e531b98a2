// What Gemini offers (static, read without loading the vendor SDK).

import { providerMetadata } from '../shared/metadata.ts';

export const GEMINI_DEFAULT_API_BASE = 'https://generativelanguage.googleapis.com';

export const metadata = providerMetadata({
  name: 'gemini',
  env_key: 'GEMINI_API_KEY',
  doc_url: 'https://ai.google.dev/api',
  default_api_base: GEMINI_DEFAULT_API_BASE,
  streaming: true, messages: true, embedding: true, list_models: true, reasoning: true, image: true,
});
