// What Amazon Bedrock offers (static, read without loading the AWS SDK).

import { providerMetadata } from '../shared/metadata.ts';

export const metadata = providerMetadata({
  name: 'bedrock',
  // a Bedrock API key (bearer token); without one the AWS credential chain signs requests (SigV4)
  env_key: 'AWS_BEARER_TOKEN_BEDROCK',
  api_key_optional: true,
  doc_url: 'https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html',
  // the SDK derives it from the region: https://bedrock-runtime.<region>.amazonaws.com
  default_api_base: '',
  streaming: true, messages: true, embedding: true, list_models: true, reasoning: true, image: true,
});
