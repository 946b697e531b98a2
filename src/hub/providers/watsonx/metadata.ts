// What IBM watsonx.ai offers (static). Flags as mozilla-ai/any-llm declares them: chat with streaming and images,
// the foundation model list; no embeddings, no reasoning effort.

import { providerMetadata } from '../shared/metadata.ts';

/** IBM's Dallas region; WATSONX_URL (or api_base) names another region or a Cloud Pak for Data cluster. */
export const WATSONX_DEFAULT_API_BASE = 'https://us-south.ml.cloud.ibm.com';

export const metadata = providerMetadata({
  name: 'watsonx',
  // an IBM Cloud API key, exchanged for a bearer token at IBM's IAM token endpoint
  env_key: 'WATSONX_API_KEY',
  doc_url: 'https://cloud.ibm.com/apidocs/watsonx-ai',
  default_api_base: WATSONX_DEFAULT_API_BASE,
  streaming: true, messages: true, completion: true, list_models: true, image: true,
});
