// Anthropic: the Messages format is native, so requests and events pass through the official SDK unchanged.

import Anthropic from '@anthropic-ai/sdk';
import type { CallOptions, MessagesParams, MessagesStreamEvent, Model, Provider, ProviderMetadata, ProviderOptions } from '../../provider.ts';
import { incompleteStreamError } from '../../message-format/stream-builder.ts';
import { anthropicBatches } from './batches.ts';
import { anthropicErrorToHub } from './errors.ts';
import { ANTHROPIC_DEFAULT_API_BASE, metadata } from './metadata.ts';

export function createAnthropic(options: ProviderOptions): Provider {
  const client = new Anthropic({
    apiKey: options.api_key ?? null,
    baseURL: options.api_base ?? ANTHROPIC_DEFAULT_API_BASE,
    // the Hub core owns retries and timeouts
    maxRetries: 0,
    ...(options.client_args as Partial<ConstructorParameters<typeof Anthropic>[0]>),
  });
  return {
    ...anthropicMessages(client, metadata),
    async listModels(call): Promise<Model[]> {
      const models: Model[] = [];
      for await (const info of client.models.list({}, { signal: call.signal })) {
        models.push({ id: info.id, object: 'model', created: Math.floor(Date.parse(info.created_at) / 1000), owned_by: 'anthropic' });
      }
      return models;
    },
    batches: anthropicBatches(client),
    async countTokens(params, call) {
      return client.messages.countTokens({ ...params, ...call.extra } as Anthropic.MessageCountTokensParams, { signal: call.signal });
    },
  };
}

/**
 * The SDK's own timeout of a Messages call: the longest a Node timer takes (about 24.8 days), that is none, because
 * the Hub core owns timeouts (its signal ends the call). Left to itself the SDK would cut a non-streaming call at 10
 * minutes, and refuse outright, before sending it, one whose max_tokens it expects to take longer: the Vercel AI SDK
 * asks for the model's whole output limit (64,000 tokens for Claude Haiku 4.5), so its generateText failed.
 */
const SDK_TIMEOUT_MS = 2 ** 31 - 1;

/** The part of an Anthropic client the Messages operations use; the Vertex and Foundry clients have it too. */
export interface MessagesClient {
  messages: { create: Anthropic['messages']['create'] };
}

/**
 * Messages, streaming and error mapping over an Anthropic SDK client: the Messages format is native, so requests
 * and events pass through unchanged. Shared by anthropic, azureanthropic (Foundry) and vertexaianthropic.
 */
export function anthropicMessages(client: MessagesClient, metadata: ProviderMetadata): Pick<Provider, 'metadata' | 'messages' | 'messagesStream' | 'toHubError'> {
  const request = (params: MessagesParams, call: CallOptions): MessagesParams => ({ ...params, ...call.extra });
  return {
    metadata,
    async messages(params, call) {
      return client.messages.create({ ...request(params, call), stream: false } as Anthropic.MessageCreateParamsNonStreaming, { signal: call.signal, timeout: SDK_TIMEOUT_MS });
    },
    async *messagesStream(params, call): AsyncIterable<MessagesStreamEvent> {
      const stream = await client.messages.create({ ...request(params, call), stream: true } as Anthropic.MessageCreateParamsStreaming, { signal: call.signal, timeout: SDK_TIMEOUT_MS });
      let stopped = false;
      for await (const event of stream) {
        if (event.type === 'message_stop') stopped = true;
        yield event;
      }
      if (!stopped) throw incompleteStreamError(metadata.name);
    },
    toHubError: (error) => anthropicErrorToHub(error, metadata.name),
  };
}
