// What Amazon SageMaker endpoints offer through the Hub (static, read without loading the AWS SDK). Flags as
// mozilla-ai/any-llm declares them: chat (streaming, images) and embeddings on a deployed endpoint; no listing.

import { providerMetadata } from '../shared/metadata.ts';

export const metadata = providerMetadata({
  name: 'sagemaker',
  // the AWS credential chain signs requests (SigV4); there is no API key
  env_key: null,
  doc_url: 'https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html',
  // the SDK derives it from the region: https://runtime.sagemaker.<region>.amazonaws.com
  default_api_base: '',
  streaming: true, messages: true, completion: true, embedding: true, image: true,
});
