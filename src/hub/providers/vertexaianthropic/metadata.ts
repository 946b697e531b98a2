// What Claude on Vertex AI offers (static, read without loading the vendor SDK).

import { providerMetadata } from '../shared/metadata.ts';

export const metadata = providerMetadata({
  name: 'vertexaianthropic',
  // Google Cloud Application Default Credentials and GOOGLE_CLOUD_PROJECT, not a key
  env_key: null,
  doc_url: 'https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude',
  // from the region: https://<region>-aiplatform.googleapis.com/v1
  default_api_base: '',
  streaming: true, messages: true, reasoning: true, image: true,
});
