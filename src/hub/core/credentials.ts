// Credentials: the api_key option, else the provider's environment variable, else MissingApiKeyError.

import { MissingApiKeyError } from '../errors.ts';
import type { ProviderMetadata } from '../provider.ts';

export function resolveApiKey(metadata: ProviderMetadata, api_key: string | undefined | null): string | undefined {
  if (api_key) return api_key;
  if (metadata.env_key === null) return undefined;
  const fromEnv = process.env[metadata.env_key];
  if (fromEnv) return fromEnv;
  if (metadata.api_key_optional) return undefined;
  throw new MissingApiKeyError(metadata.name, metadata.env_key);
}

/** Removes a secret from a text (error messages must never carry keys). */
export function redact(text: string, secret: string | undefined): string {
  if (!secret || secret.length < 4) return text;
  return text.split(secret).join('***');
}
