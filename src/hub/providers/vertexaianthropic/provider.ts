// Claude on Vertex AI through @anthropic-ai/vertex-sdk: the Messages API as rawPredict / streamRawPredict on the
// publisher model, authenticated by google-auth-library's Application Default Credentials. Vertex serves no model
// listing and no message batches for Claude through this API.

import { AnthropicVertex } from '@anthropic-ai/vertex-sdk';
import { MissingApiKeyError } from '../../errors.ts';
import type { Provider, ProviderOptions } from '../../provider.ts';
import { anthropicMessages } from '../anthropic/provider.ts';
import { vertexErrorToHub } from '../vertexai/errors.ts';
import { metadata } from './metadata.ts';

type ClientOptions = NonNullable<ConstructorParameters<typeof AnthropicVertex>[0]>;

export function createVertexAIAnthropic(options: ProviderOptions): Provider {
  const { projectId, region, ...clientArgs } = (options.client_args ?? {}) as Partial<ClientOptions>;
  const env = process.env;
  const client = new AnthropicVertex({
    // the same variables as vertexai; the SDK's own (ANTHROPIC_VERTEX_PROJECT_ID, CLOUD_ML_REGION) also work
    projectId: projectId ?? env.GOOGLE_CLOUD_PROJECT ?? env.ANTHROPIC_VERTEX_PROJECT_ID ?? missingProject(),
    region: region ?? env.GOOGLE_CLOUD_LOCATION ?? env.CLOUD_ML_REGION ?? 'us-central1',
    ...(options.api_base ? { baseURL: options.api_base } : {}),
    // the Hub core owns retries and timeouts
    maxRetries: 0,
    ...clientArgs,
  });
  settleAuthInBackground(client);
  const messages = anthropicMessages(client, metadata);
  // API answers are Anthropic's errors; a failed token exchange is google-auth-library's
  return { ...messages, toHubError: (error) => messages.toHubError(error) ?? vertexErrorToHub(error, metadata.name) };
}

/**
 * The SDK starts resolving Google credentials in its constructor and awaits the promise only at the first request.
 * Without credentials (no ADC file, no metadata server) that promise rejected unobserved: an unhandled rejection,
 * which ends a Node process (e.g. when the first call fails before it sends anything). Observing it
 * here keeps the failure for the first request, which awaits the same promise and reports it.
 */
function settleAuthInBackground(client: AnthropicVertex): void {
  const pending = (client as unknown as { _authClientPromise?: Promise<unknown> })._authClientPromise;
  pending?.catch(() => {});
}

function missingProject(): never {
  throw new MissingApiKeyError(metadata.name, 'GOOGLE_CLOUD_PROJECT');
}
