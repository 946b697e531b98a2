// Claude on Microsoft Foundry through @anthropic-ai/foundry-sdk: the Anthropic Messages API under the resource's
// address, the key in x-api-key. Foundry serves no model listing and no message batches.

import AnthropicFoundry from '@anthropic-ai/foundry-sdk';
import { InvalidRequestError } from '../../errors.ts';
import type { Provider, ProviderOptions } from '../../provider.ts';
import { anthropicMessages } from '../anthropic/provider.ts';
import { metadata } from './metadata.ts';

type ClientOptions = NonNullable<ConstructorParameters<typeof AnthropicFoundry>[0]>;

export function createAzureAnthropic(options: ProviderOptions): Provider {
  const { resource, ...clientArgs } = (options.client_args ?? {}) as Partial<ClientOptions>;
  const address = options.api_base
    ? { baseURL: options.api_base }
    : { resource: resource ?? process.env.AZURE_ANTHROPIC_RESOURCE ?? missingResource() };
  const client = new AnthropicFoundry({
    apiKey: options.api_key,
    ...address,
    // the Hub core owns retries and timeouts
    maxRetries: 0,
    ...clientArgs,
  });
  return anthropicMessages(client, metadata);
}

function missingResource(): never {
  throw new InvalidRequestError(
    'azureanthropic needs the Foundry resource: set AZURE_ANTHROPIC_RESOURCE (or client_args.resource), or give api_base',
    null,
    metadata.name,
    { param: 'api_base' },
  );
}
