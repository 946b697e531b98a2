// What Vertex AI (Gemini models on Google Cloud) offers (static, read without loading the vendor SDK).

import { providerMetadata } from '../shared/metadata.ts';

export const metadata = providerMetadata({
  name: 'vertexai',
  // Google Cloud credentials (Application Default Credentials) with GOOGLE_CLOUD_PROJECT; an api_key selects
  // Vertex AI express mode instead
  env_key: null,
  doc_url: 'https://cloud.google.com/vertex-ai/generative-ai/docs',
  // the SDK derives it from the location: https://<location>-aiplatform.googleapis.com (global: aiplatform.googleapis.com)
  default_api_base: '',
  streaming: true, messages: true, embedding: true, list_models: true, reasoning: true, image: true,
});
