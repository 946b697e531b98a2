// Worker side of rebuilding a vendor SDK's error on the calling thread (unified exceptions off): finds which exported
// class of the provider's SDK the error is, and the file the SDK's ESM entry resolves to, so the calling thread can
// load that same module instance and make an object of that class. Only the worker imports this module.

import type { VendorErrorClass } from './protocol.ts';

/** The module of each SDK that exports its error classes, by provider; the OpenAI-compatible services use openai. */
const NATIVE: Record<string, string | null> = {
  anthropic: '@anthropic-ai/sdk',
  gemini: '@google/genai',
  mistral: '@mistralai/mistralai/models/errors',
  cohere: 'cohere-ai',
  // Ollama does not export its ResponseError class; voyage and encoder have no SDK.
  ollama: null,
  voyage: null,
  encoder: null,
};

/** The specifiers are literal so that every import is static text. */
function load(specifier: string): Promise<Record<string, unknown>> {
  switch (specifier) {
    case '@anthropic-ai/sdk':
      return import('@anthropic-ai/sdk');
    case '@google/genai':
      return import('@google/genai');
    case '@mistralai/mistralai/models/errors':
      return import('@mistralai/mistralai/models/errors');
    case 'cohere-ai':
      return import('cohere-ai') as Promise<Record<string, unknown>>;
    default:
      return import('openai');
  }
}

/** The path of `type` among the module's exports: a top-level export, or one inside an exported namespace object. */
function exportPath(namespace: Record<string, unknown>, type: unknown): string[] | undefined {
  for (const [key, value] of Object.entries(namespace)) if (value === type) return [key];
  for (const [key, value] of Object.entries(namespace)) {
    if (!value || (typeof value !== 'object' && typeof value !== 'function') || key === 'default') continue;
    for (const [inner, innerValue] of Object.entries(value as Record<string, unknown>)) if (innerValue === type) return [key, inner];
  }
  return undefined;
}

/**
 * The class of the provider's SDK to rebuild `error` as: its own class where the SDK exports it (at the top or in an
 * exported namespace, like cohere-ai's `Cohere.UnauthorizedError`), else its nearest exported ancestor (Cohere's
 * `CohereError`), else undefined.
 */
export async function vendorErrorClassOf(error: unknown, provider: string | undefined): Promise<VendorErrorClass | undefined> {
  if (!(error instanceof Error) || !provider) return undefined;
  const specifier = provider in NATIVE ? NATIVE[provider] : 'openai';
  if (!specifier) return undefined;
  try {
    const namespace = await load(specifier);
    for (let proto: unknown = Object.getPrototypeOf(error); proto && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
      const path = exportPath(namespace, (proto as { constructor: unknown }).constructor);
      if (path) return { module: import.meta.resolve(specifier), export: path };
    }
    return undefined;
  } catch {
    return undefined;
  }
}
