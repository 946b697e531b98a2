// What Ollama offers (static, read without loading the vendor SDK).

import { providerMetadata } from '../shared/metadata.ts';

export const OLLAMA_DEFAULT_API_BASE = 'http://127.0.0.1:11434';

export const metadata = providerMetadata({
  name: 'ollama',
  env_key: null,
  doc_url: 'https://github.com/ollama/ollama/blob/main/docs/api.md',
  default_api_base: OLLAMA_DEFAULT_API_BASE,
  streaming: true, messages: true, embedding: true, list_models: true, reasoning: true, image: true,
});
