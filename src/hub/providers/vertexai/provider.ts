// Vertex AI through @google/genai in Vertex mode (`vertexai: true`): the Gemini provider's conversions and
// operations, with Google Cloud credentials. The SDK authenticates with google-auth-library's Application Default
// Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's ADC file, the metadata server…); an api_key selects
// Vertex AI express mode (key, no project).

import { GoogleGenAI } from '@google/genai';
import { MissingApiKeyError } from '../../errors.ts';
import type { Provider, ProviderOptions } from '../../provider.ts';
import { genAIProvider } from '../gemini/provider.ts';
import { vertexErrorToHub } from './errors.ts';
import { metadata } from './metadata.ts';

type ClientOptions = NonNullable<ConstructorParameters<typeof GoogleGenAI>[0]>;

export function createVertexAI(options: ProviderOptions): Provider {
  const { project, location, ...clientArgs } = (options.client_args ?? {}) as Partial<ClientOptions>;
  const scope = options.api_key
    ? { apiKey: options.api_key }
    : {
        project: project ?? process.env.GOOGLE_CLOUD_PROJECT ?? missingProject(),
        // given explicitly, so that the paths name the project even behind an api_base (the SDK drops both otherwise)
        location: location ?? process.env.GOOGLE_CLOUD_LOCATION ?? 'global',
      };
  // no retryOptions: the SDK then makes exactly one attempt (the Hub core owns retries)
  const client = new GoogleGenAI({
    vertexai: true,
    ...scope,
    ...clientArgs,
    ...(options.api_base ? { httpOptions: { baseUrl: options.api_base, ...clientArgs.httpOptions } } : {}),
  });
  return { ...genAIProvider(client, metadata), toHubError: (error) => vertexErrorToHub(error, metadata.name) };
}

function missingProject(): never {
  throw new MissingApiKeyError(metadata.name, 'GOOGLE_CLOUD_PROJECT');
}
