// Provider selection: a separate `provider`, or `provider:model`, or the deprecated `provider/model`.
// Whichever delimiter comes first decides (so "ollama:llama3.2:3b" and "openrouter/meta/llama" both work).

import { InvalidRequestError, UnsupportedProviderError } from '../errors.ts';
import type { ProviderDefinition } from '../provider.ts';
import { PROVIDERS } from '../providers/index.ts';

let slashWarned = false;

function warnSlashForm(model: string): void {
  if (slashWarned) return;
  slashWarned = true;
  process.emitWarning(
    `The model string form 'provider/model' ('${model}') is deprecated; use 'provider:model' or the provider parameter.`,
    { type: 'DeprecationWarning', code: 'HUB_DEP_PROVIDER_SLASH_MODEL' },
  );
}

/** For tests: forget that the deprecation warning was emitted. */
export function resetDeprecationWarningForTests(): void {
  slashWarned = false;
}

export function supportedProviders(): string[] {
  return Object.keys(PROVIDERS).sort();
}

/** Looks a provider key up (case-insensitive); unknown keys raise UnsupportedProviderError. */
export function providerDefinition(key: string): ProviderDefinition {
  const normalized = String(key).trim().toLowerCase();
  if (Object.hasOwn(PROVIDERS, normalized)) return PROVIDERS[normalized]!;
  throw new UnsupportedProviderError(String(key), supportedProviders());
}

/**
 * Splits 'provider:model' or the legacy 'provider/model' into [provider, model]. Throws InvalidRequestError (the
 * spec's ValueError) when neither delimiter is present, UnsupportedProviderError for an unknown provider.
 */
export function splitModelProvider(model: string): [string, string] {
  if (typeof model !== 'string') throw new InvalidRequestError('model must be a string', null, null, { param: 'model' });
  const colon = model.indexOf(':');
  const slash = model.indexOf('/');
  if (colon === -1 && slash === -1) {
    throw new InvalidRequestError(
      `Model '${model}' names no provider: use 'provider:model' or pass the provider parameter`,
      null,
      null,
      { param: 'model' },
    );
  }
  const useSlash = colon === -1 || (slash !== -1 && slash < colon);
  const at = useSlash ? slash : colon;
  const provider = model.slice(0, at);
  const rest = model.slice(at + 1);
  const definition = providerDefinition(provider);
  if (rest === '') throw new InvalidRequestError(`Model '${model}' names no model after the provider`, null, null, { param: 'model' });
  if (useSlash) warnSlashForm(model);
  return [definition.metadata.name, rest];
}

/** The provider and the model name of a call: the separate parameter wins, the model string keeps its text. */
export function selectProvider(provider: string | undefined | null, model: string): { provider: string; model: string } {
  if (provider !== undefined && provider !== null && provider !== '') {
    return { provider: providerDefinition(provider).metadata.name, model };
  }
  const [key, name] = splitModelProvider(model);
  return { provider: key, model: name };
}
