// What Claude on Microsoft Foundry offers (static, read without loading the vendor SDK).

import { providerMetadata } from '../shared/metadata.ts';

export const metadata = providerMetadata({
  name: 'azureanthropic',
  env_key: 'AZURE_ANTHROPIC_API_KEY',
  doc_url: 'https://learn.microsoft.com/en-us/azure/ai-foundry/foundry-models/how-to/use-foundry-models-claude',
  // from the resource name: https://<AZURE_ANTHROPIC_RESOURCE>.services.ai.azure.com/anthropic/
  default_api_base: '',
  streaming: true, messages: true, reasoning: true, image: true,
});
